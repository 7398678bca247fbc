/**
 * Exact work identity (docs/lease-format.md "Paths"): the SHA-256 of the canonical JSON
 * (src/lease/canonical-json.ts) of everything that decides what a solver run computes — the
 * input's digest, the primary target, the actions, and for a trace run its mode (and, in work of
 * older versions, its tracer). The
 * input's path is deliberately not part of it: the same bytes reached through two queue entries
 * are the same work. The payload stored with a work lease (`workPayloadOf`) carries the path as
 * well, so another coordinator can take the work over after this one dies.
 */
import { describeValue } from '../config/values.js';
import { InvalidJobError } from '../errors.js';
import type { CanonicalJsonLimits } from '../lease/canonical-json.js';
import { workIdOf } from '../lease/identity.js';
import type { CoordinatorJob, JobAction } from './ports.js';

const WORK_PAYLOAD_SCHEMA = 'symfence-work/1';

/**
 * How the identity is serialised for its digest. Depth: a work identity is 3 levels deep, so 16
 * refuses hostile nesting early. `utf8`: a non-ASCII tracer id is digested as itself, the form
 * every work id on disk was computed with.
 */
const IDENTITY_JSON: CanonicalJsonLimits = { maxDepth: 16, nonAscii: 'utf8' };
/** Most actions and group members a job may carry into its identity and payload. */
const MAX_JOB_ITEMS = 1024;
/** Longest input path stored in a work payload (PATH_MAX). */
const MAX_INPUT_PATH_CHARS = 4096;
const MAX_U64_BIGINT = (1n << 64n) - 1n;

function isBranch(value: unknown, allowZero: boolean): value is bigint {
  return typeof value === 'bigint' && value >= (allowZero ? 0n : 1n) && value <= MAX_U64_BIGINT;
}

/**
 * Throws `InvalidJobError` unless `job` has the shape identity and payload are built from: a
 * 64-hex input digest, a u64 primary target, at most 1024 actions of known kinds on u64 branches,
 * at most 1024 group members, a non-empty input path of at most 4096 characters.
 */
function checkJob(job: CoordinatorJob): void {
  if (typeof job !== 'object' || job === null) throw new InvalidJobError(`a job must be an object, got ${describeValue(job)}`);
  if (typeof job.inputSha256 !== 'string' || !/^[0-9a-f]{64}$/.test(job.inputSha256)) throw new InvalidJobError(`job inputSha256 must be 64 lowercase hex digits, got ${describeValue(job.inputSha256)}`);
  if (!isBranch(job.targetBranch, true)) throw new InvalidJobError(`job targetBranch must be a bigint in 0..2^64-1, got ${describeValue(job.targetBranch)}`);
  if (!Array.isArray(job.actions) || job.actions.length > MAX_JOB_ITEMS) throw new InvalidJobError(`job actions must be an array of at most ${MAX_JOB_ITEMS} actions, got ${describeValue(job.actions)}`);
  for (const action of job.actions as readonly unknown[]) {
    const a = action as Partial<JobAction> | null;
    if (typeof a !== 'object' || a === null || !isBranch(a.branch, false) || typeof a.kind !== 'string' || !ACTION_KINDS.has(a.kind)) {
      throw new InvalidJobError(`job action ${describeValue(action)} is not { branch: bigint, kind: solve|sample|skip }`);
    }
  }
}

function identityOf(job: CoordinatorJob): Record<string, unknown> {
  checkJob(job);
  return {
    schema: WORK_PAYLOAD_SCHEMA,
    input: job.inputSha256,
    target: job.targetBranch.toString(10),
    actions: job.actions.map((a) => [a.branch.toString(10), a.kind]),
    // Absent for solving runs, so their ids are what they always were.
    ...(job.mode === 'trace' ? { mode: 'trace', ...(job.tracer !== undefined ? { tracer: job.tracer } : {}) } : {}),
  };
}

/** The job's work id: `workIdOf` (src/lease/identity.ts) of its identity — never of its payload. */
export function jobWorkId(job: CoordinatorJob): string {
  return workIdOf(identityOf(job), IDENTITY_JSON);
}

/** What is stored with the work lease: the identity plus what a takeover needs to re-run it. */
export function workPayloadOf(job: CoordinatorJob): Record<string, unknown> {
  checkJob(job);
  if (typeof job.inputPath !== 'string' || job.inputPath === '' || job.inputPath.length > MAX_INPUT_PATH_CHARS) {
    throw new InvalidJobError(`job inputPath must be a non-empty string of at most ${MAX_INPUT_PATH_CHARS} characters, got ${describeValue(job.inputPath)}`);
  }
  if (!Array.isArray(job.group) || job.group.length > MAX_JOB_ITEMS || !job.group.every((t) => isBranch(t, false))) {
    throw new InvalidJobError(`job group must be an array of at most ${MAX_JOB_ITEMS} bigint branches, got ${describeValue(job.group)}`);
  }
  return { ...identityOf(job), path: job.inputPath, group: job.group.map((t) => t.toString(10)), origin: job.origin, depth: job.depth };
}

const DECIMAL_RE = /^[1-9][0-9]{0,19}$/;
const MAX_U64 = (1n << 64n) - 1n;
const ACTION_KINDS: ReadonlySet<string> = new Set(['solve', 'sample', 'skip']);

function parseTarget(raw: unknown, allowZero: boolean): bigint {
  if (raw === '0' && allowZero) return 0n;
  if (typeof raw !== 'string' || !DECIMAL_RE.test(raw)) throw new InvalidJobError(`target ${String(raw)} is not a decimal branch id`);
  const value = BigInt(raw);
  if (value > MAX_U64) throw new InvalidJobError(`target ${raw} exceeds 64 bits`);
  return value;
}

/**
 * Rebuilds a job from a work-lease payload written by `workPayloadOf` (possibly by another
 * coordinator). Anything malformed is an `InvalidJobError`: a foreign payload is never guessed at.
 */
export function jobFromWorkPayload(payload: Readonly<Record<string, unknown>>): CoordinatorJob {
  if (typeof payload !== 'object' || payload === null) throw new InvalidJobError(`work payload must be an object, got ${describeValue(payload)}`);
  if (payload['schema'] !== WORK_PAYLOAD_SCHEMA) throw new InvalidJobError(`work payload schema ${String(payload['schema'])} is not ${WORK_PAYLOAD_SCHEMA}`);
  const input = payload['input'];
  const path = payload['path'];
  if (typeof input !== 'string' || !/^[0-9a-f]{64}$/.test(input)) throw new InvalidJobError('work payload has no input digest');
  if (typeof path !== 'string' || path.length === 0) throw new InvalidJobError('work payload has no input path');
  const rawActions = payload['actions'];
  const rawGroup = payload['group'];
  if (!Array.isArray(rawActions) || !Array.isArray(rawGroup)) throw new InvalidJobError('work payload actions/group are not arrays');
  const actions: JobAction[] = rawActions.map((row: unknown) => {
    if (!Array.isArray(row) || row.length !== 2 || typeof row[1] !== 'string' || !ACTION_KINDS.has(row[1])) {
      throw new InvalidJobError(`work payload action ${JSON.stringify(row)} is malformed`);
    }
    return { branch: parseTarget(row[0], false), kind: row[1] as JobAction['kind'] };
  });
  const depth = payload['depth'];
  const mode = payload['mode'];
  if (mode !== undefined && mode !== 'trace') throw new InvalidJobError(`work payload mode ${JSON.stringify(mode)} is not "trace"`);
  const tracer = payload['tracer'];
  if (tracer !== undefined && (typeof tracer !== 'string' || tracer.length === 0)) throw new InvalidJobError('work payload tracer is not a coordinator id');
  return {
    inputPath: path,
    inputSha256: input,
    targetBranch: parseTarget(payload['target'], true),
    actions,
    group: rawGroup.map((t: unknown) => parseTarget(t, false)),
    origin: 'recovered',
    depth: typeof depth === 'number' && Number.isSafeInteger(depth) && depth >= 0 ? depth : 0,
    ...(mode === 'trace' ? { mode, ...(typeof tracer === 'string' ? { tracer } : {}) } : {}),
  };
}
