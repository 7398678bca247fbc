/**
 * Result commit: what happens to an active job once its solver run settled (docs/campaign.md
 * "Lifecycle of a job" and "Commit recovery"):
 *
 *   aborted / lease lost ──▶ roll back                                    (`aborted`)
 *   set-up failure ───────▶ roll back, count the streak                   (`abandoned`)
 *   otherwise: stage (a trace run: with its trace; with what it settled) ──▶ beginCommit(manifest)
 *              ──▶ release target group (with the answers) ──▶ publish + done (fenced) ──▶ discard staged
 *              ──▶ release the local reservation ──▶ count, feed back, journal
 *   nothing to publish (no finding, no trace, nothing settled): leased ──▶ done (fenced, one write)
 *              ──▶ release target group (with the questions left open) … as above
 *
 * Contract:
 * - A result is published only after `beginCommit(workId, workToken, manifest)` accepted its work
 *   fence. A target token never authorises a result; only the work fence does.
 * - Staging, beginCommit and that completion that fail on a transient I/O error are retried after
 *   a pause, the result kept meanwhile (`untilAnswered`; docs/campaign.md "When the lease store
 *   fails"). Given up (stop, work fence lost, or an error a retry meets again): staging —
 *   `stagingFailures`; beginCommit or completion — `jobsAborted`; either way rolled back (work
 *   abandoned, target group and reservation released), journal `aborted`. No manifest names bytes
 *   that were not staged.
 * - A result with nothing to publish completes its record (`leased → done`, fenced by the work
 *   token) instead: there is nothing a crash could leave half published, so nothing to replay.
 * - beginCommit (or that completion) refused: the result is stale — rolled back, `staleResults`
 *   counted, journal `stale`. Its staged copies are left to the sweep: the work's new holder may
 *   have staged the very same names (same work id and content), and removing them could strand its
 *   manifest.
 * - After beginCommit nothing is rolled back (the record is irreversibly ours to finish). The
 *   fenced publication answers `completed` (we published; counted here), `already` (a replaying
 *   coordinator won; counted there) or refuses/fails (`commitPublishFailures`; the record stays
 *   committing, and the commit scan replays it within seconds: `publishFailed`). Staged copies are
 *   discarded once the record is done.
 * - What a run settled is kept in its manifest, so its answers are as durable as its result: the
 *   target group is released with them after beginCommit and before the publication marks the
 *   record done, and a record left committing is replayed with them (commit-recovery.ts). A release
 *   carrying answers that fails on a transient I/O error is retried like the steps above
 *   (`releaseAnswered`); refused or given up, it is counted and left to TTL, and the answers are
 *   written without the lease (`recordAnswers`, `answersRecorded`). If what the run settled could
 *   not be written that way either (an I/O error, a stop), the result is not published: the
 *   record stays committing (`commitPublishFailures`) and its replay shares the answers first.
 *   The local reservation is released regardless.
 * Nothing here throws for a port failure: every one is counted or logged.
 */
import path from 'node:path';
import type { Logger } from 'pino';
import { manifestJson, type CommitAnswers, type CommitStatus } from '../commit/commit-manifest.js';
import { countCommittedJob, jobKindOf } from '../telemetry/counters.js';
import { sourceIdOf } from '../triage/afl-names.js';
import { releaseShared, type GroupReleaseContext } from './group-release.js';
import type { JobJournal } from './job-journal.js';
import { decimal, type ActiveJob } from './job-state.js';
import type { CoordinatorJob, FindingItem, PublishedEntry, ResultCommits, SolverOutcome, StagedResult, WorkLeasePort, WorkSource } from './ports.js';
import { isTransientError, type StoreFaultSink } from './store-faults.js';
import { isSetupFailure } from './setup-failures.js';
import { memberOutcomes } from '../scheduler/target-ledger.js';
import { isInputDigest } from '../lease/lease-record.js';
import type { GroupAnswers } from '../lease/table-contract.js';
import { telemetryToJson } from '../scheduler/telemetry.js';

/**
 * Test hooks: awaited at exact points of the lifecycle so a test can hold (or kill) a coordinator
 * there. Never needed in production.
 */
export interface CoordinatorHooks {
  /** After `beginCommit` accepted a result, before its findings are published. */
  afterBeginCommit?(info: { readonly workId: string; readonly findings: number; readonly settled: number }): Promise<void> | void;
  /** A step of a result's commit failed on an I/O error: the result is kept, and the step retried after a pause. */
  resultHeld?(info: { readonly workId: string; readonly step: string; readonly attempt: number }): Promise<void> | void;
}

/** What publication reports: counters, and the `finding` event per published entry. */
export interface PublicationContext {
  readonly counters: GroupReleaseContext['counters'];
  readonly finding: ((entry: PublishedEntry, job: CoordinatorJob) => void) | undefined;
}

export interface ResultCommitContext extends GroupReleaseContext, PublicationContext {
  /** The lease owner of this coordinator: the writer of answers recorded without a lease. */
  readonly coordinatorId: string;
  readonly workLeases: WorkLeasePort;
  readonly commits: ResultCommits;
  readonly source: WorkSource;
  readonly journal: JobJournal;
  readonly hooks: CoordinatorHooks | undefined;
  /** A set-up failure was rolled back (`setup-failures.ts`): count it toward the streak. */
  readonly setupFailed: (active: ActiveJob, outcome: SolverOutcome) => void;
  /** A result that was the input's own: the set-up works, the streak starts over. */
  readonly inputResult: () => void;
  /** Our own publication of `workId` failed, its record left committing: the commit scan replays it soon. */
  readonly publishFailed?: (workId: string) => void;
  /** Where I/O failures and answers of the store go (store-faults.ts). */
  readonly storeFaults: StoreFaultSink;
  /**
   * Waits before the `attempt`-th retry of a step that failed on an I/O error: true once its delay
   * passed on the coordinator's clock, false when the coordinator stops first.
   */
  readonly pauseForRetry: (attempt: number) => Promise<boolean>;
}

type Attempt<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

/**
 * Runs one durable step of a result's commit (staging, beginCommit, completion) until the store
 * answers it. A result is worth keeping: dropped, its run would be redone, and the coverage its
 * findings added is already in the campaign's map, so the rerun would find them uninteresting and
 * they would be lost. So an error a retry may pass (`isTransientError`) keeps the result and
 * retries the step after a pause (`pauseForRetry`), for as long as the coordinator runs and the job
 * keeps its work fence (a heartbeat that finds it lost ends the retries; a lost target group does
 * not: only the work fence decides whether a result counts). Each failure goes to `storeFaults`,
 * each retry is counted (`commitRetries`) and announced (`resultHeld`). `wrote` says whether a
 * step's answer means the store wrote (which ends a spell of failures).
 */
async function untilAnswered<T>(ctx: ResultCommitContext, active: ActiveJob, step: string, run: () => Promise<T>, wrote: (value: T) => boolean): Promise<Attempt<T>> {
  // A heartbeat may mark the job lost during any await below.
  const workLost = (): boolean => active.lost === 'work';
  for (let attempt = 0; ; attempt++) {
    try {
      const value = await run();
      if (wrote(value)) ctx.storeFaults.answered();
      return { ok: true, value };
    } catch (error) {
      if (!isTransientError(error)) {
        active.logger.error({ err: error }, `${step} failed`);
        return { ok: false, error };
      }
      ctx.storeFaults.failed(error, `${step} failed; the result is kept and the step retried`, { workId: active.workId });
      if (workLost()) return { ok: false, error };
      const paused = ctx.pauseForRetry(attempt);
      try {
        await ctx.hooks?.resultHeld?.({ workId: active.workId, step, attempt });
      } catch (hookError) {
        active.logger.warn({ err: hookError }, 'resultHeld hook failed');
      }
      if (!(await paused) || workLost()) return { ok: false, error };
      ctx.counters.commitRetries++;
    }
  }
}

/**
 * A run rolled back without an answer goes back to its source (`WorkSource.giveBack`): a directed
 * job's questions to the lane that proposed it, so they are asked again later, in this life or,
 * after a stop, from the saved lane state. Not when a heartbeat found its work fence taken (the
 * work's new holder runs it), nor work taken over (its record, left to expire, is found again).
 */
function giveBackUnanswered(ctx: ResultCommitContext, active: ActiveJob): void {
  if (active.lost === 'work' || active.recovered === true) return;
  ctx.source.giveBack?.(active.work, ctx.clock.now());
}

/** Abandons `active`'s work lease; a refusal or failure leaves it to expire (logged). */
async function abandonQuietly(ctx: ResultCommitContext, active: ActiveJob): Promise<void> {
  try {
    await ctx.workLeases.abandon(active.workId, active.workToken, ctx.clock.now());
  } catch (error) {
    active.logger.warn({ err: error }, 'abandoning taken-over work whose result cannot commit failed; left to expire');
  }
}

/**
 * The group release of a result that counts, carrying what its run answered. Lost, those answers
 * would let the campaign ask the questions again, so a release that fails on a transient I/O error
 * is retried like a commit step (`untilAnswered`), the group renewed meanwhile. Refused (the lease
 * expired or was taken over) or given up: counted in `releaseFailures`, the group left to its TTL,
 * and the answers written without the lease (`recordAnswers`, retried the same way): what the run
 * settled, and what it left open unless an attempt of the release failed (it may have been
 * applied all the same, and an open question's attempt would count twice). False when those
 * answers could not be written for an I/O error: the caller leaves the result to its replay.
 */
async function releaseAnswered(ctx: ResultCommitContext, active: ActiveJob, token: string, answers: GroupAnswers): Promise<boolean> {
  const targets = ctx.targetLeases;
  if (targets === undefined) return true;
  const { group } = active.work.job;
  let unsure = false;
  const released = await untilAnswered(
    ctx,
    active,
    'releasing the target group with its answers',
    async () => {
      try {
        return await targets.releaseGroup(group, token, ctx.clock.now(), answers);
      } catch (error) {
        unsure = true;
        throw error;
      }
    },
    (ok) => ok,
  );
  if (released.ok && released.value) return true;
  ctx.counters.releaseFailures++;
  const unleased: GroupAnswers = unsure ? { input: answers.input, settled: answers.settled } : answers;
  if (targets.recordAnswers === undefined || (unleased.settled.length === 0 && (unleased.open ?? []).length === 0)) return true;
  const writer = { owner: ctx.coordinatorId, token, worker: active.work.owner };
  const recorded = await untilAnswered(ctx, active, 'recording the answers of a result whose release failed', () => targets.recordAnswers!(unleased, writer, ctx.clock.now()), (ok) => ok);
  if (recorded.ok && recorded.value) ctx.counters.answersRecorded++;
  else active.logger.warn({ targets: decimal(group) }, 'the answers of a committed result could not be recorded');
  // Refused (a corrupt answer record), a replay would be refused too: nothing to leave to it.
  return recorded.ok;
}

export async function commitResult(ctx: ResultCommitContext, active: ActiveJob, outcome: SolverOutcome): Promise<void> {
  const endMs = ctx.clock.now();
  const counters = ctx.counters;
  const { job } = active.work;

  if (outcome.status === 'aborted' || active.lost !== undefined) {
    await active.tx.rollback();
    counters.jobsAborted++;
    ctx.journal.recordRun(active, endMs, 'aborted', 0, 0);
    giveBackUnanswered(ctx, active);
    return;
  }

  if (isSetupFailure(outcome.status, outcome.errorCode)) {
    // Not the input's fault: the work must stay claimable (abandoned, never done) so a rerun with
    // a working set-up runs it; everything the dispatch took is given back.
    await active.tx.rollback();
    counters.jobsAbandoned++;
    ctx.journal.recordRun(active, endMs, 'abandoned', 0, 0);
    ctx.setupFailed(active, outcome);
    giveBackUnanswered(ctx, active);
    return;
  }
  ctx.inputResult();
  /**
   * A result dropped before its commit: everything the dispatch took is given back, and journalled.
   * Dropped for a reason a retry may pass (a stop, an outage), its work goes back to its source; a
   * stale result's work, or one whose error a retry meets again, does not.
   */
  const drop = async (status: 'aborted' | 'stale', error?: unknown): Promise<void> => {
    await active.tx.rollback();
    ctx.journal.recordRun(active, endMs, status, outcome.generated.length, 0);
    if (status !== 'aborted') return;
    if (isTransientError(error)) giveBackUnanswered(ctx, active);
    // Work taken over, left to expire by the rollback, would be taken over and fail the same way
    // once per TTL: it is abandoned, as our own work is.
    else if (active.recovered === true && active.lost !== 'work') await abandonQuietly(ctx, active);
  };

  const trace = sharedTraceOf(job, outcome);
  const items = findingItems(ctx, active, outcome);
  // What the run answered on its input, released with its group so no coordinator asks it again
  // on this input, and what it left open, so every coordinator backs off from it.
  const members = memberOutcomes(job.group, outcome.telemetry, outcome.status === 'timeout');
  const targetToken = active.targetToken;
  const answers: GroupAnswers | undefined =
    targetToken !== undefined && isInputDigest(job.inputSha256) && (members.settled.length > 0 || members.open.length > 0)
      ? { input: job.inputSha256, settled: members.settled, ...(members.open.length > 0 ? { open: members.open } : {}) }
      : undefined;
  // A result that settled a question keeps its answers in its manifest, beside its findings: the
  // release writes them before the record is done, and a coordinator that replays the record after
  // a crash writes them from there (docs/leases.md "Shared answers"), so none is ever lost.
  const kept: CommitAnswers | undefined =
    answers !== undefined && members.settled.length > 0 ? { input: answers.input, token: targetToken!, worker: active.work.owner, settled: members.settled } : undefined;
  const staging = await untilAnswered(ctx, active, 'staging the result durably', () =>
    ctx.commits.stage(active.workId, items, {
      status: outcome.status as CommitStatus,
      source: sourceIdOf(path.basename(job.inputPath)),
      ...(trace !== undefined ? { trace } : {}),
      ...(kept !== undefined ? { answers: kept } : {}),
    }),
    () => true,
  );
  if (!staging.ok) {
    counters.stagingFailures++;
    active.logger.error({ err: staging.error }, 'staging the result durably failed; result dropped and work released');
    await drop('aborted', staging.error);
    return;
  }
  const staged = staging.value;

  // A result with nothing to publish or replay (no finding, no trace, nothing settled): its record
  // goes from leased to done in one fenced step, one durable write instead of three.
  const nothingToPublish = staged.manifest.items.length === 0 && staged.manifest.trace === undefined && staged.manifest.answers === undefined;
  // A completion ends the work lease: a renewal that finds the record done from here on found
  // this one (lease-renewal.ts). beginCommit keeps it renewable until the publication.
  if (nothingToPublish) active.ending = true;
  // A retry after a failure whose write took effect finds the record already moved by our token:
  // the tables answer that as accepted (docs/leases.md), so it is not taken for a stale result.
  const commit = await untilAnswered(ctx, active, nothingToPublish ? 'completing the work record' : 'beginCommit', () =>
    nothingToPublish
      ? ctx.workLeases.complete(active.workId, active.workToken, ctx.clock.now())
      : ctx.workLeases.beginCommit(active.workId, active.workToken, ctx.clock.now(), manifestJson(staged.manifest)),
    (accepted) => accepted,
  );
  if (!commit.ok) {
    // Given up (stop, work fence lost, or an error a retry meets again): dropped like an aborted run.
    counters.jobsAborted++;
    active.logger.warn({ status: outcome.status }, 'result dropped: its commit failed');
    await drop('aborted', commit.error);
    return;
  }
  if (!commit.value) {
    counters.staleResults++;
    active.logger.warn({ status: outcome.status }, 'stale result dropped: the work fence is no longer ours');
    await drop('stale');
    return;
  }
  // From here on the work record is irreversibly ours to finish: nothing may be rolled back.
  active.phase = 'committing';
  active.tx.commit();
  // The group release shares the answers only once the result that proved them is durable
  // (beginCommit, or the completion of a result with nothing to publish).
  // True unless the answers could not be written for an I/O error.
  const release = async (): Promise<boolean> => {
    if (targetToken === undefined) return true;
    let shared = true;
    if (answers === undefined) await releaseShared(ctx, job.group, targetToken, answers);
    else shared = await releaseAnswered(ctx, active, targetToken, answers);
    active.groupReleased = true;
    return shared;
  };
  let findings: PublishedEntry[] = [];
  if (!nothingToPublish) {
    try {
      await ctx.hooks?.afterBeginCommit?.({ workId: active.workId, findings: staged.manifest.items.length, settled: staged.manifest.answers?.settled.length ?? 0 });
    } catch (error) {
      active.logger.warn({ err: error }, 'afterBeginCommit hook failed');
    }
    // The group release, then the publication, which completes the record: both end leases. The
    // release comes first so that a record still committing is one whose answers may be missing:
    // its replay writes them from the manifest (commit-recovery.ts).
    active.ending = true;
    if ((await release()) || kept === undefined) findings = await publishCommitted(ctx, active, staged);
    else {
      // Published now, the record would be done without its answers shared, and nothing would
      // write them: it stays committing, and its replay writes them before it publishes.
      counters.commitPublishFailures++;
      active.logger.warn('the answers of a committed result could not be shared; its publication is left to the replay, which shares them first');
      ctx.publishFailed?.(active.workId);
    }
  } else await release();
  const interesting = findings.filter((f) => f.kind === 'queue').length;
  if (job.group.length > 0) ctx.reservations.releaseGroup(job.group, active.work.owner);

  switch (outcome.status) {
    case 'ok':
      counters.jobsOk++;
      break;
    case 'timeout':
      counters.jobsTimeout++;
      break;
    case 'crash':
      counters.jobsCrash++;
      break;
    default:
      counters.jobsError++;
  }
  const solverMs = outcome.solverTimeUs !== undefined ? outcome.solverTimeUs / 1000 : outcome.elapsedMs;
  counters.solverTimeMs += solverMs;
  const timing = outcome.timing;
  const runMs = timing !== undefined ? timing.spawnMs + timing.solverMs + timing.collectMs + timing.triageMs : outcome.elapsedMs;
  let newEdges = 0;
  for (const g of outcome.generated) if (g.interesting && g.terminal === undefined) newEdges += g.newEdges ?? 1;
  countCommittedJob(counters, jobKindOf(job), outcome.telemetry, job.origin);
  try {
    ctx.source.observe(
      {
        job,
        workId: active.workId,
        status: outcome.status,
        ...(outcome.telemetry !== undefined ? { telemetry: outcome.telemetry } : {}),
        ...(outcome.telemetryError !== undefined ? { telemetryError: outcome.telemetryError } : {}),
        findings,
        newEdges,
        solverMs,
        runMs,
      },
      ctx.clock.now(),
    );
  } catch (error) {
    active.logger.error({ err: error }, 'feedback to the work source failed');
  }
  ctx.journal.recordRun(active, endMs, outcome.status, outcome.generated.length, interesting, outcome.telemetry, members);
}

/**
 * committing → done for our own result: the staged findings are published into our queue and the
 * record marked done in one fenced step (docs/leases.md "Publishing a committed result"). Resolves with the entries this
 * call published (empty for `already` and on every failure).
 */
async function publishCommitted(ctx: ResultCommitContext, active: ActiveJob, staged: StagedResult): Promise<PublishedEntry[]> {
  let outcome;
  try {
    outcome = await ctx.commits.publish(active.workId, active.workToken, staged.manifest, staged.findings, ctx.clock.now());
  } catch (error) {
    ctx.counters.commitPublishFailures++;
    const msg = 'publishing the committed result failed; the record stays committing and is replayed later';
    if (isTransientError(error)) ctx.storeFaults.failed(error, msg, { workId: active.workId });
    else active.logger.error({ err: error }, msg);
    ctx.publishFailed?.(active.workId);
    return [];
  }
  if (outcome.outcome === 'stale' || outcome.outcome === 'corrupt' || outcome.outcome === 'live') {
    ctx.counters.commitPublishFailures++;
    active.logger.error({ outcome: outcome.outcome }, 'the committing record refused its own token; findings not published');
    return [];
  }
  if (outcome.outcome === 'already') active.logger.info('another coordinator replayed this result first; not publishing it again');
  else countPublished(ctx, outcome.entries, active.work.job);
  await discardStaged(ctx.commits, staged, active.logger);
  return [...outcome.entries];
}

/**
 * What a trace run leaves for every coordinator of the campaign (docs/campaign.md "Shared
 * traces"): its telemetry in wire form, when the run ended `ok` with telemetry. Any other run,
 * and a trace that crashed, timed out or wrote no telemetry, shares nothing.
 */
function sharedTraceOf(job: CoordinatorJob, outcome: SolverOutcome): Uint8Array | undefined {
  if (job.mode !== 'trace' || outcome.status !== 'ok' || outcome.telemetry === undefined) return undefined;
  return new TextEncoder().encode(JSON.stringify(telemetryToJson(outcome.telemetry)));
}

/** What a result publishes: interesting, crashing and hanging inputs, and a crashing/hanging parent. */
function findingItems(ctx: PublicationContext, active: ActiveJob, outcome: SolverOutcome): FindingItem[] {
  const { job } = active.work;
  const items: FindingItem[] = [];
  for (const input of outcome.generated) {
    ctx.counters.generated++;
    if (input.terminal === 'crash') items.push({ kind: 'crashes', content: input.bytes });
    else if (input.terminal === 'timeout') items.push({ kind: 'hangs', content: input.bytes });
    else if (input.interesting) items.push({ kind: 'queue', content: input.bytes });
  }
  if (outcome.status === 'crash') items.push({ kind: 'crashes', content: { path: job.inputPath } });
  else if (outcome.status === 'timeout') items.push({ kind: 'hangs', content: { path: job.inputPath } });
  return items;
}

/** Counts published entries by kind and emits `finding` for each (when the job is known). */
export function countPublished(ctx: PublicationContext, entries: readonly PublishedEntry[], job: CoordinatorJob | undefined): void {
  for (const entry of entries) {
    if (entry.kind === 'queue') ctx.counters.interesting++;
    else if (entry.kind === 'crashes') ctx.counters.crashes++;
    else ctx.counters.hangs++;
    if (job) ctx.finding?.(entry, job);
  }
}

/** Removes a finished result's staged copies; a failure is only logged (the sweep removes them). */
export async function discardStaged(commits: ResultCommits, staged: StagedResult, logger: Logger): Promise<void> {
  try {
    await commits.discard(staged.manifest);
  } catch (error) {
    logger.warn({ err: error }, 'removing staged findings failed; the recovery sweep removes them later');
  }
}
