/**
 * `symfence-telemetry/1`: the feedback a directed solver run leaves in `SYMCC_TELEMETRY_OUT`.
 *
 * The parser is strict on purpose: a field of the wrong type is an error naming the path to that
 * field (`branchTrace[3][2]`), never a guess, because a silently zeroed branch id would steer the
 * lanes toward a target that does not exist. Unknown top-level keys are ignored so runtimes may add
 * fields without a schema bump. u64 ids travel as decimal strings (JSON numbers lose precision).
 */
import { TelemetryInvalidError } from '../errors.js';
import { parseDecimalU64 } from './branch-id.js';

export const TELEMETRY_SCHEMA = 'symfence-telemetry/1';
export const MAX_TRACE_ENTRIES = 512;
export const MAX_OPEN_BRANCHES = 256;
/** Raw JSON text larger than this is rejected before parsing. */
export const MAX_TELEMETRY_BYTES = 64 * 1024 * 1024;

export type TargetStatus = 'sat' | 'unsat' | 'unknown' | 'none';

export interface BranchTraceEntry {
  readonly parent: bigint;
  readonly actual: bigint;
  readonly opposite: bigint;
  readonly site: bigint;
  readonly taken: 0 | 1;
  readonly interesting: 0 | 1;
}

export interface SolverCounters {
  readonly queries: number;
  readonly sat: number;
  readonly unsat: number;
  readonly unknown: number;
  readonly solverTimeUs: number;
  readonly generated: number;
}

/**
 * The preload library's own account of a run (top-level `preload`; absent when the runtime wrote
 * the telemetry itself). Counts cover the whole path, not only the bounded trace.
 */
export interface PreloadReport {
  readonly mode: 'untargeted' | 'trace' | 'directed';
  /** Every call of the branch hook, and those with a symbolic condition. */
  readonly events: number;
  readonly symbolicEvents: number;
  /** Symbolic events handed to the runtime for solving, and those passed with site id 0. */
  readonly solved: number;
  readonly skipped: number;
  /** Events beyond the trace and open-branch bounds. */
  readonly traceDropped: number;
  readonly openDropped: number;
  /** The run ended as soon as every target of its group had been solved. */
  readonly earlyExit: boolean;
  /** Fork at the target (absent from older libraries): children started, and whether a fork failed or a cap stopped them. */
  readonly forks?: number;
  readonly forkFailed?: boolean;
  readonly forkCapped?: boolean;
  /**
   * In-place answers (absent from older libraries): group branches QSYM solved in the run's own
   * process, and QSYM's solving steps there (Solver::negatePath calls; in an untargeted run, the
   * events its pruning let through).
   */
  readonly inPlace?: number;
  readonly negations?: number;
  /** QSYM's solving decision came through the library (absent from older libraries). */
  readonly interposed?: boolean;
  /** CPU of the whole run (user + system, the process and every child it reaped), when the library measured it. */
  readonly cpuUs?: number;
}

/**
 * One branch answered in a forked child of the run (docs/solver.md, "Fork at the target"):
 * `unknown` when the child crashed, ran out of its CPU budget or took the solver's whole timeout.
 */
export interface ForkAnswer {
  readonly branch: bigint;
  readonly status: 'sat' | 'unsat' | 'unknown';
  /** Wall time of the child's solving call (0 when it never finished). */
  readonly solverTimeUs: number;
  /** The child's CPU time (user + system). */
  readonly cpuUs: number;
  /** Generated files attributed to the branch. */
  readonly files: number;
}

export interface Telemetry {
  readonly schema: typeof TELEMETRY_SCHEMA;
  /** 0n = the run had no primary target. */
  readonly targetBranch: bigint;
  readonly targetReached: boolean;
  readonly targetStatus: TargetStatus;
  readonly branchTrace: readonly BranchTraceEntry[];
  /** De-duplicated, in first-seen order. */
  readonly openBranches: readonly bigint[];
  readonly counters: SolverCounters;
  readonly preload?: PreloadReport;
  /**
   * Preload telemetry only (`generatedBy`): the opposite branch ids a generated input was
   * attributed to, de-duplicated — the branches this run answered `sat`.
   */
  readonly generatedFor?: readonly bigint[];
  /** Preload telemetry only: the branches answered in the run (forked or in place), in path order. */
  readonly answers?: readonly ForkAnswer[];
}

const STATUSES: ReadonlySet<string> = new Set(['sat', 'unsat', 'unknown', 'none']);
const COUNTER_KEYS = ['queries', 'sat', 'unsat', 'unknown', 'solverTimeUs', 'generated'] as const;

function fail(path: string, expected: string, value: unknown): never {
  let received: string;
  if (value === undefined) received = 'missing';
  else {
    try {
      received = JSON.stringify(value)?.slice(0, 80) ?? String(value);
    } catch {
      received = String(value);
    }
  }
  throw new TelemetryInvalidError(`telemetry ${path}: expected ${expected}, received ${received}`, { path, expected, received });
}

function u64(value: unknown, path: string, minimum: bigint): bigint {
  if (typeof value !== 'string') fail(path, 'a decimal u64 string', value);
  const parsed = parseDecimalU64(value);
  if (parsed === undefined || parsed < minimum) {
    fail(path, minimum > 0n ? 'a decimal id in 1..2^64-1' : 'a decimal u64 string', value);
  }
  return parsed;
}

function bit(value: unknown, path: string): 0 | 1 {
  if (value !== 0 && value !== 1) fail(path, '0 or 1', value);
  return value;
}

function counter(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) fail(path, 'a non-negative integer', value);
  return value;
}

/**
 * Parses and validates telemetry from JSON text or an already-parsed value.
 * Throws `TelemetryInvalidError` (`ERR_TELEMETRY_INVALID`) with `details.path` naming the bad field.
 */
export function parseTelemetry(input: string | unknown): Telemetry {
  let raw: unknown = input;
  if (typeof input === 'string') {
    if (input.length > MAX_TELEMETRY_BYTES) fail('$', `at most ${MAX_TELEMETRY_BYTES} bytes of JSON`, `${input.length} bytes`);
    try {
      raw = JSON.parse(input);
    } catch (error) {
      throw new TelemetryInvalidError(`telemetry is not valid JSON: ${(error as Error).message}`, { path: '$', expected: 'JSON' });
    }
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) fail('$', 'a JSON object', raw);
  const obj = raw as Record<string, unknown>;
  if (obj.schema !== TELEMETRY_SCHEMA) fail('schema', `"${TELEMETRY_SCHEMA}"`, obj.schema);

  const targetBranch = u64(obj.targetBranch, 'targetBranch', 0n);
  if (typeof obj.targetReached !== 'boolean') fail('targetReached', 'a boolean', obj.targetReached);
  if (typeof obj.targetStatus !== 'string' || !STATUSES.has(obj.targetStatus)) {
    fail('targetStatus', 'one of sat|unsat|unknown|none', obj.targetStatus);
  }

  const traceRaw = obj.branchTrace;
  if (!Array.isArray(traceRaw)) fail('branchTrace', 'an array', traceRaw);
  if (traceRaw.length > MAX_TRACE_ENTRIES) fail('branchTrace', `at most ${MAX_TRACE_ENTRIES} entries`, `${traceRaw.length} entries`);
  const branchTrace = traceRaw.map((entry, i): BranchTraceEntry => {
    const at = `branchTrace[${i}]`;
    if (!Array.isArray(entry) || entry.length !== 6) fail(at, '[parent, actual, opposite, site, taken, interesting]', entry);
    return Object.freeze({
      parent: u64(entry[0], `${at}[0]`, 0n),
      actual: u64(entry[1], `${at}[1]`, 1n),
      opposite: u64(entry[2], `${at}[2]`, 1n),
      site: u64(entry[3], `${at}[3]`, 0n),
      taken: bit(entry[4], `${at}[4]`),
      interesting: bit(entry[5], `${at}[5]`),
    });
  });

  const openRaw = obj.openBranches;
  if (!Array.isArray(openRaw)) fail('openBranches', 'an array', openRaw);
  if (openRaw.length > MAX_OPEN_BRANCHES) fail('openBranches', `at most ${MAX_OPEN_BRANCHES} entries`, `${openRaw.length} entries`);
  const openSeen = new Set<bigint>();
  openRaw.forEach((id, i) => openSeen.add(u64(id, `openBranches[${i}]`, 1n)));

  const countersRaw = obj.counters;
  if (typeof countersRaw !== 'object' || countersRaw === null || Array.isArray(countersRaw)) fail('counters', 'an object', countersRaw);
  const c = countersRaw as Record<string, unknown>;
  const counters = {} as Record<(typeof COUNTER_KEYS)[number], number>;
  for (const key of COUNTER_KEYS) counters[key] = counter(c[key], `counters.${key}`);

  const preload = obj.preload === undefined ? undefined : parsePreload(obj.preload);
  const generatedFor = obj.generatedBy === undefined ? undefined : parseGeneratedBy(obj.generatedBy);
  const answers = obj.answers === undefined ? undefined : parseAnswers(obj.answers);

  // Field by field, not a literal that starts with a spread of an optional field: on Node 20 that
  // cost 10–40 µs per result to build, this a fraction of one.
  const telemetry = {} as { -readonly [K in keyof Telemetry]: Telemetry[K] };
  if (preload !== undefined) telemetry.preload = preload;
  if (generatedFor !== undefined) telemetry.generatedFor = Object.freeze(generatedFor);
  if (answers !== undefined) telemetry.answers = Object.freeze(answers);
  telemetry.schema = TELEMETRY_SCHEMA;
  telemetry.targetBranch = targetBranch;
  telemetry.targetReached = obj.targetReached;
  telemetry.targetStatus = obj.targetStatus as TargetStatus;
  telemetry.branchTrace = Object.freeze(branchTrace);
  telemetry.openBranches = Object.freeze([...openSeen]);
  telemetry.counters = Object.freeze(counters);
  return Object.freeze(telemetry);
}

const PRELOAD_MODES: ReadonlySet<string> = new Set(['untargeted', 'trace', 'directed']);
const PRELOAD_COUNTS = ['events', 'symbolicEvents', 'solved', 'skipped', 'traceDropped', 'openDropped'] as const;

function parsePreload(raw: unknown): PreloadReport {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) fail('preload', 'an object', raw);
  const p = raw as Record<string, unknown>;
  if (typeof p.mode !== 'string' || !PRELOAD_MODES.has(p.mode)) fail('preload.mode', 'one of untargeted|trace|directed', p.mode);
  const counts = {} as Record<(typeof PRELOAD_COUNTS)[number], number>;
  for (const key of PRELOAD_COUNTS) counts[key] = counter(p[key], `preload.${key}`);
  if (typeof p.earlyExit !== 'boolean') fail('preload.earlyExit', 'a boolean', p.earlyExit);
  const extras: { forks?: number; forkFailed?: boolean; forkCapped?: boolean; interposed?: boolean; inPlace?: number; negations?: number; cpuUs?: number } = {};
  for (const key of ['forks', 'inPlace', 'negations'] as const) if (p[key] !== undefined) extras[key] = counter(p[key], `preload.${key}`);
  if (p.cpuUs !== undefined) extras.cpuUs = counter(p.cpuUs, 'preload.cpuUs');
  for (const key of ['forkFailed', 'forkCapped', 'interposed'] as const) {
    if (p[key] === undefined) continue;
    if (typeof p[key] !== 'boolean') fail(`preload.${key}`, 'a boolean', p[key]);
    extras[key] = p[key];
  }
  return Object.freeze({ mode: p.mode as PreloadReport['mode'], ...counts, earlyExit: p.earlyExit, ...extras });
}

/** Rows `[fileName, oppositeId, siteId]` the preload library writes, at most this many. */
export const MAX_GENERATED_ROWS = 4096;

function parseGeneratedBy(raw: unknown): bigint[] {
  if (!Array.isArray(raw)) fail('generatedBy', 'an array', raw);
  if (raw.length > MAX_GENERATED_ROWS) fail('generatedBy', `at most ${MAX_GENERATED_ROWS} entries`, `${raw.length} entries`);
  const seen = new Set<bigint>();
  raw.forEach((row, i) => {
    const at = `generatedBy[${i}]`;
    if (!Array.isArray(row) || row.length !== 3 || typeof row[0] !== 'string') fail(at, '[fileName, opposite, site]', row);
    seen.add(u64(row[1], `${at}[1]`, 1n));
    u64(row[2], `${at}[2]`, 0n);
  });
  return [...seen];
}

/** Rows `[branch, status, solverTimeUs, cpuUs, files]`, at most this many. */
export const MAX_FORK_ANSWERS = 256;
const ANSWER_STATUSES: ReadonlySet<string> = new Set(['sat', 'unsat', 'unknown']);

function parseAnswers(raw: unknown): ForkAnswer[] {
  if (!Array.isArray(raw)) fail('answers', 'an array', raw);
  if (raw.length > MAX_FORK_ANSWERS) fail('answers', `at most ${MAX_FORK_ANSWERS} entries`, `${raw.length} entries`);
  return raw.map((row, i): ForkAnswer => {
    const at = `answers[${i}]`;
    if (!Array.isArray(row) || row.length !== 5) fail(at, '[branch, status, solverTimeUs, cpuUs, files]', row);
    if (typeof row[1] !== 'string' || !ANSWER_STATUSES.has(row[1])) fail(`${at}[1]`, 'one of sat|unsat|unknown', row[1]);
    return Object.freeze({
      branch: u64(row[0], `${at}[0]`, 1n),
      status: row[1] as ForkAnswer['status'],
      solverTimeUs: counter(row[2], `${at}[2]`),
      cpuUs: counter(row[3], `${at}[3]`),
      files: counter(row[4], `${at}[4]`),
    });
  });
}

/**
 * Serialises telemetry back to the wire form (ids as decimal strings); `parseTelemetry` reads it
 * back to an equal value. `generatedFor` goes out as `generatedBy` rows without file names or
 * sites (`["", id, "0"]`), which parse back to the same ids.
 */
export function telemetryToJson(t: Telemetry): Record<string, unknown> {
  return {
    schema: t.schema,
    targetBranch: t.targetBranch.toString(),
    targetReached: t.targetReached,
    targetStatus: t.targetStatus,
    branchTrace: t.branchTrace.map((e) => [e.parent.toString(), e.actual.toString(), e.opposite.toString(), e.site.toString(), e.taken, e.interesting]),
    openBranches: t.openBranches.map((b) => b.toString()),
    counters: { ...t.counters },
    ...(t.preload !== undefined ? { preload: { ...t.preload } } : {}),
    ...(t.generatedFor !== undefined ? { generatedBy: t.generatedFor.map((b) => ['', b.toString(), '0']) } : {}),
    ...(t.answers !== undefined ? { answers: t.answers.map((a) => [a.branch.toString(), a.status, a.solverTimeUs, a.cpuUs, a.files]) } : {}),
  };
}
