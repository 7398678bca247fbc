// Lease renewal on its own, through its narrow context (no coordinator): which losses abort a run,
// which only get counted, and what a pending job keeps.
import { describe, expect, it } from 'vitest';
import { DispatchTransaction } from '../../src/coordinator/dispatch-transaction.js';
import type { ActiveJob, PendingJob } from '../../src/coordinator/job-state.js';
import { renewLeases, type LeaseRenewalContext } from '../../src/coordinator/lease-renewal.js';
import { StoreFaults } from '../../src/coordinator/store-faults.js';
import { jobWorkId } from '../../src/coordinator/work-identity.js';
import { createCounters } from '../../src/telemetry/counters.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { FakeTargetLeases, FakeWorkLeases, makeJob } from '../helpers/coordinator-fakes.js';

const TTL_MS = 30_000;
const NOW = 1_000_000;

function context() {
  const workLeases = new FakeWorkLeases(TTL_MS);
  const targetLeases = new FakeTargetLeases(TTL_MS);
  const lost: string[] = [];
  const storeFaults = new StoreFaults(silentLogger(), { now: () => NOW });
  const ctx: LeaseRenewalContext = { workLeases, targetLeases, counters: createCounters(), storeFaults, leaseLost: (i) => lost.push(`${i.lease}:${i.workId}`) };
  return { ctx, workLeases, targetLeases, lost };
}

async function activeJob(t: ReturnType<typeof context>, name: string, phase: ActiveJob['phase'], target = 7n): Promise<ActiveJob> {
  const job = makeJob(name, target);
  const workId = jobWorkId(job);
  const claim = await t.workLeases.claim(workId, {}, NOW);
  const group = await t.targetLeases.claimGroup(job.group, {}, NOW);
  if (!claim.ok || !group.ok) throw new Error('test setup: claims refused');
  if (phase === 'committing') await t.workLeases.beginCommit(workId, claim.token, NOW, {});
  return {
    workId,
    work: { job, owner: 1 },
    targetToken: group.token,
    workToken: claim.token,
    tx: new DispatchTransaction(),
    controller: new AbortController(),
    startMs: NOW,
    logger: silentLogger(),
    phase,
    solverRunning: phase === 'active',
    lost: undefined,
    done: Promise.resolve(),
  };
}

describe('lease renewal', () => {
  it('aborts nothing for a committing job whose work fence is gone (the fenced publication decides), but counts it', async () => {
    const t = context();
    const job = await activeJob(t, 'a', 'committing');
    t.workLeases.records.get(job.workId)!.status = 'done'; // a replaying coordinator finished it
    const report = await renewLeases(t.ctx, [job], [], NOW + 1);
    expect(report).toEqual({ workOk: 0, workFailed: 1, targetOk: 1, targetFailed: 0 });
    expect(job.controller.signal.aborted).toBe(false);
    expect(job.lost).toBeUndefined();
    expect(t.lost).toEqual([]);
    expect(t.ctx.counters).toMatchObject({ leaseExpiries: 0, heartbeatsOk: 1, heartbeatsFailed: 1 });
  });

  it('neither counts nor acts on a lease this coordinator ended itself while the renewal was queued', async () => {
    const t = context();
    const completed = await activeJob(t, 'a', 'active');
    const published = await activeJob(t, 'b', 'committing', 8n);
    // The I/O thread ran each job's own ending first: a completion (nothing to publish) and a
    // publication, each marking its job as ending before it was submitted (result-commit.ts).
    const heartbeatMany = t.workLeases.heartbeatMany.bind(t.workLeases);
    t.workLeases.heartbeatMany = async (fences, now) => {
      for (const job of [completed, published]) {
        job.ending = true;
        t.workLeases.records.get(job.workId)!.status = 'done';
      }
      return heartbeatMany(fences, now);
    };
    const heartbeatGroup = t.targetLeases.heartbeatGroup.bind(t.targetLeases);
    t.targetLeases.heartbeatGroup = async (group, token, now) => {
      await t.targetLeases.releaseGroup(group, token); // the group's release ran first too
      return heartbeatGroup(group, token, now);
    };
    const report = await renewLeases(t.ctx, [completed, published], [], NOW + 1);
    expect(report).toEqual({ workOk: 0, workFailed: 0, targetOk: 0, targetFailed: 0 });
    expect([completed.lost, published.lost]).toEqual([undefined, undefined]);
    expect(completed.controller.signal.aborted).toBe(false);
    expect(t.lost).toEqual([]);
    expect(t.ctx.counters).toMatchObject({ leaseExpiries: 0, heartbeatsOk: 0, heartbeatsFailed: 0 });
  });

  it('does not renew a job whose dispatch was rolled back, and a rollback during the renewal is no loss', async () => {
    const t = context();
    const given = await activeJob(t, 'a', 'active');
    const giving = await activeJob(t, 'b', 'active', 8n);
    const kept = await activeJob(t, 'c', 'active', 9n);
    await given.tx.rollback(); // e.g. a result dropped, its leases being given back
    const heartbeatMany = t.workLeases.heartbeatMany.bind(t.workLeases);
    t.workLeases.heartbeatMany = async (fences, now) => {
      expect([...fences.keys()]).toEqual([giving.workId, kept.workId]);
      await giving.tx.rollback(); // given back while the batch was queued…
      await t.workLeases.abandon(giving.workId, giving.workToken); // …and its abandon ran first
      return heartbeatMany(fences, now);
    };
    const report = await renewLeases(t.ctx, [given, giving, kept], [], NOW + 1);
    expect(report).toEqual({ workOk: 1, workFailed: 0, targetOk: 1, targetFailed: 0 });
    expect(t.targetLeases.calls.filter((c) => c.startsWith('heartbeat'))).toEqual(['heartbeat 9']);
    expect([given.lost, giving.lost, kept.lost]).toEqual([undefined, undefined, undefined]);
    expect(t.lost).toEqual([]);
  });

  it('aborts a running job whose fence was taken over and stops renewing its target group', async () => {
    const t = context();
    const job = await activeJob(t, 'a', 'active');
    t.workLeases.steal(job.workId, NOW);
    const report = await renewLeases(t.ctx, [job], [], NOW + 1);
    expect(report).toEqual({ workOk: 0, workFailed: 1, targetOk: 0, targetFailed: 0 });
    expect(job.lost).toBe('work');
    expect(job.controller.signal.aborted).toBe(true);
    expect(t.lost).toEqual([`work:${job.workId}`]);
    expect(t.targetLeases.calls.filter((c) => c.startsWith('heartbeat'))).toEqual([]);
  });

  it('forgets a pending token the table refuses, and keeps one whose renewal failed with an I/O error', async () => {
    const t = context();
    const claim = async (name: string, target: bigint): Promise<PendingJob> => {
      const job = makeJob(name, target);
      const group = await t.targetLeases.claimGroup(job.group, {}, NOW);
      return { work: { job, owner: 1 }, targetToken: group.ok ? group.token : undefined, recovered: false };
    };
    const refused = await claim('p1', 21n);
    const unknown = await claim('p2', 22n);
    t.targetLeases.heartbeatScript = ['lost', 'error'];
    expect(await renewLeases(t.ctx, [], [refused, unknown], NOW + 1)).toEqual({ workOk: 0, workFailed: 0, targetOk: 0, targetFailed: 2 });
    expect(refused.targetToken).toBeUndefined();
    expect(unknown.targetToken).toBeDefined();
  });
});
