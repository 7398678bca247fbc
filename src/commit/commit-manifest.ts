/**
 * The commit manifest: what `beginCommit` stores in a work record so that any coordinator sharing
 * the lease directory can finish the result if its owner dies before `complete`
 * (docs/lease-format.md "Commit manifests"). It names the staged copies of the result's findings;
 * the bytes themselves live under `<lease-root>/staged/`, written durably before `beginCommit`.
 *
 *   { "schema": "symfence-commit/1", "workId": "<64 hex>", "status": "ok", "source": "000012",
 *     "items": [ { "kind": "queue", "sha256": "<64 hex>", "size": 17,
 *                  "path": "staged/<workId>.<sha256>" } ] }
 *
 * A trace run's manifest may also name its trace (`"trace": { "sha256", "size", "path":
 * "traces/<workId>.<sha256>" }`): the run's telemetry, kept under `<lease-root>/traces/` for every
 * coordinator of the campaign (docs/campaign.md "Shared traces"). Unlike findings it is never
 * discarded: it is what the done record leaves for the others.
 *
 * Paths are relative to the lease root, so hosts that mount the shared directory at different
 * places agree on them. Reading is strict: any unknown key, wrong type, foreign path or duplicate
 * item fails closed with `ERR_COMMIT_MANIFEST` — a recovering coordinator never guesses which bytes
 * a result meant.
 */
import { CommitManifestError } from '../errors.js';
import { MAX_GROUP_TARGETS } from '../lease/identity.js';
import { isDecimalTarget, isInputDigest, type JsonObject } from '../lease/lease-record.js';

export const COMMIT_MANIFEST_SCHEMA = 'symfence-commit/1';
/** Staged findings live in this directory under the lease root. */
export const STAGED_DIR = 'staged';
/** Shared traces live in this directory under the lease root. */
export const TRACES_DIR = 'traces';
/**
 * Most items one manifest may name: a run's generated inputs (the solver's `maxOutputFiles` is
 * capped at 100,000) plus the parent input of a crash or timeout.
 */
export const MAX_MANIFEST_ITEMS = 100_001;
/** Largest staged finding, bytes (AFL's own input cap is 1 MiB). */
export const MAX_STAGED_BYTES = 64 * 1024 * 1024;

/**
 * Largest shared trace, bytes. A trace is bounded telemetry (at most 512 trace rows, 256 open
 * branches, 4,096 attributed files and 256 answers) — tens of KiB — so this cap only refuses a
 * hostile manifest; it is below the etcd store's staging limit.
 */
export const MAX_TRACE_BYTES = 1024 * 1024;

export type CommitItemKind = 'queue' | 'crashes' | 'hangs';
export type CommitStatus = 'ok' | 'timeout' | 'crash' | 'error';

export interface CommitItem {
  readonly kind: CommitItemKind;
  /** Lowercase hex SHA-256 of the bytes. */
  readonly sha256: string;
  readonly size: number;
  /** `staged/<workId>.<sha256>`, relative to the lease root. */
  readonly path: string;
}

/** A trace run's telemetry, shared with every coordinator of the campaign. */
export interface CommitTrace {
  readonly sha256: string;
  readonly size: number;
  /** `traces/<workId>.<sha256>`, relative to the lease root. */
  readonly path: string;
}

/**
 * What the committed run answered (docs/leases.md "Shared answers"), kept with its result so that
 * whoever finishes the record writes them into the answers table before it is `done`: the owner
 * with its group release, a replaying coordinator from here.
 */
export interface CommitAnswers {
  /** The input's SHA-256 (lowercase hex). */
  readonly input: string;
  /** The target lease that asked: its token and worker (its owner is the work record's). */
  readonly token: string;
  readonly worker: number;
  /**
   * Members answered (sat or unsat) on the input, 1 … 64. Not the members left open: writing an
   * answer twice leaves it as it was, but an open question's attempt would count twice.
   */
  readonly settled: readonly bigint[];
}

export interface CommitManifest {
  readonly schema: typeof COMMIT_MANIFEST_SCHEMA;
  /** The work record this manifest belongs to (a manifest copied to another record is refused). */
  readonly workId: string;
  /** The solver status of the committed run. */
  readonly status: CommitStatus;
  /** AFL `src:` digits of the parent input, used in the published names. */
  readonly source: string;
  readonly items: readonly CommitItem[];
  /** A trace run's shared trace (absent for every other run, and from older records). */
  readonly trace?: CommitTrace;
  /** What the run answered (absent when it settled nothing, and from older records). */
  readonly answers?: CommitAnswers;
}

const HEX64 = /^[0-9a-f]{64}$/;
const SOURCE_RE = /^\d{1,10}$/;
const KINDS: ReadonlySet<string> = new Set(['queue', 'crashes', 'hangs']);
const STATUSES: ReadonlySet<string> = new Set(['ok', 'timeout', 'crash', 'error']);
const MANIFEST_KEYS = ['items', 'schema', 'source', 'status', 'workId'];
const ITEM_KEYS = ['kind', 'path', 'sha256', 'size'];
const TRACE_KEYS = ['path', 'sha256', 'size'];
const ANSWERS_KEYS = ['input', 'settled', 'token', 'worker'];

/** File name of a staged finding inside `staged/`: content-addressed within its work. */
export function stagedName(workId: string, sha256: string): string {
  return `${workId}.${sha256}`;
}

/** The manifest path of a staged finding, relative to the lease root. */
export function stagedRelativePath(workId: string, sha256: string): string {
  return `${STAGED_DIR}/${stagedName(workId, sha256)}`;
}

/** `<workId>.<sha256>` → its parts; null for any other name (temps, foreign files). */
export function parseStagedName(name: string): { workId: string; sha256: string } | null {
  const match = /^([0-9a-f]{64})\.([0-9a-f]{64})$/.exec(name);
  return match ? { workId: match[1]!, sha256: match[2]! } : null;
}

/** The manifest path of a shared trace, relative to the lease root. */
export function traceRelativePath(workId: string, sha256: string): string {
  return `${TRACES_DIR}/${stagedName(workId, sha256)}`;
}

interface ManifestItemInput {
  readonly kind: CommitItemKind;
  readonly sha256: string;
  readonly size: number;
}

/** Builds a manifest (validated like a read one, so a writer can never store what a reader refuses). */
export function buildCommitManifest(
  workId: string,
  status: CommitStatus,
  source: string,
  items: readonly ManifestItemInput[],
  trace?: { readonly sha256: string; readonly size: number },
  answers?: CommitAnswers,
): CommitManifest {
  if (!Array.isArray(items)) fail(String(workId).slice(0, 64), 'items is not an array');
  if (items.length > MAX_MANIFEST_ITEMS) fail(String(workId).slice(0, 64), `${items.length} items (at most ${MAX_MANIFEST_ITEMS})`);
  if (!(items as readonly unknown[]).every((i) => typeof i === 'object' && i !== null)) fail(String(workId).slice(0, 64), 'an item is not an object');
  const manifest = {
    schema: COMMIT_MANIFEST_SCHEMA,
    workId,
    status,
    source,
    items: items.map((i) => ({ kind: i.kind, sha256: i.sha256, size: i.size, path: stagedRelativePath(workId, i.sha256) })),
    ...(trace !== undefined ? { trace: { sha256: trace.sha256, size: trace.size, path: traceRelativePath(workId, trace.sha256) } } : {}),
    ...(answers !== undefined ? { answers: answersJson(answers) } : {}),
  };
  return parseCommitManifest(manifest, workId);
}

/** The manifest as the JSON object `beginCommit` stores. */
export function manifestJson(manifest: CommitManifest): JsonObject {
  return {
    schema: manifest.schema,
    workId: manifest.workId,
    status: manifest.status,
    source: manifest.source,
    items: manifest.items.map((i) => ({ ...i })),
    ...(manifest.trace !== undefined ? { trace: { ...manifest.trace } } : {}),
    ...(manifest.answers !== undefined ? { answers: answersJson(manifest.answers) } : {}),
  };
}

/** A manifest's answers as stored: targets as decimal strings. */
function answersJson(answers: CommitAnswers): JsonObject {
  const decimals = (targets: unknown): unknown => (Array.isArray(targets) ? targets.map((t) => (typeof t === 'bigint' ? t.toString(10) : t)) : targets);
  return { input: answers?.input, token: answers?.token, worker: answers?.worker, settled: decimals(answers?.settled) } as JsonObject;
}

function fail(workId: string, reason: string): never {
  throw new CommitManifestError(`invalid commit manifest of work ${workId}: ${reason}`, { workId, reason });
}

function exactKeys(value: object, keys: readonly string[]): boolean {
  const actual = Object.keys(value).sort();
  return actual.length === keys.length && actual.every((k, i) => k === keys[i]);
}

/**
 * Strict read of a stored manifest for work `workId`. Throws `CommitManifestError`
 * (`ERR_COMMIT_MANIFEST`, details `{ workId, reason }`) on anything but a well-formed manifest of
 * this schema for this work.
 */
export function parseCommitManifest(value: unknown, workId: string): CommitManifest {
  if (!HEX64.test(workId)) fail(workId, 'the work id is not 64 lowercase hex characters');
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(workId, 'not an object');
  const v = value as Record<string, unknown>;
  if (v['schema'] !== COMMIT_MANIFEST_SCHEMA) fail(workId, `schema ${JSON.stringify(v['schema'])} is not ${COMMIT_MANIFEST_SCHEMA}`);
  const keys = [...MANIFEST_KEYS, ...(v['trace'] !== undefined ? ['trace'] : []), ...(v['answers'] !== undefined ? ['answers'] : [])].sort();
  if (!exactKeys(v, keys)) fail(workId, `keys ${Object.keys(v).sort().join(',')} are not ${MANIFEST_KEYS.join(',')} (and optionally answers, trace)`);
  if (v['workId'] !== workId) fail(workId, `it belongs to work ${JSON.stringify(v['workId'])}`);
  if (typeof v['status'] !== 'string' || !STATUSES.has(v['status'])) fail(workId, `status ${JSON.stringify(v['status'])}`);
  if (typeof v['source'] !== 'string' || !SOURCE_RE.test(v['source'])) fail(workId, `source ${JSON.stringify(v['source'])}`);
  const items = v['items'];
  if (!Array.isArray(items)) fail(workId, 'items is not an array');
  if (items.length > MAX_MANIFEST_ITEMS) fail(workId, `${items.length} items (at most ${MAX_MANIFEST_ITEMS})`);
  const seen = new Set<string>();
  const parsed: CommitItem[] = items.map((item: unknown, index: number) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item) || !exactKeys(item, ITEM_KEYS)) fail(workId, `item ${index} is not { kind, sha256, size, path }`);
    const it = item as Record<string, unknown>;
    if (typeof it['kind'] !== 'string' || !KINDS.has(it['kind'])) fail(workId, `item ${index} kind ${JSON.stringify(it['kind'])}`);
    if (typeof it['sha256'] !== 'string' || !HEX64.test(it['sha256'])) fail(workId, `item ${index} sha256 ${JSON.stringify(it['sha256'])}`);
    const size = it['size'];
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0 || size > MAX_STAGED_BYTES) fail(workId, `item ${index} size ${JSON.stringify(size)}`);
    const expected = stagedRelativePath(workId, it['sha256']);
    if (it['path'] !== expected) fail(workId, `item ${index} path ${JSON.stringify(it['path'])} is not ${expected}`);
    const key = `${it['kind']}:${it['sha256']}`;
    if (seen.has(key)) fail(workId, `item ${index} repeats ${key}`);
    seen.add(key);
    return { kind: it['kind'] as CommitItemKind, sha256: it['sha256'], size, path: expected };
  });
  const trace = v['trace'] === undefined ? undefined : parseTrace(v['trace'], workId);
  const answers = v['answers'] === undefined ? undefined : parseAnswers(v['answers'], workId);
  return {
    schema: COMMIT_MANIFEST_SCHEMA,
    workId,
    status: v['status'] as CommitStatus,
    source: v['source'],
    items: parsed,
    ...(trace !== undefined ? { trace } : {}),
    ...(answers !== undefined ? { answers } : {}),
  };
}

function parseAnswers(value: unknown, workId: string): CommitAnswers {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || !exactKeys(value, ANSWERS_KEYS)) fail(workId, 'answers is not { input, token, worker, settled }');
  const a = value as Record<string, unknown>;
  if (!isInputDigest(a['input'])) fail(workId, `answers input ${JSON.stringify(a['input'])}`);
  const token = a['token'];
  // As a lease record's token: a non-empty string (a long coordinator id makes a long one; the
  // record's own size bound holds the manifest).
  if (typeof token !== 'string' || token === '') fail(workId, 'answers token is not a lease token');
  const worker = a['worker'];
  if (typeof worker !== 'number' || !Number.isSafeInteger(worker) || worker < 0) fail(workId, `answers worker ${JSON.stringify(worker)}`);
  const settled = a['settled'];
  if (!Array.isArray(settled) || !settled.every(isDecimalTarget)) fail(workId, 'answers settled is not a list of decimal u64 strings');
  if (settled.length === 0 || settled.length > MAX_GROUP_TARGETS) fail(workId, `answers settle ${settled.length} targets (1 … ${MAX_GROUP_TARGETS})`);
  if (new Set(settled).size !== settled.length) fail(workId, 'answers settle a target twice');
  return { input: a['input'], token, worker, settled: settled.map((t: string) => BigInt(t)) };
}

function parseTrace(value: unknown, workId: string): CommitTrace {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || !exactKeys(value, TRACE_KEYS)) fail(workId, 'trace is not { sha256, size, path }');
  const t = value as Record<string, unknown>;
  if (typeof t['sha256'] !== 'string' || !HEX64.test(t['sha256'])) fail(workId, `trace sha256 ${JSON.stringify(t['sha256'])}`);
  const size = t['size'];
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0 || size > MAX_TRACE_BYTES) fail(workId, `trace size ${JSON.stringify(size)}`);
  const expected = traceRelativePath(workId, t['sha256']);
  if (t['path'] !== expected) fail(workId, `trace path ${JSON.stringify(t['path'])} is not ${expected}`);
  return { sha256: t['sha256'], size, path: expected };
}
