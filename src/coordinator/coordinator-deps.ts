/**
 * What a `Coordinator` is built from: its options, the ports it drives, its injected clock,
 * logger, counters and event sinks, and what its shutdown reports (coordinator.ts).
 */
import type { Logger } from 'pino';
import type { CampaignCounters } from '../telemetry/counters.js';
import type { JobLogEntry, JobLogPort } from '../telemetry/job-log.js';
import type { Clock, CoordinatorJob, LocalReservations, PublishedEntry, ResultCommits, SolverPort, TargetLeasePort, WorkLeasePort, WorkSource } from './ports.js';
import type { CoordinatorHooks } from './result-commit.js';

export interface CoordinatorOptions {
  /** This coordinator's id, recorded in leases and jobs.jsonl. */
  readonly coordinatorId: string;
  /** Solver slots. */
  readonly workers: number;
  /** Exact-work lease TTL, ms. */
  readonly workLeaseTtlMs: number;
  /** Target lease TTL, ms; ignored without a shared target table. */
  readonly targetLeaseTtlMs?: number;
  /** Queue safety valve: pending jobs beyond this are dropped and their tokens released at once. */
  readonly maxPendingJobs: number;
  /** Take over other coordinators' expired work when slots are free. */
  readonly recoverExpiredWork: boolean;
  /** Owner number used for local reservations of recovered work. Default `RECOVERY_OWNER`. */
  readonly recoveryOwner?: number;
  /** How often committing records are scanned for replay, ms. Default: the work TTL. */
  readonly commitScanIntervalMs?: number;
  /**
   * Set-up failures in a row (solver cannot start, showmap set-up failed; see setup-failures.ts)
   * after which the coordinator stops with `ERR_SETUP_FAILURES`. Default 8.
   */
  readonly maxSetupFailures?: number;
  /**
   * Keep one job per solver slot dispatched ahead (admitted, claimed, not started), so a slot whose
   * solver exits starts its next run at once, with no admission or lease I/O in between
   * (docs/campaign.md "Prefetching"). Default true.
   */
  readonly prefetchJobs?: boolean;
  /** With prefetching: jobs per slot kept dispatched ahead (docs/campaign.md "Prefetching"). Default 4. */
  readonly prefetchDepth?: number;
}

interface CoordinatorEvents {
  finding?(entry: PublishedEntry, job: CoordinatorJob): void;
  leaseLost?(info: { workId: string; lease: 'work' | 'target'; targets: readonly string[] }): void;
  jobFinished?(entry: JobLogEntry): void;
}

/** The parts the coordinator drives; a campaign builds them once its output directory exists. */
export interface CoordinatorPorts {
  readonly workLeases: WorkLeasePort;
  /** Absent in single-coordinator mode: target groups are then only reserved locally. */
  readonly targetLeases?: TargetLeasePort;
  readonly reservations: LocalReservations;
  readonly solver: SolverPort;
  readonly source: WorkSource;
  /** Whether a recovered work payload's input still exists; default: always. */
  readonly inputExists?: (path: string) => boolean;
  /**
   * Crash-safe commits: findings staged durably before `beginCommit`, published under the work
   * record's lock, committing records of dead owners replayed (docs/campaign.md "Commit recovery").
   */
  readonly commits: ResultCommits;
}

export interface CoordinatorDeps extends CoordinatorPorts {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly counters: CampaignCounters;
  readonly jobLog?: JobLogPort;
  readonly events?: CoordinatorEvents;
  readonly hooks?: CoordinatorHooks;
}

export interface ShutdownReport {
  readonly abortedRuns: number;
  /** Jobs admitted but never started (pending, or prefetched and claimed) whose holdings were released. */
  readonly releasedPending: number;
  readonly releaseFailures: number;
}

/**
 * Owner id of the reservations the coordinator takes itself (taken-over work). The scheduler's
 * admission hands out owners below 2^31, so this one never collides with them.
 */
export const RECOVERY_OWNER = 0xffff_fff0;
