/**
 * Dispatch: pending → active (docs/campaign.md "Lifecycle of a job"). In this order:
 *
 *   1. the local reservation the admission took is registered for undo;
 *   2. with a shared target table and a targeted job: the pending target token is re-validated
 *      (a renewal with it proves the group is still ours right now), or the group is re-claimed
 *      when the token is gone or refused; the token held is registered for undo (release);
 *   3. the exact-work lease is claimed and registered for undo (abandon); a trace run's claim that
 *      is refused hands the refusal to the shared traces (`shared-traces.ts`) after the rollback;
 *   4. unless the coordinator is stopping, the active job is handed back, claimed but not started:
 *      the coordinator starts it in a free slot at once, or keeps it prefetched for the next slot
 *      that frees (`startRun` marks the transaction sent then).
 *
 * Contract: on success the job holds its local reservation, a current target token (if targeted
 * and shared) and the exact-work fence, all registered in its `DispatchTransaction` — the result
 * commit either commits that transaction (after `beginCommit`) or rolls it back. On any failure
 * (re-claim refused or failed, work claim refused or failed, shutdown) the dispatch is rolled back
 * completely — newest acquisition first, nothing stays held, the scheduler's lane state is not
 * touched here — `dispatchRollbacks` (and `conflicts` for a refused claim) is counted and `undefined`
 * is returned. Nothing is thrown. A claim that failed with a transient I/O error refused nothing:
 * the work was only not started, so after the rollback it goes back to its source (`giveBack`),
 * which offers it again later; a directed job's lane then takes its branches back (docs/campaign.md
 * "When the lease store fails"). So does work rolled back by a stop, or whose re-claim met a member
 * held elsewhere right now; not work refused `answered`, `backoff` or `done`, nor the exact work
 * held elsewhere (its holder runs it). Every I/O failure, and every granted claim, is told to
 * `storeFaults`.
 */
import type { Logger } from 'pino';
import { childLogger } from '../telemetry/logger.js';
import { DispatchTransaction } from './dispatch-transaction.js';
import { releaseShared, type GroupReleaseContext } from './group-release.js';
import { decimal, type ActiveJob, type PendingJob } from './job-state.js';
import type { AdmittedWork, ClaimOutcome, CoordinatorJob, WorkLeasePort } from './ports.js';
import type { ClaimAsk } from '../scheduler/admission-ports.js';
import { isTransientError, type StoreFaultSink } from './store-faults.js';
import { traceClaimRefused, type SharedTraceContext } from './shared-traces.js';
import { jobWorkId, workPayloadOf } from './work-identity.js';

export interface DispatchContext extends GroupReleaseContext {
  readonly coordinatorId: string;
  readonly workLeases: WorkLeasePort;
  /** Checked last, after every claim: a dispatch that raced `stop()` gives everything back. */
  readonly stopping: () => boolean;
  /** A claim failed in a way no retry mends (the lease store was replaced): the coordinator stops. */
  readonly claimFailed?: (error: unknown) => void;
  /** Where I/O failures and answers of the lease store go (store-faults.ts). */
  readonly storeFaults: StoreFaultSink;
  /** Work rolled back before it started, its question still open: its source offers it again later. */
  readonly giveBack?: (work: AdmittedWork) => void;
  /** Where a refused trace claim goes (docs/campaign.md "Shared traces"); absent: a refusal is only rolled back. */
  readonly traces?: SharedTraceContext;
  /** What a re-claim of a job's group asks about answers (`WorkSource.claimAsk`); absent: its input alone. */
  readonly claimAsk?: (job: CoordinatorJob) => ClaimAsk;
}

const ioFailure: ClaimOutcome = { ok: false, reason: 'error' };

/**
 * Removes the expired work record of `job` (taken over, its group refused `answered` or
 * `backoff`): claimed as a takeover, then abandoned. A claim refused (another coordinator took it,
 * or it finished) or a failure leaves it as it was: it expires and is refused again, nothing lost.
 */
async function retireRecovered(ctx: DispatchContext, job: CoordinatorJob): Promise<void> {
  const workId = jobWorkId(job);
  try {
    const held = await ctx.workLeases.claim(workId, { ...workPayloadOf(job), coordinator: ctx.coordinatorId }, ctx.clock.now());
    if (!held.ok) return;
    if (await ctx.workLeases.abandon(workId, held.token, ctx.clock.now())) ctx.counters.recoveredRetired++;
  } catch (error) {
    ctx.storeFaults.failed(error, 'retiring taken-over work whose question is settled failed', { workId });
  }
}

export async function dispatch(ctx: DispatchContext, pending: PendingJob): Promise<ActiveJob | undefined> {
  const { job, owner } = pending.work;
  const counters = ctx.counters;
  const claimStartMs = ctx.clock.now();
  const tx = new DispatchTransaction();
  if (job.group.length > 0) {
    tx.register('local-reservation', () => {
      ctx.reservations.releaseGroup(job.group, owner);
    });
  }
  const rollback = async (reason: string): Promise<undefined> => {
    const report = await tx.rollback();
    counters.dispatchRollbacks++;
    ctx.log.debug({ reason, failedUndos: report.failed, targets: decimal(job.group) }, 'dispatch rolled back');
    return undefined;
  };
  let failure: unknown;
  /** A pending token whose renewal failed on I/O: still ours, maybe, and in no undo. */
  let unsureToken: string | undefined;
  /**
   * The store failed, so nothing was refused: rolled back, and the work goes back to its source,
   * unless the error is one a retry meets again. Recovered work is not: the takeover scan finds
   * its expired record again. A pending token that may still be ours is given back too, so the
   * reopened questions are not refused by our own lease until its TTL.
   */
  const giveBack = async (reason: string): Promise<undefined> => {
    await rollback(reason);
    if (unsureToken !== undefined) await releaseShared(ctx, job.group, unsureToken);
    if (pending.recovered || !isTransientError(failure) || ctx.giveBack === undefined) return undefined;
    counters.workGivenBack++;
    ctx.giveBack(pending.work);
    return undefined;
  };
  /**
   * Rolled back, though nothing refused the question itself (a member of the group held elsewhere
   * right now, a stop): the work goes back to its source too, so a directed job's lane asks its
   * questions again later (not counted in `workGivenBack`, which counts store failures).
   */
  const notNow = async (reason: string): Promise<undefined> => {
    await rollback(reason);
    if (!pending.recovered) ctx.giveBack?.(pending.work);
    return undefined;
  };

  let targetToken: string | undefined;
  const targets = ctx.targetLeases;
  if (targets && job.group.length > 0) {
    const now = ctx.clock.now();
    if (pending.targetToken !== undefined) {
      let held: boolean;
      try {
        held = await targets.heartbeatGroup(job.group, pending.targetToken, now);
        if (held) ctx.storeFaults.answered();
      } catch (error) {
        // The store failed: nothing was refused, and the token may still be ours. A re-claim now
        // would be refused by that very token (a claim needs only reads, a renewal a write): the
        // work goes back to its source and the token is given back.
        failure = error;
        unsureToken = pending.targetToken;
        ctx.storeFaults.failed(error, 'target lease renewal failed', { targets: decimal(job.group) });
        ctx.claimFailed?.(error);
        return giveBack('target lease renewal failed');
      }
      if (held) targetToken = pending.targetToken;
    }
    if (targetToken === undefined) {
      let claim: ClaimOutcome;
      try {
        // Asking what the admission asked: a pair answered (or given up on, or backing off)
        // elsewhere since refuses the re-claim as it would have refused the admission.
        claim = await targets.claimGroup(job.group, { path: job.inputPath, coordinator: ctx.coordinatorId }, now, ctx.claimAsk?.(job) ?? { input: job.inputSha256 });
        // Only a write proves the store writes again (a refusal is answered by reads alone).
        if (claim.ok) ctx.storeFaults.answered();
      } catch (error) {
        failure = error;
        ctx.storeFaults.failed(error, 'target re-claim failed', { targets: decimal(job.group) });
        ctx.claimFailed?.(error);
        claim = ioFailure;
      }
      if (!claim.ok) {
        if (claim === ioFailure) return giveBack('target group claim failed');
        if (claim.reason === 'conflict') {
          counters.conflicts++;
          return notNow('target group conflict');
        }
        const refused = await rollback(`target group ${claim.reason}`);
        // Taken-over work whose question was answered or given up meanwhile would be taken over
        // and refused again at every scan, on every coordinator: its work record goes.
        if (pending.recovered && (claim.reason === 'answered' || claim.reason === 'backoff') && !ctx.stopping()) await retireRecovered(ctx, job);
        return refused;
      }
      targetToken = claim.token;
    }
    const token = targetToken;
    tx.register('target-group', async () => {
      await releaseShared(ctx, job.group, token);
    });
  }

  const workId = jobWorkId(job);
  // A trace claim refused by a done record asks for its manifest: it names the trace to adopt.
  const traces = job.mode === 'trace' ? ctx.traces : undefined;
  let workClaim: ClaimOutcome;
  try {
    workClaim = await ctx.workLeases.claim(workId, { ...workPayloadOf(job), coordinator: ctx.coordinatorId }, ctx.clock.now(), traces ? { doneCommit: true } : {});
    if (workClaim.ok) ctx.storeFaults.answered();
  } catch (error) {
    failure = error;
    ctx.storeFaults.failed(error, 'work lease claim failed', { workId });
    ctx.claimFailed?.(error);
    workClaim = ioFailure;
  }
  if (!workClaim.ok) {
    if (workClaim === ioFailure) return giveBack('work lease claim failed');
    if (workClaim.reason === 'conflict') counters.conflicts++;
    const refused = await rollback(`work lease ${workClaim.reason}`);
    if (traces && !ctx.stopping()) await traceClaimRefused(traces, job, workId, workClaim, ctx.clock.now());
    return refused;
  }
  const workToken = workClaim.token;
  // Rolled back, our own work is abandoned (its source offers it again); work taken over is left
  // to expire instead, so that a takeover scan, ours or another coordinator's, finds it again:
  // abandoned, nothing would ever offer it again.
  tx.register('work-lease', async () => {
    if (!pending.recovered) await ctx.workLeases.abandon(workId, workToken, ctx.clock.now());
  });

  if (ctx.stopping()) return notNow('shutting down');
  if (pending.recovered) counters.leaseSteals++;
  // The job's logger is made at its first use: most jobs never log, and a child logger costs a
  // parse and a serialisation of its bindings (telemetry/logger.ts), on the main thread, per job.
  let logger: Logger | undefined;
  const startMs = ctx.clock.now();
  return {
    workId,
    work: pending.work,
    targetToken,
    workToken,
    tx,
    controller: new AbortController(),
    startMs,
    get logger(): Logger {
      return (logger ??= childLogger(ctx.log, { workId, targets: decimal(job.group) }));
    },
    ...(pending.recovered ? { recovered: true } : {}),
    phase: 'active',
    solverRunning: true,
    busyAccruedUntilMs: startMs,
    lost: undefined,
    done: Promise.resolve(),
    marks: {
      admittedMs: pending.admittedMs ?? claimStartMs,
      claimStartMs,
      claimedMs: startMs,
      slot: -1,
      slotFreeSinceMs: undefined,
      solverExitMs: undefined,
      resultMs: undefined,
    },
  };
}

/**
 * A dispatched job goes to its solver slot: the transaction is marked sent (later rollbacks use
 * the after-send undos), the start is counted, and its run's interval begins now.
 */
export function startRun(counters: DispatchContext['counters'], active: ActiveJob, slot: number, slotFreeSinceMs: number | undefined, nowMs: number): void {
  active.tx.markSent();
  counters.jobsStarted++;
  active.startMs = nowMs;
  active.busyAccruedUntilMs = nowMs;
  if (active.marks) {
    active.marks.slot = slot;
    active.marks.slotFreeSinceMs = slotFreeSinceMs;
  }
}
