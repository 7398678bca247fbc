import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TargetLeaseAdapter, WorkLeaseAdapter } from '../../src/coordinator/adapters/lease-adapters.js';
import { SchedulerAdapter } from '../../src/coordinator/adapters/scheduler-adapter.js';
import { Coordinator, RECOVERY_OWNER } from '../../src/coordinator/coordinator.js';
import { untargetedJob } from '../../src/coordinator/seed-work-source.js';
import { jobWorkId, workPayloadOf } from '../../src/coordinator/work-identity.js';
import { InflightTargetSet } from '../../src/inflight/inflight-target-set.js';
import { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { parseTelemetry, type Telemetry } from '../../src/scheduler/telemetry.js';
import { toErrorData } from '../../src/errors.js';
import { createCounters } from '../../src/telemetry/counters.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { FakeSolver, FakeSource, ManualClock, makeJob, sha } from '../helpers/coordinator-fakes.js';
import { leaseTableRecords, MemoryResultCommits } from '../helpers/memory-result-commits.js';

const TTL_MS = 10_000;
const dirs: string[] = [];
function tmp(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-adapt-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function tables(root = tmp()) {
  const opts = { leaseTtlMs: TTL_MS, coordination: 'single', shardCount: 4 } as const;
  const work = await FencedWorkLeaseTable.open(path.join(root, 'work'), opts);
  const targets = await FencedTargetLeaseTable.open(path.join(root, 'targets'), opts);
  return { work, targets, mine: new WorkLeaseAdapter(work, 'me'), theirs: new WorkLeaseAdapter(work, 'them'), myTargets: new TargetLeaseAdapter(targets, 'me'), theirTargets: new TargetLeaseAdapter(targets, 'them') };
}

describe('WorkLeaseAdapter over FencedWorkLeaseTable', () => {
  it('maps claim, conflict, heartbeat loss, beginCommit, complete and done', async () => {
    const { mine, theirs } = await tables();
    const job = makeJob('a');
    const id = jobWorkId(job);
    const claim = await mine.claim(id, workPayloadOf(job), 1_000);
    expect(claim.ok).toBe(true);
    expect(await theirs.claim(id, workPayloadOf(job), 2_000)).toEqual({ ok: false, reason: 'conflict' });
    const token = claim.ok ? claim.token : '';
    expect([...(await mine.heartbeatMany(new Map([[id, token], [sha('nope'), 'x:1']]), 3_000))]).toEqual([sha('nope')]);
    expect(await mine.beginCommit(id, 'stale-token', 3_000)).toBe(false);
    expect(await mine.beginCommit(id, token, 3_000, { schema: 'manifest' })).toBe(true);
    expect(await mine.abandon(id, token)).toBe(false); // committing cannot be abandoned
    expect(await mine.complete(id, token, 3_500)).toBe(true);
    expect(await theirs.claim(id, workPayloadOf(job), 1_000_000)).toEqual({ ok: false, reason: 'done', finished: { owner: 'me' } });
    expect(await theirs.claim(id, workPayloadOf(job), 1_000_000, { doneCommit: true })).toEqual({ ok: false, reason: 'done', finished: { owner: 'me', commit: { schema: 'manifest' } } });
  });

  it('hands out expired work with its payload, which another owner can then claim', async () => {
    const { mine, theirs } = await tables();
    const job = makeJob('orphan', 7n);
    const id = jobWorkId(job);
    expect((await mine.claim(id, workPayloadOf(job), 1_000)).ok).toBe(true);
    expect(await theirs.recoverExpired(10, 1_000 + TTL_MS - 1)).toEqual([]);
    const expired = await theirs.recoverExpired(10, 1_000 + TTL_MS);
    expect(expired).toEqual([{ workId: id, payload: expect.objectContaining({ path: job.inputPath, target: '7' }) }]);
    expect((await theirs.claim(id, workPayloadOf(job), 1_000 + TTL_MS)).ok).toBe(true);
  });
});

describe('TargetLeaseAdapter over FencedTargetLeaseTable', () => {
  it('claims groups all-or-nothing, fences heartbeat and release by token', async () => {
    const { myTargets, theirTargets } = await tables();
    const claim = await myTargets.claimGroup([11n, 22n], {}, 1_000);
    expect(claim.ok).toBe(true);
    const token = claim.ok ? claim.token : '';
    expect(await theirTargets.claimGroup([22n, 33n], {}, 1_500)).toEqual({ ok: false, reason: 'conflict' });
    expect((await theirTargets.claimGroup([33n], {}, 1_500)).ok).toBe(true); // 33 was not half-taken
    expect(await myTargets.heartbeatGroup([11n, 22n], 'other', 2_000)).toBe(false);
    expect(await myTargets.heartbeatGroup([11n, 22n], token, 2_000)).toBe(true);
    expect(await theirTargets.releaseGroup([11n, 22n], 'other')).toBe(false);
    expect(await myTargets.releaseGroup([11n, 22n], token)).toBe(true);
  });

  it('answers one outcome per group for the scheduler’s batched claim', async () => {
    const { myTargets, theirTargets } = await tables();
    await theirTargets.claimGroup([5n], {}, 1_000);
    const outcomes = await myTargets.claimGroups([[4n], [5n, 6n], [6n]], 1_000);
    expect(outcomes.map((o) => o.ok)).toEqual([true, false, true]);
    await myTargets.releaseGroups(outcomes.flatMap((o, i) => (o.ok ? [{ targets: [[4n], [5n, 6n], [6n]][i]!, token: o.token }] : [])));
    expect((await theirTargets.claimGroup([4n, 6n], {}, 1_000)).ok).toBe(true);
  });
});

function telemetry(open: bigint[], trace: Array<[bigint, bigint, bigint, number, 0 | 1]>): Telemetry {
  return parseTelemetry({
    schema: 'symfence-telemetry/1',
    targetBranch: '0',
    targetReached: false,
    targetStatus: 'none',
    branchTrace: trace.map(([p, a, o, s, t]) => [String(p), String(a), String(o), String(s), t, 0]),
    openBranches: open.map(String),
    counters: { queries: 0, sat: 0, unsat: 0, unknown: 0, solverTimeUs: 0, generated: 0 },
  });
}

describe('SchedulerAdapter', () => {
  function setup(frontierTargets?: number) {
    const dir = tmp();
    const seedPath = path.join(dir, 'seed');
    writeFileSync(seedPath, 'AAAA');
    const inflight = InflightTargetSet.create(256);
    const scheduler = new Scheduler({ local: inflight, ...(frontierTargets !== undefined ? { options: { frontierTargets } } : {}) });
    const adapter = new SchedulerAdapter(scheduler, inflight);
    const seed = { path: seedPath, sha256: sha('AAAA'), depth: 2, origin: 'seed' as const };
    return { scheduler, inflight, adapter, seed };
  }

  it('asks a later claim of a job\'s group what its lane\'s admission asked: a question the campaign gave up on refuses the re-claim of work taken over', async () => {
    const { adapter, seed } = setup();
    const root = tmp();
    const table = await FencedTargetLeaseTable.open(path.join(root, 'targets'), { coordination: 'single', leaseTtlMs: 10_000 });
    try {
      const other = new TargetLeaseAdapter(table, 'other');
      const me = new TargetLeaseAdapter(table, 'me');
      const policy = { baseMs: 30_000, maxAttempts: 3 };
      // Another coordinator's runs left (seed, 77) open three times: given up campaign-wide.
      let now = 1_000_000;
      for (let i = 0; i < 3; i += 1) {
        const [held] = await other.claimGroups([[77n]], now, [{ input: seed.sha256, backoff: policy }]);
        if (!held?.ok) throw new Error('setup claim refused');
        expect(await other.releaseGroup([77n], held.token, now + 1, { input: seed.sha256, settled: [], open: [77n] })).toBe(true);
        now += 600_000;
      }
      const job = { ...makeJob('x', 77n), inputPath: seed.path, inputSha256: seed.sha256 };
      // Taken over from an expired lease: its lane is unknown, so it asks its input and the back-off.
      const recovered = adapter.claimAsk({ ...job, origin: 'recovered' });
      expect(recovered).toEqual({ input: seed.sha256, backoff: policy });
      expect(await me.claimGroup([77n], { path: seed.path }, now, recovered)).toMatchObject({ ok: false, reason: 'backoff' });
      // A frontier job asks any input too, as its admission did.
      expect(adapter.claimAsk({ ...job, origin: 'scheduler:frontier+hint' })).toEqual({ input: seed.sha256, anyInput: true, backoff: policy });
    } finally {
      await table.close();
    }
  });

  it('turns telemetry into admitted targeted jobs on the seed’s file, and releases them through the scheduler', async () => {
    const { scheduler, inflight, adapter, seed } = setup();
    adapter.addSeed(seed, 0);
    adapter.observe({ job: untargetedJob(seed), workId: 'w', status: 'ok', telemetry: telemetry([3n], [[1n, 2n, 3n, 4, 1]]), findings: [] }, 0);
    const admitted = await adapter.admit(4, 0);
    expect(admitted.length).toBeGreaterThan(0);
    const first = admitted[0]!;
    expect(first.job).toMatchObject({ inputPath: seed.path, inputSha256: seed.sha256, depth: 2 });
    expect(first.job.group.length).toBeGreaterThan(0);
    expect(first.job.origin).toMatch(/^scheduler:/);
    expect(inflight.has(first.job.group[0]!)).toBe(true);
    for (const a of admitted) adapter.releaseGroup(a.job.group, a.owner);
    expect(inflight.size()).toBe(0);
    expect(scheduler.stats().inflightTargets).toBe(0);
  });

  it('reopens a frontier job that never ran in its lane, and ignores hinted, untargeted and foreign jobs', async () => {
    const { scheduler, adapter, seed } = setup();
    adapter.addSeed(seed, 0);
    adapter.observe({ job: untargetedJob(seed), workId: 'w', status: 'ok', telemetry: telemetry([3n], [[1n, 2n, 3n, 4, 1]]), findings: [] }, 0);
    const frontier = scheduler.lane('frontier')!;
    expect(frontier.openOf(seed.sha256)).toEqual([3n]);
    const [admitted] = await adapter.admit(1, 0);
    expect(admitted!.job).toMatchObject({ origin: 'scheduler:frontier', group: [3n] });
    expect(frontier.openOf(seed.sha256)).toEqual([]);
    adapter.releaseGroup(admitted!.job.group, admitted!.owner);
    // A hint gave the job its target at dispatch, or it has none, or no lane made it: not the lane's to take back.
    adapter.reopen({ ...admitted!.job, origin: 'scheduler:frontier+hint' }, 1);
    adapter.reopen({ ...admitted!.job, group: [], targetBranch: 0n, actions: [] }, 1);
    adapter.reopen({ ...admitted!.job, origin: 'seed' }, 1);
    expect(frontier.openOf(seed.sha256)).toEqual([]);
    adapter.reopen(admitted!.job, 1);
    expect(frontier.openOf(seed.sha256)).toEqual([3n]);
    const [again] = await adapter.admit(1, 2);
    expect(again!.job.group).toEqual([3n]);
  });

  it('counts a back-fill when admission refused a candidate and admitted another', async () => {
    // One target per frontier job: the busy branch and the free one are separate candidates.
    const { inflight, scheduler, seed } = setup(1);
    const counters = createCounters();
    const adapter = new SchedulerAdapter(scheduler, inflight, counters);
    adapter.addSeed(seed, 0);
    adapter.observe({ job: untargetedJob(seed), workId: 'w', status: 'ok', telemetry: telemetry([3n, 6n], [[1n, 2n, 3n, 4, 1], [2n, 5n, 6n, 7, 1]]), findings: [] }, 0);
    expect(inflight.tryReserveGroup([3n], 999)).toBe(true); // busy elsewhere in this process
    // One slot; the top-ranked proposal targets the busy 3, so the admitted job is a back-fill.
    const admitted = await adapter.admit(1, 0);
    expect(admitted).toHaveLength(1);
    expect(admitted[0]!.job.group.includes(3n)).toBe(false);
    expect(scheduler.stats().admission.localConflicts).toBeGreaterThan(0);
    expect(counters.backFills).toBe(1);
    expect(scheduler.stats().admission.backFills).toBe(1);
  });

  it('hands a telemetry refusal to the scheduler, which counts it', () => {
    const { scheduler, adapter, seed } = setup();
    adapter.addSeed(seed, 0);
    let refusal: unknown;
    try {
      parseTelemetry('{"schema":"nope"}');
    } catch (error) {
      refusal = error;
    }
    adapter.observe({ job: untargetedJob(seed), workId: 'w', status: 'ok', telemetryError: toErrorData(refusal), findings: [] }, 0);
    expect(scheduler.stats().telemetryRejected).toBe(1);
  });

  it('drops a whole-run replay of an input whose whole run it committed, and admits one of an input that was only traced', async () => {
    const { adapter, seed } = setup();
    adapter.addSeed(seed, 0);
    const interesting = [{ kind: 'queue' as const, name: 'id:000001', path: '/q/id:000001', sha256: sha('found') }];
    // Nothing left open: the fallback lane's only job for this input is a replay of the whole run.
    adapter.observe({ job: untargetedJob(seed), workId: 'w', status: 'ok', telemetry: telemetry([], []), findings: interesting }, 0);
    expect(await adapter.admit(4, 0)).toEqual([]);
    expect(adapter.wholeRunReplaysDropped).toBe(1);

    const traced = { ...seed, path: `${seed.path}-traced`, sha256: sha('traced') };
    writeFileSync(traced.path, 'traced');
    adapter.addSeed(traced, 0);
    adapter.observe({ job: untargetedJob(traced, 'trace'), workId: 't', status: 'ok', telemetry: telemetry([], []), findings: interesting }, 0);
    const admitted = await adapter.admit(4, 0);
    expect(admitted.map((a) => [a.job.inputSha256, a.job.targetBranch, a.job.actions.length, a.job.mode])).toEqual([[traced.sha256, 0n, 0, undefined]]);
    expect(adapter.wholeRunReplaysDropped).toBe(1);
  });

  it('routes reservations it did not admit straight to the in-flight set', () => {
    const { inflight, adapter } = setup();
    expect(adapter.tryReserveGroup([9n], RECOVERY_OWNER)).toBe(true);
    expect(inflight.ownerOf(9n)).toBe(RECOVERY_OWNER);
    expect(adapter.releaseGroup([9n], RECOVERY_OWNER)).toBe(1);
    expect(inflight.has(9n)).toBe(false);
  });
});

describe('Coordinator over the real lease tables', () => {
  it('retires work taken over from a dead coordinator whose question the campaign gave up on meanwhile, instead of taking it over at every scan', async () => {
    const { work, targets, mine, myTargets } = await tables();
    const clock = new ManualClock(1_000_000);
    const policy = { baseMs: 1_000, maxAttempts: 3 };
    const job = { ...makeJob('a', 77n), origin: 'scheduler:prefix' };
    // A coordinator claims the group and the work, then dies.
    const [held] = await new TargetLeaseAdapter(targets, 'dead').claimGroups([job.group], clock.now(), [{ input: job.inputSha256, backoff: policy }]);
    expect(held?.ok).toBe(true);
    expect((await new WorkLeaseAdapter(work, 'dead').claim(jobWorkId(job), workPayloadOf(job), clock.now())).ok).toBe(true);
    // Its target lease expires; another coordinator's runs leave (input, 77) open three times: given up.
    const them = new TargetLeaseAdapter(targets, 'them');
    for (let i = 0; i < 3; i += 1) {
      clock.advance(2 * TTL_MS);
      const [claim] = await them.claimGroups([job.group], clock.now(), [{ input: job.inputSha256, backoff: policy }]);
      if (!claim?.ok) throw new Error(`setup claim refused: ${JSON.stringify(claim)}`);
      expect(await them.releaseGroup(job.group, claim.token, clock.now() + 1, { input: job.inputSha256, settled: [], open: [77n] })).toBe(true);
    }
    clock.advance(2 * TTL_MS);
    const solver = new FakeSolver();
    const source = new FakeSource([]);
    // What the scheduler adapter asks for work taken over (origin `recovered`): its input and the back-off.
    source.ask = (j) => ({ input: j.inputSha256, backoff: policy });
    const counters = createCounters();
    const coordinator = new Coordinator(
      { coordinatorId: 'me', workers: 1, workLeaseTtlMs: TTL_MS, targetLeaseTtlMs: TTL_MS, maxPendingJobs: 8, recoverExpiredWork: true },
      { clock, logger: silentLogger(), counters, workLeases: mine, targetLeases: myTargets, reservations: InflightTargetSet.create(64), solver, source, commits: new MemoryResultCommits(leaseTableRecords(work)) },
    );
    for (let i = 0; i < 10; i += 1) {
      await coordinator.tick();
      await coordinator.settled();
      clock.advance(TTL_MS);
    }
    expect(solver.runs).toHaveLength(0);
    expect(counters).toMatchObject({ dispatchRollbacks: 1, recoveredRetired: 1 });
    expect(await work.snapshotCounts({ nowMs: clock.now() })).toMatchObject({ leased: 0, expired: 0, committing: 0, done: 0, corrupt: 0 });
  });

  it('runs a targeted job to done and releases its group with what the run left open, which another coordinator\'s claim then backs off from', async () => {
    const { mine, myTargets, theirTargets, targets, work } = await tables();
    const clock = new ManualClock(5_000);
    const inflight = InflightTargetSet.create(64);
    const solver = new FakeSolver();
    const job = makeJob('a', 77n, [88n]);
    expect(inflight.tryReserveGroup(job.group, 1)).toBe(true);
    const claim = await myTargets.claimGroup(job.group, {}, clock.now());
    const source = new FakeSource([{ job, owner: 1, ...(claim.ok ? { targetToken: claim.token } : {}) }]);
    const coordinator = new Coordinator(
      { coordinatorId: 'me', workers: 1, workLeaseTtlMs: TTL_MS, targetLeaseTtlMs: TTL_MS, maxPendingJobs: 8, recoverExpiredWork: true },
      { clock, logger: silentLogger(), counters: createCounters(), workLeases: mine, targetLeases: myTargets, reservations: inflight, solver, source, commits: new MemoryResultCommits(leaseTableRecords(work)) },
    );
    await coordinator.tick();
    expect(solver.runs).toHaveLength(1);
    clock.advance(100);
    // No telemetry: the run shows nothing answered, so both members were left open.
    solver.runs[0]!.resolve({ status: 'ok', generated: [], elapsedMs: 1 });
    await coordinator.settled();
    expect(await work.snapshotCounts({ nowMs: clock.now() })).toMatchObject({ leased: 0, committing: 0, done: 1, corrupt: 0 });
    expect(await targets.snapshotCounts({ nowMs: clock.now() })).toMatchObject({ leased: 0, done: 2, corrupt: 0 });
    // Both members' answer records (beside the answer generation record, which carries no answers).
    const answers = (await targets.snapshotRecords()).filter((e) => e.record.role === 'answers');
    expect(answers).toHaveLength(2);
    for (const e of answers) expect(e.record.open).toEqual([[job.inputSha256, 1, 5_100]]);
    expect(inflight.size()).toBe(0);
    // Another coordinator's admission asks the group on the same input with its back-off policy.
    const backoff = { baseMs: 1_000, maxAttempts: 3 };
    const [refused, other] = await theirTargets.claimGroups([job.group, [77n]], 5_500, [{ input: job.inputSha256, backoff }, { input: sha('b'), backoff }]);
    expect(refused).toMatchObject({ ok: false, reason: 'backoff', open: [{ target: 77n, attempts: 1, lastOpenMs: 5_100 }, { target: 88n, attempts: 1, lastOpenMs: 5_100 }] });
    expect(other?.ok).toBe(true);
  });
});
