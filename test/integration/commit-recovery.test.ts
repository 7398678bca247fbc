// Closing the commit-crash window (docs/campaign.md "Commit recovery"): a result accepted by
// beginCommit whose owner dies before it is published and done is replayed from its staged
// findings — by the same coordinator id at its next start, by another only after the work TTL —
// published exactly once, and failing closed on a bad manifest or missing/altered bytes. Real
// lease table, I/O service and queue publisher, in-process, on a fault-injecting filesystem
// layer; a fake solver and an injected clock.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readFile, readdir, rmdir, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseStagedName, STAGED_DIR } from '../../src/commit/commit-manifest.js';
import { IoResultCommits } from '../../src/coordinator/adapters/io-result-commits.js';
import { IoWorkLeases } from '../../src/coordinator/adapters/io-lease-adapters.js';
import { Coordinator, type CoordinatorHooks } from '../../src/coordinator/coordinator.js';
import type { CommitScan, ResultCommits, SolverOutcome, TriagedInput } from '../../src/coordinator/ports.js';
import { jobWorkId } from '../../src/coordinator/work-identity.js';
import { IoDurableWriter } from '../../src/io/io-adapters.js';
import { FaultInjectingFsLayer, type FaultRule } from '../../src/fs/fault-fs-layer.js';
import { IoService } from '../../src/io/io-service.js';
import { LeaseLayout } from '../../src/lease/table-layout.js';
import { currentWriterTag, formatWriterTag } from '../../src/lease/temp-writer.js';
import type { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { createCounters, type CampaignCounters } from '../../src/telemetry/counters.js';
import { JobLogFile, readJobLog } from '../../src/telemetry/job-log.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { QueuePublisher } from '../../src/triage/queue-publisher.js';
import { FakeReservations, FakeSolver, FakeSource, ManualClock, makeJob } from '../helpers/coordinator-fakes.js';
import { LocalIoClient } from '../helpers/local-io-client.js';
import { openWork, S, tempRoot } from '../helpers/lease-fixtures.js';
import { describeEachStore, leaseStoreUnderTest, type LeaseStoreHooks } from '../helpers/lease-stores.js';

/**
 * The store the current describe block runs on (set in its beforeAll): every node of a scenario
 * opens its work table there. Staged findings live under the lease root on every store.
 */
let currentStore: (LeaseStoreHooks & { options(): Record<string, unknown> }) | undefined;
function storeOfTest(): LeaseStoreHooks & { options(): Record<string, unknown> } {
  if (!currentStore) throw new Error('no lease store selected for this block');
  return currentStore;
}

const TTL_MS = 10 * S;
const T0 = 5_000_000;
const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

const FOUND = [Buffer.from('interesting input one'), Buffer.from('interesting input two')];
const CRASHER = Buffer.from('crashing generated input');
const OUTCOME: SolverOutcome = {
  status: 'ok',
  elapsedMs: 5,
  generated: [
    ...FOUND.map((bytes): TriagedInput => ({ bytes, sha256: sha(bytes), interesting: true })),
    { bytes: Buffer.from('boring'), sha256: sha(Buffer.from('boring')), interesting: false },
    { bytes: CRASHER, sha256: sha(CRASHER), interesting: true, terminal: 'crash' },
  ],
};

interface Node {
  readonly coordinator: Coordinator;
  readonly solver: FakeSolver;
  readonly source: FakeSource;
  readonly counters: CampaignCounters;
  readonly service: IoService;
  readonly table: FencedWorkLeaseTable;
  readonly outDir: string;
  readonly fsLayer: FaultInjectingFsLayer;
  readonly commits: IoResultCommits;
}

/** One coordinator process: its own work-table handle, I/O service, queue and fakes. */
async function startNode(
  leaseRoot: string,
  outDir: string,
  id: string,
  clock: ManualClock,
  extra: { hooks?: CoordinatorHooks; recoverExpiredWork?: boolean; wrapCommits?: (commits: ResultCommits) => ResultCommits; jobLog?: JobLogFile } = {},
): Promise<Node> {
  const fsLayer = new FaultInjectingFsLayer();
  const table = await openWork(path.join(leaseRoot, 'work'), { leaseTtlMs: TTL_MS, fileBarrier: 'fsync', ...storeOfTest().options() }, { fsLayer });
  const service = await IoService.start({ coordinatorId: id, work: table, fsLayer, options: { fileBarrier: 'fsync' } }, T0);
  const client = new LocalIoClient(service);
  const publisher = await QueuePublisher.open(outDir, new IoDurableWriter(client));
  const commits = await IoResultCommits.open(leaseRoot, client, publisher, { fsLayer });
  const solver = new FakeSolver();
  const source = new FakeSource([]);
  const counters = createCounters();
  const coordinator = new Coordinator(
    { coordinatorId: id, workers: 1, workLeaseTtlMs: TTL_MS, maxPendingJobs: 8, recoverExpiredWork: extra.recoverExpiredWork ?? true },
    {
      clock,
      logger: silentLogger(),
      counters,
      workLeases: new IoWorkLeases(client),
      reservations: new FakeReservations(),
      solver,
      source,
      commits: extra.wrapCommits ? extra.wrapCommits(commits) : commits,
      ...(extra.hooks ? { hooks: extra.hooks } : {}),
      ...(extra.jobLog ? { jobLog: extra.jobLog } : {}),
    },
  );
  return { coordinator, solver, source, counters, service, table, outDir, fsLayer, commits };
}

/** A hook that holds the first committed job right after beginCommit (the owner "dies" there). */
function holdAfterBeginCommit(): { hooks: CoordinatorHooks; held: Promise<string>; release: () => void } {
  let onHeld!: (workId: string) => void;
  let release!: () => void;
  const held = new Promise<string>((resolve) => (onHeld = resolve));
  const gate = new Promise<void>((resolve) => (release = resolve));
  return {
    hooks: {
      afterBeginCommit: async ({ workId }) => {
        onHeld(workId);
        await gate;
      },
    },
    held,
    release,
  };
}

/** Runs one job on `node` up to the hold; resolves with its work id. */
async function commitAndHold(node: Node, held: Promise<string>, name = 'parent'): Promise<string> {
  const job = makeJob(name);
  node.source.queue.push({ job, owner: 1 });
  await node.coordinator.tick();
  await node.solver.started(1);
  node.solver.runs[0]!.resolve(OUTCOME);
  const workId = await held;
  expect(workId).toBe(jobWorkId(job));
  return workId;
}

async function contents(dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const name of names.filter((n) => n.startsWith('id:'))) out.push(sha(await readFile(path.join(dir, name))));
  return out.sort();
}

async function stagedNames(leaseRoot: string): Promise<string[]> {
  return (await readdir(path.join(leaseRoot, STAGED_DIR))).sort();
}

async function statusOf(table: FencedWorkLeaseTable, workId: string): Promise<string | undefined> {
  return (await table.snapshotRecords()).find((e) => e.id === workId)?.record.status;
}

const expectedQueue = FOUND.map(sha).sort();
const expectedCrashes = [sha(CRASHER)];

async function setup() {
  const root = await tempRoot('symfence-recovery-');
  return { root, leaseRoot: path.join(root, 'leases'), clock: new ManualClock(T0) };
}

/**
 * A node's commits whose next scan, once `serve(snapshot)` was called, returns that snapshot
 * instead of a fresh one; everything else goes to the real commits (bound: they hold private state).
 */
function staleScanOnce(): { wrapCommits: (inner: ResultCommits) => ResultCommits; serve(snapshot: CommitScan): void } {
  let stale: CommitScan | undefined;
  return {
    serve(snapshot) {
      stale = snapshot;
    },
    wrapCommits: (inner) =>
      new Proxy(inner, {
        get(target, property) {
          if (property === 'scan') {
            return async () => {
              const served = stale ?? (await target.scan());
              stale = undefined;
              return served;
            };
          }
          const value = Reflect.get(target, property, target) as unknown;
          return typeof value === 'function' ? value.bind(target) : value;
        },
      }),
  };
}

/** Coordinator `a` accepts a result (beginCommit) and is held there, alive, until `hold.release()`. */
async function ownerHeldAfterBeginCommit() {
  const { root, leaseRoot, clock } = await setup();
  const hold = holdAfterBeginCommit();
  const a = await startNode(leaseRoot, path.join(root, 'a'), 'a', clock, { hooks: hold.hooks });
  const workId = await commitAndHold(a, hold.held);
  return { root, leaseRoot, clock, hold, a, workId };
}

/** Coordinator `a` accepts a result (beginCommit) and dies before publishing it. */
async function ownerDiedAfterBeginCommit() {
  const { leaseRoot, clock, a: first, workId } = await ownerHeldAfterBeginCommit();
  await first.service.close(); // the process is gone; its job never continues
  return { leaseRoot, clock, outDir: first.outDir, first, workId };
}

describeEachStore('commit recovery', (store) => {
  beforeAll(() => {
    currentStore = store;
  });

  it('stages the findings durably before beginCommit and stores a manifest naming them by path relative to the lease root', async () => {
    const { leaseRoot, hold, a, workId } = await ownerHeldAfterBeginCommit();
    const record = (await a.table.snapshotRecords()).find((e) => e.id === workId)!.record;
    expect(record.status).toBe('committing');
    const items = (record.commit as { items: { kind: string; sha256: string; path: string }[] }).items;
    expect(items.map((i) => `${i.kind}:${i.sha256}`).sort()).toEqual([...expectedQueue.map((s) => `queue:${s}`), `crashes:${sha(CRASHER)}`].sort());
    for (const item of items) {
      expect(item.path).toBe(`staged/${workId}.${item.sha256}`);
      expect(sha(await readFile(path.join(leaseRoot, item.path)))).toBe(item.sha256);
    }
    // Nothing published yet: the owner is held between beginCommit and publication.
    expect(await contents(path.join(a.outDir, 'queue'))).toEqual([]);
    hold.release();
    await a.coordinator.settled();
    expect(await contents(path.join(a.outDir, 'queue'))).toEqual(expectedQueue);
    expect(await contents(path.join(a.outDir, 'crashes'))).toEqual(expectedCrashes);
    expect(await statusOf(a.table, workId)).toBe('done');
    expect(await stagedNames(leaseRoot)).toEqual([]);
    expect(a.counters).toMatchObject({ interesting: 2, crashes: 1, commitsReplayed: 0, commitPublishFailures: 0, stagingFailures: 0 });
    await a.service.close();
  });

  it('replays a result whose owner died after beginCommit when the same coordinator id starts again: findings exactly once, record done, staged files gone', async () => {
    const { leaseRoot, clock, outDir, workId } = await ownerDiedAfterBeginCommit();

    clock.advance(1); // well within the TTL: our own record needs no waiting
    const second = await startNode(leaseRoot, outDir, 'a', clock);
    await second.coordinator.tick(); // the first round scans and replays
    expect(await contents(path.join(outDir, 'queue'))).toEqual(expectedQueue);
    expect(await contents(path.join(outDir, 'crashes'))).toEqual(expectedCrashes);
    expect(await statusOf(second.table, workId)).toBe('done');
    expect(await stagedNames(leaseRoot)).toEqual([]);
    expect(second.counters).toMatchObject({ commitsReplayed: 1, commitReplayFailures: 0, interesting: 2, crashes: 1 });
    // The replayed findings were fed back like a finished job's.
    expect(second.source.observed.map((o) => o.workId)).toEqual([workId]);

    // Replaying again publishes nothing more.
    expect(await second.coordinator.recoverCommits()).toBe(0);
    expect(await contents(path.join(outDir, 'queue'))).toEqual(expectedQueue);
    await second.service.close();
  });

  it('journals a replayed result in jobs.jsonl exactly once, marked as a replay naming the original owner and the replayer', async () => {
    const { root, leaseRoot, clock, hold, a, workId } = await ownerHeldAfterBeginCommit();
    await mkdir(path.join(root, 'b'), { recursive: true });
    const journal = path.join(root, 'b', 'jobs.jsonl');
    const jobLog = new JobLogFile(journal);
    const b = await startNode(leaseRoot, path.join(root, 'b'), 'b', clock, { jobLog });
    clock.advance(TTL_MS);
    expect(await b.coordinator.recoverCommits()).toBe(1);
    // Scanning again (the record is done now) journals nothing more.
    expect(await b.coordinator.recoverCommits()).toBe(0);
    jobLog.close();
    const lines = readJobLog(journal).filter((j) => j.workId === workId);
    expect(lines).toEqual([
      { workId, targets: [], coordinator: 'b', owner: 'a', replay: true, startMs: T0 + TTL_MS, endMs: T0 + TTL_MS, status: 'ok', generated: 3, interesting: 2 },
    ]);
    hold.release();
    await a.coordinator.settled();
    await Promise.all([a.service.close(), b.service.close()]);
  });

  it('replays around a corrupt record elsewhere in the work table instead of stopping at it', async () => {
    const { leaseRoot, clock, outDir, first, workId } = await ownerDiedAfterBeginCommit();
    const damagedId = 'e'.repeat(64);
    await storeOfTest().writeRaw(first.table.root, damagedId, '{"schema": 1, "status": "le');
    const second = await startNode(leaseRoot, outDir, 'a', clock);
    await second.coordinator.tick();
    expect(second.counters).toMatchObject({ commitsReplayed: 1, commitReplayFailures: 0 });
    expect(await contents(path.join(outDir, 'queue'))).toEqual(expectedQueue);
    expect((await storeOfTest().readRaw(first.table.root, damagedId))?.toString('utf8')).toBe('{"schema": 1, "status": "le'); // fails closed: untouched
    const records = await second.table.snapshotRecords({ corrupt: 'skip' });
    expect(records.find((e) => e.id === workId)?.record.status).toBe('done');
    await expect(second.table.snapshotRecords()).rejects.toMatchObject({ code: 'ERR_LEASE_CORRUPT' }); // still reported
    await second.service.close();
  });

  it('retries at the next scan a replay that failed on an unreadable staged finding, and then publishes it', async () => {
    const { leaseRoot, clock, outDir, workId } = await ownerDiedAfterBeginCommit();
    // A staged finding that cannot be read for now (a directory in its place gives EISDIR).
    const staged = path.join(leaseRoot, STAGED_DIR, (await stagedNames(leaseRoot))[0]!);
    const bytes = await readFile(staged);
    await unlink(staged);
    await mkdir(staged);
    const second = await startNode(leaseRoot, outDir, 'a', clock);
    await second.coordinator.tick();
    expect(second.counters).toMatchObject({ commitsReplayed: 0, commitReplayFailures: 1 });
    expect(await statusOf(second.table, workId)).toBe('committing');
    await rmdir(staged);
    await writeFile(staged, bytes);
    expect(await second.coordinator.recoverCommits()).toBe(1);
    expect(await statusOf(second.table, workId)).toBe('done');
    expect(await contents(path.join(outDir, 'queue'))).toEqual(expectedQueue);
    expect(second.counters).toMatchObject({ commitsReplayed: 1, commitReplayFailures: 1 });
    await second.service.close();
  });

  it('lets another coordinator replay a committing record only after a whole work TTL without renewal, into its own queue', async () => {
    const { root, leaseRoot, clock, hold, a, workId } = await ownerHeldAfterBeginCommit();
    const b = await startNode(leaseRoot, path.join(root, 'b'), 'b', clock);

    clock.advance(TTL_MS - 1);
    expect(await b.coordinator.recoverCommits()).toBe(0);
    expect(await statusOf(b.table, workId)).toBe('committing');

    // The live owner renews its committing record: the TTL starts again.
    await a.coordinator.heartbeat();
    clock.advance(TTL_MS - 1);
    expect(await b.coordinator.recoverCommits()).toBe(0);
    expect(await contents(path.join(b.outDir, 'queue'))).toEqual([]);

    clock.advance(1); // a whole TTL of silence since the last renewal
    expect(await b.coordinator.recoverCommits()).toBe(1);
    expect(await contents(path.join(b.outDir, 'queue'))).toEqual(expectedQueue);
    expect(await contents(path.join(b.outDir, 'crashes'))).toEqual(expectedCrashes);
    expect(await statusOf(b.table, workId)).toBe('done');
    expect(b.counters.commitsReplayed).toBe(1);

    // The owner wakes up after all: the fenced publication answers `already`; it publishes and counts nothing.
    hold.release();
    await a.coordinator.settled();
    expect(await contents(path.join(a.outDir, 'queue'))).toEqual([]);
    expect(await contents(path.join(a.outDir, 'crashes'))).toEqual([]);
    expect(a.counters).toMatchObject({ interesting: 0, crashes: 0, commitPublishFailures: 0, jobsOk: 1 });
    expect(await stagedNames(leaseRoot)).toEqual([]);
    await Promise.all([a.service.close(), b.service.close()]);
  });

  it('lets exactly one of two coordinators racing to replay the same record publish it', async () => {
    const { root, leaseRoot, clock, a, workId } = await ownerHeldAfterBeginCommit();
    const b = await startNode(leaseRoot, path.join(root, 'b'), 'b', clock);
    const c = await startNode(leaseRoot, path.join(root, 'c'), 'c', clock);
    clock.advance(TTL_MS);
    const replayed = await Promise.all([b.coordinator.recoverCommits(), c.coordinator.recoverCommits()]);
    expect(replayed.sort()).toEqual([0, 1]);
    const queues = [...(await contents(path.join(b.outDir, 'queue'))), ...(await contents(path.join(c.outDir, 'queue')))].sort();
    expect(queues).toEqual(expectedQueue);
    expect(b.counters.commitsReplayed + c.counters.commitsReplayed).toBe(1);
    expect(b.counters.commitReplayFailures + c.counters.commitReplayFailures).toBe(0);
    expect(await statusOf(b.table, workId)).toBe('done');
    await Promise.all([a.service.close(), b.service.close(), c.service.close()]);
  });

  it('leaves a foreign committing record to its owner when the owner renewed it after the replayer\'s scan', async () => {
    const { root, leaseRoot, clock, hold, a, workId } = await ownerHeldAfterBeginCommit();
    const stale = staleScanOnce();
    const c = await startNode(leaseRoot, path.join(root, 'c'), 'c', clock, { wrapCommits: stale.wrapCommits });
    clock.advance(TTL_MS);
    const snapshot = await c.commits.scan(); // the owner looks silent in this snapshot …
    expect(snapshot.committing.map((r) => r.workId)).toEqual([workId]);
    stale.serve(snapshot);
    await a.coordinator.heartbeat(); // … but renews before the replay takes the lock
    expect(await c.coordinator.recoverCommits()).toBe(0);
    expect(c.counters).toMatchObject({ commitsReplayed: 0, commitReplayFailures: 0 });
    expect(await contents(path.join(c.outDir, 'queue'))).toEqual([]);
    expect(await statusOf(a.table, workId)).toBe('committing');
    hold.release();
    await a.coordinator.settled();
    expect(await contents(path.join(a.outDir, 'queue'))).toEqual(expectedQueue);
    expect(a.counters.interesting).toBe(2);
    await Promise.all([a.service.close(), c.service.close()]);
  });

  it('does not count a replay whose staged copies vanished because another coordinator finished the record after the scan', async () => {
    const { root, leaseRoot, clock, a, workId } = await ownerHeldAfterBeginCommit();
    // C's first scan is served from a snapshot read before B finished the record.
    const stale = staleScanOnce();
    const c = await startNode(leaseRoot, path.join(root, 'c'), 'c', clock, { wrapCommits: stale.wrapCommits });
    const b = await startNode(leaseRoot, path.join(root, 'b'), 'b', clock);
    clock.advance(TTL_MS);
    const snapshot = await b.commits.scan();
    expect(snapshot.committing.map((r) => r.workId)).toEqual([workId]);
    stale.serve(snapshot);
    expect(await b.coordinator.recoverCommits()).toBe(1);
    expect(await c.coordinator.recoverCommits()).toBe(0);
    expect(c.counters).toMatchObject({ commitReplayFailures: 0, commitsReplayed: 0 });
    expect(await contents(path.join(c.outDir, 'queue'))).toEqual([]);
    expect(await statusOf(c.table, workId)).toBe('done');
    await Promise.all([a.service.close(), b.service.close(), c.service.close()]);
  });

  it('never replays another coordinator\'s record when taking over expired work is disabled', async () => {
    const { root, leaseRoot, clock, a, workId } = await ownerHeldAfterBeginCommit();
    const b = await startNode(leaseRoot, path.join(root, 'b'), 'b', clock, { recoverExpiredWork: false });
    clock.advance(10 * TTL_MS);
    expect(await b.coordinator.recoverCommits()).toBe(0);
    expect(await statusOf(b.table, workId)).toBe('committing');
    await Promise.all([a.service.close(), b.service.close()]);
  });

  describe('fails closed, counts and keeps running', () => {
    async function deadOwnerThen(corrupt: (ctx: { leaseRoot: string; workId: string; table: FencedWorkLeaseTable }) => Promise<void>) {
      const { leaseRoot, clock, outDir, workId } = await ownerDiedAfterBeginCommit();
      const second = await startNode(leaseRoot, outDir, 'a', clock);
      await corrupt({ leaseRoot, workId, table: second.table });
      await second.coordinator.tick();
      expect(second.counters).toMatchObject({ commitsReplayed: 0, commitReplayFailures: 1, interesting: 0 });
      expect(await statusOf(second.table, workId)).toBe('committing');
      expect(await contents(path.join(outDir, 'queue'))).toEqual([]);
      // A bad record cannot heal by itself: the next scan skips it instead of reporting it again.
      expect(await second.coordinator.recoverCommits()).toBe(0);
      expect(second.counters.commitReplayFailures).toBe(1);
      // Still running: a fresh job goes all the way to done.
      second.source.queue.push({ job: makeJob('next'), owner: 2 });
      await second.coordinator.tick();
      await second.solver.started(1);
      second.solver.runs[0]!.resolve({ status: 'ok', generated: [], elapsedMs: 1 });
      await second.coordinator.settled();
      expect(await statusOf(second.table, jobWorkId(makeJob('next')))).toBe('done');
      expect(second.counters.jobsOk).toBe(1);
      await second.service.close();
    }

    it('a staged finding that is missing', async () => {
      await deadOwnerThen(async ({ leaseRoot, workId }) => {
        const name = (await stagedNames(leaseRoot)).find((n) => parseStagedName(n)?.workId === workId)!;
        await unlink(path.join(leaseRoot, STAGED_DIR, name));
      });
    });

    it('a staged finding whose bytes do not match its SHA-256', async () => {
      await deadOwnerThen(async ({ leaseRoot }) => {
        const name = (await stagedNames(leaseRoot))[0]!;
        const file = path.join(leaseRoot, STAGED_DIR, name);
        const bytes = await readFile(file);
        bytes[0] = bytes[0]! ^ 0xff; // same size, other content
        await writeFile(file, bytes);
      });
    });

    it('a manifest of another schema', async () => {
      await deadOwnerThen(async ({ workId, table }) => {
        const record = (await table.snapshotRecords()).find((e) => e.id === workId)!.record;
        // Rewrite the committing record's manifest in place (same token, as a corrupting writer would).
        const stored = JSON.parse((await storeOfTest().readRaw(table.root, workId))!.toString('utf8')) as Record<string, unknown>;
        await storeOfTest().writeRaw(table.root, workId, JSON.stringify({ ...stored, commit: { ...(record.commit as object), schema: 'symfence-commit/99' } }));
      });
    });

    it('a manifest naming a path outside staged/', async () => {
      await deadOwnerThen(async ({ workId, table }) => {
        const stored = JSON.parse((await storeOfTest().readRaw(table.root, workId))!.toString('utf8')) as { commit: { items: { path: string }[] } };
        stored.commit.items[0]!.path = '../../etc/passwd';
        await storeOfTest().writeRaw(table.root, workId, JSON.stringify(stored));
      });
    });
  });

  describe('a fault at each step of staging leaves no committing record and no staged name, and the kept result commits once staging works', () => {
    const steps: Array<[string, FaultRule]> = [
      ['write', { op: 'write', path: `/${STAGED_DIR}/` }],
      ['file barrier', { op: 'fsync', path: `/${STAGED_DIR}/` }],
      ['rename', { op: 'rename', path: `/${STAGED_DIR}/` }],
      ['rename (took effect, then failed)', { op: 'rename', path: `/${STAGED_DIR}/`, when: 'after' }],
      ['directory barrier', { op: 'syncDirectory', path: (p: string) => p.endsWith(`/${STAGED_DIR}`) }],
    ];
    for (const [step, rule] of steps) {
      it(step, async () => {
        const { root, leaseRoot, clock } = await setup();
        let onHeld!: () => void;
        const held = new Promise<void>((resolve) => (onHeld = resolve));
        const a = await startNode(leaseRoot, path.join(root, 'a'), 'a', clock, { hooks: { resultHeld: () => onHeld() } });
        a.fsLayer.fail(rule);
        const job = makeJob('parent');
        a.source.queue.push({ job, owner: 1 });
        await a.coordinator.tick();
        await a.solver.started(1);
        a.solver.runs[0]!.resolve(OUTCOME);
        await held;
        // Staging failed: nothing points at missing bytes, and nothing half-staged is left.
        expect(await a.table.snapshotCounts({ nowMs: clock.now() })).toMatchObject({ leased: 1, committing: 0, done: 0 });
        expect((await stagedNames(leaseRoot)).filter((n) => parseStagedName(n) !== null || n.endsWith('.tmp'))).toEqual([]);
        expect(await contents(path.join(a.outDir, 'queue'))).toEqual([]);
        // The result was kept, not the run lost: once staging works, the retry commits it.
        a.fsLayer.clearRules();
        clock.advance(1000);
        await a.coordinator.tick();
        await a.coordinator.settled();
        expect(a.solver.runs).toHaveLength(1);
        expect(await statusOf(a.table, jobWorkId(job))).toBe('done');
        expect(await contents(path.join(a.outDir, 'queue'))).toEqual(expectedQueue);
        expect(a.counters).toMatchObject({ stagingFailures: 0, commitRetries: 1, jobsOk: 1 });
        await a.service.close();
      });
    }
  });

  it('sweeps staged files left behind by a crash after completion once the work has been done for a TTL, keeping those of live work', async () => {
    const { root, leaseRoot, clock } = await setup();
    const a = await startNode(leaseRoot, path.join(root, 'a'), 'a', clock);
    const job = makeJob('parent');
    a.source.queue.push({ job, owner: 1 });
    await a.coordinator.tick();
    await a.solver.started(1);
    a.solver.runs[0]!.resolve(OUTCOME);
    await a.coordinator.settled();
    const doneId = jobWorkId(job);
    const liveId = 'f'.repeat(64);
    const leftover = `${doneId}.${'1'.repeat(64)}`;
    const live = `${liveId}.${'2'.repeat(64)}`;
    await mkdir(path.join(leaseRoot, STAGED_DIR), { recursive: true });
    await writeFile(path.join(leaseRoot, STAGED_DIR, leftover), 'x');
    await writeFile(path.join(leaseRoot, STAGED_DIR, live), 'y');
    // Just done: a scan without locks cannot tell it from a completion its batch may still roll back.
    await a.coordinator.recoverCommits();
    expect(await stagedNames(leaseRoot)).toEqual([leftover, live].sort());
    expect(a.counters.stagedSwept).toBe(0);
    clock.advance(TTL_MS);
    await a.coordinator.recoverCommits();
    expect(await stagedNames(leaseRoot)).toEqual([live]);
    expect(a.counters.stagedSwept).toBe(1);
    await a.service.close();
  });
});

describe('commit recovery (file store: leftover record temps in shard directories)', () => {
  beforeAll(() => {
    currentStore = { ...leaseStoreUnderTest('files'), options: () => ({ store: 'files' }) };
  });

  it('sweeps the leftover temps of a dead writer at its first recovery scan (tables once, staged/ every scan), keeping a live writer\'s, and counts them', async () => {
    const { root, leaseRoot, clock } = await setup();
    const a = await startNode(leaseRoot, path.join(root, 'a'), 'a', clock);
    const self = currentWriterTag();
    const dead = formatWriterTag({ ...self, pid: spawnSync(process.execPath, ['-e', '']).pid! });
    const layout = new LeaseLayout(path.join(leaseRoot, 'work'), 4);
    const tableTemp = (tag: string, c: string) => `${layout.recordPath(c.repeat(64))}.${tag}.7.tmp`;
    const stagedTemp = (tag: string, n: number) => path.join(leaseRoot, STAGED_DIR, `.symfence-io-${tag}-${n}.tmp`);
    const files = [tableTemp(dead, 'a'), tableTemp(formatWriterTag(self), 'b'), stagedTemp(dead, 1), stagedTemp(formatWriterTag(self), 2)];
    for (const file of files) {
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, 'partial');
    }
    const present = async () => {
      const out: string[] = [];
      for (const f of files) if (await readFile(f).then(() => true, () => false)) out.push(f);
      return out;
    };
    await a.coordinator.tick(); // the first round runs the recovery scan
    expect(await present()).toEqual([files[1], files[3]]);
    expect(a.counters.tempsSwept).toBe(2);

    // Later scans look at staged/ only: a table temp left now waits for the next start (or `leases check`).
    const later = [tableTemp(dead, 'c'), stagedTemp(dead, 3)];
    for (const file of later) {
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, 'partial');
    }
    await a.coordinator.recoverCommits();
    expect(await readFile(later[0]!, 'utf8')).toBe('partial');
    await expect(readFile(later[1]!)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(a.counters.tempsSwept).toBe(3);
    await a.service.close();
  });
});
