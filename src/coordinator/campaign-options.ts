/**
 * The campaign's options: one schema for the library (`Campaign.start`), the CLI flags of
 * `symfence run`/`demo` and the `SYMFENCE_*` environment variables.
 */
import { defineOptionSchema, type ResolvedOptions } from '../config/schema.js';
import { DEFAULT_TRACE_STORE_MAX_BYTES, MAX_TRACE_STORE_MAX_BYTES, MIN_TRACE_STORE_MAX_BYTES } from '../commit/trace-store-cap.js';

/**
 * Most solver slots of one campaign: the solver pool's own bound (`SOLVER_OPTIONS.workers`), so a
 * value the campaign accepts is never refused later by the pool. Above two slots (by default) the
 * slots are served by solver threads, one per `slotsPerThread` slots (4 by default), each with its
 * own V8 isolate, ~10 MB of resident memory (docs/solver.md "Memory per worker").
 */
export const MAX_CAMPAIGN_WORKERS = 256;

export const CAMPAIGN_OPTIONS = defineOptionSchema('campaign', {
  /** Solver slots, 0..256. 0 = one per available core. Default 0. */
  workers: {
    kind: 'integer',
    default: 0,
    min: 0,
    max: MAX_CAMPAIGN_WORKERS,
    flag: 'workers',
    env: 'SYMFENCE_WORKERS',
    description: `concurrent solver jobs, 0-${MAX_CAMPAIGN_WORKERS} (0 = one per available core)`,
  },
  /** Per-job solver timeout, ms. Default 30 s. */
  solverTimeoutMs: {
    kind: 'duration',
    default: 30_000,
    min: 100,
    max: 86_400_000,
    flag: 'solver-timeout',
    env: 'SYMFENCE_SOLVER_TIMEOUT',
    description: 'kill a solver run after this long',
  },
  /** Stop the campaign after this long, ms. 0 = run until stopped. Default 0. */
  durationMs: {
    kind: 'duration',
    default: 0,
    min: 0,
    flag: 'duration',
    env: 'SYMFENCE_DURATION',
    description: 'stop after this long (0 = until interrupted)',
  },
  /** AFL++ output directory (`afl-fuzz -o`). */
  aflOut: {
    kind: 'string',
    default: undefined,
    flag: 'afl-out',
    env: 'SYMFENCE_AFL_OUT',
    description: 'AFL++ output directory (afl-fuzz -o)',
  },
  /** The AFL++ instance whose queue is read (`-M`/`-S` name). */
  aflInstance: {
    kind: 'string',
    default: undefined,
    flag: 'afl-instance',
    env: 'SYMFENCE_AFL_INSTANCE',
    description: 'AFL++ instance whose queue symfence reads (-M/-S name)',
  },
  /** This coordinator's directory name under the AFL output directory. Default `symfence`. */
  name: {
    kind: 'string',
    default: 'symfence',
    flag: 'name',
    env: 'SYMFENCE_NAME',
    description: 'name of this coordinator\'s directory under the AFL output directory',
  },
  /** Output directory; default `<aflOut>/<name>`. */
  outDir: {
    kind: 'string',
    default: undefined,
    flag: 'out-dir',
    env: 'SYMFENCE_OUT_DIR',
    description: 'output directory',
    defaultHelp: '<afl-out>/<name>',
  },
  /** Shared lease directory (multi-coordinator). Default: `<outDir>/leases`, private to this coordinator. */
  leaseDir: {
    kind: 'string',
    default: undefined,
    flag: 'lease-dir',
    env: 'SYMFENCE_LEASE_DIR',
    description: 'lease directory shared by cooperating coordinators',
    defaultHelp: 'private, <out-dir>/leases',
  },
  /**
   * The campaign's namespace in a lease directory or etcd prefix shared with other campaigns
   * (src/coordinator/lease-root.ts). Default: none, the lease directory itself.
   */
  campaign: {
    kind: 'string',
    default: undefined,
    flag: 'campaign',
    env: 'SYMFENCE_CAMPAIGN',
    description: 'campaign name within a lease directory or etcd prefix that several campaigns share: its work, answers and traces live under <lease-dir>/campaigns/<name>/ (etcd: <etcd-prefix>/campaigns/<name>), apart from other campaigns\'',
    defaultHelp: 'none: the lease directory itself',
  },
  /** Coordinator id recorded in leases and jobs.jsonl. Default `<hostname>:<pid>`. */
  coordinatorId: {
    kind: 'string',
    default: undefined,
    flag: 'coordinator-id',
    env: 'SYMFENCE_COORDINATOR_ID',
    description: 'this coordinator\'s id in leases and logs',
    defaultHelp: '<hostname>:<pid>',
  },
  /** Exact-work lease TTL, ms. Default 120 s. */
  workLeaseTtlMs: {
    kind: 'duration',
    default: 120_000,
    min: 1_000,
    max: 86_400_000,
    flag: 'work-lease-ttl',
    env: 'SYMFENCE_WORK_LEASE_TTL',
    description: 'exact-work lease TTL: another coordinator may take expired work over after this',
  },
  /** Target-group lease TTL, ms. Default 120 s. */
  targetLeaseTtlMs: {
    kind: 'duration',
    default: 120_000,
    min: 1_000,
    max: 86_400_000,
    flag: 'target-lease-ttl',
    env: 'SYMFENCE_TARGET_LEASE_TTL',
    description: 'target-group lease TTL',
  },
  /** How often stats.json and plot_data.csv are written, ms. Default 5 s. */
  statsIntervalMs: {
    kind: 'duration',
    default: 5_000,
    min: 100,
    max: 3_600_000,
    flag: 'stats-interval',
    env: 'SYMFENCE_STATS_INTERVAL',
    description: 'how often stats.json and plot_data.csv are written',
  },
  /** Queue safety valve: pending jobs beyond this are dropped and their leases released. Default 4096. */
  maxPendingJobs: {
    kind: 'integer',
    default: 4096,
    min: 1,
    max: 1_000_000,
    flag: 'max-pending-jobs',
    env: 'SYMFENCE_MAX_PENDING_JOBS',
    description: 'most jobs carried in the pending queue',
  },
  /** Longest sleep of an idle coordinator loop, ms. Default 200 ms. */
  idlePollMs: {
    kind: 'duration',
    default: 200,
    min: 1,
    max: 60_000,
    flag: 'idle-poll',
    env: 'SYMFENCE_IDLE_POLL',
    description: 'longest sleep of an idle coordinator loop',
  },
  /**
   * Where branch telemetry comes from: `auto` (the preload library for a dynamically linked stock
   * SymCC binary, else the solver's own), `preload`, `runtime`, `off`. Default `auto`.
   */
  solverTelemetry: {
    kind: 'enum',
    values: ['auto', 'preload', 'runtime', 'off'] as const,
    default: 'auto',
    flag: 'solver-telemetry',
    env: 'SYMFENCE_SOLVER_TELEMETRY',
    description: 'branch telemetry source: auto, preload (stock SymCC through the preload library), runtime (the solver writes it), off (untargeted runs only)',
  },
  /**
   * An input's first run: `auto` (chosen per input by measured yield, docs/scheduler.md "Full or
   * directed: the yield split"), `trace` (solve nothing, learn its branches, then directed runs at
   * the branches nobody answered) or `full` (plain SymCC: solve every branch). Default `auto`.
   */
  firstRun: {
    kind: 'enum',
    values: ['auto', 'trace', 'full'] as const,
    default: 'trace',
    flag: 'first-run',
    env: 'SYMFENCE_FIRST_RUN',
    description: 'first run of each input: trace (learn its branches, then solve the unanswered ones directed), auto (full or trace by measured new edges per second of run time: slot plus triage) or full (solve every branch)',
  },
  /**
   * Jobs failing in a row for a set-up reason (solver cannot start, afl-showmap cannot run the
   * target) before the campaign stops with ERR_SETUP_FAILURES. Such jobs are abandoned, never
   * marked done. Default 8.
   */
  maxSetupFailures: {
    kind: 'integer',
    default: 8,
    min: 1,
    max: 1_000_000,
    flag: 'max-setup-failures',
    env: 'SYMFENCE_MAX_SETUP_FAILURES',
    description: 'set-up failures in a row (solver or afl-showmap cannot start) before the campaign stops',
  },
  /**
   * Size cap of the campaign's shared traces, bytes: over it, the least recently used traces (of
   * work done for a whole work TTL) are evicted; their `done` records stay (docs/campaign.md
   * "Shared traces"). 1 MiB..1 TiB. Default 512 MiB.
   */
  traceStoreMaxBytes: {
    kind: 'size',
    default: DEFAULT_TRACE_STORE_MAX_BYTES,
    min: MIN_TRACE_STORE_MAX_BYTES,
    max: MAX_TRACE_STORE_MAX_BYTES,
    flag: 'trace-store-max',
    env: 'SYMFENCE_TRACE_STORE_MAX',
    description: 'size cap of the shared traces under the lease directory (etcd: under the prefix); over it the least recently used are evicted',
  },
  /** Take over other coordinators' expired work. Default true. */
  recoverExpiredWork: {
    kind: 'boolean',
    default: true,
    flag: 'recover-expired',
    env: 'SYMFENCE_RECOVER_EXPIRED',
    description: 'take over expired work of dead coordinators',
  },
  /**
   * Keep one job per solver slot admitted and claimed ahead, so a slot whose solver exits starts
   * its next run at once (docs/campaign.md "Prefetching"). Default true.
   */
  prefetchJobs: {
    kind: 'boolean',
    default: true,
    flag: 'prefetch-jobs',
    env: 'SYMFENCE_PREFETCH_JOBS',
    description: 'claim jobs per solver slot ahead, started the moment the slot\'s solver exits',
  },
  /**
   * With prefetching: how many jobs per solver slot are kept dispatched ahead (docs/campaign.md
   * "Prefetching"). Default 4.
   */
  prefetchDepth: {
    kind: 'integer',
    default: 4,
    min: 1,
    max: 64,
    flag: 'prefetch-depth',
    env: 'SYMFENCE_PREFETCH_DEPTH',
    description: 'jobs per solver slot kept claimed ahead (with --prefetch-jobs)',
  },
});

export type CampaignOptions = ResolvedOptions<typeof CAMPAIGN_OPTIONS.specs>;
