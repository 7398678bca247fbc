/**
 * Every failure symfence reports is a `SymfenceError` subclass with a stable `code`.
 *
 * Errors cross thread boundaries (piscina tasks, comlink calls to the I/O thread) as plain data
 * `{ code, message, details }`: structured clone keeps neither the class nor own properties such
 * as `code`, so `toErrorData()` flattens an error and `fromErrorData()` rebuilds the right class
 * from the code registry below. Tests and callers branch on `code`, never on message text.
 */

/**
 * Every code symfence reports, one literal union: `defineError` takes only these, so a new failure
 * kind is added here first. `ERR_SYMFENCE` is the base class's, `ERR_INTERNAL` a bug's (a thrown
 * value that was no error of ours).
 */
export const ERROR_CODES = [
  'ERR_SYMFENCE',
  'ERR_INTERNAL',
  'ERR_ABORTED',
  'ERR_ADMISSION_PROTOCOL',
  'ERR_AFL',
  'ERR_CAMPAIGN_STATE',
  'ERR_CLOSED',
  'ERR_COMMIT_MANIFEST',
  'ERR_ETCD_UNAVAILABLE',
  'ERR_FS_PROBE',
  'ERR_GUIDANCE_INVALID',
  'ERR_HINT_INVALID',
  'ERR_INFLIGHT_FULL',
  'ERR_INVALID_JOB',
  'ERR_INVALID_OPTION',
  'ERR_LANE_STATE',
  'ERR_LEASE_CORRUPT',
  'ERR_LEASE_IO',
  'ERR_LEASE_RECORD_TOO_LARGE',
  'ERR_LEASE_STORE_REPLACED',
  'ERR_LEASE_STORE_SCHEMA',
  'ERR_LEASE_STORE_UNSUPPORTED',
  'ERR_LOCK_PATH',
  'ERR_LOCK_TIMEOUT',
  'ERR_MAZE_INVALID',
  'ERR_NATIVE_UNAVAILABLE',
  'ERR_OUT_DIR_BUSY',
  'ERR_PLOT_DATA_INVALID',
  'ERR_PRELOAD_UNSUPPORTED',
  'ERR_PUBLISH',
  'ERR_QUEUE_CLOSED',
  'ERR_SETUP_FAILURES',
  'ERR_SHOWMAP_SETUP',
  'ERR_SOLVER_EXIT',
  'ERR_SOLVER_NOT_FOUND',
  'ERR_SOLVER_NOT_SYMCC',
  'ERR_SOLVER_OUTPUT_BUDGET',
  'ERR_SOLVER_SILENT',
  'ERR_SOLVER_SPAWN',
  'ERR_SOLVER_TIMEOUT',
  'ERR_STAGED_FINDING',
  'ERR_STAGED_FINDING_TOO_LARGE',
  'ERR_TELEMETRY_INVALID',
  'ERR_USAGE',
] as const;
export type SymfenceErrorCode = (typeof ERROR_CODES)[number];

declare const foreign: unique symbol;
/**
 * A code from outside symfence that an error carried across a thread (an errno name such as
 * `EIO`): only `fromErrorData` makes one. Compare codes of unknown origin through `codeOf`.
 */
export type ForeignErrorCode = string & { readonly [foreign]: true };

/** Structured-clone-safe description of an error. */
export interface ErrorData {
  readonly code: string;
  readonly message: string;
  readonly details?: Readonly<Record<string, unknown>>;
  readonly stack?: string;
}

export class SymfenceError extends Error {
  readonly code: SymfenceErrorCode | ForeignErrorCode = 'ERR_SYMFENCE';
  readonly details: Readonly<Record<string, unknown>>;

  constructor(message: string, details: Readonly<Record<string, unknown>> = {}, options?: ErrorOptions) {
    super(message, options);
    this.details = details;
  }

  override get name(): string {
    return this.constructor.name;
  }
}

type ErrorClass = new (message: string, details?: Readonly<Record<string, unknown>>) => SymfenceError;

const registry = new Map<string, ErrorClass>();

/**
 * Declares an error class with a fixed code and registers it for `fromErrorData`. Modules that own
 * a failure kind call this once at load time; duplicate codes are a programming error.
 */
export function defineError<C extends SymfenceErrorCode>(code: C, fallbackName: string): ErrorClass & { readonly code: C } {
  if (registry.has(code)) throw new Error(`error code ${code} is defined twice`);
  const cls = {
    [fallbackName]: class extends SymfenceError {
      override readonly code: SymfenceErrorCode = code;
    },
  }[fallbackName] as ErrorClass;
  Object.defineProperty(cls, 'code', { value: code, enumerable: true });
  registry.set(code, cls);
  return cls as ErrorClass & { readonly code: C };
}

/** An option, flag or environment variable has an invalid value or is unknown. */
export const InvalidOptionError = defineError('ERR_INVALID_OPTION', 'InvalidOptionError');
/** Command-line usage error: unknown command, missing argument. Exit code 2. */
export const UsageError = defineError('ERR_USAGE', 'UsageError');
/** A lease record is unreadable, of another schema, or does not match its path. Fails closed. */
export const LeaseCorruptError = defineError('ERR_LEASE_CORRUPT', 'LeaseCorruptError');
/** A lease operation hit an I/O failure; touched records were restored where possible. */
export const LeaseIoError = defineError('ERR_LEASE_IO', 'LeaseIoError');
/** A record's lock could not be taken before the deadline. Locks are never stolen by age. */
export const LockTimeoutError = defineError('ERR_LOCK_TIMEOUT', 'LockTimeoutError');
/** A lock path is a directory, a symlink or otherwise not a regular file. */
export const LockPathError = defineError('ERR_LOCK_PATH', 'LockPathError');
/**
 * The chosen lease store cannot be used for this lease directory: SQLite asked for on a network
 * filesystem (docs/leases.md "Lease stores"). Refused at open, before any work is claimed.
 */
export const LeaseStoreUnsupportedError = defineError('ERR_LEASE_STORE_UNSUPPORTED', 'LeaseStoreUnsupportedError');
/**
 * A lease database is not symfence's, is of a newer schema, holds another kind of table, or holds
 * objects (triggers, views, tables, indexes, columns) other than the schema's. Refused at open.
 */
export const LeaseStoreSchemaError = defineError('ERR_LEASE_STORE_SCHEMA', 'LeaseStoreSchemaError');
/**
 * The lease database a table has open is no longer the one at its path (deleted, replaced, or its
 * `-wal`/`-shm` deleted): every lease of the table is lost and its claims are refused. Reopen the
 * table to use the database now at the path.
 */
export const LeaseStoreReplacedError = defineError('ERR_LEASE_STORE_REPLACED', 'LeaseStoreReplacedError');
/** The native addon (flock, syncfs) is not built or not loadable. */
export const NativeUnavailableError = defineError('ERR_NATIVE_UNAVAILABLE', 'NativeUnavailableError');
/** The filesystem qualification probe failed at a named step. */
export const FsProbeError = defineError('ERR_FS_PROBE', 'FsProbeError');
/** The shared in-flight target set has no free slot. Nothing was admitted. */
export const InflightFullError = defineError('ERR_INFLIGHT_FULL', 'InflightFullError');
/** A job, target id or action list is malformed. */
export const InvalidJobError = defineError('ERR_INVALID_JOB', 'InvalidJobError');
/** Solver telemetry does not match the `symfence-telemetry/1` schema. */
export const TelemetryInvalidError = defineError('ERR_TELEMETRY_INVALID', 'TelemetryInvalidError');
/** The solver ran past its timeout and was killed. */
export const SolverTimeoutError = defineError('ERR_SOLVER_TIMEOUT', 'SolverTimeoutError');
/** The solver produced more output than the configured caps allow. */
export const SolverOutputBudgetError = defineError('ERR_SOLVER_OUTPUT_BUDGET', 'SolverOutputBudgetError');
/** The solver could not be started. */
export const SolverSpawnError = defineError('ERR_SOLVER_SPAWN', 'SolverSpawnError');
/**
 * The solver command is not SymCC: a file neither ELF nor a `#!` script (the kernel cannot run it,
 * and execvp would hand it to `sh`), or its start-up probe run showed no SymCC runtime — no
 * telemetry, no preload event, no runtime banner. Refused before any work is claimed. Exit code 2.
 */
export const SolverNotSymccError = defineError('ERR_SOLVER_NOT_SYMCC', 'SolverNotSymccError');
/**
 * A solver run exited 0 having written no telemetry and no output and shown no SymCC runtime: the
 * solver no longer behaves like SymCC. A set-up failure (docs/solver.md "Is it SymCC?"): the
 * work is abandoned, not done.
 */
export const SolverSilentError = defineError('ERR_SOLVER_SILENT', 'SolverSilentError');
/** `--solver-telemetry preload` was asked for a binary the preload library cannot interpose, or the library is missing. */
export const PreloadUnsupportedError = defineError('ERR_PRELOAD_UNSUPPORTED', 'PreloadUnsupportedError');
/** The solver command does not name an executable file (checked at start, execvp's lookup). Exit code 2. */
export const SolverNotFoundError = defineError('ERR_SOLVER_NOT_FOUND', 'SolverNotFoundError');
/**
 * afl-showmap (or the AFL target it runs) cannot be set up: the tool is missing, or it aborted
 * before running the target (missing target, no instrumentation). Not a hang. Exit code 2 at start.
 */
export const ShowmapSetupError = defineError('ERR_SHOWMAP_SETUP', 'ShowmapSetupError');
/**
 * The campaign stopped itself: `maxSetupFailures` jobs in a row failed for a reason that is not
 * their input's fault (solver cannot start, showmap set-up failure). Their work was abandoned, not
 * marked done, so a rerun with a working set-up runs it.
 */
export const SetupFailuresError = defineError('ERR_SETUP_FAILURES', 'SetupFailuresError');
/** AFL++ output directory, queue entry or tool is missing or malformed. */
export const AflError = defineError('ERR_AFL', 'AflError');
/** The operation was aborted through an AbortSignal or by shutdown. */
export const AbortedError = defineError('ERR_ABORTED', 'AbortedError');
/** The component was closed; no further calls are accepted. */
export const ClosedError = defineError('ERR_CLOSED', 'ClosedError');
/** The bounded request queue refused a request (closing, or the caller gave up waiting). */
export const QueueClosedError = defineError('ERR_QUEUE_CLOSED', 'QueueClosedError');

/** Durable file publication (the AFL queue through the I/O thread) failed; nothing half-written carries a final name. */
export const PublishError = defineError('ERR_PUBLISH', 'PublishError');
/**
 * etcd could not be reached (or refused the client) when a table opened or staged findings were
 * read or written: nothing was claimed or published (docs/leases.md "The etcd store").
 */
export const EtcdUnavailableError = defineError('ERR_ETCD_UNAVAILABLE', 'EtcdUnavailableError');
/** A lease record or batch does not fit one etcd transaction. Nothing was written. */
export const LeaseRecordTooLargeError = defineError('ERR_LEASE_RECORD_TOO_LARGE', 'LeaseRecordTooLargeError');
/** A finding to stage in etcd is larger than one etcd value may be. Nothing was staged. */
export const StagedFindingTooLargeError = defineError('ERR_STAGED_FINDING_TOO_LARGE', 'StagedFindingTooLargeError');

/** The `code` of any thrown value (`ERR_*` of ours, an errno name of Node's), or undefined. */
export function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** Flattens any thrown value into data that survives structured clone. */
export function toErrorData(error: unknown): ErrorData {
  if (error instanceof SymfenceError) {
    return { code: error.code, message: error.message, details: error.details, stack: error.stack };
  }
  if (error instanceof Error) {
    return { code: codeOf(error) ?? 'ERR_INTERNAL', message: error.message, stack: error.stack };
  }
  return { code: 'ERR_INTERNAL', message: String(error) };
}

/**
 * Rebuilds an error from `toErrorData` output. Registered codes come back as their class; other
 * codes (Node's `EACCES`, `ERR_INTERNAL` …) as a plain `SymfenceError` carrying that code.
 */
export function fromErrorData(data: ErrorData): SymfenceError {
  const cls = registry.get(data.code);
  const error = cls ? new cls(data.message, data.details ?? {}) : new UnregisteredError(data.code, data.message, data.details ?? {});
  if (data.stack !== undefined) error.stack = data.stack;
  return error;
}

/** An error of a code nobody registered: one of ours without a class (`ERR_INTERNAL`), or a foreign one. */
class UnregisteredError extends SymfenceError {
  override readonly code: SymfenceErrorCode | ForeignErrorCode;
  constructor(code: string, message: string, details: Readonly<Record<string, unknown>>) {
    super(message, details);
    this.code = code as SymfenceErrorCode | ForeignErrorCode;
  }
}

/** True when `data` looks like `toErrorData` output (used on the receiving side of a port). */
export function isErrorData(data: unknown): data is ErrorData {
  return (
    typeof data === 'object' &&
    data !== null &&
    typeof (data as ErrorData).code === 'string' &&
    typeof (data as ErrorData).message === 'string'
  );
}

/** All registered codes, for documentation and the export snapshot test. */
export function registeredErrorCodes(): readonly string[] {
  return [...registry.keys()].sort();
}
/** A persisted scheduler lane-state snapshot is malformed or of another schema. */
export const LaneStateError = defineError('ERR_LANE_STATE', 'LaneStateError');
/** A hint file or hint entry is malformed. */
export const HintInvalidError = defineError('ERR_HINT_INVALID', 'HintInvalidError');
/** A guidance (site → distance) file is malformed. */
export const GuidanceInvalidError = defineError('ERR_GUIDANCE_INVALID', 'GuidanceInvalidError');
/** A reservation port broke its contract (e.g. `claimGroups` answered the wrong number of outcomes). */
export const AdmissionProtocolError = defineError('ERR_ADMISSION_PROTOCOL', 'AdmissionProtocolError');
/** The solver runtime refused to run (exit 255 before `main`: e.g. `SYMCC_OUTPUT_DIR` missing). */
export const SolverExitError = defineError('ERR_SOLVER_EXIT', 'SolverExitError');
/** A reference-solver maze (test and demo fixture) is malformed. */
export const MazeInvalidError = defineError('ERR_MAZE_INVALID', 'MazeInvalidError');
/** A campaign's output directory or stats file is missing, unreadable or of another schema. */
export const CampaignStateError = defineError('ERR_CAMPAIGN_STATE', 'CampaignStateError');
/** A `plot_data.csv` (symfence's) or `plot_data` / `fuzzer_stats` (AFL++'s) that cannot be parsed; names the file and line. */
export const PlotDataInvalidError = defineError('ERR_PLOT_DATA_INVALID', 'PlotDataInvalidError');
/** A committing work record's result manifest is malformed, of another schema or names foreign paths. */
export const CommitManifestError = defineError('ERR_COMMIT_MANIFEST', 'CommitManifestError');
/** A staged finding named by a commit manifest is missing, unreadable or not the bytes it claims. */
export const StagedFindingError = defineError('ERR_STAGED_FINDING', 'StagedFindingError');
/** Another live campaign holds the output directory (its queue, stats and job log). */
export const OutDirBusyError = defineError('ERR_OUT_DIR_BUSY', 'OutDirBusyError');
/**
 * A broken invariant of symfence itself — a bug, never the answer to bad input or a failing
 * filesystem (those have codes of their own). Also the code of a thrown value that was no error of
 * ours (`toErrorData`).
 */
export const InternalError = defineError('ERR_INTERNAL', 'InternalError');
