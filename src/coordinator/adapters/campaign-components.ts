/**
 * Builds a campaign's components from the real parts: the I/O thread over the lease tables (private under the
 * output directory, or shared under `--lease-dir`), the in-flight target set, the scheduler, the
 * solver pool with coverage triage, the queue publisher (through the I/O thread) and the seed
 * work source. Every durable mutation of the process goes through the one I/O thread.
 *
 * The scheduler gets the campaign's scheduler options, its hint sources (the embedder's, then the
 * `--hints` file) and `--guidance`; its lane state lives in `<outDir>/scheduler-state.json`
 * (docs/scheduler.md "Lane state file"). The I/O thread gets the `--io-*` options and logs through
 * the campaign's `io` child logger (docs/io-thread.md "Logging").
 *
 * Without a lease directory the campaign is single-coordinator: the work table lives under
 * `<outDir>/leases/work` in `single` coordination and there is no shared target table (targets
 * are only reserved in-process). With one, both tables live under it in `multi` coordination;
 * opening them runs the filesystem probe first and refuses a directory where flock or atomic
 * rename do not behave (or when the native addon is missing).
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { STAGED_DIR } from '../../commit/commit-manifest.js';
import { EtcdStagedFindings } from '../../commit/etcd-staged-findings.js';
import { GuidanceInvalidError } from '../../errors.js';
import { LEASE_TABLE_OPTIONS } from '../../lease/lease-table-options.js';
import { resolveLeaseStore } from '../../lease/open-backend.js';
import type { LeaseStoreKind } from '../../lease/backend-contract.js';
import { parseGuidance } from '../../scheduler/guidance-map.js';
import { HintLinesFile } from '../../scheduler/hint-lines-file.js';
import type { HintSource } from '../../scheduler/hints.js';
import { LaneStateKeeper, SCHEDULER_STATE_FILE } from '../../scheduler/lane-state-keeper.js';
import type { SchedulerOptions } from '../../scheduler/scheduler-options.js';
import { InflightTargetSet } from '../../inflight/inflight-target-set.js';
import { IoDurableWriter, IoSharedTargetClaims } from '../../io/io-adapters.js';
import { IoThread } from '../../io/io-thread.js';
import { Scheduler } from '../../scheduler/scheduler.js';
import { parseTelemetry, type Telemetry } from '../../scheduler/telemetry.js';
import { SolverPool } from '../../solver/solver-pool.js';
import type { SOLVER_CAMPAIGN_OPTIONS } from '../../solver/solver-options.js';
import type { OptionsInput } from '../../config/schema.js';
import type { CommandTemplate, InputMode, TriageSettings } from '../../solver/solver-types.js';
import { AflQueueReader } from '../../triage/afl-queue.js';
import { AflPeers } from '../../triage/afl-peers.js';
import type { CoverageBitmap } from '../../solver/coverage-bitmap.js';
import { QueuePublisher } from '../../triage/queue-publisher.js';
import type { CampaignComponents, CampaignContext } from '../campaign-context.js';
import type { CampaignOptions } from '../campaign-options.js';
import { decideSolverTelemetry, resolveOnPath, type SolverTelemetryDecision } from '../../solver/solver-telemetry.js';
import { preloadLibraryPath } from '../../solver/preload-library.js';
import type { Clock, SeedInput } from '../ports.js';
import type { FsLayer } from '../../fs/fs-layer.js';
import { SeedWorkSource } from '../seed-work-source.js';
import { probeSolverCommand, type SolverProbeSpec } from './solver-probe.js';
import { IoTargetLeases, IoWorkLeases } from './io-lease-adapters.js';
import { IoResultCommits } from './io-result-commits.js';
import { SchedulerAdapter } from './scheduler-adapter.js';
import { SolverPoolAdapter, type SolverAdapterSettings } from './solver-adapter.js';
import { componentLogger } from '../../telemetry/logger.js';
import { campaignLeaseRoot } from '../lease-root.js';

/** In-flight set capacity: targets of concurrently admitted jobs (≤ 64 per job). */
const INFLIGHT_CAPACITY = 1 << 16;

interface ComponentSpec {
  /** The SymCC binary (or reference solver) command, `@@` for file input. */
  readonly command: CommandTemplate;
  readonly inputMode?: InputMode;
  /** Coverage triage of generated inputs (afl-showmap or the reference showmap mode). */
  readonly triage?: TriageSettings;
  /** In-process triage against the pool's bitmap instead (built-in coverage). */
  readonly classify?: (bitmap: CoverageBitmap) => SolverAdapterSettings['classify'];
  /** AFL++ queue to read inputs from. */
  readonly aflQueueDir?: string;
  /** Inputs to start from (the demo's seed). */
  readonly initialSeeds?: readonly SeedInput[];
  /** Disable the scheduler (untargeted runs only). Default false. */
  readonly untargetedOnly?: boolean;
  /** Further solver options (caps, kill grace, spawn thread …); workers and timeout come from the campaign. */
  readonly solver?: OptionsInput<typeof SOLVER_CAMPAIGN_OPTIONS.specs>;
  /** The solver honours `SYMFENCE_TRACE_ONLY` by itself (the reference solver): trace-first also without the preload library. */
  readonly honoursTraceOnly?: boolean;
  /** Where telemetry comes from, decided before start (`decideSolverTelemetry`); decided here when absent. */
  readonly telemetry?: SolverTelemetryDecision;
  /**
   * Probe the solver command on this seed before anything is claimed (solver-probe.ts): refused
   * with `ERR_SOLVER_NOT_SYMCC` unless it shows SymCC's runtime. Skipped with telemetry `off`.
   */
  readonly probeSeed?: SolverProbeSpec['seed'];
}

/**
 * The telemetry source of a campaign's solver command (`--solver-telemetry`), decided before
 * anything is created so that a refused `preload` spends no seed.
 */
export function campaignTelemetry(options: CampaignOptions, command: CommandTemplate): SolverTelemetryDecision {
  return decideSolverTelemetry({
    requested: options.solverTelemetry,
    binary: resolveOnPath(command.binary, process.env),
    preloadLibrary: preloadLibraryPath(),
    env: process.env,
  });
}

/** The I/O client with its staging requests served by etcd instead (publication stays on the thread). */
export function withStaging(io: Pick<IoThread, 'publishCommitted' | 'snapshotRecords'>, staging: EtcdStagedFindings): Parameters<typeof IoResultCommits.open>[1] {
  return {
    publishCommitted: (...args) => io.publishCommitted(...args),
    snapshotRecords: (...args) => io.snapshotRecords(...args),
    ensureDir: () => staging.ensureDir(),
    listDir: (dir) => staging.listDir(dir),
    stageFiles: (dir, files) => staging.stageFiles(dir, files),
    removeFiles: (dir, names) => staging.removeFiles(dir, names),
  };
}

/**
 * Starts the I/O thread over the lease tables: shared under `--lease-dir` (multi coordination,
 * work and target tables), private under `<outDir>/leases` otherwise (work table only). The tables
 * use the target TTL; work claims and expiry scans pass the work TTL per call.
 *
 * With the etcd store (`lease.store` / `lease.etcdEndpoints`) the tables are always shared —
 * the records live in the cluster — and the root stays a directory of this host (under
 * `--lease-dir`, else `<outDir>/leases`) holding lease-table.json and this host's staged findings.
 */
async function startIoThread(context: CampaignContext, inflight: InflightTargetSet): Promise<{ io: IoThread; shared: boolean; leaseRoot: string; store: LeaseStoreKind }> {
  const { options, outDir, coordinatorId } = context;
  const root = campaignLeaseRoot(options, outDir);
  // The store the tables will open with (the same rule: a recorded store first, then the options).
  const store = await resolveLeaseStore(path.join(root, 'work'), LEASE_TABLE_OPTIONS.resolve({ ...context.lease }));
  const shared = options.leaseDir !== undefined || store === 'etcd';
  const io = await IoThread.start({
    coordinatorId,
    workRoot: path.join(root, 'work'),
    ...(shared ? { targetRoot: path.join(root, 'targets') } : {}),
    leaseOptions: { ...context.lease, leaseTtlMs: shared ? options.targetLeaseTtlMs : options.workLeaseTtlMs, coordination: shared ? 'multi' : 'single' },
    ioOptions: { ...context.io },
    inflight,
    // The thread's warnings and errors ("I/O batch failed unexpectedly") reach the campaign log.
    logger: componentLogger(context.logger, 'io'),
  });
  return { io, shared, leaseRoot: root, store };
}

/**
 * The scheduler's files named by its options: the `--hints` file (JSON lines, checked whole) and
 * the `--guidance` file. Read before anything is created; a bad file refuses the start with
 * `ERR_HINT_INVALID` / `ERR_GUIDANCE_INVALID` naming the option.
 */
async function loadSchedulerFiles(options: SchedulerOptions): Promise<{ hints: readonly HintSource[]; guidance?: ReadonlyMap<bigint, number> }> {
  const hints = options.hintsFile !== undefined ? [await HintLinesFile.load(options.hintsFile, '--hints')] : [];
  if (options.guidanceFile === undefined) return { hints };
  const file = options.guidanceFile;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    const errno = (error as NodeJS.ErrnoException).code ?? 'EIO';
    throw new GuidanceInvalidError(`--guidance ${file}: cannot be read (${errno})`, { option: '--guidance', file, errno });
  }
  try {
    return { hints, guidance: parseGuidance(text) };
  } catch (error) {
    throw new GuidanceInvalidError(`--guidance ${file}: ${(error as Error).message}`, { option: '--guidance', file });
  }
}

/** How often the AFL++ instances' queues and fuzz_bitmap files are read again, ms (AFL++ rewrites its map with its stats, every few seconds). */
const AFL_PEERS_POLL_MS = 5_000;

/**
 * The AFL++ instances beside this campaign. AFL++ imports our queue under the name of our
 * directory in the `-o` directory (the default `<afl-out>/<name>`); with an `--out-dir` elsewhere
 * no instance syncs from us and only coverage is merged.
 */
function aflPeersOf(context: CampaignContext, pool: SolverPool<Telemetry>): AflPeers {
  const aflOut = path.resolve(context.options.aflOut!);
  const ourName = path.dirname(path.resolve(context.outDir)) === aflOut ? path.basename(context.outDir) : context.options.name;
  return new AflPeers({ aflOut, ourName, merge: (covered) => (covered.length <= pool.bitmap.sizeBytes ? pool.bitmap.claim(covered).newBytes : 0) });
}

/**
 * The solver telemetry of the campaign, logged; with telemetry on and a probe seed, the command
 * is first run once on it and must show SymCC (else the campaign is refused before any job).
 */
async function decideTelemetry(context: CampaignContext, spec: ComponentSpec): Promise<SolverTelemetryDecision> {
  const telemetry = spec.telemetry ?? campaignTelemetry(context.options, spec.command);
  const solverLog = componentLogger(context.logger, 'solver');
  const telemetryLog = { telemetry: telemetry.mode, reason: telemetry.reason };
  if (telemetry.warning !== undefined) solverLog.warn(telemetryLog, telemetry.warning);
  else solverLog.info(telemetryLog, `solver telemetry: ${telemetry.mode}`);
  if (spec.probeSeed !== undefined && telemetry.mode !== 'off') {
    const evidence = await probeSolverCommand({
      command: spec.command,
      telemetry,
      seed: spec.probeSeed,
      timeoutMs: context.options.solverTimeoutMs,
      ...(spec.inputMode ? { inputMode: spec.inputMode } : {}),
      ...(spec.solver ? { solver: spec.solver } : {}),
    });
    solverLog.info({ evidence }, 'solver probe: the command shows SymCC');
  }
  return telemetry;
}

/**
 * The scheduler over the in-flight set (and the shared claims, with shared leases), with the lane
 * state of an earlier run on this out-dir loaded, and the reservations port over it.
 */
async function startScheduler(
  context: CampaignContext,
  inflight: InflightTargetSet,
  sharedClaims: IoSharedTargetClaims | undefined,
  files: { readonly hints: readonly HintSource[]; readonly guidance?: ReadonlyMap<bigint, number> },
): Promise<{ scheduler: Scheduler; keeper: LaneStateKeeper; reservations: SchedulerAdapter }> {
  const schedulerLog = componentLogger(context.logger, 'scheduler');
  const { stateIntervalMs: _interval, hintsFile: _hints, guidanceFile: _guidance, ...schedulerOptions } = context.scheduler;
  const scheduler = new Scheduler({
    local: inflight,
    ...(sharedClaims ? { shared: sharedClaims } : {}),
    options: schedulerOptions,
    ...(files.guidance ? { guidance: files.guidance } : {}),
    // Embedder sources first, then the --hints file: a later hint overrides an earlier one's fields.
    hints: [...context.hints, ...files.hints],
    logger: schedulerLog,
  });
  const keeper = new LaneStateKeeper({
    scheduler,
    file: path.join(context.outDir, SCHEDULER_STATE_FILE),
    intervalMs: context.scheduler.stateIntervalMs,
    now: () => context.clock.now(),
    logger: schedulerLog,
  });
  // Before any job: what the lanes learned in an earlier run on this out-dir is not relearned.
  await keeper.load();
  const reservations = new SchedulerAdapter(scheduler, inflight, context.counters, sharedClaims ? { shared: sharedClaims } : {});
  return { scheduler, keeper, reservations };
}

/** The solver port: the spec's command, input mode, triage and classifier over the pool. */
function solverPort(context: CampaignContext, spec: ComponentSpec, telemetry: SolverTelemetryDecision, pool: SolverPool<Telemetry>): SolverPoolAdapter {
  return new SolverPoolAdapter(pool, {
    command: spec.command,
    timeoutMs: context.options.solverTimeoutMs,
    ...(spec.inputMode ? { inputMode: spec.inputMode } : {}),
    ...(spec.triage ? { triage: spec.triage } : {}),
    ...(spec.classify ? { classify: spec.classify(pool.bitmap) } : {}),
    ...(telemetry.preload !== undefined ? { preload: telemetry.preload } : {}),
    requireSymccEvidence: telemetry.mode !== 'off',
  });
}

/**
 * The result commits over the I/O thread, staging findings in etcd when `staging` is given (the
 * traces' last uses then live in etcd too).
 */
export function openResultCommits(
  io: Parameters<typeof IoResultCommits.open>[1],
  leaseRoot: string,
  publisher: QueuePublisher,
  staging: EtcdStagedFindings | undefined,
  traces: { readonly traceStoreMaxBytes: number; readonly clock: Clock; readonly fsLayer?: FsLayer },
): Promise<IoResultCommits> {
  return staging
    ? IoResultCommits.open(leaseRoot, withStaging(io, staging), publisher, { ...traces, traceUse: staging }, staging.readFile)
    : IoResultCommits.open(leaseRoot, io, publisher, traces);
}

export async function buildCampaignComponents(context: CampaignContext, spec: ComponentSpec): Promise<CampaignComponents & { readonly pool: SolverPool<Telemetry> }> {
  const files = await loadSchedulerFiles(context.scheduler);
  const telemetry = await decideTelemetry(context, spec);
  const untargetedOnly = spec.untargetedOnly === true || telemetry.mode === 'off';
  const inflight = InflightTargetSet.create(INFLIGHT_CAPACITY);
  const { io, shared, leaseRoot, store } = await startIoThread(context, inflight);
  let pool: SolverPool<Telemetry> | undefined;
  let staging: EtcdStagedFindings | undefined;
  try {
    const workLeases = new IoWorkLeases(io, context.options.workLeaseTtlMs);
    const targetLeases = shared ? new IoTargetLeases(io, (group) => inflight.ownerOf(group[0]!)) : undefined;
    const sharedClaims = shared ? new IoSharedTargetClaims(io, { inflight }) : undefined;
    const { scheduler, keeper, reservations } = await startScheduler(context, inflight, sharedClaims, files);
    const publisher = await QueuePublisher.open(context.outDir, new IoDurableWriter(io));
    // Findings are staged where every coordinator sharing the leases can replay them: under the
    // lease root, or with the etcd store in etcd (the lease root is this host's own there).
    staging = store === 'etcd' ? await EtcdStagedFindings.open(LEASE_TABLE_OPTIONS.resolve({ ...context.lease }), leaseRoot) : undefined;
    const commits = await openResultCommits(io, leaseRoot, publisher, staging, { traceStoreMaxBytes: context.options.traceStoreMaxBytes, clock: context.clock });
    pool = new SolverPool<Telemetry>({
      solver: { ...spec.solver, workers: context.workers, timeoutMs: context.options.solverTimeoutMs },
      // The scheduler's strict parser, run once per result (the coordinator hands the parsed value on).
      parseTelemetry,
      // Run directories go under the solver's `scratchDir` (memory-backed by default); afl-showmap
      // writes its map under /dev/ only to a file that exists (it takes the path for a device),
      // so triage files stay on the out-dir's filesystem.
      triageParent: context.outDir,
      logger: context.logger,
    });
    const solverPool = pool;
    // Trace-only runs need a solver that honours SYMFENCE_TRACE_ONLY: the preload library does, a
    // runtime writing its own telemetry may not (each "trace" would then be a full solve).
    const traceCapable = !untargetedOnly && (telemetry.mode === 'preload' || spec.honoursTraceOnly === true);
    const traceFirst = traceCapable && context.options.firstRun !== 'full';
    const source = new SeedWorkSource({
      ...(spec.aflQueueDir ? { afl: new AflQueueReader(spec.aflQueueDir) } : {}),
      ...(untargetedOnly ? {} : { scheduler: reservations }),
      ...(spec.initialSeeds ? { initialSeeds: spec.initialSeeds } : {}),
      firstRun: traceFirst ? context.options.firstRun : 'full',
      // A trace run finds nothing by itself: the directed runs that follow it get half the slots.
      ...(traceFirst ? { schedulerShare: 0.5 } : {}),
    });
    // The AFL++ instances' coverage joins the global map before the first triage, and keeps
    // joining it: a finding AFL++ already has is not published (docs/campaign.md "AFL++ coverage and imports").
    const peers = spec.aflQueueDir !== undefined && context.options.aflOut !== undefined ? aflPeersOf(context, solverPool) : undefined;
    await peers?.refresh();
    const peersTimer = peers ? setInterval(() => void peers.refresh(), AFL_PEERS_POLL_MS) : undefined;
    peersTimer?.unref();
    // Periodic saves start only once the campaign's components all exist.
    keeper.start();
    return {
      pool: solverPool,
      workLeases,
      ...(targetLeases ? { targetLeases } : {}),
      reservations,
      solver: solverPort(context, spec, telemetry, solverPool),
      source,
      commits,
      edgesCovered: () => solverPool.bitmap.edgesCovered(),
      ...(peers ? { aflPeers: () => peers.snapshot() } : {}),
      frontier: () => scheduler.stats().frontier,
      ...(traceFirst && context.options.firstRun === 'auto' ? { yield: () => source.yieldFigures() } : {}),
      inputExists: (file) => existsSync(file),
      // Lane state first (the coordinator has stopped: the lanes know everything they will),
      // then solver runs (they may still publish through the I/O thread), then the thread.
      close: async () => {
        if (peersTimer) clearInterval(peersTimer);
        try {
          await keeper.close();
          await solverPool.close();
        } finally {
          await io.close();
          await staging?.close();
        }
      },
    };
  } catch (error) {
    await pool?.close().catch(() => {}); // closing after a failed start; the start's own error is what is thrown
    await io.close().catch(() => {}); // closing after a failed start; the start's own error is what is thrown
    await staging?.close().catch(() => {}); // closing after a failed start; the start's own error is what is thrown
    throw error;
  }
}
