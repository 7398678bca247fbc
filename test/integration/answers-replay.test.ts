// A coordinator that dies between its commit and its group release loses none of its answers
// (docs/leases.md "Shared answers"): the commit manifest keeps what the run settled, and the
// coordinator that replays the record writes those answers before it publishes the findings, so a
// claim of the same question on the same input is refused `answered` from then on. Real lease
// tables on every store, the I/O service and queue publisher in-process; a fake solver and an
// injected clock.
import { createHash } from 'node:crypto';
import path from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { IoResultCommits } from '../../src/coordinator/adapters/io-result-commits.js';
import { IoTargetLeases, IoWorkLeases } from '../../src/coordinator/adapters/io-lease-adapters.js';
import { Coordinator, type CoordinatorHooks } from '../../src/coordinator/coordinator.js';
import type { SolverOutcome } from '../../src/coordinator/ports.js';
import { jobWorkId } from '../../src/coordinator/work-identity.js';
import { IoDurableWriter } from '../../src/io/io-adapters.js';
import { IoService } from '../../src/io/io-service.js';
import { answerRecordId } from '../../src/lease/identity.js';
import type { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import type { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { createCounters, type CampaignCounters } from '../../src/telemetry/counters.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { QueuePublisher } from '../../src/triage/queue-publisher.js';
import { FakeReservations, FakeSolver, FakeSource, ManualClock, makeJob, unsatTelemetry } from '../helpers/coordinator-fakes.js';
import { LocalIoClient } from '../helpers/local-io-client.js';
import { openTarget, openWork, S, tempRoot } from '../helpers/lease-fixtures.js';
import { describeEachStore, type StoreContext } from '../helpers/lease-stores.js';

const TTL_MS = 10 * S;
const T0 = 5_000_000;
const FOUND = Buffer.from('an input the run generated');
const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** A directed run at `branch` that proved it unsat and generated one interesting input. */
function answeredAt(branch: bigint): SolverOutcome {
  return {
    status: 'ok',
    elapsedMs: 5,
    generated: [{ bytes: FOUND, sha256: sha(FOUND), interesting: true }],
    telemetry: unsatTelemetry(branch, 1),
  };
}

interface Node {
  readonly coordinator: Coordinator;
  readonly solver: FakeSolver;
  readonly source: FakeSource;
  readonly counters: CampaignCounters;
  readonly service: IoService;
  readonly work: FencedWorkLeaseTable;
  readonly target: FencedTargetLeaseTable;
}

let store: StoreContext;

/** One coordinator process: its own table handles, I/O service, queue and fakes. */
async function startNode(leaseRoot: string, outDir: string, id: string, clock: ManualClock, hooks?: CoordinatorHooks): Promise<Node> {
  const options = { leaseTtlMs: TTL_MS, ...store.options() };
  const work = await openWork(path.join(leaseRoot, 'work'), options);
  const target = await openTarget(path.join(leaseRoot, 'targets'), options);
  const service = await IoService.start({ coordinatorId: id, work, target, targetLeaseTtlMs: TTL_MS }, T0);
  const client = new LocalIoClient(service);
  const publisher = await QueuePublisher.open(outDir, new IoDurableWriter(client));
  const commits = await IoResultCommits.open(leaseRoot, client, publisher);
  const solver = new FakeSolver();
  const source = new FakeSource([]);
  const counters = createCounters();
  const coordinator = new Coordinator(
    { coordinatorId: id, workers: 1, workLeaseTtlMs: TTL_MS, targetLeaseTtlMs: TTL_MS, maxPendingJobs: 8, recoverExpiredWork: true },
    {
      clock,
      logger: silentLogger(),
      counters,
      workLeases: new IoWorkLeases(client),
      targetLeases: new IoTargetLeases(client),
      reservations: new FakeReservations(),
      solver,
      source,
      commits,
      ...(hooks ? { hooks } : {}),
    },
  );
  return { coordinator, solver, source, counters, service, work, target };
}

describeEachStore('answers of a result whose owner died before its release', (context) => {
  beforeAll(() => {
    store = context;
  });

  it('are written by the replay before its publication, so the question is refused on that input from then on', async () => {
    const root = await tempRoot('symfence-answers-replay-');
    const leaseRoot = path.join(root, 'leases');
    const clock = new ManualClock(T0);
    let held!: (workId: string) => void;
    const reached = new Promise<string>((resolve) => (held = resolve));
    const a = await startNode(leaseRoot, path.join(root, 'a'), 'a', clock, {
      afterBeginCommit: async ({ workId }) => {
        held(workId);
        await new Promise<never>(() => {}); // the coordinator dies here: it never continues
      },
    });
    const job = makeJob('parent', 5n);
    a.source.queue.push({ job, owner: 1 });
    await a.coordinator.tick();
    await a.solver.started(1);
    a.solver.runs[0]!.resolve(answeredAt(5n));
    expect(await reached).toBe(jobWorkId(job));
    await a.service.close();

    // The answer is in the commit manifest only: the release never ran.
    const committing = (await a.work.snapshotRecords()).find((e) => e.id === jobWorkId(job))!.record;
    expect(committing.status).toBe('committing');
    expect(committing.commit).toMatchObject({ answers: { input: job.inputSha256, settled: ['5'] } });
    expect((await a.target.snapshotRecords()).some((e) => e.id === answerRecordId(5n))).toBe(false);
    const token = (committing.commit as { answers: { token: string } }).answers.token;

    // The same coordinator starts again: its record of the previous life is replayed at once.
    clock.advance(S);
    const b = await startNode(leaseRoot, path.join(root, 'b'), 'a', clock);
    await b.coordinator.tick();
    await b.coordinator.settled();
    expect(b.counters).toMatchObject({ commitsReplayed: 1, answersRecorded: 1, interesting: 1, commitReplayFailures: 0 });
    expect((await b.work.snapshotRecords()).find((e) => e.id === jobWorkId(job))!.record.status).toBe('done');
    const answer = (await b.target.snapshotRecords()).find((e) => e.id === answerRecordId(5n))!.record;
    expect(answer).toMatchObject({ role: 'answers', answered: true, settled: [job.inputSha256], owner: 'a', token });

    // Any coordinator asking branch 5 on that input is refused, whoever holds its lease now.
    const asker = await openTarget(path.join(leaseRoot, 'targets'), { leaseTtlMs: TTL_MS, ...store.options() });
    clock.advance(2 * TTL_MS);
    expect(await asker.claimGroup([5n], {}, { owner: 'c', nowMs: clock.now(), input: job.inputSha256 })).toEqual({ ok: false, reason: 'answered', answered: [5n] });
    const elsewhere = await asker.claimGroup([5n], {}, { owner: 'c', nowMs: clock.now(), input: 'e'.repeat(64) });
    expect(elsewhere.ok).toBe(true);
    await b.coordinator.stop();
    await b.service.close();
    for (const table of [a.work, a.target, b.work, b.target, asker]) await table.close();
  });
});
