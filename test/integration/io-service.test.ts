// The I/O service run in-thread over the counting / fault-injecting fs layer: group commit,
// exact barrier counts, fault injection at every step of a batch, backpressure, mirror coherence.
import { describe, expect, it } from 'vitest';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { IoService } from '../../src/io/io-service.js';
import type { BatchClaimResult, TargetClaimResult } from '../../src/io/io-requests.js';
import { InflightTargetSet } from '../../src/inflight/inflight-target-set.js';
import { shardOf, targetRecordId } from '../../src/lease/identity.js';
import type { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { loadNative } from '../../src/native/bindings.js';
import { openTarget, openWork, S, snapshotTree, tempRoot } from '../helpers/lease-fixtures.js';
import { describeEachStore, type StoreContext } from '../helpers/lease-stores.js';

const T0 = 1_000_000;
const TTL = 10 * S;
const hasNative = loadNative() !== null;

function range(from: number, count: number): bigint[] {
  return Array.from({ length: count }, (_, i) => BigInt(from + i));
}

function granted(result: TargetClaimResult | BatchClaimResult | undefined): string {
  if (!result?.ok) throw new Error(`expected a grant, got ${JSON.stringify(result, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`);
  return result.token;
}

async function setup(options: { fileBarrier?: 'syncfs' | 'fsync'; shardCount?: number; queueCapacity?: number; inflight?: boolean; work?: boolean; store?: Record<string, unknown> } = {}) {
  const root = await tempRoot('symfence-io-');
  const fsLayer = new FaultInjectingFsLayer();
  const fileBarrier = options.fileBarrier ?? 'fsync';
  const target = await openTarget(`${root}/targets`, { shardCount: options.shardCount ?? 8, fileBarrier, leaseTtlMs: TTL, ...options.store }, { fsLayer });
  const work = options.work ? await openWork(`${root}/work`, { fileBarrier, ...options.store }, { fsLayer }) : null;
  const inflight = options.inflight === false ? null : InflightTargetSet.create(4096);
  const service = await IoService.start(
    {
      coordinatorId: 'coord-a',
      target,
      work,
      targetLeaseTtlMs: TTL,
      inflight,
      fsLayer,
      options: { fileBarrier, queueCapacity: options.queueCapacity ?? 1024 },
    },
    T0,
  );
  return { root, fsLayer, target, work, inflight, service };
}

/** Claims and releases every group once so shard directories and lock files exist. */
async function warmUp(service: IoService, groups: bigint[][]): Promise<void> {
  const claims = await Promise.all(groups.map((targets) => service.submit({ kind: 'claimGroup', targets, payload: {}, mirrorOwner: 1, nowMs: T0 })));
  await Promise.all(groups.map((targets, i) => service.submit({ kind: 'releaseGroup', targets, token: granted(claims[i]), nowMs: T0 })));
}

function shardsOf(targets: bigint[], shardCount: number): number {
  return new Set(targets.map((t) => shardOf(targetRecordId(t), shardCount))).size;
}

describe('I/O service group commit', () => {
  it('commits 20 concurrent 8-target claims in 8 shards with one batch: one file-barrier pass and one directory barrier per shard', async () => {
    const { service, fsLayer } = await setup({ fileBarrier: 'fsync' });
    const groups = Array.from({ length: 20 }, (_, i) => range(1 + i * 8, 8));
    await warmUp(service, groups);
    fsLayer.resetCounts();
    const before = service.stats().batches;
    const results = await Promise.all(groups.map((targets, i) => service.submit({ kind: 'claimGroup', targets, payload: { job: i }, mirrorOwner: i + 1, nowMs: T0 + 1 })));
    for (const result of results) granted(result);
    expect(service.stats().batches - before).toBe(1);
    const barriers = fsLayer.barriers();
    // 160 temp files made durable in ONE parallel pass, then one directory barrier per shard.
    expect(barriers.directory).toBe(shardsOf(groups.flat(), 8));
    expect(barriers.directory).toBe(8);
    expect(barriers.file).toBe(160);
    expect(barriers.filesystem).toBe(0);
    await service.close();
  });

  it.skipIf(!hasNative)('makes all temp files of a batch durable with a single syncfs when that strategy is chosen', async () => {
    const { service, fsLayer } = await setup({ fileBarrier: 'syncfs' });
    const groups = Array.from({ length: 20 }, (_, i) => range(1 + i * 8, 8));
    await warmUp(service, groups);
    fsLayer.resetCounts();
    const results = await Promise.all(groups.map((targets, i) => service.submit({ kind: 'claimGroup', targets, payload: {}, mirrorOwner: i + 1, nowMs: T0 + 1 })));
    for (const result of results) granted(result);
    expect(fsLayer.barriers()).toEqual({ file: 0, filesystem: 1, directory: 8 });
    await service.close();
  });

  it('answers no claim before its barrier pass completed', async () => {
    const { service, fsLayer } = await setup();
    await warmUp(service, [range(1, 8)]);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const atBarrier = new Promise<void>((resolve) => (entered = resolve));
    fsLayer.hook({ op: 'syncDirectory', run: async () => { entered(); await gate; } });
    let answered = false;
    const claim = service.submit({ kind: 'claimGroup', targets: range(1, 8), payload: {}, mirrorOwner: 1, nowMs: T0 }).then((r) => {
      answered = true;
      return r;
    });
    await atBarrier;
    await new Promise((resolve) => setImmediate(resolve));
    expect(answered).toBe(false);
    release();
    granted(await claim);
    expect(answered).toBe(true);
    await service.close();
  });

});

/** Every stored record's bytes, by id. */
async function storedState(store: StoreContext, root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const id of await store.storedIds(root)) out.set(id, (await store.readRaw(root, id))!.toString('base64'));
  return out;
}

describeEachStore('I/O service leases', (store) => {
  it('lets overlapping claims from many callers end with at most one holder per target', async () => {
    const { service, target } = await setup({ shardCount: 4, store: store.options() });
    let seed = 42;
    const random = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const groups = Array.from({ length: 30 }, () => {
      const set = new Set<bigint>();
      while (set.size < 6) set.add(BigInt(1 + random(40)));
      return [...set];
    });
    const results = await Promise.all(groups.map((targets, i) => service.submit({ kind: 'claimGroup', targets, payload: { i }, mirrorOwner: i + 1, nowMs: T0 })));
    const holders = new Map<bigint, number>();
    results.forEach((result, i) => {
      if (!result.ok) {
        expect(['conflict', 'local-conflict']).toContain(result.reason);
        return;
      }
      for (const t of groups[i]!) {
        expect(holders.has(t)).toBe(false);
        holders.set(t, i);
      }
    });
    expect(holders.size).toBeGreaterThan(0);
    const records = await target.snapshotRecords();
    for (const { record } of records) {
      const winner = holders.get(BigInt(record.target!));
      expect(winner).toBeDefined();
      expect(record.token).toBe((results[winner!] as { token: string }).token);
    }
    expect(records).toHaveLength(holders.size);
    await service.close();
  });

  it('holds a request that overlaps one already in the batch for the next batch, so a release sees its claim', async () => {
    const { service } = await setup({ store: store.options() });
    const targets = range(1, 4);
    const claim = service.submit({ kind: 'claimGroup', targets, payload: {}, mirrorOwner: 1, nowMs: T0 });
    const second = service.submit({ kind: 'claimGroup', targets, payload: {}, mirrorOwner: 2, nowMs: T0 });
    const token = granted(await claim);
    expect(await second).toMatchObject({ ok: false, reason: 'local-conflict' });
    expect(await service.submit({ kind: 'releaseGroup', targets, token, nowMs: T0 })).toEqual({ ok: true });
    await service.close();
  });

  it('fails only the request whose input is bad and commits the others of the batch', async () => {
    const { service } = await setup({ store: store.options() });
    const good = service.submit({ kind: 'claimGroup', targets: range(1, 4), payload: {}, mirrorOwner: 1, nowMs: T0 });
    const bad = service.submit({ kind: 'claimGroup', targets: [5n, 5n], payload: {}, mirrorOwner: 2, nowMs: T0 });
    const badOwner = service.submit({ kind: 'claimGroup', targets: [9n], payload: {}, mirrorOwner: 0, nowMs: T0 });
    const [goodResult, badResult, badOwnerResult] = await Promise.allSettled([good, bad, badOwner]);
    expect(goodResult).toMatchObject({ status: 'fulfilled', value: { ok: true } });
    expect(badResult).toMatchObject({ status: 'rejected', reason: { code: 'ERR_INVALID_JOB' } });
    expect(badOwnerResult).toMatchObject({ status: 'rejected', reason: { code: 'ERR_INVALID_OPTION' } });
    await service.close();
  });

  it('runs work and target requests of one batch, each table with one durability batch', async () => {
    const { service, fsLayer } = await setup({ work: true, store: store.options() });
    const workIds = Array.from({ length: 5 }, (_, i) => `${String(i).padStart(8, '0')}${'d'.repeat(56)}`);
    await warmUp(service, [range(1, 4)]);
    fsLayer.resetCounts();
    const before = service.stats().batches;
    const [claims, group] = await Promise.all([
      Promise.all(workIds.map((workId) => service.submit({ kind: 'claim', workId, payload: { workId }, nowMs: T0 }))),
      service.submit({ kind: 'claimGroup', targets: range(1, 4), payload: {}, mirrorOwner: 1, nowMs: T0 }),
    ]);
    granted(group);
    for (const claim of claims) expect(claim.ok).toBe(true);
    expect(service.stats().batches - before).toBe(1);
    const tokens = claims.map((c) => (c as { token: string }).token);
    const heartbeat = await service.submit({ kind: 'heartbeatMany', leases: workIds.map((id, i) => [id, tokens[i]!] as const), nowMs: T0 + 5 });
    expect(heartbeat.renewed).toEqual([...workIds].sort());
    expect(await service.submit({ kind: 'beginCommit', workId: workIds[0]!, token: tokens[0]!, nowMs: T0 + 6 })).toEqual({ ok: true });
    expect(await service.submit({ kind: 'completeOnce', workId: workIds[0]!, token: tokens[0]!, nowMs: T0 + 7 })).toBe('completed');
    expect(await service.submit({ kind: 'abandon', workId: workIds[1]!, token: tokens[1]! })).toEqual({ ok: true });
    expect(await service.submit({ kind: 'snapshotCounts', table: 'work', nowMs: T0 + 8 })).toMatchObject({ leased: 3, done: 1 });
    expect(await service.submit({ kind: 'recoverExpired', table: 'work', nowMs: T0 + 8 + TTL })).toHaveLength(3);
    await service.close();
  });

  it.skipIf(!store.failWrites)('keeps the negative and read-only answers of a batch whose commit failed', async () => {
    const { service, fsLayer, target, root } = await setup({ store: store.options() });
    const a = granted(await service.submit({ kind: 'claimGroup', targets: range(1, 4), payload: {}, mirrorOwner: 1, nowMs: T0 }));
    expect((await target.claimGroup([50n], {}, { owner: 'coord-b', nowMs: T0 })).ok).toBe(true);
    await warmUp(service, [range(10, 4)]);
    const lift = await store.failWrites!(`${root}/targets`, fsLayer);
    const before = service.stats().batches;
    const [claim, conflict, stale, counts] = await Promise.allSettled([
      service.submit({ kind: 'claimGroup', targets: range(10, 4), payload: {}, mirrorOwner: 2, nowMs: T0 + 1 }),
      service.submit({ kind: 'claimGroup', targets: [50n], payload: {}, mirrorOwner: 3, nowMs: T0 + 1 }),
      service.submit({ kind: 'heartbeatGroup', targets: range(1, 4), token: `${a}-not`, nowMs: T0 + 1 }),
      service.submit({ kind: 'snapshotCounts', table: 'target', nowMs: T0 + 1 }),
    ]);
    await lift();
    expect(service.stats().batches - before).toBe(1);
    expect(claim).toMatchObject({ status: 'rejected', reason: { code: 'ERR_LEASE_IO' } });
    expect(conflict).toMatchObject({ status: 'fulfilled', value: { ok: false, reason: 'conflict' } });
    expect(stale).toMatchObject({ status: 'fulfilled', value: { ok: false, reason: 'stale' } });
    expect(counts).toMatchObject({ status: 'fulfilled', value: { leased: 5 } });
    await service.close();
  });

  it.skipIf(!store.failWrites)('fails every writer of a batch whose commit failed and leaves the records of before the batch', async () => {
    const { service, fsLayer, root, inflight } = await setup({ store: store.options() });
    const a = granted(await service.submit({ kind: 'claimGroup', targets: range(1, 4), payload: {}, mirrorOwner: 1, nowMs: T0 }));
    const c = granted(await service.submit({ kind: 'claimGroup', targets: range(20, 4), payload: {}, mirrorOwner: 3, nowMs: T0 }));
    await warmUp(service, [range(10, 4)]);
    const before = await storedState(store, `${root}/targets`);
    const lift = await store.failWrites!(`${root}/targets`, fsLayer);
    const results = await Promise.allSettled([
      service.submit({ kind: 'claimGroup', targets: range(10, 4), payload: {}, mirrorOwner: 2, nowMs: T0 + 1 }),
      service.submit({ kind: 'heartbeatGroup', targets: range(1, 4), token: a, nowMs: T0 + 1 }),
      service.submit({ kind: 'releaseGroup', targets: range(20, 4), token: c, nowMs: T0 + 1 }),
    ]);
    await lift();
    for (const result of results) expect(result).toMatchObject({ status: 'rejected', reason: { code: 'ERR_LEASE_IO', details: { restored: true } } });
    expect(await storedState(store, `${root}/targets`)).toEqual(before);
    for (const t of range(10, 4)) expect(inflight!.has(t)).toBe(false);
    for (const t of range(1, 4)) expect(inflight!.ownerOf(t)).toBe(1);
    for (const t of range(20, 4)) expect(inflight!.ownerOf(t)).toBe(3);
    // The fence did not move: the held groups are still ours, and the service keeps working.
    expect(await service.submit({ kind: 'heartbeatGroup', targets: range(1, 4), token: a, nowMs: T0 + 2 })).toEqual({ ok: true });
    expect(await service.submit({ kind: 'releaseGroup', targets: range(20, 4), token: c, nowMs: T0 + 2 })).toEqual({ ok: true });
    granted(await service.submit({ kind: 'claimGroup', targets: range(10, 4), payload: {}, mirrorOwner: 2, nowMs: T0 + 2 }));
    await service.close();
  });
});

describe('I/O service fault injection (file store: every step of a batch)', () => {
  type Step = { name: string; rule: Parameters<FaultInjectingFsLayer['fail']>[0] };
  const steps: Step[] = [
    { name: 'temp write', rule: { op: 'write', path: '.tmp' } },
    { name: 'file barrier', rule: { op: 'fsync', path: '.tmp', nth: 3 } },
    { name: 'rename', rule: { op: 'rename', nth: 2 } },
    { name: 'directory barrier', rule: { op: 'syncDirectory' } },
    { name: 'unlink of a released record', rule: { op: 'unlink', path: '.json' } },
    { name: 'rename that took effect but reported failure', rule: { op: 'rename', nth: 3, when: 'after' } },
  ];

  for (const step of steps) {
    it(`fails the writers of the batch cleanly at the ${step.name}, leaving the bytes of before the batch`, async () => {
      const { service, fsLayer, root, inflight } = await setup();
      // Before: group A held (to heartbeat), group C held (to release).
      const a = granted(await service.submit({ kind: 'claimGroup', targets: range(1, 4), payload: {}, mirrorOwner: 1, nowMs: T0 }));
      const c = granted(await service.submit({ kind: 'claimGroup', targets: range(20, 4), payload: {}, mirrorOwner: 3, nowMs: T0 }));
      await warmUp(service, [range(10, 4)]);
      const before = await snapshotTree(`${root}/targets`);
      fsLayer.fail(step.rule);
      const results = await Promise.allSettled([
        service.submit({ kind: 'claimGroup', targets: range(10, 4), payload: {}, mirrorOwner: 2, nowMs: T0 + 1 }),
        service.submit({ kind: 'heartbeatGroup', targets: range(1, 4), token: a, nowMs: T0 + 1 }),
        service.submit({ kind: 'releaseGroup', targets: range(20, 4), token: c, nowMs: T0 + 1 }),
      ]);
      fsLayer.clearRules();
      // One durability batch per table: a failed commit fails every writer of it, with ERR_LEASE_IO.
      for (const result of results) {
        expect(result.status).toBe('rejected');
        expect((result as PromiseRejectedResult).reason).toMatchObject({ code: 'ERR_LEASE_IO' });
      }
      expect(await snapshotTree(`${root}/targets`)).toEqual(before);
      // Mirror: the failed claim left nothing; held groups stay mirrored (the leases are still ours).
      for (const t of range(10, 4)) expect(inflight!.has(t)).toBe(false);
      for (const t of range(1, 4)) expect(inflight!.ownerOf(t)).toBe(1);
      for (const t of range(20, 4)) expect(inflight!.ownerOf(t)).toBe(3);
      // The service keeps working after the failure.
      granted(await service.submit({ kind: 'claimGroup', targets: range(10, 4), payload: {}, mirrorOwner: 2, nowMs: T0 + 2 }));
      await service.close();
    });
  }

});

describe('I/O service backpressure', () => {
  it('keeps at most queueCapacity requests queued; further callers wait and are all answered', async () => {
    const { service, fsLayer } = await setup({ queueCapacity: 2 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const atBarrier = new Promise<void>((resolve) => (entered = resolve));
    fsLayer.hook({ op: 'syncDirectory', run: async () => { entered(); await gate; } });
    const first = service.submit({ kind: 'claimGroup', targets: [1n], payload: {}, mirrorOwner: 1, nowMs: T0 });
    await atBarrier;
    const more = Array.from({ length: 6 }, (_, i) => service.submit({ kind: 'claimGroup', targets: [BigInt(100 + i)], payload: {}, mirrorOwner: 1, nowMs: T0 }));
    await new Promise((resolve) => setImmediate(resolve));
    expect(service.queueLength).toBe(2);
    release();
    granted(await first);
    for (const result of await Promise.all(more)) granted(result);
    expect(service.queueLength).toBe(0);
    await service.close();
  });

  it('answers every queued request on close, then refuses new ones with ERR_QUEUE_CLOSED', async () => {
    const { service } = await setup();
    const pending = Array.from({ length: 5 }, (_, i) => service.submit({ kind: 'claimGroup', targets: [BigInt(i + 1)], payload: {}, mirrorOwner: 1, nowMs: T0 }));
    const closing = service.close();
    await service.close();
    await closing;
    for (const result of await Promise.all(pending)) granted(result);
    await expect(service.submit({ kind: 'claimGroup', targets: [99n], payload: {}, mirrorOwner: 1, nowMs: T0 })).rejects.toMatchObject({ code: 'ERR_QUEUE_CLOSED' });
  });
});

describe('I/O service mirror coherence', () => {
  it('puts a grant into the mirror under the request owner before answering, and a release takes it out', async () => {
    const { service, inflight } = await setup();
    const claim = service.submit({ kind: 'claimGroup', targets: range(1, 3), payload: {}, mirrorOwner: 7, nowMs: T0 });
    const token = granted(await claim);
    for (const t of range(1, 3)) expect(inflight!.ownerOf(t)).toBe(7);
    expect(service.stats().mirroredGroups).toBe(1);
    expect(await service.submit({ kind: 'releaseGroup', targets: range(1, 3), token, nowMs: T0 })).toEqual({ ok: true });
    expect(inflight!.size()).toBe(0);
  });

  it('accepts a group the caller reserved locally under the same owner, and leaves that reservation to the caller on a durable conflict', async () => {
    const { service, inflight, target } = await setup();
    const other = target as FencedTargetLeaseTable;
    // Another coordinator holds target 3.
    expect((await other.claimGroup([3n], {}, { owner: 'coord-b', nowMs: T0 })).ok).toBe(true);
    expect(inflight!.tryReserveGroup(range(1, 2), 5)).toBe(true);
    granted(await service.submit({ kind: 'claimGroup', targets: range(1, 2), payload: {}, mirrorOwner: 5, nowMs: T0 }));
    expect(inflight!.tryReserveGroup([3n, 4n], 6)).toBe(true);
    expect(await service.submit({ kind: 'claimGroup', targets: [3n, 4n], payload: {}, mirrorOwner: 6, nowMs: T0 })).toMatchObject({ ok: false, reason: 'conflict' });
    expect(inflight!.ownerOf(3n)).toBe(6);
    expect(inflight!.ownerOf(4n)).toBe(6);
    // Without a local reservation, the I/O thread's own reservation is dropped on a conflict.
    expect(await service.submit({ kind: 'claimGroup', targets: [3n, 8n], payload: {}, mirrorOwner: 9, nowMs: T0 })).toMatchObject({ ok: false, reason: 'local-conflict' });
    inflight!.releaseGroup([3n, 4n], 6);
    expect(await service.submit({ kind: 'claimGroup', targets: [3n, 8n], payload: {}, mirrorOwner: 9, nowMs: T0 })).toMatchObject({ ok: false, reason: 'conflict' });
    expect(inflight!.has(3n)).toBe(false);
    expect(inflight!.has(8n)).toBe(false);
    await service.close();
  });

  it('keeps a member in the mirror that a refused group of a request reserved and a later granted group of the same owner holds', async () => {
    const { service, inflight, target } = await setup();
    const input = 'ab'.repeat(32);
    // Branch 100 answered on the input.
    const first = granted(await service.submit({ kind: 'claimGroup', targets: [100n], payload: {}, mirrorOwner: 1, nowMs: T0 }));
    expect(await service.submit({ kind: 'releaseGroup', targets: [100n], token: first, answers: { input, settled: [100n] }, nowMs: T0 })).toEqual({ ok: true });
    // One request, two groups of one owner sharing member 5, nothing reserved by the caller.
    const results = await service.submit({
      kind: 'claimGroups',
      groups: [
        { targets: [100n, 5n], payload: {}, mirrorOwner: 1, input },
        { targets: [5n, 6n], payload: {}, mirrorOwner: 1, input },
      ],
      nowMs: T0 + 1,
    });
    expect(results[0]).toMatchObject({ ok: false, reason: 'answered' });
    // Those claims named their input: the target table scanned the answer records first.
    expect(service.stats()).toMatchObject({ answerScans: 1, answerScanFailures: 0 });
    const token = granted(results[1]);
    const leased = (await target.snapshotRecords()).filter((e) => e.record.status === 'leased').map((e) => e.record.target).sort();
    expect(leased).toEqual(['5', '6']);
    expect([inflight!.ownerOf(5n), inflight!.ownerOf(6n), inflight!.ownerOf(100n)]).toEqual([1, 1, 0]);
    expect(await service.submit({ kind: 'releaseGroup', targets: [5n, 6n], token, nowMs: T0 + 2 })).toEqual({ ok: true });
    expect(inflight!.size()).toBe(0);
  });

  it('refuses a group held by another local owner as local-conflict without touching the disk', async () => {
    const { service, inflight, root } = await setup();
    expect(inflight!.tryReserveGroup([2n], 4)).toBe(true);
    const before = await snapshotTree(`${root}/targets`);
    expect(await service.submit({ kind: 'claimGroup', targets: range(1, 3), payload: {}, mirrorOwner: 5, nowMs: T0 })).toEqual({ ok: false, reason: 'local-conflict', targets: [2n] });
    expect(await snapshotTree(`${root}/targets`)).toEqual(before);
    expect(inflight!.has(1n)).toBe(false);
    await service.close();
  });

  it('removes a group from the mirror when its heartbeat finds the lease lost', async () => {
    const { service, inflight, target } = await setup();
    const token = granted(await service.submit({ kind: 'claimGroup', targets: range(1, 3), payload: {}, mirrorOwner: 2, nowMs: T0 }));
    // Another coordinator takes the group over after expiry.
    expect((await target.claimGroup(range(1, 3), {}, { owner: 'coord-b', nowMs: T0 + TTL })).ok).toBe(true);
    expect(await service.submit({ kind: 'heartbeatGroup', targets: range(1, 3), token, nowMs: T0 + TTL / 2 })).toMatchObject({ ok: false, reason: 'stale' });
    expect(inflight!.size()).toBe(0);
    expect(service.stats().lostGroups).toBe(1);
    await service.close();
  });

  it('drops a grant whose heartbeats stopped for a whole TTL, and keeps a renewed one', async () => {
    const { service, inflight } = await setup();
    granted(await service.submit({ kind: 'claimGroup', targets: [1n], payload: {}, mirrorOwner: 2, nowMs: T0 }));
    const kept = granted(await service.submit({ kind: 'claimGroup', targets: [2n], payload: {}, mirrorOwner: 3, nowMs: T0 }));
    expect(await service.submit({ kind: 'heartbeatGroup', targets: [2n], token: kept, nowMs: T0 + TTL / 2 })).toEqual({ ok: true });
    expect(await service.submit({ kind: 'sweepExpired', nowMs: T0 + TTL - 1 })).toBe(0);
    expect(await service.submit({ kind: 'sweepExpired', nowMs: T0 + TTL })).toBe(1);
    expect(inflight!.has(1n)).toBe(false);
    expect(inflight!.ownerOf(2n)).toBe(3);
    await service.close();
  });

  it('rebuilds the mirror at start from this coordinator\'s live records only, with their owners', async () => {
    const { service, target, fsLayer } = await setup();
    granted(await service.submit({ kind: 'claimGroup', targets: range(1, 3), payload: {}, mirrorOwner: 5, nowMs: T0 }));
    granted(await service.submit({ kind: 'claimGroup', targets: [9n], payload: {}, mirrorOwner: 6, nowMs: T0 - TTL }));
    await service.close();
    expect((await target.claimGroup([20n], {}, { owner: 'coord-b', nowMs: T0 })).ok).toBe(true);
    const inflight = InflightTargetSet.create(64);
    const restarted = await IoService.start({ coordinatorId: 'coord-a', target, targetLeaseTtlMs: TTL, inflight, fsLayer }, T0 + 1);
    expect(range(1, 3).map((t) => inflight.ownerOf(t))).toEqual([5, 5, 5]);
    expect(inflight.has(9n)).toBe(false); // expired
    expect(inflight.has(20n)).toBe(false); // another coordinator's
    expect(restarted.stats().mirroredGroups).toBe(1);
    await restarted.close();
  });
});
