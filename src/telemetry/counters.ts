/**
 * The campaign's counters: one mutable record owned by the coordinator, copied out (never shared)
 * for `stats.json`, the CSV time series, the progress line and `Campaign.counters()`.
 * Every field is a plain number so a snapshot is a cheap structured-clone-safe object.
 */

export interface CampaignCounters {
  /** Jobs handed to a solver. */
  jobsStarted: number;
  /** Finished jobs by solver status, counted only when their result was committed. */
  jobsOk: number;
  jobsTimeout: number;
  jobsCrash: number;
  jobsError: number;
  /** Runs aborted (lost lease, shutdown) and rolled back. */
  jobsAborted: number;
  /**
   * Jobs whose run failed for a reason that is not the input's fault (solver cannot start, showmap
   * set-up failure): rolled back, work lease abandoned so the work is retried, never marked done.
   */
  jobsAbandoned: number;
  /** Results dropped because `beginCommit` refused their work fence. */
  staleResults: number;
  /** Inputs the solver generated, and those that added coverage (published to the queue). */
  generated: number;
  interesting: number;
  /** Entries written to crashes/ and hangs/. */
  crashes: number;
  hangs: number;
  /** Solver time of committed jobs, milliseconds. */
  solverTimeMs: number;
  /** Jobs admitted by the scheduler and handed to the coordinator. */
  admissions: number;
  /** Claims refused because another holder had the target or the exact work. */
  conflicts: number;
  /** Admissions that filled a slot after an earlier candidate was refused. */
  backFills: number;
  /** Dispatches rolled back before the solver started (re-claim or work claim failed). */
  dispatchRollbacks: number;
  /** Expired work of other coordinators taken over. */
  leaseSteals: number;
  /** Own leases found lost at heartbeat or commit time (expired and taken, or deleted). */
  leaseExpiries: number;
  /** Target-group releases that failed and were left to TTL expiry. */
  releaseFailures: number;
  heartbeatsOk: number;
  heartbeatsFailed: number;
  /** Pending jobs dropped by the queue safety valve (their tokens released at once). */
  safetyValveDrops: number;
  /** Results dropped because staging their findings durably failed (before beginCommit). */
  stagingFailures: number;
  /** Own committed results whose fenced publication failed; the record stays committing and is replayed. */
  commitPublishFailures: number;
  /** Committing records (own from a previous life, or another's after the work TTL) finished here. */
  commitsReplayed: number;
  /** Replay attempts refused: corrupt manifest, missing or altered staged finding, unreadable table. */
  commitReplayFailures: number;
  /** Staged finding files of finished work removed by the recovery sweep. */
  stagedSwept: number;
  /** Committed jobs by kind: trace-only first runs, directed (a target group), untargeted solving runs. */
  jobsTrace: number;
  jobsTargeted: number;
  jobsFull: number;
  /** Branch queries the solver was asked to solve, from the runs' telemetry. */
  queriesSolved: number;
  /** Symbolic branches a run passed over without solving (preload telemetry: not in the job's group). */
  queriesSkipped: number;
  /** Directed jobs whose primary target was on the path, and those that settled it as sat / unsat. */
  targetsReached: number;
  targetsSat: number;
  targetsUnsat: number;
  /** Leftover temp files (lease records, staged findings) of writers provably gone, removed by the recovery sweep. */
  tempsSwept: number;
  /**
   * Solver slot time spent running solvers, ms: the integral of busy slots over time, aborted and
   * rolled-back runs included. Over `workers × elapsed` it is the time-averaged utilisation
   * (`solverUtilisation`), where `fillRatio` is only the instant's value.
   */
  solverBusyMs: number;
  /** Busy solver slots / slots, sampled at the last scheduling round. */
  fillRatio: number;
  /** Non-zero bytes of the global coverage bitmap. */
  edgesCovered: number;
  /** Our published inputs the AFL++ instances imported (distinct per instance, summed). */
  aflImported: number;
  /** Global-map bytes first set by merging the AFL++ instances' coverage (fuzz_bitmap). */
  aflMergedEdges: number;
}

export function createCounters(): CampaignCounters {
  return {
    jobsStarted: 0,
    jobsOk: 0,
    jobsTimeout: 0,
    jobsCrash: 0,
    jobsError: 0,
    jobsAborted: 0,
    jobsAbandoned: 0,
    staleResults: 0,
    generated: 0,
    interesting: 0,
    crashes: 0,
    hangs: 0,
    solverTimeMs: 0,
    admissions: 0,
    conflicts: 0,
    backFills: 0,
    dispatchRollbacks: 0,
    leaseSteals: 0,
    leaseExpiries: 0,
    releaseFailures: 0,
    heartbeatsOk: 0,
    heartbeatsFailed: 0,
    safetyValveDrops: 0,
    stagingFailures: 0,
    commitPublishFailures: 0,
    commitsReplayed: 0,
    commitReplayFailures: 0,
    stagedSwept: 0,
    jobsTrace: 0,
    jobsTargeted: 0,
    jobsFull: 0,
    queriesSolved: 0,
    queriesSkipped: 0,
    targetsReached: 0,
    targetsSat: 0,
    targetsUnsat: 0,
    tempsSwept: 0,
    solverBusyMs: 0,
    fillRatio: 0,
    edgesCovered: 0,
    aflImported: 0,
    aflMergedEdges: 0,
  };
}

/** Jobs whose result was committed, whatever the solver status. */
export function jobsCompleted(c: Readonly<CampaignCounters>): number {
  return c.jobsOk + c.jobsTimeout + c.jobsCrash + c.jobsError;
}

export const COUNTER_NAMES: readonly (keyof CampaignCounters)[] = Object.freeze(
  Object.keys(createCounters()) as (keyof CampaignCounters)[],
);

/**
 * Counters added after `symfence-stats/1` was first written (commit recovery). A stats file of an
 * earlier version lacks them; readers take them as 0 instead of refusing the file.
 */
export const LATER_COUNTER_NAMES: ReadonlySet<keyof CampaignCounters> = new Set<keyof CampaignCounters>([
  'stagingFailures',
  'commitPublishFailures',
  'commitsReplayed',
  'commitReplayFailures',
  'stagedSwept',
  'jobsTrace',
  'jobsTargeted',
  'jobsFull',
  'queriesSolved',
  'queriesSkipped',
  'targetsReached',
  'targetsSat',
  'targetsUnsat',
  'tempsSwept',
  'jobsAbandoned',
  'solverBusyMs',
  'aflImported',
  'aflMergedEdges',
]);

/** The kind of a job for the counters and jobs.jsonl. */
export type JobKind = 'trace' | 'targeted' | 'full';

export function jobKindOf(job: { readonly mode?: 'trace'; readonly group: readonly unknown[] }): JobKind {
  return job.mode === 'trace' ? 'trace' : job.group.length > 0 ? 'targeted' : 'full';
}

/** What a committed job's telemetry adds to the counters (queries, targets reached and settled). */
export function countCommittedJob(
  c: CampaignCounters,
  kind: JobKind,
  telemetry: { readonly counters: { readonly queries: number }; readonly targetBranch: bigint; readonly targetReached: boolean; readonly targetStatus: string; readonly preload?: { readonly skipped: number } } | undefined,
): void {
  if (kind === 'trace') c.jobsTrace++;
  else if (kind === 'targeted') c.jobsTargeted++;
  else c.jobsFull++;
  if (telemetry === undefined) return;
  c.queriesSolved += telemetry.counters.queries;
  c.queriesSkipped += telemetry.preload?.skipped ?? 0;
  if (kind === 'targeted' && telemetry.targetBranch > 0n && telemetry.targetReached) {
    c.targetsReached++;
    if (telemetry.targetStatus === 'sat') c.targetsSat++;
    else if (telemetry.targetStatus === 'unsat') c.targetsUnsat++;
  }
}

/** Generated inputs per solved query (0 before the first query). */
export function generatedPerQuery(c: Readonly<CampaignCounters>): number {
  return c.queriesSolved === 0 ? 0 : c.generated / c.queriesSolved;
}

/**
 * Time-averaged solver utilisation: busy solver slot time over the slot time there was
 * (`workers × elapsedMs`), in [0, 1]. 0 before any time has passed or without workers.
 */
export function solverUtilisation(solverBusyMs: number, workers: number, elapsedMs: number): number {
  if (workers <= 0 || elapsedMs <= 0) return 0;
  return Math.min(1, Math.max(0, solverBusyMs / (workers * elapsedMs)));
}

/** `solver utilisation 73% (busy 87.4 solver-s; fill 50% of 4 at the end)`-style summary text. */
export function formatUtilisation(utilisation: number, solverBusyMs: number, workers: number, fillRatio?: number): string {
  const fill = fillRatio === undefined ? '' : `; fill ${(fillRatio * 100).toFixed(0)}% of ${workers} now`;
  return `solver utilisation ${(utilisation * 100).toFixed(0)}% on average (busy ${(solverBusyMs / 1000).toFixed(1)} solver-s over ${workers} worker(s)${fill})`;
}
