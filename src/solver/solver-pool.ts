/**
 * `SolverPool`: a fixed number of solver slots, each running one SymCC process at a time, served by
 * piscina solver threads (`slotsPerThread` slots each); one task = one SymCC run. With
 * `spawnThread: 'main'` (and `auto` for up to two workers) the same handler runs every slot on the
 * calling thread and no threads are started.
 *
 * Cancellation never goes through piscina's `signal` option: piscina terminates the worker thread
 * of an aborted running task, which would orphan the solver's process group. Each task instead
 * carries a `TaskAbortCell` in shared memory; aborting flips it, the worker kills the process group
 * (SIGTERM, SIGKILL after the grace) and returns. So when `run()` settles — resolved or rejected —
 * the solver and everything it forked are gone and its run directory is removed, or, for an
 * aborted run, moved into the trash without waiting for its unlinks (docs/solver.md, *Where a
 * run's directory goes*).
 */
import { accessSync, constants as fsConstants, mkdtempSync, renameSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Piscina } from 'piscina';
import { AbortedError, ClosedError, fromErrorData, toErrorData } from '../errors.js';
import { checkOptionsObject, invalidOption } from '../config/values.js';
import type { OptionsInput } from '../config/schema.js';
import { componentLogger, silentLogger, type Logger } from '../telemetry/logger.js';
import { workerEntry } from '../util/paths.js';
import { CoverageBitmap } from './coverage-bitmap.js';
import { TaskAbortCell } from './abort-cell.js';
import { checkScratchDir, resolveSolverOptions, resolveSpawnThread, type SOLVER_OPTIONS, type SolverOptions } from './solver-options.js';
import type { GeneratedInput, SolverResult, SolverTask, WireResult, WireTask } from './solver-types.js';
import { TriageQueue, TriageSlots } from './result-triage.js';
import { createSolverTaskHandler, type SolverWorkerData } from './solver-worker-main.js';
import { resolveSpawnMethod, type SpawnMethod } from './spawn-method.js';
import { removalBudget, removeTreeBounded } from './bounded-remove.js';
import { CLOSED_SUFFIX, ownedScratchPrefix, sweepStaleScratch } from './scratch-sweep.js';
import { resolveTask } from './task-resolution.js';
import { parseTelemetryEnvelope, type TelemetryParser } from './telemetry-envelope.js';

export interface SolverPoolOptions<T> {
  /** Solver options (workers, timeouts, caps, map size …); see `SOLVER_OPTIONS`. */
  readonly solver?: OptionsInput<typeof SOLVER_OPTIONS.specs>;
  /** Shared coverage bitmap for triage; default: a fresh one of `mapSizeBytes`. */
  readonly bitmap?: CoverageBitmap;
  /** Parses `SYMCC_TELEMETRY_OUT` text on the main thread; default: envelope check only. */
  readonly parseTelemetry?: TelemetryParser<T>;
  /**
   * Parent directory of the pool's scratch directory (per-run directories, pruning maps); default
   * the solver option `scratchDir`, else `/dev/shm` when it is a writable directory, else
   * `os.tmpdir()`.
   */
  readonly scratchParent?: string;
  /**
   * Parent of the directory that coverage triage works in (its candidate and map files); default
   * the scratch directory itself. afl-showmap takes an output path under `/dev/` for a device and
   * writes there only to a file that exists, so triage with afl-showmap must not work under
   * `/dev/shm`. A separate parent gets a pool-owned directory swept and removed like the scratch one.
   */
  readonly triageParent?: string;
  readonly logger?: Logger;
}

export interface RunOptions {
  /** Aborting kills the solver's process group from inside the worker; `run()` then rejects. */
  readonly signal?: AbortSignal;
  /**
   * Called once when the run's solver slot is free again (its solver process exited and its
   * outputs were collected), before coverage triage, which runs after it on this thread. A caller
   * that starts the next run here overlaps it with this run's triage. Called for every run whose
   * slot reported back (also one that failed before its solver started); never twice.
   */
  readonly onSolverExit?: () => void;
  /**
   * The solver slot (0-based) to run in. A slot runs one solver process at a time: a run given to
   * a busy slot is prepared at once and starts the moment the slot's process exits ("staged",
   * docs/solver.md "Staged runs"). Default: the slot with the fewest unsettled runs.
   */
  readonly slot?: number;
}

/** Tasks a slot's thread takes at once: the running one and one staged behind it (more queue). */
const STAGED_TASKS_PER_SLOT = 2;

export interface SolverPoolCounters {
  runs: number;
  ok: number;
  timeout: number;
  crash: number;
  error: number;
  aborted: number;
  outputBudgetRefusals: number;
  telemetryErrors: number;
  generated: number;
  interesting: number;
}

export class SolverPool<T = Readonly<Record<string, unknown>>> {
  readonly options: SolverOptions;
  readonly bitmap: CoverageBitmap;
  /** How this pool starts solvers: `options.spawnMethod` with `auto` decided. */
  readonly spawnMethod: SpawnMethod;
  /** Which thread serves the slots: `options.spawnThread` with `auto` decided. */
  readonly spawnThread: 'worker' | 'main';
  /** One single-thread pool per solver thread, each serving `#slotsPerThread` slots; empty with `spawnThread: 'main'`. */
  readonly #slotThreads: Piscina[];
  readonly #slotsPerThread: number;
  /** Tasks submitted to each slot and not yet settled (a task without a slot goes to the least loaded). */
  readonly #slotLoad: number[];
  /** With `spawnThread: 'main'`: the task handler a solver thread runs, on this thread, for every slot. */
  readonly #mainRunner: ((task: WireTask) => Promise<WireResult>) | null;
  readonly #parseTelemetry: TelemetryParser<T>;
  readonly #scratchRoot: string;
  /** The directories this pool made and removes at close: the scratch directory, and the triage one when apart. */
  readonly #ownedRoots: string[] = [];
  readonly #logger: Logger;
  readonly #inFlight = new Map<number, { cell: TaskAbortCell; settled: Promise<unknown> }>();
  readonly #counters: SolverPoolCounters = {
    runs: 0,
    ok: 0,
    timeout: 0,
    crash: 0,
    error: 0,
    aborted: 0,
    outputBudgetRefusals: 0,
    telemetryErrors: 0,
    generated: 0,
    interesting: 0,
  };
  #nextTaskId = 1;
  #closing: Promise<void> | null = null;
  readonly #triage: TriageQueue;
  /** A plain snapshot of the environment afl-showmap's is derived from (iterating `process.env` is slow). */
  readonly #baseEnv: NodeJS.ProcessEnv = Object.freeze({ ...process.env });

  constructor(options: SolverPoolOptions<T> = {}) {
    checkOptionsObject(options, 'options');
    this.options = resolveSolverOptions(options.solver ?? {});
    this.spawnMethod = resolveSpawnMethod(this.options.spawnMethod);
    this.spawnThread = resolveSpawnThread(this.options);
    this.bitmap = options.bitmap ?? new CoverageBitmap(this.options.mapSizeBytes);
    this.#parseTelemetry = options.parseTelemetry ?? (parseTelemetryEnvelope as unknown as TelemetryParser<T>);
    this.#logger = componentLogger(options.logger ?? silentLogger(), 'solver');
    const scratchParent = options.scratchParent ?? checkScratchDir(this.options.scratchDir) ?? defaultScratchParent();
    // Leftovers of coordinators that died without close() (SIGKILL): their owner pid is gone; and
    // what closed pools left beyond their close-time budget.
    const swept = sweepStaleScratch(scratchParent);
    if (swept.length > 0) this.#logger.info({ scratchParent, swept: swept.length }, 'removed scratch directories of closed pools and dead coordinators');
    this.#scratchRoot = mkdtempSync(ownedScratchPrefix(scratchParent));
    this.#ownedRoots.push(this.#scratchRoot);
    const triageParent = options.triageParent === undefined ? scratchParent : path.resolve(options.triageParent);
    if (triageParent !== path.resolve(scratchParent)) {
      const sweptTriage = sweepStaleScratch(triageParent);
      if (sweptTriage.length > 0) this.#logger.info({ triageParent, swept: sweptTriage.length }, 'removed triage directories of closed pools and dead coordinators');
      this.#ownedRoots.push(mkdtempSync(ownedScratchPrefix(triageParent)));
    }
    const triageRoot = this.#ownedRoots.at(-1)!;
    // As many triages at once as solver slots: each slot's triage overlaps the slot's next run.
    this.#triage = new TriageQueue(new TriageSlots(triageRoot, this.options.workers), { bitmap: this.bitmap, baseEnv: this.#baseEnv, batching: { supported: true } });
    const workerData: SolverWorkerData = {
      scratchRoot: this.#scratchRoot,
      bitmapBuffer: this.bitmap.buffer,
      pruningMapBytes: this.options.mapSizeBytes,
    };
    this.#slotLoad = new Array<number>(this.options.workers).fill(0);
    if (this.spawnThread === 'main') {
      this.#slotThreads = [];
      this.#slotsPerThread = this.options.workers;
      this.#mainRunner = createSolverTaskHandler(workerData, this.bitmap);
    } else {
      this.#mainRunner = null;
      // Slots 0..k-1 on the first thread, k..2k-1 on the second, and so on (docs/solver.md
      // "Solver threads"). Two tasks per slot: the running one and the one staged behind it
      // ("Staged runs"); the slot's gate lets only one of them run a process.
      const perThread = this.options.slotsPerThread;
      this.#slotsPerThread = perThread;
      this.#slotThreads = Array.from(
        { length: Math.ceil(this.options.workers / perThread) },
        (_, thread) =>
          new Piscina({
            filename: workerEntry('solver-worker'),
            minThreads: 1,
            maxThreads: 1,
            concurrentTasksPerWorker: STAGED_TASKS_PER_SLOT * Math.min(perThread, this.options.workers - thread * perThread),
            idleTimeout: Number.MAX_SAFE_INTEGER,
            // Not 'sync' (piscina's default): a thread with no task would block in Atomics.wait,
            // and with it its event loop, so a flood's removal (trash-removal.ts) would stop
            // between slices until the next task came.
            atomics: 'async',
            workerData,
          }),
      );
    }
  }

  /** Solver worker threads this pool runs: ceil(workers / slotsPerThread), or 0 with `spawnThread: 'main'`. */
  get threads(): number {
    return this.#slotThreads.length;
  }

  /** A snapshot of the run counters. */
  get counters(): Readonly<SolverPoolCounters> {
    return { ...this.#counters };
  }

  /** Tasks submitted and not yet settled. */
  get pending(): number {
    return this.#inFlight.size;
  }

  /**
   * Runs one solver task. Resolves with a typed result for every way the solver can end
   * (`ok | timeout | crash | error`); rejects only for an invalid task (`ERR_INVALID_OPTION`,
   * `ERR_INVALID_JOB`), an abort (`ERR_ABORTED`, after the process group is dead) or a closed pool
   * (`ERR_CLOSED`).
   */
  async run(task: SolverTask, runOptions: RunOptions = {}): Promise<SolverResult<T>> {
    if (this.#closing) throw new ClosedError('solver pool is closed');
    checkOptionsObject(runOptions, 'runOptions');
    const signal = runOptions.signal;
    if (signal?.aborted) throw new AbortedError('solver run aborted before dispatch', { reason: String(signal.reason) });
    const slot = this.#slotFor(runOptions.slot);
    const taskId = this.#nextTaskId++;
    const cell = new TaskAbortCell();
    const wire = resolveTask(task, this.options, taskId, cell.buffer, slot, this.spawnMethod);
    const onAbort = (): void => {
      cell.requestAbort();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    // The solver slot runs the solver and collects its outputs; triage follows on this thread.
    const slotTask: WireTask = wire.triage !== null ? { ...wire, triage: null, includeBytes: true } : wire;
    // Once the slot has finished the task its abort cell no longer takes an abort, so triage also
    // watches the caller's signal and the pool's close.
    const stopRequested = (): boolean => cell.abortRequested || signal?.aborted === true || this.#closing !== null;
    this.#slotLoad[slot]! += 1;
    const inSlot = this.#mainRunner !== null ? this.#mainRunner(slotTask) : (this.#slotThreads[Math.floor(slot / this.#slotsPerThread)]!.run(slotTask) as Promise<WireResult>);
    const running = this.#runTriaged(wire, inSlot.finally(() => (this.#slotLoad[slot]! -= 1)), runOptions.onSolverExit, stopRequested);
    this.#inFlight.set(taskId, { cell, settled: running.catch(() => undefined) }); // only waits for the task to settle; its result or error goes to the caller of run
    let wireResult: WireResult;
    try {
      wireResult = await running;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      this.#inFlight.delete(taskId);
    }
    if (wireResult.aborted || signal?.aborted || cell.abortRequested) {
      this.#counters.aborted += 1;
      throw new AbortedError(this.#closing ? 'solver run aborted: pool closing' : 'solver run aborted', {
        status: wireResult.status,
        elapsedMs: wireResult.elapsedMs,
        outputEntriesRead: wireResult.outputEntriesRead ?? 0,
      });
    }
    return this.#finish(wireResult);
  }

  /** The slot asked for, else the one with the fewest unsettled tasks (lowest first). */
  #slotFor(asked: number | undefined): number {
    if (asked !== undefined) {
      if (!Number.isSafeInteger(asked) || asked < 0 || asked >= this.options.workers) throw invalidOption('runOptions.slot', `a solver slot, 0..${this.options.workers - 1}`, asked);
      return asked;
    }
    let best = 0;
    for (let slot = 1; slot < this.#slotLoad.length; slot++) if (this.#slotLoad[slot]! < this.#slotLoad[best]!) best = slot;
    return best;
  }

  /**
   * The slot's result, then (when the task asked for it) its outputs' coverage triage. The slot is
   * reported free (`onSolverExit`) first. A showmap that cannot run the target at all makes the
   * run an `error` with `ERR_SHOWMAP_SETUP` and no outputs: not the input's fault.
   */
  async #runTriaged(wire: WireTask, slot: Promise<WireResult>, onSolverExit: (() => void) | undefined, stopRequested: () => boolean): Promise<WireResult> {
    const result = await slot;
    try {
      onSolverExit?.();
    } catch (error) {
      this.#logger.error({ err: error }, 'onSolverExit callback threw');
    }
    if (wire.triage === null || result.aborted || result.generated.length === 0) return result;
    const triageStartMs = performance.now();
    const triaged = await this.#triage.triage(wire.triage, wire.spawnMethod, result.generated, stopRequested);
    const timing = result.timing !== undefined ? { timing: { ...result.timing, triageMs: performance.now() - triageStartMs } } : {};
    if (!Array.isArray(triaged)) {
      // Triage could not run at all: no verdict on any output, and not this input's fault.
      const { error: _solverError, ...rest } = result;
      return { ...rest, ...timing, generated: [], duplicatesDropped: 0, ignoredEntries: 0, outputEntriesRead: 0, aborted: result.aborted || stopRequested(), status: 'error', error: triaged.setupError };
    }
    // A triage stopped early has no verdict on some outputs: the result is dropped as aborted.
    const complete = triaged.filter((g): g is GeneratedInput => g !== null);
    const generated = wire.includeBytes ? complete : complete.map(({ bytes: _bytes, ...rest }) => rest);
    return { ...result, ...timing, generated, aborted: result.aborted || stopRequested() || complete.length < triaged.length };
  }

  #finish(wire: WireResult): SolverResult<T> {
    const c = this.#counters;
    c.runs += 1;
    c[wire.status] += 1;
    if (wire.error?.code === 'ERR_SOLVER_OUTPUT_BUDGET') c.outputBudgetRefusals += 1;
    c.generated += wire.generated.length;
    c.interesting += wire.generated.filter((g) => (g.novelty?.newBits ?? 0) > 0).length;
    let telemetry: { telemetry?: T; telemetryError?: SolverResult<T>['telemetryError'] } = {};
    if (wire.telemetryReadError) {
      telemetry = { telemetryError: wire.telemetryReadError };
    } else if (wire.telemetryText !== undefined) {
      try {
        telemetry = { telemetry: this.#parseTelemetry(wire.telemetryText) };
      } catch (error) {
        telemetry = { telemetryError: toErrorData(error) };
      }
    }
    if (telemetry.telemetryError) {
      c.telemetryErrors += 1;
      this.#logger.warn({ code: telemetry.telemetryError.code }, 'solver telemetry rejected');
    }
    for (const candidate of wire.generated) {
      if (candidate.showmap === 'hang') this.#logger.info({ sha256: candidate.sha256 }, 'triage: generated input hangs the target (afl-showmap exit 1); not merged');
      else if (candidate.showmap === 'error') this.#logger.warn({ sha256: candidate.sha256 }, 'triage: afl-showmap failed on a generated input');
    }
    if (wire.status === 'error' && wire.error) {
      this.#logger.warn({ code: wire.error.code, exitCode: wire.exitCode }, fromErrorData(wire.error).message);
    }
    return { ...wire, ...telemetry };
  }

  /**
   * Idempotent. Aborts every running task (each kills its process group from inside its worker),
   * waits for them to settle (an aborted run's directory is only moved aside, so this does not
   * wait for a flood's unlinks), stops the threads and removes the scratch directory within the
   * `closeRemovalEntries` / `closeRemovalMs` budget. Every step runs even when an earlier one fails.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const { cell } of this.#inFlight.values()) cell.requestAbort();
      await Promise.allSettled([...this.#inFlight.values()].map((entry) => entry.settled));
      try {
        await Promise.all(this.#slotThreads.map((threads) => threads.destroy()));
      } finally {
        this.#removeScratchRoot();
      }
    })();
    return this.#closing;
  }

  /**
   * Each directory the pool owns is first renamed to its closed name, which any pool's sweep
   * removes (docs/solver.md, *Where a run's directory goes*), then removed in batches
   * (bounded-remove.ts: the trash may hold a flood) until the budget runs out. Never throws: what
   * is left is swept.
   */
  #removeScratchRoot(): void {
    const budget = removalBudget(this.options.closeRemovalEntries, this.options.closeRemovalMs);
    for (const owned of this.#ownedRoots) {
      let root = owned + CLOSED_SUFFIX;
      try {
        renameSync(owned, root);
      } catch (error) {
        // Not renamed: removed under its own name, and a remainder waits until this process is gone.
        this.#logger.warn({ err: error, scratchRoot: owned }, 'cannot rename the scratch directory to its closed name');
        root = owned;
      }
      let complete = false;
      try {
        complete = removeTreeBounded(root, budget);
      } catch (error) {
        this.#logger.warn({ err: error, scratchRoot: root }, 'cannot remove the scratch directory');
        continue;
      }
      if (!complete) this.#logger.info({ scratchRoot: root, entries: this.options.closeRemovalEntries, ms: this.options.closeRemovalMs }, 'scratch directory partly removed at close; the next pool removes the rest');
    }
  }
}

/**
 * Where run directories go by default. Every run creates and removes two directories; on a disk
 * filesystem shared with fsync-heavy work (lease tables) each `rmdir` waited for the journal —
 * milliseconds per run in `bench/dispatch` — while tmpfs does it in microseconds. Outputs are
 * bounded by the output caps, so memory-backed scratch is safe.
 */
export function defaultScratchParent(): string {
  try {
    if (statSync('/dev/shm').isDirectory()) {
      accessSync('/dev/shm', fsConstants.W_OK);
      return '/dev/shm';
    }
  } catch {
    // No usable /dev/shm: fall through.
  }
  return os.tmpdir();
}
