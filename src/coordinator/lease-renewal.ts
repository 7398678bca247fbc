/**
 * Lease renewal (heartbeats): every lease the coordinator holds is renewed once per heartbeat
 * period (`heartbeat-period.ts`; docs/campaign.md "Heartbeats"):
 *
 *   1. the exact-work fences of running *and committing* jobs, in one batch;
 *   2. the target group of every active job (running or committing), one by one;
 *   3. the target group of every pending job that still carries a token.
 *
 * Contract: each lease's failure is isolated (an I/O error on one never skips the others) and
 * counted (`heartbeatsOk` / `heartbeatsFailed`). A job that lost its target group keeps its work
 * fence renewed until it ends: its result may still commit, and only that fence decides. A
 * definite loss of a running job's lease (the table answered false, or listed its work id as
 * lost) marks the job `lost`, counts a lease expiry, emits `leaseLost` and aborts its solver run —
 * its result could never commit. An I/O failure (outcome unknown) aborts nothing: `beginCommit`
 * decides later whether the result still counts. A lost pending token is forgotten, so the
 * dispatch re-claims the group. Committing jobs are never aborted: there is no run left, and the
 * fenced publication decides their fate.
 *
 * A job this coordinator is ending itself (`ActiveJob.ending`: its completion, publication or
 * group release is under way; or its dispatch transaction rolled back) may have its leases gone by
 * the time a renewal batch runs, because the I/O thread ran the ending first. That is no loss: such
 * a renewal is neither counted nor acted on. A rolled-back job is not renewed at all.
 */
import type { CampaignCounters } from '../telemetry/counters.js';
import { decimal, type ActiveJob, type PendingJob } from './job-state.js';
import type { TargetLeasePort, WorkLeasePort } from './ports.js';
import type { StoreFaultSink } from './store-faults.js';

export interface HeartbeatReport {
  readonly workOk: number;
  readonly workFailed: number;
  readonly targetOk: number;
  readonly targetFailed: number;
}

export interface LeaseRenewalContext {
  readonly workLeases: WorkLeasePort;
  readonly targetLeases: TargetLeasePort | undefined;
  readonly counters: CampaignCounters;
  /** Where I/O failures go (logged once per spell, then summed up: store-faults.ts). */
  readonly storeFaults: StoreFaultSink;
  /** Called once per definite loss of a running job's lease (work fence or target group). */
  readonly leaseLost?: (info: { workId: string; lease: 'work' | 'target'; targets: readonly string[] }) => void;
}

/**
 * Renews one target group. Results: true = renewed, false = definitely lost, undefined = I/O
 * failure (unknown; told to `faults`, never thrown).
 */
export async function renewGroup(targets: TargetLeasePort, group: readonly bigint[], token: string, now: number, faults: StoreFaultSink): Promise<boolean | undefined> {
  try {
    const held = await targets.heartbeatGroup(group, token, now);
    if (held) faults.answered();
    return held;
  } catch (error) {
    faults.failed(error, 'target lease renewal failed', { targets: decimal(group) });
    return undefined;
  }
}

/** The coordinator gave this job's leases back, or is giving them back (see the file contract). */
function rolledBack(job: ActiveJob): boolean {
  return job.tx.state === 'rolled-back';
}

/** The job's leases may be gone by this coordinator's own doing (see the file contract). */
function endedHere(job: ActiveJob): boolean {
  return job.ending === true || rolledBack(job);
}

/** One round of renewals over a snapshot of the active and pending jobs (see the file contract). */
export async function renewLeases(ctx: LeaseRenewalContext, active: readonly ActiveJob[], pending: readonly PendingJob[], now: number): Promise<HeartbeatReport> {
  let workOk = 0;
  let workFailed = 0;
  let targetOk = 0;
  let targetFailed = 0;

  // Committing records are renewed too: their `updated` tells other coordinators the owner is
  // alive and will finish the result itself (they replay it only after a whole TTL of silence).
  // So is a job that is ending (a slow publication keeps its record alive), unless rolled back,
  // and one that lost its target group: its result may still be committed (held while the store
  // fails, say), and only the work fence decides that — left unrenewed, it would be taken over.
  const fenced = active.filter((a) => !rolledBack(a) && ((a.phase === 'active' && a.lost !== 'work') || a.phase === 'committing'));
  if (fenced.length > 0) {
    const fences = new Map(fenced.map((a) => [a.workId, a.workToken]));
    try {
      const lost = await ctx.workLeases.heartbeatMany(fences, now);
      // A renewal that wrote proves the store writes again.
      if (lost.size < fences.size) ctx.storeFaults.answered();
      for (const job of fenced) {
        if (!lost.has(job.workId)) workOk++;
        else if (endedHere(job)) {
          // Completed, published or given back by this coordinator while the renewal was queued.
        } else if (job.phase === 'committing') {
          // Finished by a replaying coordinator already (done), or gone: the fenced publication
          // will say which; there is no run left to abort.
          workFailed++;
          job.logger.info('committing record no longer renewable; the fenced publication decides');
        } else {
          workFailed++;
          loseLease(ctx, job, 'work');
        }
      }
    } catch (error) {
      // Outcome unknown: keep running; beginCommit decides whether the result still counts.
      workFailed += fenced.length;
      ctx.storeFaults.failed(error, 'work lease renewal failed', { leases: fenced.length });
    }
  }

  const targets = ctx.targetLeases;
  if (targets) {
    for (const job of active) {
      // Committing jobs keep their group until their release (with their answers, before the
      // publication): renew it too, so a slow commit does not let it expire (a lost group there
      // only costs a failed release later, whose answers are then written without it).
      if (job.targetToken === undefined || job.groupReleased === true || job.lost !== undefined || rolledBack(job)) continue;
      const held = await renewGroup(targets, job.work.job.group, job.targetToken, now, ctx.storeFaults);
      if (held === true) targetOk++;
      else if (held === false && endedHere(job)) {
        // Released (or given back) by this coordinator while the renewal was queued.
      } else {
        targetFailed++;
        if (held === false && job.phase === 'active') loseLease(ctx, job, 'target');
      }
    }
    for (const job of pending) {
      if (job.targetToken === undefined) continue;
      const held = await renewGroup(targets, job.work.job.group, job.targetToken, now, ctx.storeFaults);
      if (held === true) targetOk++;
      else {
        targetFailed++;
        if (held === false) job.targetToken = undefined;
      }
    }
  }
  ctx.counters.heartbeatsOk += workOk + targetOk;
  ctx.counters.heartbeatsFailed += workFailed + targetFailed;
  return { workOk, workFailed, targetOk, targetFailed };
}

/** A running job lost a lease for good: mark, count, tell, and abort its solver run. */
function loseLease(ctx: LeaseRenewalContext, job: ActiveJob, lease: 'work' | 'target'): void {
  job.lost = lease;
  ctx.counters.leaseExpiries++;
  job.logger.warn({ lease }, 'lease lost; aborting the solver run');
  ctx.leaseLost?.({ workId: job.workId, lease, targets: decimal(job.work.job.group) });
  job.controller.abort();
}
