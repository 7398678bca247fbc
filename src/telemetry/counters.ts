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
  /** Runs aborted (lost lease, shutdown) and rolled back, and results whose beginCommit or completion was given up. */
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
  /**
   * Target claims refused because a member was answered on the same input already, by any
   * coordinator of the campaign (docs/leases.md "Shared answers"): questions not asked twice.
   */
  answeredElsewhere: number;
  /**
   * Target claims refused because runs of the campaign left a member's question open on the same
   * input and it is still backing off, or was left open as often as `--target-attempts` allows
   * (docs/leases.md "Shared answers"): open questions back off campaign-wide.
   */
  openElsewhere: number;
  /**
   * Shared traces (docs/campaign.md "Shared traces"): inputs whose trace another coordinator of the
   * campaign had already made, learned from its stored trace instead of tracing again; stored
   * traces that could not be read or parsed (the input is then not traced by us either); trace
   * claims put off because another coordinator was tracing the input at that moment; and traces of
   * our own, made in an earlier life after its last lane-state save, learned again from the store.
   */
  tracesAdopted: number;
  traceAdoptFailures: number;
  tracesDeferred: number;
  /**
   * Shared traces a done record names that were no longer stored (evicted by the trace store's
   * cap): not adopted, not a failure, the input not traced again; and the traces this
   * coordinator's sweep evicted (docs/campaign.md "Shared traces").
   */
  traceAdoptMissing: number;
  tracesEvicted: number;
  tracesRelearned: number;
  /** Dispatches rolled back before the solver started (re-claim or work claim failed). */
  dispatchRollbacks: number;
  /**
   * Of those, dispatches whose claim failed on an I/O error of the lease store: their work went
   * back to its source, to be offered again later (docs/campaign.md "When the lease store fails").
   */
  workGivenBack: number;
  /** Expired work of other coordinators taken over. */
  leaseSteals: number;
  /**
   * Expired work of other coordinators not run because the campaign answered its question, or
   * gave it up, meanwhile (its group's re-claim refused `answered` or `backoff`): its work record
   * removed, so that no coordinator takes it over again.
   */
  recoveredRetired: number;
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
  /**
   * Steps of a result's commit (staging, beginCommit, completion) retried after an I/O error: the
   * result is kept meanwhile (docs/campaign.md "When the lease store fails").
   */
  commitRetries: number;
  /** Own committed results whose fenced publication failed; the record stays committing and is replayed. */
  commitPublishFailures: number;
  /** Committing records (own from a previous life, or another's after the work TTL) finished here. */
  commitsReplayed: number;
  /** Replay attempts refused: corrupt manifest, missing or altered staged finding, unreadable table. */
  commitReplayFailures: number;
  /**
   * Committed results' answers written without their lease (docs/leases.md "Shared answers"): a
   * result whose group release failed, or a result replayed from its commit manifest.
   */
  answersRecorded: number;
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
  /**
   * Where slot time went, ms (docs/campaign.md "Where slot time goes"), summed over runs whose
   * solver measured it: solver processes alive (`solverProcessMs`; its share of `workers × elapsed`
   * is `solverUtilisation`), starting them (`slotSpawnMs`: run directory, input copy, launch),
   * collecting outputs after their exit (`slotCollectMs`), and slots idle between one run's exit
   * and the next run's start (`slotGapMs`). `triageMs` is coverage triage, which no longer holds
   * a slot. `solverProcessMs` also counts runs whose solver port does not measure (their elapsed).
   */
  solverProcessMs: number;
  slotSpawnMs: number;
  slotCollectMs: number;
  slotGapMs: number;
  triageMs: number;
  /** Prefetched jobs rolled back before they started (stop, lost lease) or sent back to pending for a better one. */
  prefetchRollbacks: number;
  /** Busy solver slots / slots, sampled at the last scheduling round. */
  fillRatio: number;
  /** Non-zero bytes of the global coverage bitmap. */
  edgesCovered: number;
  /**
   * The cost of an answer (docs/solver.md "What an answer costs"): answers (solving calls that
   * settled a branch, sat or unsat) and the CPU of the runs that gave them (the preload library's
   * `cpuUs`: user + system of the solver process and every child it reaped), by job kind.
   */
  answersTrace: number;
  answersTargeted: number;
  answersFull: number;
  answerCpuMsTrace: number;
  answerCpuMsTargeted: number;
  answerCpuMsFull: number;
  /** Directed jobs whose primary target was not on the path (`targetReached: false`), in all and by scheduler lane. */
  targetsNotReached: number;
  laneFrontierDirected: number;
  laneFrontierNotReached: number;
  lanePrefixDirected: number;
  lanePrefixNotReached: number;
  laneCstgDirected: number;
  laneCstgNotReached: number;
  laneEdgeDirected: number;
  laneEdgeNotReached: number;
  laneConcurrencyDirected: number;
  laneConcurrencyNotReached: number;
  laneFallbackDirected: number;
  laneFallbackNotReached: number;
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
    answeredElsewhere: 0,
    openElsewhere: 0,
    tracesAdopted: 0,
    traceAdoptFailures: 0,
    tracesDeferred: 0,
    traceAdoptMissing: 0,
    tracesEvicted: 0,
    tracesRelearned: 0,
    dispatchRollbacks: 0,
    workGivenBack: 0,
    leaseSteals: 0,
    recoveredRetired: 0,
    leaseExpiries: 0,
    releaseFailures: 0,
    heartbeatsOk: 0,
    heartbeatsFailed: 0,
    safetyValveDrops: 0,
    stagingFailures: 0,
    commitRetries: 0,
    commitPublishFailures: 0,
    commitsReplayed: 0,
    commitReplayFailures: 0,
    answersRecorded: 0,
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
    solverProcessMs: 0,
    slotSpawnMs: 0,
    slotCollectMs: 0,
    slotGapMs: 0,
    triageMs: 0,
    prefetchRollbacks: 0,
    fillRatio: 0,
    edgesCovered: 0,
    answersTrace: 0,
    answersTargeted: 0,
    answersFull: 0,
    answerCpuMsTrace: 0,
    answerCpuMsTargeted: 0,
    answerCpuMsFull: 0,
    targetsNotReached: 0,
    laneFrontierDirected: 0,
    laneFrontierNotReached: 0,
    lanePrefixDirected: 0,
    lanePrefixNotReached: 0,
    laneCstgDirected: 0,
    laneCstgNotReached: 0,
    laneEdgeDirected: 0,
    laneEdgeNotReached: 0,
    laneConcurrencyDirected: 0,
    laneConcurrencyNotReached: 0,
    laneFallbackDirected: 0,
    laneFallbackNotReached: 0,
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
  'answersRecorded',
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
  'solverProcessMs',
  'slotSpawnMs',
  'slotCollectMs',
  'slotGapMs',
  'triageMs',
  'prefetchRollbacks',
  'answersTrace',
  'answersTargeted',
  'answersFull',
  'answerCpuMsTrace',
  'answerCpuMsTargeted',
  'answerCpuMsFull',
  'targetsNotReached',
  'laneFrontierDirected',
  'laneFrontierNotReached',
  'lanePrefixDirected',
  'lanePrefixNotReached',
  'laneCstgDirected',
  'laneCstgNotReached',
  'laneEdgeDirected',
  'laneEdgeNotReached',
  'laneConcurrencyDirected',
  'laneConcurrencyNotReached',
  'laneFallbackDirected',
  'laneFallbackNotReached',
  'aflImported',
  'aflMergedEdges',
  'answeredElsewhere',
  'openElsewhere',
  'tracesAdopted',
  'traceAdoptFailures',
  'tracesDeferred',
  'traceAdoptMissing',
  'tracesEvicted',
  'tracesRelearned',
  'workGivenBack',
  'commitRetries',
]);

/** The kind of a job for the counters and jobs.jsonl. */
type JobKind = 'trace' | 'targeted' | 'full';

export function jobKindOf(job: { readonly mode?: 'trace'; readonly group: readonly unknown[] }): JobKind {
  return job.mode === 'trace' ? 'trace' : job.group.length > 0 ? 'targeted' : 'full';
}

/** The scheduler lanes with directed-job counters (`lane<Name>Directed`, `lane<Name>NotReached`). */
const COUNTED_LANES = ['frontier', 'prefix', 'cstg', 'edge', 'concurrency', 'fallback'] as const;
type CountedLane = (typeof COUNTED_LANES)[number];

/** A scheduler job's origin, `scheduler:<lane>` or `scheduler:<lane>+hint` (a hint gave it its target): its parts. */
export function schedulerOrigin(origin: string | undefined): { readonly lane: string; readonly hinted: boolean } | undefined {
  if (origin === undefined || !origin.startsWith('scheduler:')) return undefined;
  const [lane, hint] = origin.slice('scheduler:'.length).split('+');
  return { lane: lane!, hinted: hint !== undefined };
}

/** The lane a job's origin names, if one with counters. */
function laneOfOrigin(origin: string | undefined): CountedLane | undefined {
  const lane = schedulerOrigin(origin)?.lane;
  return lane !== undefined && (COUNTED_LANES as readonly string[]).includes(lane) ? (lane as CountedLane) : undefined;
}

function laneKey(lane: CountedLane, what: 'Directed' | 'NotReached'): keyof CampaignCounters {
  return `lane${lane[0]!.toUpperCase()}${lane.slice(1)}${what}` as keyof CampaignCounters;
}

/** The telemetry fields the counters read. */
interface CountedTelemetry {
  readonly counters: { readonly queries: number; readonly sat: number; readonly unsat: number };
  readonly targetBranch: bigint;
  readonly targetReached: boolean;
  readonly targetStatus: string;
  readonly preload?: { readonly skipped: number; readonly cpuUs?: number };
}

/**
 * What a run answered and what it cost: `answers` = solving calls that settled a branch (sat or
 * unsat; forked answers included), `answerCpuMs` = the run's CPU as the preload library measured
 * it (absent without it).
 */
export function answerCost(telemetry: CountedTelemetry): { answers: number; answerCpuMs?: number } {
  const answers = telemetry.counters.sat + telemetry.counters.unsat;
  const cpuUs = telemetry.preload?.cpuUs;
  return cpuUs === undefined ? { answers } : { answers, answerCpuMs: cpuUs / 1000 };
}

/** What a committed job's telemetry adds to the counters (queries, targets reached and settled, answers and their CPU). */
export function countCommittedJob(c: CampaignCounters, kind: JobKind, telemetry: CountedTelemetry | undefined, origin?: string): void {
  if (kind === 'trace') c.jobsTrace++;
  else if (kind === 'targeted') c.jobsTargeted++;
  else c.jobsFull++;
  if (telemetry === undefined) return;
  c.queriesSolved += telemetry.counters.queries;
  c.queriesSkipped += telemetry.preload?.skipped ?? 0;
  const cost = answerCost(telemetry);
  if (cost.answerCpuMs !== undefined) {
    const suffix = kind === 'trace' ? 'Trace' : kind === 'targeted' ? 'Targeted' : 'Full';
    c[`answers${suffix}`] += cost.answers;
    c[`answerCpuMs${suffix}`] += cost.answerCpuMs;
  }
  if (kind === 'targeted' && telemetry.targetBranch > 0n) {
    const lane = laneOfOrigin(origin);
    if (lane !== undefined) c[laneKey(lane, 'Directed')]++;
    if (telemetry.targetReached) {
      c.targetsReached++;
      if (telemetry.targetStatus === 'sat') c.targetsSat++;
      else if (telemetry.targetStatus === 'unsat') c.targetsUnsat++;
    } else {
      c.targetsNotReached++;
      if (lane !== undefined) c[laneKey(lane, 'NotReached')]++;
    }
  }
}

/** CPU ms per answer by job kind (null for a kind with no measured answer yet). */
export function cpuMsPerAnswer(c: Readonly<CampaignCounters>): { trace: number | null; targeted: number | null; full: number | null } {
  const per = (answers: number, cpuMs: number) => (answers === 0 ? null : cpuMs / answers);
  return {
    trace: per(c.answersTrace, c.answerCpuMsTrace),
    targeted: per(c.answersTargeted, c.answerCpuMsTargeted),
    full: per(c.answersFull, c.answerCpuMsFull),
  };
}

/** Directed jobs and those that missed their target, per lane that ran any. */
export function targetNotReachedByLane(c: Readonly<CampaignCounters>): Record<string, { directed: number; notReached: number }> {
  const out: Record<string, { directed: number; notReached: number }> = {};
  for (const lane of COUNTED_LANES) {
    const directed = c[laneKey(lane, 'Directed')];
    if (directed > 0) out[lane] = { directed, notReached: c[laneKey(lane, 'NotReached')] };
  }
  return out;
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

/** `solver utilisation 73% (busy 87.4 solver-s; fill 50% of 4 at the end)`-style summary text; `solverMs` is solver process time. */
export function formatUtilisation(utilisation: number, solverMs: number, workers: number, fillRatio?: number): string {
  const fill = fillRatio === undefined ? '' : `; fill ${(fillRatio * 100).toFixed(0)}% of ${workers} now`;
  return `solver utilisation ${(utilisation * 100).toFixed(0)}% on average (busy ${(solverMs / 1000).toFixed(1)} solver-s over ${workers} worker(s)${fill})`;
}

/**
 * `slot time: solver 83.1%, spawn 1.2%, collect 0.4%, between runs 2.0%, other 13.3%; triage 20.5 s off the slots`:
 * where the slots' `workers × elapsedMs` went (docs/campaign.md "Where slot time goes"). `other`
 * is the rest: no work to run, runs whose solver did not measure, start-up and shutdown.
 */
export function formatSlotTime(c: Readonly<CampaignCounters>, workers: number, elapsedMs: number): string {
  const slotMs = workers * elapsedMs;
  if (slotMs <= 0) return 'slot time: none yet';
  const pct = (ms: number): string => `${((ms / slotMs) * 100).toFixed(1)}%`;
  const other = Math.max(0, slotMs - c.solverProcessMs - c.slotSpawnMs - c.slotCollectMs - c.slotGapMs);
  return `slot time: solver ${pct(c.solverProcessMs)}, spawn ${pct(c.slotSpawnMs)}, collect ${pct(c.slotCollectMs)}, between runs ${pct(c.slotGapMs)}, other ${pct(other)}; triage ${(c.triageMs / 1000).toFixed(1)} s off the slots`;
}
