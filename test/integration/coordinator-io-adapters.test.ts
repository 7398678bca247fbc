import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { IoTargetLeases, IoWorkLeases } from '../../src/coordinator/adapters/io-lease-adapters.js';
import { IoResultCommits } from '../../src/coordinator/adapters/io-result-commits.js';
import { Coordinator } from '../../src/coordinator/coordinator.js';
import { jobWorkId, workPayloadOf } from '../../src/coordinator/work-identity.js';
import { InflightTargetSet } from '../../src/inflight/inflight-target-set.js';
import { IoDurableWriter } from '../../src/io/io-adapters.js';
import { IoThread } from '../../src/io/io-thread.js';
import { createCounters } from '../../src/telemetry/counters.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { QueuePublisher } from '../../src/triage/queue-publisher.js';
import { FakeSolver, FakeSource, ManualClock, makeJob } from '../helpers/coordinator-fakes.js';

const TTL_MS = 10_000;
/** The I/O thread ages mirrored grants against the latest request time: use wall-clock times. */
const T0 = Date.now();
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function start() {
  const root = mkdtempSync(path.join(tmpdir(), 'symfence-ioadapt-'));
  const inflight = InflightTargetSet.create(256);
  const io = await IoThread.start({
    coordinatorId: 'me',
    workRoot: path.join(root, 'work'),
    targetRoot: path.join(root, 'targets'),
    leaseOptions: { leaseTtlMs: TTL_MS, coordination: 'single', shardCount: 4 },
    inflight,
  });
  cleanups.push(() => rmSync(root, { recursive: true, force: true }), () => io.close());
  return { root, io, inflight, work: new IoWorkLeases(io), targets: new IoTargetLeases(io, (g) => inflight.ownerOf(g[0]!)) };
}

describe('lease ports over the I/O thread', () => {
  it('maps the work lifecycle: claim, conflict, lost heartbeat, beginCommit, complete, done', async () => {
    const { work } = await start();
    const job = makeJob('a');
    const id = jobWorkId(job);
    const claim = await work.claim(id, workPayloadOf(job), T0);
    expect(claim.ok).toBe(true);
    const token = claim.ok ? claim.token : '';
    expect(await work.claim(id, workPayloadOf(job), T0 + 1_000)).toEqual({ ok: false, reason: 'conflict' });
    expect([...(await work.heartbeatMany(new Map([[id, 'stale:1']]), T0 + 1_000))]).toEqual([id]);
    expect(await work.beginCommit(id, token, T0 + 2_000, { schema: 'manifest' })).toBe(true);
    expect(await work.complete(id, token, T0 + 2_000)).toBe(true);
    expect(await work.claim(id, workPayloadOf(job), T0 + 10_000_000)).toEqual({ ok: false, reason: 'done', finished: { owner: 'me' } });
    expect(await work.claim(id, workPayloadOf(job), T0 + 10_000_000, { doneCommit: true })).toEqual({ ok: false, reason: 'done', finished: { owner: 'me', commit: { schema: 'manifest' } } });
  });

  it('re-claims a group the scheduler reserved locally under its own owner, and releases it from the mirror', async () => {
    const { targets, inflight } = await start();
    expect(inflight.tryReserveGroup([11n, 22n], 7)).toBe(true);
    const claim = await targets.claimGroup([11n, 22n], {}, T0);
    expect(claim.ok).toBe(true);
    expect(inflight.ownerOf(22n)).toBe(7);
    expect(await targets.heartbeatGroup([11n, 22n], claim.ok ? claim.token : '', T0 + 1_000)).toBe(true);
    expect(await targets.releaseGroup([11n, 22n], claim.ok ? claim.token : '', T0 + 1_000)).toBe(true);
    expect(inflight.has(11n)).toBe(false);
  });

  it('drives a coordinator job to done with every mutation through the I/O thread', async () => {
    const { root, work, targets, inflight, io } = await start();
    const commits = await IoResultCommits.open(root, io, await QueuePublisher.open(path.join(root, 'out'), new IoDurableWriter(io)));
    const clock = new ManualClock(T0);
    const solver = new FakeSolver();
    const job = makeJob('a', 77n, [88n]);
    expect(inflight.tryReserveGroup(job.group, 3)).toBe(true);
    const coordinator = new Coordinator(
      { coordinatorId: 'me', workers: 1, workLeaseTtlMs: TTL_MS, targetLeaseTtlMs: TTL_MS, maxPendingJobs: 8, recoverExpiredWork: false },
      { clock, logger: silentLogger(), counters: createCounters(), workLeases: work, targetLeases: targets, reservations: inflight, solver, source: new FakeSource([{ job, owner: 3 }]), commits },
    );
    await coordinator.tick(); // no pending token: claimed at dispatch
    expect(solver.runs).toHaveLength(1);
    solver.runs[0]!.resolve({ status: 'ok', generated: [], elapsedMs: 1 });
    await coordinator.settled();
    expect(await io.snapshotCounts('work', clock.now())).toMatchObject({ leased: 0, committing: 0, done: 1 });
    expect(await io.snapshotCounts('target', clock.now())).toMatchObject({ leased: 0 });
    expect(inflight.size()).toBe(0);
  });
});
