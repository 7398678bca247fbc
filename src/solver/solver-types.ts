/**
 * What crosses the boundary between the main thread and a solver worker thread: the task a caller
 * submits, the wire form the worker receives, and the typed result it sends back. Everything here
 * must survive structured clone (no classes, no functions; errors as `ErrorData`).
 */
import type { ErrorData } from '../errors.js';

/** A program and its argv template; `@@` in argv is replaced by the input file path. */
export interface CommandTemplate {
  readonly binary: string;
  readonly argv: readonly string[];
}

export type InputMode = 'auto' | 'stdin' | 'file';

/** The input of one run: a file (read at dispatch) or bytes. */
export type SolverInput = { readonly path: string } | { readonly bytes: Uint8Array };

import type { ActionKind } from '../scheduler/replay-job.js';
import type { SpawnMethod } from './spawn-method.js';
export type { ActionKind };

/** Directed-extension job fields (`SYMCC_TARGET_BRANCH`, `SYMCC_S2F_ACTIONS`, `SYMFENCE_TRACE_ONLY`). */
export interface DirectedJob {
  /** Primary target branch; 0n = none. */
  readonly targetBranch: bigint;
  readonly actions: readonly { readonly branch: bigint; readonly kind: ActionKind }[];
  /**
   * Solve nothing, only record the branch trace (`SYMFENCE_TRACE_ONLY=1`): the cheap first run
   * that tells the scheduler which branches an input has. Excludes a target and actions.
   */
  readonly traceOnly?: boolean;
  /**
   * Trace runs only: branches the run should also answer when its path reaches their opposite
   * side (`SYMFENCE_WANTED`, at most 256; docs/solver.md "A first run that answers the
   * frontier"). Empty or absent: a plain trace run.
   */
  readonly wanted?: readonly bigint[];
}

/** Caps on what one run may leave in its output directory. Over any cap the result is refused. */
export interface OutputCaps {
  readonly maxOutputFiles: number;
  readonly maxOutputFileBytes: number;
  readonly maxOutputTotalBytes: number;
}

/**
 * Coverage triage of generated inputs. `showmap` is `afl-showmap` (or the reference solver's
 * showmap-compatible mode); it is run as `showmap -t <ms> -m none -b -o <map> -- <target argv>`
 * with `@@` replaced by the candidate's path, or the candidate on stdin when there is no `@@`.
 */
export interface TriageSettings {
  readonly showmap: CommandTemplate;
  /** The AFL-instrumented target (not the SymCC binary). */
  readonly target: CommandTemplate;
  readonly inputMode?: InputMode;
  /** `-t` for afl-showmap; the process is killed 2 s after it if still alive. */
  readonly timeoutMs?: number;
}

/** One solver run, as a caller submits it to `SolverPool.run`. */
export interface SolverTask {
  readonly input: SolverInput;
  readonly command: CommandTemplate;
  /** Extra environment for the solver (contract variables such as `SYMCC_OUTPUT_DIR` are refused). */
  readonly env?: Readonly<Record<string, string>>;
  readonly inputMode?: InputMode;
  readonly timeoutMs?: number;
  readonly killGraceMs?: number;
  readonly caps?: Partial<OutputCaps>;
  readonly stderrCapBytes?: number;
  /** Directed extension; omitted or empty = untargeted run. */
  readonly job?: DirectedJob;
  /** Set `SYMCC_TELEMETRY_OUT` even for untargeted runs (default true: lanes learn from traces). */
  readonly telemetry?: boolean;
  /** Triage each generated input against the pool's shared coverage bitmap. */
  readonly triage?: TriageSettings;
  /** Return the bytes of generated inputs (default true). */
  readonly includeBytes?: boolean;
  /**
   * Absolute path of symfence's SymCC preload library (`preloadLibraryPath()`): prepended to the
   * solver's `LD_PRELOAD`, so a stock SymCC binary writes telemetry and honours directed jobs.
   * See docs/solver.md, "Stock SymCC: the preload library".
   */
  readonly preload?: string;
}

/** The task as the worker thread receives it: every default resolved, plus the abort cell. */
export interface WireTask {
  readonly taskId: number;
  readonly abortBuffer: SharedArrayBuffer;
  readonly input: SolverInput;
  readonly command: CommandTemplate;
  readonly env: Readonly<Record<string, string>>;
  readonly inputMode: 'stdin' | 'file';
  readonly timeoutMs: number;
  readonly killGraceMs: number;
  readonly caps: OutputCaps;
  readonly stderrCapBytes: number;
  readonly job: DirectedJob | null;
  readonly telemetry: boolean;
  readonly triage: (Required<TriageSettings> & { readonly inputMode: 'stdin' | 'file' }) | null;
  readonly includeBytes: boolean;
  /** The preload library to prepend to `LD_PRELOAD`, or null. */
  readonly preload: string | null;
  /** How the worker starts the solver and afl-showmap; absent = `auto` on the worker's thread. */
  readonly spawnMethod?: SpawnMethod;
  /** The pool's solver slot the task runs in (0-based): its directory, pruning map and process gate. */
  readonly slot: number;
}

export type SolverStatus = 'ok' | 'timeout' | 'crash' | 'error';

/** Outcome of triaging one generated input with afl-showmap. */
export type ShowmapOutcome = 'ok' | 'hang' | 'crash' | 'error';

export interface CoverageNovelty {
  /** Map bytes in which this input set at least one new bit (claimed by this thread). */
  readonly newBytes: number;
  /** Total new bits this input claimed. */
  readonly newBits: number;
}

export interface GeneratedInput {
  /** File name in the output directory (`000000`, …). */
  readonly name: string;
  readonly sha256: string;
  readonly sizeBytes: number;
  /** Present unless the task set `includeBytes: false`. */
  readonly bytes?: Uint8Array;
  /** Present when the task asked for triage. */
  readonly showmap?: ShowmapOutcome;
  /** Present when showmap returned a map; `newBits > 0` means interesting. */
  readonly novelty?: CoverageNovelty;
}

/**
 * Where one run's time went on its solver slot, ms (docs/campaign.md "Where slot time goes"):
 * `spawnMs` from the task reaching its slot to the solver process started (run directory, input
 * copy, launch), `solverMs` the solver process's lifetime, `collectMs` what still held the slot
 * after its exit (stderr drain, output collection, telemetry), `triageMs` the coverage triage of
 * the outputs, which runs after the slot was given back (`SolverPool.run`'s `onSolverExit`).
 */
export interface RunTiming {
  readonly spawnMs: number;
  readonly solverMs: number;
  readonly collectMs: number;
  readonly triageMs: number;
  /** The solver process's CPU time (user + system, its reaped descendants included), when its run supervisor reported it. */
  readonly solverCpuMs?: number;
  /**
   * How long the slot went without a solver process before this one started: from the slot's
   * previous process exit to this launch, on the slot's own thread. Absent on a slot's first run.
   */
  readonly idleMs?: number;
}

/** What the worker returns. `SolverPool.run` adds the parsed telemetry. */
export interface WireResult {
  readonly status: SolverStatus;
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly elapsedMs: number;
  /** Last `[STAT] SMT: {"solving_time": µs}` on stderr, clamped to wall time; null when absent. */
  readonly solverTimeUs: number | null;
  /** Count of `[INFO] New testcase:` lines. */
  readonly newTestcaseLines: number;
  readonly generated: readonly GeneratedInput[];
  /** Every regular, non-hidden file the run left, before de-duplication and refusal. */
  readonly totalGenerated: number;
  readonly duplicatesDropped: number;
  /** Dot files, symlinks, directories and other non-regular entries ignored in the output dir. */
  readonly ignoredEntries: number;
  /**
   * Output-directory entries read while listing: bounded by the count cap (listing stops at
   * `maxOutputFiles + 1`), 0 when the run was aborted before collection.
   */
  readonly outputEntriesRead?: number;
  /** Set with status `error` (spawn failure, runtime exit 255, output budget …) or for timeouts. */
  readonly error?: ErrorData;
  readonly aborted: boolean;
  /** Raw text of `SYMCC_TELEMETRY_OUT` when the solver wrote it. */
  readonly telemetryText?: string;
  /** Why the telemetry file could not be read (too large, unreadable). */
  readonly telemetryReadError?: ErrorData;
  /** The last `stderrCapBytes` of stderr. */
  readonly stderrTail: string;
  readonly stderrTruncated: boolean;
  /** Absent when the run never reached a solver process (aborted or failed before the spawn). */
  readonly timing?: RunTiming;
}

export interface SolverResult<T = unknown> extends WireResult {
  /** Parsed telemetry (by the pool's telemetry parser), when the solver wrote valid telemetry. */
  readonly telemetry?: T;
  /** Telemetry present but invalid (`ERR_TELEMETRY_INVALID`), or unreadable. */
  readonly telemetryError?: ErrorData;
}
