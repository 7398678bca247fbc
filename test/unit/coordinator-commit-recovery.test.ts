// Commit recovery through the production commit path in memory: committing records whose owner
// will not finish them are replayed from their staged copies, exactly once, and fail closed.
import { describe, expect, it } from 'vitest';
import { manifestJson, type CommitAnswers } from '../../src/commit/commit-manifest.js';
import { Coordinator } from '../../src/coordinator/coordinator.js';
import { jobWorkId, workPayloadOf } from '../../src/coordinator/work-identity.js';
import { createCounters } from '../../src/telemetry/counters.js';
import type { JobLogEntry } from '../../src/telemetry/job-log.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { FakeReservations, FakeSolver, FakeSource, FakeTargetLeases, FakeWorkLeases, ManualClock, makeJob, sha } from '../helpers/coordinator-fakes.js';
import { MemoryResultCommits } from '../helpers/memory-result-commits.js';

const TTL_MS = 30_000;

function setup(recoverExpiredWork = true) {
  const clock = new ManualClock();
  const targetLeases = new FakeTargetLeases(TTL_MS);
  const workLeases = new FakeWorkLeases(TTL_MS);
  const commits = new MemoryResultCommits(workLeases);
  const source = new FakeSource();
  const counters = createCounters();
  const jobs: JobLogEntry[] = [];
  const coordinator = new Coordinator(
    { coordinatorId: 'c1', workers: 1, workLeaseTtlMs: TTL_MS, maxPendingJobs: 8, recoverExpiredWork },
    {
      clock,
      logger: silentLogger(),
      counters,
      workLeases,
      targetLeases,
      reservations: new FakeReservations(),
      solver: new FakeSolver(),
      source,
      commits,
      jobLog: { append: (e) => jobs.push(e), close: () => {} },
    },
  );

  /** A result `owner` staged and passed beginCommit for, then never finished (it died); `answers`: what its manifest kept. */
  async function orphan(name: string, owner: string, answers?: CommitAnswers): Promise<string> {
    const job = makeJob(name, 5n);
    const workId = jobWorkId(job);
    const staged = await commits.stage(workId, [{ kind: 'queue', content: new TextEncoder().encode(`found by ${name}`) }], { status: 'ok', source: '000003', ...(answers !== undefined ? { answers } : {}) });
    workLeases.records.set(workId, { status: 'committing', token: `${owner}:1`, updatedMs: clock.now(), payload: workPayloadOf(job), owner, commit: manifestJson(staged.manifest) });
    return workId;
  }
  return { clock, workLeases, targetLeases, commits, source, counters, jobs, coordinator, orphan };
}

describe('commit recovery', () => {
  it('replays its own committing record of a previous life at the first tick: published once, done, journalled, staged copies gone', async () => {
    const t = setup();
    const workId = await t.orphan('a', 'c1');
    await t.coordinator.tick();
    expect(t.workLeases.records.get(workId)?.status).toBe('done');
    expect(t.commits.entries.map((e) => e.sha256)).toEqual([sha('found by a')]);
    expect(t.commits.staged.size).toBe(0);
    expect(t.counters).toMatchObject({ commitsReplayed: 1, interesting: 1, commitReplayFailures: 0 });
    expect(t.jobs).toEqual([expect.objectContaining({ workId, replay: true, owner: 'c1', coordinator: 'c1', status: 'ok', generated: 1, interesting: 1, targets: ['5'] })]);
    expect(t.source.observed.map((o) => o.workId)).toEqual([workId]);
    expect(await t.coordinator.recoverCommits()).toBe(0); // nothing left to replay
  });

  it('leaves another coordinator\'s committing record to it until it was silent a whole work TTL', async () => {
    const t = setup();
    const workId = await t.orphan('b', 'c2');
    expect(await t.coordinator.recoverCommits()).toBe(0);
    expect(t.workLeases.records.get(workId)?.status).toBe('committing');
    t.clock.advance(TTL_MS);
    expect(await t.coordinator.recoverCommits()).toBe(1);
    expect(t.workLeases.records.get(workId)?.status).toBe('done');
    expect(t.jobs).toEqual([expect.objectContaining({ workId, replay: true, owner: 'c2', coordinator: 'c1' })]);
  });

  it('never replays another coordinator\'s record without takeover of expired work', async () => {
    const t = setup(false);
    const workId = await t.orphan('b', 'c2');
    t.clock.advance(10 * TTL_MS);
    expect(await t.coordinator.recoverCommits()).toBe(0);
    expect(t.workLeases.records.get(workId)?.status).toBe('committing');
    expect(t.commits.entries).toEqual([]);
  });

  it('leaves a record with a missing staged copy committing and reports it once, not at every scan', async () => {
    const t = setup();
    const workId = await t.orphan('a', 'c1');
    t.commits.staged.clear();
    expect(await t.coordinator.recoverCommits()).toBe(0);
    expect(await t.coordinator.recoverCommits()).toBe(0);
    expect(t.workLeases.records.get(workId)?.status).toBe('committing');
    expect(t.counters).toMatchObject({ commitReplayFailures: 1, commitsReplayed: 0 });
    expect(t.jobs).toEqual([]);
  });

  it('retries after a failed publication, which leaves the record committing', async () => {
    const t = setup();
    const workId = await t.orphan('a', 'c1');
    t.commits.publishError = true;
    expect(await t.coordinator.recoverCommits()).toBe(0);
    expect(t.workLeases.records.get(workId)?.status).toBe('committing');
    expect(t.commits.entries).toEqual([]);
    t.commits.publishError = false;
    expect(await t.coordinator.recoverCommits()).toBe(1);
    expect(t.counters).toMatchObject({ commitReplayFailures: 1, commitsReplayed: 1, interesting: 1 });
  });

  it('writes the answers a manifest kept before it publishes the replayed result, under the token that asked', async () => {
    const t = setup();
    const kept = { input: sha('a'), token: 'c2:target-token', worker: 4, settled: [5n] };
    const workId = await t.orphan('a', 'c2', kept);
    const order: string[] = [];
    t.commits.beforePublish = () => {
      order.push(`publish after ${t.targetLeases.calls.join('+')}`);
    };
    t.clock.advance(TTL_MS);
    expect(await t.coordinator.recoverCommits()).toBe(1);
    expect(order).toEqual(['publish after record 5']);
    expect(t.targetLeases.recorded).toEqual([{ answers: { input: sha('a'), settled: [5n] }, writer: { owner: 'c2', token: 'c2:target-token', worker: 4 }, now: t.clock.now() }]);
    expect(t.workLeases.records.get(workId)?.status).toBe('done');
    expect(t.counters).toMatchObject({ commitsReplayed: 1, answersRecorded: 1, commitReplayFailures: 0 });
  });

  it('leaves a replay committing when its answers cannot be written, and publishes it once they are; a refusal does not hold the findings back', async () => {
    const t = setup();
    const kept = { input: sha('a'), token: 'c1:target-token', worker: 1, settled: [5n] };
    const workId = await t.orphan('a', 'c1', kept);
    t.targetLeases.recordError = true;
    expect(await t.coordinator.recoverCommits()).toBe(0);
    expect(t.workLeases.records.get(workId)?.status).toBe('committing');
    expect(t.commits.entries).toEqual([]);
    expect(t.counters).toMatchObject({ commitReplayFailures: 1, answersRecorded: 0 });
    t.targetLeases.recordError = false;
    expect(await t.coordinator.recoverCommits()).toBe(1);
    expect(t.counters).toMatchObject({ commitsReplayed: 1, answersRecorded: 1 });

    const refused = await t.orphan('b', 'c1', { ...kept, input: sha('b') });
    t.targetLeases.recordRefused = true;
    expect(await t.coordinator.recoverCommits()).toBe(1);
    expect(t.workLeases.records.get(refused)?.status).toBe('done');
    expect(t.counters).toMatchObject({ commitsReplayed: 2, answersRecorded: 1 });
  });

  it('fails closed on kept answers that name another input or a target outside the work\'s group: nothing written, nothing published', async () => {
    const t = setup();
    const foreign = await t.orphan('a', 'c1', { input: sha('zzz'), token: 'c1:tok', worker: 1, settled: [5n] });
    const outside = await t.orphan('b', 'c1', { input: sha('b'), token: 'c1:tok', worker: 1, settled: [5n, 6n] });
    expect(await t.coordinator.recoverCommits()).toBe(0);
    expect(await t.coordinator.recoverCommits()).toBe(0); // reported once, not at every scan
    for (const workId of [foreign, outside]) expect(t.workLeases.records.get(workId)?.status).toBe('committing');
    expect(t.targetLeases.recorded).toEqual([]);
    expect(t.commits.entries).toEqual([]);
    expect(t.counters).toMatchObject({ commitReplayFailures: 2, commitsReplayed: 0 });
  });

  it('writes a record\'s kept answers once while its publication keeps failing', async () => {
    const t = setup();
    const workId = await t.orphan('a', 'c1', { input: sha('a'), token: 'c1:tok', worker: 1, settled: [5n] });
    t.commits.publishError = true;
    for (let i = 0; i < 4; i++) expect(await t.coordinator.recoverCommits()).toBe(0);
    expect(t.workLeases.records.get(workId)?.status).toBe('committing');
    t.commits.publishError = false;
    expect(await t.coordinator.recoverCommits()).toBe(1);
    expect(t.targetLeases.recorded).toHaveLength(1);
    expect(t.counters).toMatchObject({ answersRecorded: 1, commitsReplayed: 1, commitReplayFailures: 4 });
  });

  it('counts an unreadable table as a replay failure and keeps running', async () => {
    const t = setup();
    await t.orphan('a', 'c1');
    t.commits.scanError = true;
    expect(await t.coordinator.recoverCommits()).toBe(0);
    expect(t.counters.commitReplayFailures).toBe(1);
  });

  it('sweeps the staged copies of work done for a whole work TTL, and only those', async () => {
    const t = setup();
    const done = await t.orphan('a', 'c1');
    t.workLeases.records.get(done)!.status = 'done'; // completed, then the owner died before discarding
    t.workLeases.records.get(done)!.completedMs = t.clock.now();
    const live = await t.orphan('b', 'c2');
    expect(await t.coordinator.recoverCommits()).toBe(0);
    expect(t.commits.staged.size).toBe(2);
    t.clock.advance(TTL_MS - 1);
    t.workLeases.records.get(live)!.updatedMs = t.clock.now(); // its owner is alive
    t.clock.advance(1);
    await t.coordinator.recoverCommits();
    expect([...t.commits.staged.keys()].map((name) => name.split('.')[0])).toEqual([live]);
    expect(t.counters.stagedSwept).toBe(1);
  });
});

