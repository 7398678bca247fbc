/**
 * Giving a target group back: the shared token (when the campaign shares a target table), then
 * the local reservation. Used by the safety valve and shutdown (pending jobs) and by the result
 * commit (after beginCommit, before publication). Releases never throw: a failed shared release is counted
 * (`releaseFailures`) and left to the lease's TTL (docs/campaign.md "Lifecycle of a job").
 */
import type { Logger } from 'pino';
import type { GroupAnswers } from '../lease/table-contract.js';
import type { CampaignCounters } from '../telemetry/counters.js';
import { decimal, type PendingJob } from './job-state.js';
import type { Clock, LocalReservations, TargetLeasePort } from './ports.js';
import { isTransientError, type StoreFaultSink } from './store-faults.js';

export interface GroupReleaseContext {
  readonly targetLeases: TargetLeasePort | undefined;
  readonly reservations: LocalReservations;
  readonly clock: Clock;
  readonly counters: CampaignCounters;
  readonly log: Logger;
  /** Where transient I/O failures go (store-faults.ts); absent: logged at warn each. */
  readonly storeFaults?: StoreFaultSink;
}

/**
 * Releases the shared records of `group` carrying `token`, keeping `answers` with them (docs/leases.md
 * "Shared answers"). Results: true = released (or nothing to release); false = refused or failed,
 * counted and left to TTL (answers carried here are then lost with the lease; the result commit
 * writes a counted result's answers without it instead: result-commit.ts `releaseAnswered`).
 */
export async function releaseShared(ctx: GroupReleaseContext, group: readonly bigint[], token: string, answers?: GroupAnswers): Promise<boolean> {
  const targets = ctx.targetLeases;
  if (!targets || group.length === 0) return true;
  let released = false;
  try {
    released = await targets.releaseGroup(group, token, ctx.clock.now(), answers);
  } catch (error) {
    if (ctx.storeFaults !== undefined && isTransientError(error)) ctx.storeFaults.failed(error, 'target release failed; left to TTL', { targets: decimal(group) });
    else ctx.log.warn({ err: error, targets: decimal(group) }, 'target release failed; left to TTL');
  }
  if (!released) ctx.counters.releaseFailures++;
  return released;
}

/**
 * Releases everything a pending job holds: its shared token (if any), then its local reservation
 * (always, even when the shared release failed). Returns false when the shared release failed.
 */
export async function releasePending(ctx: GroupReleaseContext, pending: PendingJob): Promise<boolean> {
  const { job, owner } = pending.work;
  let ok = true;
  if (pending.targetToken !== undefined) ok = await releaseShared(ctx, job.group, pending.targetToken);
  if (job.group.length > 0) ctx.reservations.releaseGroup(job.group, owner);
  return ok;
}
