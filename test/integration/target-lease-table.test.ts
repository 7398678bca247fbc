import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { canonicalJsonBytes } from '../../src/lease/canonical-json.js';
import { answerGenerationRecordId, answerRecordId, targetRecordId } from '../../src/lease/identity.js';
import type { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { S, bytesOf, exists, listFiles, openTarget, recordJson, recordFiles, snapshotTree, tempRoot } from '../helpers/lease-fixtures.js';
import { codeOfAsync as codeOf } from '../helpers/error-code.js';
import { describeEachStore, type StoreContext } from '../helpers/lease-stores.js';

function range(from: number, to: number): bigint[] {
  const out: bigint[] = [];
  for (let t = from; t <= to; t += 1) out.push(BigInt(t));
  return out;
}

function shardDirs(table: FencedTargetLeaseTable, targets: readonly bigint[]): string[] {
  return [...new Set(targets.map((t) => table.shardDirOf(targetRecordId(t))))].sort();
}

async function claimed(table: FencedTargetLeaseTable, targets: readonly bigint[], nowMs: number, owner = 'master'): Promise<string> {
  const result = await table.claimGroup(targets, { path: 'seed' }, { owner, nowMs });
  if (!result.ok) throw new Error(`claim failed: ${result.reason}`);
  return result.token;
}

/** Every stored record's bytes, by id (a store-independent "nothing changed" check). */
async function storedState(store: StoreContext, root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const id of await store.storedIds(root)) out.set(id, (await store.readRaw(root, id))!.toString('base64'));
  return out;
}

async function storedJson(store: StoreContext, root: string, id: string): Promise<Record<string, unknown>> {
  const bytes = await store.readRaw(root, id);
  if (!bytes) throw new Error(`no record ${id}`);
  return JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
}

describeEachStore('FencedTargetLeaseTable', (store) => {
  const open = (root: string, options: Record<string, unknown> = {}) => openTarget(root, { ...store.options(), ...options });

  it('refuses an overlapping group without publishing any member (T1)', async () => {
    const root = await tempRoot();
    const first = await open(root);
    const second = await open(root);
    const tokenA = await claimed(first, [11n, 22n], 100 * S, 'master-a');
    const refused = await second.claimGroup([22n, 33n], { path: 'seed-b' }, { owner: 'master-b', nowMs: 105 * S });
    expect(refused).toMatchObject({ ok: false, reason: 'conflict', holders: [{ target: 22n, owner: 'master-a' }] });
    expect(await store.readRaw(root, targetRecordId(33n))).toBeNull();
    expect((await first.snapshotCounts({ nowMs: 105 * S })).leased).toBe(2);
    expect(await first.releaseGroup([11n, 22n], tokenA)).toEqual({ ok: true });
    expect((await second.claimGroup([22n, 33n], { path: 'seed-b' }, { owner: 'master-b', nowMs: 106 * S })).ok).toBe(true);
  });

  it('keeps a field a newer writer added through heartbeats and takes it away with the release', async () => {
    const root = await tempRoot();
    const table = await open(root);
    const targets = [41n, 42n];
    const token = await claimed(table, targets, 100 * S);
    for (const target of targets) {
      const id = targetRecordId(target);
      await store.writeRaw(root, id, canonicalJsonBytes({ ...(await storedJson(store, root, id)), zNewerField: { since: 'v9' } }));
    }
    // A fresh table: what it reads is what is stored, not what this process wrote.
    const reader = await open(root);
    expect(await reader.heartbeatGroup(targets, token, { nowMs: 110 * S })).toEqual({ ok: true });
    for (const target of targets) expect(await storedJson(store, root, targetRecordId(target))).toMatchObject({ zNewerField: { since: 'v9' }, updatedMs: 110 * S, token });
    expect(await reader.heartbeatGroup(targets, token, { nowMs: 120 * S })).toEqual({ ok: true });
    expect((await reader.snapshotRecords()).map((e) => [e.record['zNewerField'], e.record.updatedMs])).toEqual([
      [{ since: 'v9' }, 120 * S],
      [{ since: 'v9' }, 120 * S],
    ]);
    expect(await reader.releaseGroup(targets, token)).toEqual({ ok: true });
    expect(await store.storedIds(root)).toEqual([]);
  });

  it('fences heartbeats, expiry and a stale release (T2)', async () => {
    const root = await tempRoot();
    const first = await open(root);
    const second = await open(root);
    const group = [77n, 88n];
    const tokenA = await claimed(first, group, 10 * S, 'master-a');
    expect(await first.heartbeatGroup(group, tokenA, { nowMs: 19 * S })).toEqual({ ok: true });
    expect((await second.claimGroup([88n, 77n], { path: 'seed-b' }, { owner: 'master-b', nowMs: 25 * S })).ok).toBe(false);
    const stolen = await second.claimGroup([88n, 77n], { path: 'seed-b' }, { owner: 'master-b', nowMs: 30 * S });
    if (!stolen.ok) throw new Error('expected the steal to succeed');
    expect(await first.releaseGroup(group, tokenA)).toMatchObject({ ok: false, reason: 'stale' });
    for (const t of group) {
      expect(await storedJson(store, root, targetRecordId(t))).toMatchObject({ token: stolen.token, steals: 1, attempts: 2, previousOwner: 'master-a' });
    }
    expect(await second.releaseGroup([77n, 88n], stolen.token)).toEqual({ ok: true });
    expect((await first.claimGroup(group, { path: 'seed-c' }, { owner: 'master-a', nowMs: 31 * S })).ok).toBe(true);
  });

  it('rejects a non-finite time and never overwrites a corrupt member (T4)', async () => {
    const root = await tempRoot();
    const table = await open(root);
    expect(await codeOf(table.claimGroup([101n], { path: 'seed' }, { owner: 'master', nowMs: Number.NaN }))).toBe('ERR_INVALID_OPTION');
    const id = targetRecordId(101n);
    const corrupt = canonicalJsonBytes({ schema: 0, kind: 'target', id, status: 'leased', payload: {}, token: 'corrupt', updatedMs: 10 * S });
    await store.writeRaw(root, id, corrupt);
    expect(await table.claimGroup([101n, 102n], { path: 'replacement' }, { owner: 'other', nowMs: 20 * S })).toMatchObject({ ok: false, reason: 'corrupt', corrupt: [{ target: 101n }] });
    expect(await table.heartbeatGroup([101n], 'corrupt', { nowMs: 20 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(await table.releaseGroup([101n], 'corrupt')).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(await store.readRaw(root, id)).toEqual(corrupt);
    expect(await store.readRaw(root, targetRecordId(102n))).toBeNull();
  });

  it('rejects an unserialisable payload before creating any lock file or shard directory (T6)', async () => {
    const root = await tempRoot();
    const table = await open(root);
    class Opaque {}
    const before = await listFiles(root);
    for (const payload of [{ unsupported: new Opaque() }, { nan: Number.NaN }, { f: () => 1 }, { u: undefined }]) {
      expect(await codeOf(table.claimGroup([111n, 222n, 333n], payload, { owner: 'master', nowMs: 10 * S }))).toBe('ERR_INVALID_JOB');
    }
    expect(await listFiles(root)).toEqual(before);
    expect(await store.storedIds(root)).toEqual([]);
  });

  it('rejects malformed groups with ERR_INVALID_JOB', async () => {
    const root = await tempRoot();
    const table = await open(root);
    for (const group of [[], [0n], [-1n], [1n, 1n], [1n << 64n], range(1, 65), [5 as unknown as bigint]]) {
      expect(await codeOf(table.claimGroup(group, { path: 'x' }, { owner: 'm', nowMs: 1 }))).toBe('ERR_INVALID_JOB');
    }
    expect((await table.claimGroup(range(1, 64), { path: 'x' }, { owner: 'm', nowMs: 1 })).ok).toBe(true);
  });

  it('rejects a stale release with zero mutation (T9)', async () => {
    const root = await tempRoot();
    const table = await open(root);
    const group = [401n, 402n, 403n];
    const token = await claimed(table, group, 10 * S);
    const lastId = group.map(targetRecordId).sort().at(-1)!;
    const last = await storedJson(store, root, lastId);
    await store.writeRaw(root, lastId, canonicalJsonBytes({ ...last, token: 'replacement-token' }));
    const before = await storedState(store, root);
    expect(await table.releaseGroup(group, token)).toEqual({ ok: false, reason: 'stale', id: lastId });
    expect(await storedState(store, root)).toEqual(before);
  });

  it('stores the group in record-id order with u64 targets as decimal strings', async () => {
    const root = await tempRoot();
    const table = await open(root);
    const big = (1n << 64n) - 1n;
    const group = [big, 7n];
    await claimed(table, group, 10 * S);
    const expected = group.map((t) => ({ t, id: targetRecordId(t) })).sort((a, b) => (a.id < b.id ? -1 : 1)).map((m) => m.t.toString());
    const record = await storedJson(store, root, targetRecordId(big));
    expect(record).toMatchObject({ target: big.toString(), targets: expected, kind: 'target', schema: 1 });
  });

  it.skipIf(!store.holdLock)('times out a claim behind another holder of a member lock with ERR_LOCK_TIMEOUT, having written nothing', async () => {
    const root = await tempRoot();
    const table = await open(root, { lockAcquireTimeoutMs: 20 });
    await claimed(table, [1n], 10 * S);
    const before = await storedState(store, root);
    const release = await store.holdLock!(root, targetRecordId(2n));
    try {
      expect(await codeOf(table.claimGroup([2n, 3n], { c: 1 }, { owner: 'contender', nowMs: 10 * S }))).toBe('ERR_LOCK_TIMEOUT');
      expect(await storedState(store, root)).toEqual(before);
    } finally {
      await release();
    }
    // Nothing stays held by the timed-out claim.
    expect((await table.claimGroup([2n, 3n], { c: 2 }, { owner: 'contender', nowMs: 10 * S })).ok).toBe(true);
  });

  it.skipIf(!store.holdLock)('writes answers without a lease only under the members\' lease locks, so a claim holding one orders it', async () => {
    // A claim reads a branch's answer record (and the answer generation) without their locks,
    // trusting the lease record's lock to order every write of them (answers-view.ts): answers
    // written without the lease must wait for it too, or a claim could file an old answer record
    // in its view under the new generation, and trust it from then on.
    const root = await tempRoot();
    const table = await open(root, { lockAcquireTimeoutMs: 20 });
    const writer = { owner: 'replayer', token: 'tok', worker: 0 };
    const answers = { input: 'a'.repeat(64), settled: [7n] };
    const release = await store.holdLock!(root, targetRecordId(7n));
    try {
      expect(await codeOf(table.recordAnswers(answers, writer, 10 * S))).toBe('ERR_LOCK_TIMEOUT');
    } finally {
      await release();
    }
    expect(await table.recordAnswers(answers, writer, 10 * S)).toEqual({ ok: true });
    expect(await table.claimGroup([7n], { c: 1 }, { owner: 'asker', nowMs: 11 * S, input: 'a'.repeat(64) })).toEqual({ ok: false, reason: 'answered', answered: [7n] });
  });
});

describe('FencedTargetLeaseTable (file store: barriers and file faults)', () => {
  it('renews a group with one directory barrier per touched shard (T3)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, {}, { fsLayer });
    const group = range(101, 108);
    const token = await claimed(table, group, 10 * S);
    fsLayer.resetCounts();
    expect(await table.heartbeatGroup(group, token, { nowMs: 19 * S })).toEqual({ ok: true });
    expect([...fsLayer.directoryBarrierPaths].sort()).toEqual(shardDirs(table, group));
    expect(fsLayer.barriers()).toEqual({ file: 8, filesystem: 0, directory: shardDirs(table, group).length });
  });

  it('rolls back written members when a later member fails to publish (T5)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, {}, { fsLayer });
    fsLayer.fail({ op: 'rename', nth: 2 });
    const error = await table.claimGroup([101n, 202n], { path: 'seed' }, { owner: 'master', nowMs: 10 * S }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ERR_LEASE_IO', details: { step: 'publish', restored: true } });
    expect(await recordFiles(root)).toEqual([]);
    expect((await listFiles(root)).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('claims a group with one directory barrier per touched shard (T7)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, {}, { fsLayer });
    const group = range(101, 108);
    for (const dir of shardDirs(table, group)) await mkdir(dir, { recursive: true });
    fsLayer.resetCounts();
    await claimed(table, group, 10 * S);
    expect([...fsLayer.directoryBarrierPaths].sort()).toEqual(shardDirs(table, group));
    expect(fsLayer.barriers()).toEqual({ file: 8, filesystem: 0, directory: shardDirs(table, group).length });
  });

  it('makes new shard directories durable once, before the first lock file in them', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, { shardCount: 1 }, { fsLayer });
    fsLayer.resetCounts();
    await claimed(table, [1n, 2n], 10 * S);
    // mkdir 000: barrier on 000 and on root; then one barrier for the claim.
    expect(fsLayer.directoryBarrierPaths).toEqual([path.join(root, '000'), root, path.join(root, '000')]);
  });

  it('rolls back every member when the directory barrier fails (T8)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, {}, { fsLayer });
    const group = range(101, 108);
    for (const dir of shardDirs(table, group)) await mkdir(dir, { recursive: true });
    fsLayer.resetCounts();
    fsLayer.fail({ op: 'syncDirectory' });
    const error = await table.claimGroup(group, { path: 'seed' }, { owner: 'master', nowMs: 10 * S }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ERR_LEASE_IO', details: { step: 'directory-barrier', restored: true } });
    const dirs = shardDirs(table, group).length;
    // The batch's barriers (one failed), then the restore's barrier pass over the same shards.
    expect(fsLayer.count('syncDirectory')).toBe(2 * dirs);
    expect(await recordFiles(root)).toEqual([]);
  });

  it('releases a group with one directory barrier per touched shard and deletes the records (T10)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, {}, { fsLayer });
    const group = range(101, 108);
    const token = await claimed(table, group, 10 * S);
    fsLayer.resetCounts();
    expect(await table.releaseGroup(group, token)).toEqual({ ok: true });
    expect([...fsLayer.directoryBarrierPaths].sort()).toEqual(shardDirs(table, group));
    expect(fsLayer.barriers().file).toBe(0);
    expect(await recordFiles(root)).toEqual([]);
    for (const t of group) expect(await exists(table.lockPath(targetRecordId(t)))).toBe(true);
  });

  it('restores removed members byte for byte when an unlink fails (T11)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, {}, { fsLayer });
    const group = [501n, 502n, 503n];
    const token = await claimed(table, group, 10 * S);
    const before = await snapshotTree(root);
    fsLayer.fail({ op: 'unlink', nth: 2 });
    expect(await codeOf(table.releaseGroup(group, token))).toBe('ERR_LEASE_IO');
    expect(await snapshotTree(root)).toEqual(before);
  });

  it('restores every member byte for byte when the release barrier fails (T12)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, {}, { fsLayer });
    const group = range(601, 608);
    const token = await claimed(table, group, 10 * S);
    const before = await snapshotTree(root);
    fsLayer.resetCounts();
    fsLayer.fail({ op: 'syncDirectory' });
    expect(await codeOf(table.releaseGroup(group, token))).toBe('ERR_LEASE_IO');
    expect(fsLayer.count('syncDirectory')).toBe(2 * shardDirs(table, group).length);
    expect(await snapshotTree(root)).toEqual(before);
  });

  it('keeps one expiry point for the group when a heartbeat write fails (T13)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, {}, { fsLayer });
    const group = [303n, 404n];
    const token = await claimed(table, group, 10 * S);
    const before = await snapshotTree(root);
    fsLayer.fail({ op: 'rename', nth: 2 });
    expect(await codeOf(table.heartbeatGroup(group, token, { nowMs: 19 * S }))).toBe('ERR_LEASE_IO');
    expect(await snapshotTree(root)).toEqual(before);
    for (const t of group) expect((await recordJson(table.recordPath(targetRecordId(t)))).updatedMs).toBe(10 * S);
    expect((await table.claimGroup(group, { path: 'retry' }, { owner: 'other', nowMs: 20 * S })).ok).toBe(true);
  });

  it('rolls back exactly, at every step of a claim over a stolen group, and leaves no temp files', async () => {
    const steps = [
      { op: 'open' as const, path: '.tmp' },
      { op: 'write' as const },
      { op: 'fsync' as const },
      { op: 'close' as const, path: '.tmp' },
      { op: 'rename' as const },
      { op: 'rename' as const, when: 'after' as const },
      { op: 'rename' as const, nth: 3 },
      { op: 'syncDirectory' as const },
    ];
    for (const step of steps) {
      const root = await tempRoot();
      const fsLayer = new FaultInjectingFsLayer();
      const table = await openTarget(root, {}, { fsLayer });
      const group = range(1, 6);
      for (const dir of shardDirs(table, group)) await mkdir(dir, { recursive: true });
      await claimed(table, group.slice(0, 3), 10 * S, 'old-owner');
      // Lock files of the new members are expected (they are never deleted); everything else must match.
      const withoutLocks = async (): Promise<Map<string, string>> => new Map([...(await snapshotTree(root))].filter(([f]) => !f.endsWith('.lock')));
      const before = await withoutLocks();
      fsLayer.fail(step);
      const error = await table.claimGroup(group, { path: 'steal' }, { owner: 'new-owner', nowMs: 30 * S }).catch((e: unknown) => e);
      expect(error, JSON.stringify(step)).toMatchObject({ code: 'ERR_LEASE_IO', details: { restored: true } });
      expect(await withoutLocks(), JSON.stringify(step)).toEqual(before);
    }
  });

  it('releases the locks already taken when a later member lock times out, having written nothing', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const holder = await openTarget(root, {}, { fsLayer });
    const contender = await openTarget(root, { lockAcquireTimeoutMs: 10 });
    const members = [1n, 2n, 3n].map((t) => ({ t, id: targetRecordId(t) })).sort((a, b) => (a.id < b.id ? -1 : 1));
    const [first, second, third] = members as [typeof members[0], typeof members[0], typeof members[0]];
    let reached!: () => void;
    const atHook = new Promise<void>((resolve) => (reached = resolve));
    let proceed!: () => void;
    const released = new Promise<void>((resolve) => (proceed = resolve));
    // The holder sits inside its claim of the middle member, holding that member's lock.
    fsLayer.hook({ op: 'open', path: (p) => p === holder.recordPath(second.id), run: async () => { reached(); await released; } });
    const held = holder.claimGroup([second.t], { holder: true }, { owner: 'holder', nowMs: 10 * S });
    await atHook;
    expect(await codeOf(contender.claimGroup([first.t, second.t, third.t], { c: 1 }, { owner: 'contender', nowMs: 10 * S }))).toBe('ERR_LOCK_TIMEOUT');
    // The first member's lock was released again: a claim of it alone gets it at once.
    expect((await contender.claimGroup([first.t], { c: 2 }, { owner: 'contender', nowMs: 10 * S })).ok).toBe(true);
    expect(await exists(contender.recordPath(third.id))).toBe(false);
    proceed();
    expect((await held).ok).toBe(true);
  });

  it('makes a batch of temp files durable with one syncfs when configured', async () => {
    const { loadNative } = await import('../../src/native/bindings.js');
    if (!loadNative()) return;
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, { fileBarrier: 'syncfs' }, { fsLayer });
    await claimed(table, range(1, 3), 10 * S);
    fsLayer.resetCounts();
    await claimed(table, range(11, 18), 10 * S);
    expect(fsLayer.barriers()).toMatchObject({ file: 0, filesystem: 1 });
  });

  it('issues a directory barrier per mutation in scalar mode', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, { directoryBarrier: 'scalar', shardCount: 1 }, { fsLayer });
    const token = await claimed(table, range(1, 5), 10 * S);
    fsLayer.resetCounts();
    expect(await table.releaseGroup(range(1, 5), token)).toEqual({ ok: true });
    expect(fsLayer.barriers().directory).toBe(5);
  });

});

describe('answer records on the files store', () => {
  const input = 'c'.repeat(64);

  it('a claim reads the answer records under the lease records\' locks alone: it creates no lock file of its own for them', async () => {
    const root = await tempRoot();
    const table = await openTarget(root);
    const group = range(201, 204);
    const claim = await table.claimGroup(group, {}, { owner: 'c1', nowMs: 10 * S, input });
    if (!claim.ok) throw new Error('claim failed');
    for (const t of group) {
      expect(await exists(table.lockPath(targetRecordId(t)))).toBe(true);
      expect(await exists(table.lockPath(answerRecordId(t)))).toBe(false);
    }
    // The release that writes them locks them.
    expect(await table.releaseGroup(group, claim.token, { nowMs: 11 * S, answers: { input, settled: [201n] } })).toEqual({ ok: true });
    expect(await exists(table.lockPath(answerRecordId(201n)))).toBe(true);
    expect(await exists(table.lockPath(answerRecordId(202n)))).toBe(false);
    expect(await table.claimGroup(group, {}, { owner: 'c2', nowMs: 12 * S, input })).toMatchObject({ ok: false, reason: 'answered', answered: [201n] });
  });

  it('a claim after a release in the same batch sees the answer the release staged, and its refusal rests on the batch\'s commit', async () => {
    const root = await tempRoot();
    const table = await openTarget(root);
    const group = range(211, 213);
    const token = await claimed(table, group, 10 * S);
    const result = await table.executeBatch([
      table.planReleaseGroup(group, token, { nowMs: 11 * S, answers: { input, settled: [212n] } }),
      table.planClaimGroup(group, {}, { owner: 'c2', nowMs: 12 * S, input }),
    ]);
    expect(result.outcomes.map((o) => (o.ok ? o.value : o.error))).toEqual([{ ok: true }, { ok: false, reason: 'answered', answered: [212n] }]);

    // The same pair whose commit fails: the refusal described a state that never existed, so it fails too.
    const fsLayer = new FaultInjectingFsLayer();
    const failing = await openTarget(await tempRoot(), {}, { fsLayer });
    const again = await claimed(failing, group, 10 * S);
    fsLayer.fail({ op: 'syncDirectory' });
    const failed = await failing.executeBatch([
      failing.planReleaseGroup(group, again, { nowMs: 11 * S, answers: { input, settled: [212n] } }),
      failing.planClaimGroup(group, {}, { owner: 'c2', nowMs: 12 * S, input }),
    ]);
    expect(failed.outcomes.map((o) => o.ok)).toEqual([false, false]);
  });

  it('a claim refused on an answer no earlier operation of its batch touched keeps its refusal when another release of the batch fails', async () => {
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(await tempRoot(), {}, { fsLayer });
    const answeredGroup = range(231, 232);
    const first = await claimed(table, answeredGroup, 10 * S);
    expect(await table.releaseGroup(answeredGroup, first, { nowMs: 11 * S, answers: { input, settled: [231n] } })).toEqual({ ok: true });
    const other = range(241, 242);
    const token = await claimed(table, other, 12 * S);
    // The release of `other` writes answers (and the answer generation) and fails at its barrier.
    fsLayer.fail({ op: 'syncDirectory' });
    const result = await table.executeBatch([
      table.planReleaseGroup(other, token, { nowMs: 13 * S, answers: { input, settled: [241n] } }),
      table.planClaimGroup(answeredGroup, {}, { owner: 'c2', nowMs: 13 * S, input }),
    ]);
    expect(result.outcomes[0]!.ok).toBe(false);
    expect(result.outcomes[1]).toEqual({ ok: true, value: { ok: false, reason: 'answered', answered: [231n] } });
  });

  it('publishes the answer generation record first and never puts it back: a failed release restores every other record byte for byte, and nothing was answered', async () => {
    // [fault, whether the generation record moved]: its own publication refused, taking effect
    // and then failing, its directory barrier, and the first answer record's publication after it.
    const faults = [
      [{ op: 'rename', nth: 1 }, false],
      [{ op: 'rename', nth: 1, when: 'after' }, true],
      [{ op: 'syncDirectory' }, true],
      [{ op: 'rename', nth: 2 }, true],
    ] as const;
    for (const [fault, moved] of faults) {
      const root = await tempRoot();
      const fsLayer = new FaultInjectingFsLayer();
      const table = await openTarget(root, {}, { fsLayer });
      const group = range(221, 224);
      // An earlier answer: the generation record exists, and the table's view is at it.
      const first = await claimed(table, group, 10 * S);
      expect(await table.releaseGroup(group, first, { nowMs: 11 * S, answers: { input, settled: [221n] } })).toEqual({ ok: true });
      const token = await claimed(table, [222n, 223n], 12 * S);
      // Record bytes (the release takes lock files of the answer records it writes, which stay).
      const records = async (): Promise<Map<string, string>> => new Map([...(await snapshotTree(root))].filter(([file]) => file.endsWith('.json')));
      const generationFile = path.relative(root, table.recordPath(answerGenerationRecordId()));
      const generationOf = (bytes: string | undefined): { epoch: string; generation: number; changed: [number, string][] } => JSON.parse(Buffer.from(bytes!, 'base64').toString('utf8'));
      const before = await records();
      fsLayer.fail(fault);
      const failure = await table.releaseGroup([222n, 223n], token, { nowMs: 13 * S, answers: { input, settled: [222n, 223n] } }).then(
        () => undefined,
        (error: unknown) => error as { code?: string; details?: { restored?: boolean } },
      );
      expect(failure?.code).toBe('ERR_LEASE_IO');
      expect(failure?.details?.restored).toBe(true);
      const after = await records();
      expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
      for (const [file, bytes] of before) if (file !== generationFile) expect(after.get(file), file).toBe(bytes);
      if (moved) {
        // One generation further, naming the members: a reader that saw it reads them again.
        const was = generationOf(before.get(generationFile));
        const now = generationOf(after.get(generationFile));
        expect([now.epoch, now.generation]).toEqual([was.epoch, was.generation + 1]);
        expect(now.changed.filter(([g]) => g === now.generation).map(([, t]) => t).sort()).toEqual(['222', '223']);
      } else expect(after.get(generationFile)).toBe(before.get(generationFile));
      // Nothing was answered: the same table (its view) and a fresh one both still ask 222 and 223.
      expect(await table.releaseGroup([222n, 223n], token)).toEqual({ ok: true });
      const fresh = await openTarget(root);
      for (const t of [table, fresh]) expect(await t.claimGroup(group, {}, { owner: 'c2', nowMs: 14 * S, input })).toEqual({ ok: false, reason: 'answered', answered: [221n] });
      await fresh.close();
    }
  });

  it('a claim that read the generation of a release that then failed keeps an exact view: the generation is never used again', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const a = await openTarget(root, {}, { fsLayer });
    const b = await openTarget(root);
    const c = await openTarget(root);
    const other = 'd'.repeat(64);
    try {
      // Generation 1; b's view then holds branch 7 (no answer record) at generation 1.
      const c100 = await claimed(c, [100n], 1 * S);
      expect(await c.releaseGroup([100n], c100, { nowMs: 1 * S, answers: { input: other, settled: [100n] } })).toEqual({ ok: true });
      const b7 = await b.claimGroup([7n], {}, { owner: 'b', nowMs: 2 * S, input });
      if (!b7.ok) throw new Error('b could not claim 7');
      expect(await b.releaseGroup([7n], b7.token)).toEqual({ ok: true });
      // a answers branch 5 and is held after its generation record is published (generation 2);
      // b claims another branch meanwhile, reading generation 2; a's release then fails.
      const a5 = await claimed(a, [5n], 3 * S);
      let paused!: () => void;
      const atPause = new Promise<void>((resolve) => (paused = resolve));
      let resume!: () => void;
      const resumed = new Promise<void>((resolve) => (resume = resolve));
      fsLayer.hook({ op: 'rename', nth: 2, run: async () => { paused(); await resumed; } });
      fsLayer.fail({ op: 'rename', nth: 2 });
      const release = a.releaseGroup([5n], a5, { nowMs: 3 * S, answers: { input: other, settled: [5n] } }).then(() => 'released', (error: unknown) => (error as { code?: string }).code);
      await atPause;
      const b8 = await b.claimGroup([8n], {}, { owner: 'b', nowMs: 4 * S, input: other });
      expect(b8.ok).toBe(true);
      resume();
      expect(await release).toBe('ERR_LEASE_IO');
      // c answers branch 7 on b's input: generation 3, not a second generation 2 listing other branches.
      const c7 = await claimed(c, [7n], 20 * S);
      expect(await c.releaseGroup([7n], c7, { nowMs: 20 * S, answers: { input, settled: [7n] } })).toEqual({ ok: true });
      expect((JSON.parse(await readFile(c.recordPath(answerGenerationRecordId()), 'utf8')) as { generation: number }).generation).toBe(3);
      // b's view, at generation 2, drops branch 7 and is refused like a fresh table.
      const fresh = await openTarget(root);
      for (const t of [fresh, b]) expect(await t.claimGroup([7n], {}, { owner: 'late', nowMs: 21 * S, input })).toEqual({ ok: false, reason: 'answered', answered: [7n] });
      await fresh.close();
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });
});
