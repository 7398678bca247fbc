/**
 * Takeover of expired work: `leased` work records whose holder stopped renewing them for a whole
 * work TTL (another coordinator that died, or our own previous life) become pending jobs here
 * (docs/campaign.md "Several coordinators"). The takeover claims nothing yet: the dispatch claims
 * the work lease with a fresh fence (counted as a steal) and the target group, as for any job.
 *
 * Contract: resolves with at most `limit` pending jobs, each holding a local reservation of its
 * group under `owner` (taken here; a group that cannot be reserved is skipped). Skipped without
 * holding anything: a malformed payload, a payload whose identity is not its work id, an input
 * that no longer exists, work already pending or active here. A failing scan is logged and yields
 * nothing; nothing is thrown.
 */
import type { Logger } from 'pino';
import type { PendingJob } from './job-state.js';
import type { CoordinatorJob, LocalReservations, RecoveredWork, WorkLeasePort } from './ports.js';
import { jobFromWorkPayload, jobWorkId } from './work-identity.js';

export interface WorkTakeoverContext {
  readonly workLeases: WorkLeasePort;
  readonly reservations: LocalReservations;
  readonly log: Logger;
  /** Whether a recovered work payload's input still exists; absent: always. */
  readonly inputExists: ((path: string) => boolean) | undefined;
  /** True when the work id is already pending or active here. */
  readonly known: (workId: string) => boolean;
}

export async function takeOverExpired(ctx: WorkTakeoverContext, limit: number, owner: number, now: number): Promise<PendingJob[]> {
  let recovered: readonly RecoveredWork[];
  try {
    recovered = await ctx.workLeases.recoverExpired(limit, now);
  } catch (error) {
    ctx.log.error({ err: error }, 'recovering expired work failed');
    return [];
  }
  const taken: PendingJob[] = [];
  for (const item of recovered) {
    let job: CoordinatorJob;
    try {
      job = jobFromWorkPayload(item.payload);
    } catch (error) {
      ctx.log.warn({ err: error, workId: item.workId }, 'skipping expired work with a malformed payload');
      continue;
    }
    if (jobWorkId(job) !== item.workId) {
      ctx.log.warn({ workId: item.workId }, 'skipping expired work whose payload does not match its id');
      continue;
    }
    if (ctx.inputExists && !ctx.inputExists(job.inputPath)) continue;
    if (ctx.known(item.workId) || taken.some((p) => jobWorkId(p.work.job) === item.workId)) continue;
    if (job.group.length > 0 && !ctx.reservations.tryReserveGroup(job.group, owner)) continue;
    taken.push({ work: { job, owner }, targetToken: undefined, recovered: true });
  }
  return taken;
}
