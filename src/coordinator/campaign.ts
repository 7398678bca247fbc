/**
 * `Campaign`: the embedding API. `Campaign.start(options, runtime)` resolves the options, prepares
 * the output directory, builds the components (lease tables, solver pool, work sources, queue
 * publisher) through a factory, and runs the coordinator loop until the duration elapses, the
 * embedder's `AbortSignal` fires or `stop()` is called. The handle exposes typed events, live
 * counters and `stop()` (idempotent; every cleanup step runs even if an earlier one throws).
 */
import { hostname } from 'node:os';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import type { OptionsInput } from '../config/schema.js';
import { SymfenceError } from '../errors.js';
import { makeUserDirectory, userPathError } from '../config/user-paths.js';
import { checkOptionsObject, invalidOption } from '../config/values.js';
import { IO_OPTIONS, type IoOptions } from '../io/io-options.js';
import { CAMPAIGN_LEASE_OPTIONS, type CampaignLeaseOptions } from '../lease/lease-table-options.js';
import type { HintSource } from '../scheduler/hints.js';
import { SCHEDULER_OPTIONS, type SchedulerOptions } from '../scheduler/scheduler-options.js';
import { createCounters, jobsCompleted, solverUtilisation, type CampaignCounters } from '../telemetry/counters.js';
import { JobLogFile, type JobLogEntry } from '../telemetry/job-log.js';
import { componentLogger, silentLogger } from '../telemetry/logger.js';
import { ProgressLine, type ProgressStream } from '../telemetry/progress-line.js';
import type { StatsSnapshot } from '../telemetry/stats-file.js';
import { StatsReporter } from '../telemetry/stats-reporter.js';
import { TypedEmitter } from '../util/typed-emitter.js';
import { CAMPAIGN_OPTIONS, type CampaignOptions } from './campaign-options.js';
import { Coordinator, type CoordinatorHooks, type CoordinatorPorts, type ShutdownReport } from './coordinator.js';
import { loadNative } from '../native/bindings.js';
import { OutDirLock } from './out-dir-lock.js';
import { campaignEtcdPrefix, campaignLeaseRoot, checkCampaignName } from './lease-root.js';
import type { CampaignComponents, CampaignComponentsFactory, CampaignContext } from './campaign-context.js';
import {
  systemClock,
  type Clock,
  type CoordinatorJob,
  type PublishedEntry,
} from './ports.js';

// Defined in campaign-context.ts so the composition roots (adapters/) build components without
// importing this file, which loads them.
export type { CampaignComponents, CampaignContext, CampaignComponentsFactory } from './campaign-context.js';

export interface CampaignRuntime {
  /**
   * Builds the components. Omitted: an AFL++ campaign over the real parts, which needs `aflOut`,
   * `aflInstance` and `solverCommand` in the options.
   */
  readonly components?: CampaignComponentsFactory;
  /** The embedder's pino logger; symfence only derives children from it. Default: silent. */
  readonly logger?: Logger;
  /** Aborting it stops the campaign (like `stop()`). */
  readonly signal?: AbortSignal;
  /** Injected clock (tests). Default: `Date.now`. */
  readonly clock?: Clock;
  /** Where the live progress line goes; written only if it is a TTY. Default: none. */
  readonly progressStream?: ProgressStream;
  /** Test hooks passed to the coordinator (see `CoordinatorHooks`). */
  readonly hooks?: CoordinatorHooks;
}

/** `Campaign.start` input: the campaign options plus the AFL++ mode's commands. */
export type CampaignStartOptions = OptionsInput<typeof CAMPAIGN_OPTIONS.specs> & {
  /** The SymCC-instrumented binary and its arguments (`@@` = input file); AFL++ mode. */
  readonly solverCommand?: readonly string[];
  /** afl-showmap command line; default `afl-showmap` from PATH. */
  readonly showmap?: string;
  /** The AFL target command (after `--`); default: the instance's fuzzer_stats `command_line`. */
  readonly aflTarget?: string;
  /** Scheduler options (`SCHEDULER_OPTIONS` input, the same names as the scheduler flags). */
  readonly scheduler?: OptionsInput<typeof SCHEDULER_OPTIONS.specs>;
  /** I/O thread options (`IO_OPTIONS` input, the `--io-*` flags). */
  readonly io?: OptionsInput<typeof IO_OPTIONS.specs>;
  /** Lease table options (`CAMPAIGN_LEASE_OPTIONS` input: store, shards, lock timeout, barriers …). */
  readonly lease?: OptionsInput<typeof CAMPAIGN_LEASE_OPTIONS.specs>;
  /** Dispatch hint sources, consulted in order before a `scheduler.hintsFile` (docs/scheduler.md "Hints"). */
  readonly hints?: readonly HintSource[];
};

/** The parts of `CampaignStartOptions` that belong to other components' schemas. */
interface CampaignComponentOptions {
  readonly scheduler: SchedulerOptions;
  readonly io: IoOptions;
  readonly lease: CampaignLeaseOptions;
  readonly hints: readonly HintSource[];
}

/**
 * Resolves the scheduler, I/O and lease option objects and checks the hint sources. Throws
 * `ERR_INVALID_OPTION` naming the option (`scheduler`, `io`, `lease`, `hints[i]`) and the value.
 */
export function resolveComponentOptions(input: { readonly scheduler?: unknown; readonly io?: unknown; readonly lease?: unknown; readonly hints?: unknown }): CampaignComponentOptions {
  const scheduler = SCHEDULER_OPTIONS.resolve(input.scheduler ?? {});
  const io = IO_OPTIONS.resolve(input.io ?? {});
  const lease = CAMPAIGN_LEASE_OPTIONS.resolve(input.lease ?? {});
  const hints = input.hints ?? [];
  if (!Array.isArray(hints)) throw invalidOption('hints', 'a list of hint sources ({ hintFor(seed) })', hints);
  hints.forEach((source: unknown, i) => {
    if (typeof source !== 'object' || source === null || typeof (source as { hintFor?: unknown }).hintFor !== 'function') {
      throw invalidOption(`hints[${i}]`, 'a hint source ({ hintFor(seed) })', source);
    }
  });
  return { scheduler, io, lease, hints: Object.freeze([...(hints as HintSource[])]) };
}

export interface CampaignFinding extends PublishedEntry {
  /** The input whose solver run produced it. */
  readonly inputPath: string;
}

export interface CampaignEvents {
  [event: string]: (...args: never[]) => void;
  finding: (finding: CampaignFinding) => void;
  progress: (snapshot: StatsSnapshot) => void;
  leaseLost: (info: { workId: string; lease: 'work' | 'target'; targets: readonly string[] }) => void;
  jobFinished: (entry: JobLogEntry) => void;
  error: (error: Error) => void;
}

export interface CampaignSummary {
  readonly outDir: string;
  readonly coordinatorId: string;
  readonly elapsedMs: number;
  readonly jobsCompleted: number;
  /** Solver slots the campaign ran with. */
  readonly workers: number;
  /** Time-averaged solver utilisation over the run, in [0, 1]: solver process time (`counters.solverProcessMs`) over workers × elapsed. */
  readonly solverUtilisation: number;
  /** Slot occupancy over the run, in [0, 1]: slot time held by a run (`counters.solverBusyMs`) over workers × elapsed. */
  readonly slotOccupancy: number;
  readonly counters: Readonly<CampaignCounters>;
  readonly shutdown: ShutdownReport;
}

export class Campaign extends TypedEmitter<CampaignEvents> {
  readonly options: CampaignOptions;
  readonly outDir: string;
  readonly coordinatorId: string;
  readonly workers: number;
  /** Resolves with the summary once the campaign has stopped and cleaned up. */
  readonly done: Promise<CampaignSummary>;

  readonly #counters: CampaignCounters;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #startedMs: number;
  #coordinator: Coordinator | undefined;
  #components: CampaignComponents | undefined;
  #reporter: StatsReporter | undefined;
  #jobLog: JobLogFile | undefined;
  /** Held from start to the end of stop: one live campaign per output directory. */
  #outDirLock: OutDirLock | undefined;
  #timers: NodeJS.Timeout[] = [];
  #stopRequested = false;
  #resolveDone!: (summary: CampaignSummary) => void;
  #rejectDone!: (error: unknown) => void;
  #stopping: Promise<CampaignSummary> | undefined;
  #loop: Promise<ShutdownReport> | undefined;

  readonly #parts: CampaignComponentOptions;

  private constructor(options: CampaignOptions, parts: CampaignComponentOptions, outDir: string, coordinatorId: string, workers: number, logger: Logger, clock: Clock) {
    super();
    this.options = options;
    // A named campaign's etcd keys live in its namespace under the prefix, as its directory does.
    this.#parts = options.campaign === undefined ? parts : { ...parts, lease: Object.freeze({ ...parts.lease, etcdPrefix: campaignEtcdPrefix(parts.lease.etcdPrefix, options.campaign) }) };
    this.outDir = outDir;
    this.coordinatorId = coordinatorId;
    this.workers = workers;
    this.#counters = createCounters();
    this.#clock = clock;
    this.#log = componentLogger(logger, 'campaign', { coordinator: coordinatorId });
    this.#startedMs = clock.now();
    this.done = new Promise((resolve, reject) => {
      this.#resolveDone = resolve;
      this.#rejectDone = reject;
    });
    // `done` is also returned by stop(); an unobserved rejection must not crash the embedder.
    this.done.catch(() => {});
  }

  /**
   * Resolves the options, prepares `<outDir>`, builds the components and starts the loop.
   * Rejects with `ERR_INVALID_OPTION` for bad options (naming the option and value) and with the
   * factory's error when a component cannot be built; nothing keeps running in either case.
   */
  static async start(input: CampaignStartOptions, runtime: CampaignRuntime = {}): Promise<Campaign> {
    checkOptionsObject(input, 'options');
    checkOptionsObject(runtime, 'runtime');
    const { solverCommand, showmap, aflTarget, scheduler, io, lease, hints, ...rest } = input;
    const options = CAMPAIGN_OPTIONS.resolve(rest);
    const parts = resolveComponentOptions({ scheduler, io, lease, hints });
    let components = runtime.components;
    if (components === undefined) {
      if (solverCommand === undefined) {
        throw invalidOption('solverCommand', 'the SymCC command as an array of strings (or runtime.components)', undefined);
      }
      if (!Array.isArray(solverCommand) || solverCommand.some((w) => typeof w !== 'string' || w === '')) {
        throw invalidOption('solverCommand', 'an array of non-empty strings', solverCommand);
      }
      // Loaded lazily: only AFL++ campaigns need the real components.
      const { aflComponentsFactory } = await import('./adapters/afl-components.js');
      components = await aflComponentsFactory(options, {
        symcc: solverCommand,
        ...(showmap !== undefined ? { showmap } : {}),
        ...(aflTarget !== undefined ? { aflTarget } : {}),
      });
    }
    const outDir = resolveOutDir(options);
    const coordinatorId = options.coordinatorId ?? `${hostname()}:${process.pid}`;
    const workers = options.workers === 0 ? os.availableParallelism() : options.workers;
    const campaign = new Campaign(options, parts, outDir, coordinatorId, workers, runtime.logger ?? silentLogger(), runtime.clock ?? systemClock);
    await campaign.#start({ ...runtime, components });
    return campaign;
  }

  async #start(runtime: CampaignRuntime & { readonly components: CampaignComponentsFactory }): Promise<void> {
    const option = this.options.outDir !== undefined ? 'outDir (--out-dir)' : 'aflOut (--afl-out)';
    makeUserDirectory(this.outDir, option, 'the output directory');
    const native = loadNative();
    if (native) {
      try {
        this.#outDirLock = OutDirLock.acquire(this.outDir, this.coordinatorId, native);
      } catch (error) {
        if (error instanceof SymfenceError) throw error;
        throw userPathError(option, this.outDir, 'the output directory', error);
      }
    } else this.#log.warn({ outDir: this.outDir }, 'native addon missing: the output directory is not locked against a second campaign');
    const context: CampaignContext = {
      options: this.options,
      scheduler: this.#parts.scheduler,
      io: this.#parts.io,
      lease: this.#parts.lease,
      hints: this.#parts.hints,
      outDir: this.outDir,
      coordinatorId: this.coordinatorId,
      workers: this.workers,
      logger: this.#log,
      counters: this.#counters,
      clock: this.#clock,
    };
    let components: CampaignComponents;
    try {
      components = await runtime.components(context);
    } catch (error) {
      this.#outDirLock?.release();
      throw error;
    }
    this.#components = components;
    try {
      this.#jobLog = new JobLogFile(path.join(this.outDir, 'jobs.jsonl'));
      this.#reporter = this.#statsReporter(components, runtime);
      this.#coordinator = this.#coordinatorOver(components, runtime, this.#jobLog);
    } catch (error) {
      await this.#closeResources();
      throw error;
    }

    this.#sample();
    const statsTimer = setInterval(() => this.#sample(), this.options.statsIntervalMs);
    statsTimer.unref();
    this.#timers.push(statsTimer);
    if (this.options.durationMs > 0) {
      const durationTimer = setTimeout(() => void this.stop(), this.options.durationMs);
      durationTimer.unref();
      this.#timers.push(durationTimer);
    }
    if (runtime.signal) {
      if (runtime.signal.aborted) void this.stop();
      else runtime.signal.addEventListener('abort', () => void this.stop(), { once: true });
    }
    this.#log.info({ outDir: this.outDir, workers: this.workers }, 'campaign started');
    this.#loop = this.#coordinator.run({ idlePollMs: this.options.idlePollMs });
    this.#loop.then(
      () => void this.stop(),
      (error: unknown) => {
        this.#reportError(error);
        void this.stop();
      },
    );
  }

  /** The stats reporter of stats.json and the progress line, with the components' own sections. */
  #statsReporter(components: CampaignComponents, runtime: CampaignRuntime): StatsReporter {
    const progress = runtime.progressStream ? new ProgressLine(runtime.progressStream) : undefined;
    return new StatsReporter(
      {
        dir: this.outDir,
        coordinatorId: this.coordinatorId,
        name: this.options.name,
        workers: this.workers,
        statsIntervalMs: this.options.statsIntervalMs,
        startedMs: this.#startedMs,
        // Where the components open the tables: the shared directory, or the private default.
        leaseDir: campaignLeaseRoot(this.options, this.outDir),
        sections: () => ({
          ...(components.aflPeers ? { afl: components.aflPeers() } : {}),
          ...(components.frontier ? { frontier: components.frontier() } : {}),
          ...(components.yield ? { yield: components.yield() } : {}),
        }),
        onWriteError: (error) => this.#reportError(error),
      },
      this.#clock,
      this.#counters,
      progress,
    );
  }

  /** The coordinator over the components, its events forwarded as the campaign's. */
  #coordinatorOver(components: CampaignComponents, runtime: CampaignRuntime, jobLog: JobLogFile): Coordinator {
    return new Coordinator(
      {
        coordinatorId: this.coordinatorId,
        workers: this.workers,
        workLeaseTtlMs: this.options.workLeaseTtlMs,
        targetLeaseTtlMs: this.options.targetLeaseTtlMs,
        maxPendingJobs: this.options.maxPendingJobs,
        recoverExpiredWork: this.options.recoverExpiredWork,
        maxSetupFailures: this.options.maxSetupFailures,
        prefetchJobs: this.options.prefetchJobs,
        prefetchDepth: this.options.prefetchDepth,
      },
      {
        clock: this.#clock,
        logger: this.#log,
        counters: this.#counters,
        workLeases: components.workLeases,
        ...(components.targetLeases ? { targetLeases: components.targetLeases } : {}),
        reservations: components.reservations,
        solver: components.solver,
        source: components.source,
        jobLog,
        ...(components.inputExists ? { inputExists: components.inputExists } : {}),
        commits: components.commits,
        ...(runtime.hooks ? { hooks: runtime.hooks } : {}),
        events: {
          finding: (entry: PublishedEntry, job: CoordinatorJob) => this.emit('finding', { ...entry, inputPath: job.inputPath }),
          leaseLost: (info) => this.emit('leaseLost', info),
          jobFinished: (entry) => this.emit('jobFinished', entry),
        },
      },
    );
  }

  /** A copy of the live counters. */
  counters(): CampaignCounters {
    if (this.#components?.edgesCovered) this.#counters.edgesCovered = this.#components.edgesCovered();
    const peers = this.#components?.aflPeers?.();
    if (peers) {
      this.#counters.aflImported = peers.imported;
      this.#counters.aflMergedEdges = peers.mergedEdges;
    }
    this.#coordinator?.accrueSolverBusy();
    return { ...this.#counters };
  }

  /** True once stop was requested (by `stop()`, the signal, the duration or a fatal error). */
  get stopping(): boolean {
    return this.#stopRequested;
  }

  /**
   * Stops the campaign: the coordinator rolls back in-flight dispatches, aborts solver runs and
   * releases every pending and active lease; then the final stats are written and the components
   * closed. Idempotent: every call returns the same summary promise. It (and `done`) rejects with
   * `ERR_SETUP_FAILURES` when the coordinator stopped itself after `maxSetupFailures` set-up
   * failures in a row (the cleanup has run by then).
   */
  stop(): Promise<CampaignSummary> {
    this.#stopRequested = true;
    if (this.#stopping === undefined) {
      this.#stopping = this.#stop();
      // Internal callers (duration, signal, loop end) do not await it; `done` reports the failure.
      this.#stopping.catch(() => {});
    }
    return this.#stopping;
  }

  async #stop(): Promise<CampaignSummary> {
    try {
      for (const timer of this.#timers) clearTimeout(timer);
      const shutdown = (await this.#coordinator?.stop()) ?? { abortedRuns: 0, releasedPending: 0, releaseFailures: 0 };
      await this.#loop?.catch(() => {}); // the loop's failure is reported through `done` where it happened
      const counters = this.counters();
      try {
        await this.#reporter?.close();
      } catch (error) {
        this.#reportError(error);
      }
      await this.#closeResources();
      const elapsedMs = this.#clock.now() - this.#startedMs;
      const summary: CampaignSummary = {
        outDir: this.outDir,
        coordinatorId: this.coordinatorId,
        elapsedMs,
        jobsCompleted: jobsCompleted(counters),
        workers: this.workers,
        solverUtilisation: solverUtilisation(counters.solverProcessMs, this.workers, elapsedMs),
        slotOccupancy: solverUtilisation(counters.solverBusyMs, this.workers, elapsedMs),
        counters,
        shutdown,
      };
      this.#log.info({ jobsCompleted: summary.jobsCompleted, interesting: counters.interesting, shutdown }, 'campaign stopped');
      // The coordinator stopped itself because the set-up is broken: the campaign fails with that
      // code (after the same full cleanup), so a CLI run exits non-zero instead of reporting success.
      const fatal = this.#coordinator?.fatalError;
      if (fatal !== undefined) throw fatal;
      this.#resolveDone(summary);
      return summary;
    } catch (error) {
      this.#rejectDone(error);
      throw error;
    }
  }

  /** Runs every close step even when one throws. */
  async #closeResources(): Promise<void> {
    try {
      this.#jobLog?.close();
    } catch (error) {
      this.#reportError(error);
    }
    try {
      await this.#components?.close?.();
    } catch (error) {
      this.#reportError(error);
    }
    try {
      this.#outDirLock?.release();
    } catch (error) {
      this.#reportError(error);
    }
  }

  #sample(): void {
    try {
      this.counters();
      const snapshot = this.#reporter?.sample('running');
      if (snapshot) this.emit('progress', snapshot);
    } catch (error) {
      this.#reportError(error);
    }
  }

  #reportError(error: unknown): void {
    const err = error instanceof Error ? error : new Error(String(error));
    this.#log.error({ err }, 'campaign error');
    // An 'error' event without listeners would throw from EventEmitter; the log is enough then.
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }
}

function resolveOutDir(options: CampaignOptions): string {
  if (!/^[A-Za-z0-9._-]+$/.test(options.name) || options.name === '.' || options.name === '..') {
    throw invalidOption('name', 'a plain directory name (letters, digits, . _ -)', options.name);
  }
  checkCampaignName(options.campaign);
  if (options.outDir !== undefined) return path.resolve(options.outDir);
  if (options.aflOut !== undefined) return path.resolve(options.aflOut, options.name);
  throw invalidOption('outDir', 'an output directory (outDir, or aflOut with name)', undefined);
}
