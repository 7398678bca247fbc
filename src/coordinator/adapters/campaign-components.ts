/**
 * Builds a campaign's components from the real parts: the I/O thread over the lease tables (private under the
 * output directory, or shared under `--lease-dir`), the in-flight target set, the scheduler, the
 * solver pool with coverage triage, the queue publisher (through the I/O thread) and the seed
 * work source. Every durable mutation of the process goes through the one I/O thread.
 *
 * Without a lease directory the campaign is single-coordinator: the work table lives under
 * `<outDir>/leases/work` in `single` coordination and there is no shared target table (targets
 * are only reserved in-process). With one, both tables live under it in `multi` coordination;
 * opening them runs the filesystem probe first and refuses a directory where flock or atomic
 * rename do not behave (or when the native addon is missing).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
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
import type { CoverageBitmap } from '../../solver/coverage-bitmap.js';
import { QueuePublisher } from '../../triage/queue-publisher.js';
import type { CampaignComponents, CampaignContext } from '../campaign-context.js';
import type { CampaignOptions } from '../campaign-options.js';
import { decideSolverTelemetry, resolveOnPath, type SolverTelemetryDecision } from '../../solver/solver-telemetry.js';
import { preloadLibraryPath } from '../../solver/preload-library.js';
import type { SeedInput } from '../ports.js';
import { SeedWorkSource } from '../seed-work-source.js';
import { IoTargetLeases, IoWorkLeases } from './io-lease-adapters.js';
import { IoResultCommits } from './io-result-commits.js';
import { SchedulerAdapter } from './scheduler-adapter.js';
import { SolverPoolAdapter, type SolverAdapterSettings } from './solver-adapter.js';
import { componentLogger } from '../../telemetry/logger.js';

/** In-flight set capacity: targets of concurrently admitted jobs (≤ 64 per job). */
const INFLIGHT_CAPACITY = 1 << 16;

export interface ComponentSpec {
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
  /** Where telemetry comes from, decided before start (`decideSolverTelemetry`); decided here when absent. */
  readonly telemetry?: SolverTelemetryDecision;
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

/**
 * Starts the I/O thread over the lease tables: shared under `--lease-dir` (multi coordination,
 * work and target tables), private under `<outDir>/leases` otherwise (work table only). The tables
 * use the target TTL; work claims and expiry scans pass the work TTL per call.
 */
export async function startIoThread(context: CampaignContext, inflight: InflightTargetSet): Promise<{ io: IoThread; shared: boolean; leaseRoot: string }> {
  const { options, outDir, coordinatorId } = context;
  const shared = options.leaseDir !== undefined;
  const root = shared ? path.resolve(options.leaseDir!) : path.join(outDir, 'leases');
  const io = await IoThread.start({
    coordinatorId,
    workRoot: path.join(root, 'work'),
    ...(shared ? { targetRoot: path.join(root, 'targets') } : {}),
    leaseOptions: { leaseTtlMs: shared ? options.targetLeaseTtlMs : options.workLeaseTtlMs, coordination: shared ? 'multi' : 'single' },
    inflight,
  });
  return { io, shared, leaseRoot: root };
}

export async function buildCampaignComponents(context: CampaignContext, spec: ComponentSpec): Promise<CampaignComponents & { readonly pool: SolverPool<Telemetry> }> {
  const telemetry = spec.telemetry ?? campaignTelemetry(context.options, spec.command);
  const solverLog = componentLogger(context.logger, 'solver');
  const telemetryLog = { telemetry: telemetry.mode, reason: telemetry.reason };
  if (telemetry.warning !== undefined) solverLog.warn(telemetryLog, telemetry.warning);
  else solverLog.info(telemetryLog, `solver telemetry: ${telemetry.mode}`);
  const untargetedOnly = spec.untargetedOnly === true || telemetry.mode === 'off';
  const inflight = InflightTargetSet.create(INFLIGHT_CAPACITY);
  const { io, shared, leaseRoot } = await startIoThread(context, inflight);
  let pool: SolverPool<Telemetry> | undefined;
  try {
    const workLeases = new IoWorkLeases(io, context.options.workLeaseTtlMs);
    const targetLeases = shared ? new IoTargetLeases(io, (group) => inflight.ownerOf(group[0]!)) : undefined;
    const scheduler = new Scheduler({
      local: inflight,
      ...(shared ? { shared: new IoSharedTargetClaims(io, { inflight }) } : {}),
      logger: componentLogger(context.logger, 'scheduler'),
    });
    const reservations = new SchedulerAdapter(scheduler, inflight, context.counters);
    const publisher = await QueuePublisher.open(context.outDir, new IoDurableWriter(io));
    // Findings are staged under the lease root, where every coordinator sharing it can replay them.
    const commits = await IoResultCommits.open(leaseRoot, io, publisher);
    pool = new SolverPool<Telemetry>({
      solver: { ...spec.solver, workers: context.workers, timeoutMs: context.options.solverTimeoutMs },
      // The scheduler's strict parser, run once per result (the coordinator hands the parsed value on).
      parseTelemetry,
      scratchParent: context.outDir,
      logger: context.logger,
    });
    const solverPool = pool;
    const traceFirst = !untargetedOnly && context.options.firstRun === 'trace';
    const source = new SeedWorkSource({
      ...(spec.aflQueueDir ? { afl: new AflQueueReader(spec.aflQueueDir) } : {}),
      ...(untargetedOnly ? {} : { scheduler: reservations }),
      ...(spec.initialSeeds ? { initialSeeds: spec.initialSeeds } : {}),
      firstRun: traceFirst ? 'trace' : 'full',
      tracer: context.coordinatorId,
      // A trace run finds nothing by itself: the directed runs that follow it get half the slots.
      ...(traceFirst ? { schedulerShare: 0.5 } : {}),
    });
    return {
      pool: solverPool,
      workLeases,
      ...(targetLeases ? { targetLeases } : {}),
      reservations,
      solver: new SolverPoolAdapter(solverPool, {
        command: spec.command,
        timeoutMs: context.options.solverTimeoutMs,
        ...(spec.inputMode ? { inputMode: spec.inputMode } : {}),
        ...(spec.triage ? { triage: spec.triage } : {}),
        ...(spec.classify ? { classify: spec.classify(solverPool.bitmap) } : {}),
        ...(telemetry.preload !== undefined ? { preload: telemetry.preload } : {}),
      }),
      source,
      findings: publisher,
      commits,
      edgesCovered: () => solverPool.bitmap.edgesCovered(),
      inputExists: (file) => existsSync(file),
      // Solver runs first (they may still publish through the I/O thread), then the thread.
      close: async () => {
        try {
          await solverPool.close();
        } finally {
          await io.close();
        }
      },
    };
  } catch (error) {
    await pool?.close().catch(() => {});
    await io.close().catch(() => {});
    throw error;
  }
}
