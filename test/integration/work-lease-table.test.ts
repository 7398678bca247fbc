import { mkdir, symlink, utimes, writeFile, lstat, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { workIdOf } from '../../src/lease/identity.js';
import { canonicalJsonBytes } from '../../src/lease/canonical-json.js';
import { loadNative } from '../../src/native/bindings.js';
import { FencedWorkLeaseTable, MAX_HEARTBEAT_BATCH } from '../../src/lease/work-lease-table.js';
import { ID_A0, ID_B0, ID_C1, S, bytesOf, exists, listFiles, openWork, openWork as openWorkTable, recordJson, tempRoot } from '../helpers/lease-fixtures.js';
import { describeEachStore } from '../helpers/lease-stores.js';
import { codeOfAsync as codeOf } from '../helpers/error-code.js';

function ok<T extends { ok: boolean }>(result: T): Extract<T, { ok: true }> {
  expect(result.ok).toBe(true);
  return result as Extract<T, { ok: true }>;
}

describeEachStore('FencedWorkLeaseTable', (store) => {
  // Shadows the fixture: every scenario here opens its tables on the store under test.
  const openWork = (root: string, options: Record<string, unknown> = {}) => openWorkTable(root, { ...store.options(), ...options });
  const storedJson = async (root: string, id: string): Promise<Record<string, unknown>> => JSON.parse((await store.readRaw(root, id))!.toString('utf8')) as Record<string, unknown>;

  it('fences duplicate active claims and stale completions (W1)', async () => {
    const root = await tempRoot();
    const first = await openWork(root);
    const second = await openWork(root);
    const payload = { path: 'seed', target_branch: 0 };
    const id = workIdOf(payload);
    const a = ok(await first.claim(id, payload, { owner: 'master-a', worker: 1, nowMs: 100 * S }));
    const blocked = await second.claim(id, payload, { owner: 'master-b', worker: 2, nowMs: 105 * S });
    expect(blocked).toMatchObject({ ok: false, reason: 'conflict', holder: { owner: 'master-a', status: 'leased' } });
    expect((await second.recoverExpired({ nowMs: 120 * S })).map((e) => e.payload)).toEqual([payload]);
    const b = ok(await second.claim(id, payload, { owner: 'master-b', worker: 2, nowMs: 120 * S }));
    expect(b.token).not.toBe(a.token);
    expect(b).toMatchObject({ attempts: 2, steals: 1, previousOwner: 'master-a' });
    expect(await first.complete(id, a.token, { nowMs: 121 * S })).toBe(false);
    expect(await first.beginCommit(id, a.token, { nowMs: 121 * S })).toMatchObject({ ok: false, reason: 'stale' });
    expect(await second.beginCommit(id, b.token, { nowMs: 121.5 * S })).toEqual({ ok: true });
    expect(await second.complete(id, b.token, { nowMs: 122 * S })).toBe(true);
    expect(await first.claim(id, payload, { owner: 'master-a', worker: 1, nowMs: 200 * S })).toMatchObject({ ok: false, reason: 'conflict', holder: { status: 'done' } });
  });

  it('finds the expired leased record among done ones, however many (an expiry scan may skip done records unread)', async () => {
    const root = await tempRoot();
    const table = await openWork(root, { leaseTtlMs: 10 * S });
    for (let i = 0; i < 40; i++) {
      const payload = { path: `done-${i}`, target_branch: 0 };
      const { token } = ok(await table.claim(workIdOf(payload), payload, { owner: 'master', nowMs: S }));
      expect(await table.beginCommit(workIdOf(payload), token, { nowMs: S })).toEqual({ ok: true });
      expect(await table.complete(workIdOf(payload), token, { nowMs: S })).toBe(true);
    }
    const leased = { path: 'leased', target_branch: 0 };
    ok(await table.claim(workIdOf(leased), leased, { owner: 'gone', nowMs: S }));
    const committing = { path: 'committing', target_branch: 0 };
    const { token } = ok(await table.claim(workIdOf(committing), committing, { owner: 'master', nowMs: S }));
    expect(await table.beginCommit(workIdOf(committing), token, { nowMs: S })).toEqual({ ok: true });
    expect(await table.recoverExpired({ nowMs: 5 * S })).toEqual([]);
    expect((await table.recoverExpired({ nowMs: 20 * S })).map((e) => e.payload)).toEqual([leased]);
    expect(await table.snapshotCounts({ nowMs: 20 * S })).toMatchObject({ done: 40, leased: 1, expired: 1, committing: 1 });
  });

  it('extends the fence with a heartbeat; the boundary age == TTL is expired (W2)', async () => {
    const root = await tempRoot();
    const table = await openWork(root, { shardCount: 2 });
    const payload = { path: 'seed', focus_bytes: '0-3' };
    const id = workIdOf(payload);
    const { token } = ok(await table.claim(id, payload, { owner: 'master', nowMs: 10 * S }));
    expect(await table.heartbeat(id, token, { nowMs: 19 * S })).toEqual({ ok: true });
    expect(await table.recoverExpired({ nowMs: 25 * S })).toEqual([]);
    expect((await table.recoverExpired({ nowMs: 29 * S })).map((e) => e.id)).toEqual([id]);
    expect((await table.recoverExpired({ nowMs: 30 * S })).map((e) => e.payload)).toEqual([payload]);
  });

  it('makes beginCommit irreversible: committing is never stolen, not even with TTL 0 (W7)', async () => {
    const root = await tempRoot();
    const first = await openWork(root, { shardCount: 2 });
    const second = await openWork(root, { shardCount: 2 });
    const payload = { path: 'seed', target_branch: 7 };
    const id = workIdOf(payload);
    const { token } = ok(await first.claim(id, payload, { owner: 'a', worker: 1, nowMs: 10 * S }));
    expect(await first.beginCommit(id, token, { nowMs: 11 * S })).toEqual({ ok: true });
    expect(await second.claim(id, payload, { owner: 'b', worker: 2, nowMs: 15 * S })).toMatchObject({ ok: false, reason: 'conflict', holder: { status: 'committing' } });
    expect(await second.recoverExpired({ nowMs: 22 * S })).toEqual([]);
    expect(await second.recoverExpired({ nowMs: 22 * S, leaseTtlMs: 0 })).toEqual([]);
    expect(await second.claim(id, payload, { owner: 'b', worker: 2, nowMs: 22 * S, leaseTtlMs: 0 })).toMatchObject({ ok: false, reason: 'conflict' });
    expect(await second.abandon(id, token)).toMatchObject({ ok: false, reason: 'stale' });
    expect(await first.beginCommit(id, token, { nowMs: 23 * S })).toEqual({ ok: true });
    expect(await first.complete(id, token, { nowMs: 24 * S })).toBe(true);
    expect(await first.snapshotCounts({ nowMs: 100 * S })).toEqual({ leased: 0, committing: 0, expired: 0, done: 1, corrupt: 0 });
  });

  it('renews committing records but not done ones', async () => {
    const root = await tempRoot();
    const table = await openWork(root);
    const { token } = ok(await table.claim(ID_A0, { p: 1 }, { owner: 'm', nowMs: 1 * S }));
    ok(await table.beginCommit(ID_A0, token, { nowMs: 2 * S }));
    expect(await table.heartbeat(ID_A0, token, { nowMs: 3 * S })).toEqual({ ok: true });
    expect((await storedJson(root, ID_A0)).updatedMs).toBe(3 * S);
    expect(await table.complete(ID_A0, token, { nowMs: 4 * S })).toBe(true);
    expect(await table.heartbeat(ID_A0, token, { nowMs: 5 * S })).toMatchObject({ ok: false, reason: 'stale' });
  });

  it('stores the commit manifest durably and classifies completion once (W8)', async () => {
    const root = await tempRoot();
    const first = await openWork(root, { shardCount: 2 });
    const helper = await openWork(root, { shardCount: 2 });
    const payload = { path: 'seed', origin: 'generated' };
    const id = workIdOf(payload);
    const manifest = { schema: 'test-result-commit-v1', children: ['a'.repeat(64), 'b'.repeat(64)] };
    const { token } = ok(await first.claim(id, payload, { owner: 'master-a', nowMs: 10 * S }));
    expect(await first.beginCommit(id, token, { commit: manifest, nowMs: 11 * S })).toEqual({ ok: true });
    const committed = await store.readRaw(root, id);
    expect(await first.beginCommit(id, token, { commit: { different: true }, nowMs: 12 * S })).toEqual({ ok: false, reason: 'manifest-mismatch', id });
    expect(await store.readRaw(root, id)).toEqual(committed);
    expect(await first.beginCommit(id, token, { commit: manifest, nowMs: 12 * S })).toEqual({ ok: true });
    expect(await helper.recoverCommittingRecords()).toEqual([{ id, payload, token, commit: manifest }]);
    expect(await helper.completeOnce(id, token, { nowMs: 13 * S })).toBe('completed');
    expect(await first.completeOnce(id, token, { nowMs: 14 * S })).toBe('already');
    expect(await first.completeOnce(id, 'wrong-token', { nowMs: 15 * S })).toBe('stale');
    expect(await helper.recoverCommittingRecords()).toEqual([]);
    const done = await storedJson(root, id);
    expect(done).toMatchObject({ status: 'done', completedMs: 13 * S, updatedMs: 12 * S, commit: manifest });
  });

  it('replays a commit exactly once and keeps it committing when publication fails (W9)', async () => {
    const root = await tempRoot();
    const first = await openWork(root, { shardCount: 2 });
    const helper = await openWork(root, { shardCount: 2 });
    const manifest = { schema: 'test-result-commit-v1', children: ['a'] };
    const payload = { path: 'seed', origin: 'generated' };
    const id = workIdOf(payload);
    const { token } = ok(await first.claim(id, payload, { owner: 'master-a', nowMs: 10 * S }));
    ok(await first.beginCommit(id, token, { commit: manifest, nowMs: 11 * S }));
    const published: unknown[] = [];
    expect(await helper.replayCommitOnce(id, token, (commit) => void published.push(commit), { nowMs: 12 * S })).toBe('completed');
    expect(published).toEqual([manifest]);
    expect(await first.replayCommitOnce(id, token, () => { throw new Error('must not publish twice'); }, { nowMs: 13 * S })).toBe('already');

    const retryPayload = { path: 'retry', origin: 'generated' };
    const retryId = workIdOf(retryPayload);
    const retry = ok(await first.claim(retryId, retryPayload, { owner: 'master-a', nowMs: 14 * S }));
    ok(await first.beginCommit(retryId, retry.token, { commit: manifest, nowMs: 15 * S }));
    await expect(helper.replayCommitOnce(retryId, retry.token, () => { throw Object.assign(new Error('publication interrupted'), { code: 'EIO' }); }, { nowMs: 16 * S })).rejects.toMatchObject({ code: 'EIO' });
    expect(await helper.recoverCommittingRecords()).toEqual([{ id: retryId, payload: retryPayload, token: retry.token, commit: manifest }]);
    // The failed publication left the record committing, so the owner publishes it later.
    const later: unknown[] = [];
    expect(await first.replayCommitOnce(retryId, retry.token, (commit) => void later.push(commit), { nowMs: 17 * S })).toBe('completed');
    expect(later).toEqual([manifest]);
  });

  it('replays a commit only once it has not been renewed for minIdleMs, checked under the lock', async () => {
    const root = await tempRoot();
    const owner = await openWork(root, { shardCount: 2 });
    const helper = await openWork(root, { shardCount: 2 });
    const payload = { path: 'seed-idle', origin: 'generated' };
    const id = workIdOf(payload);
    const { token } = ok(await owner.claim(id, payload, { owner: 'master-a', nowMs: 10 * S }));
    ok(await owner.beginCommit(id, token, { commit: { n: 1 }, nowMs: 11 * S }));
    await owner.heartbeat(id, token, { nowMs: 40 * S }); // the owner is alive
    const before = await store.readRaw(root, id);
    const refuse = (): void => {
      throw new Error('must not publish while the owner is alive');
    };
    expect(await helper.replayCommitOnce(id, token, refuse, { nowMs: 45 * S, minIdleMs: 30 * S })).toBe('live');
    expect(await store.readRaw(root, id)).toEqual(before);
    const published: unknown[] = [];
    expect(await helper.replayCommitOnce(id, token, (commit) => void published.push(commit), { nowMs: 70 * S, minIdleMs: 30 * S })).toBe('completed');
    expect(published).toEqual([{ n: 1 }]);
    await expect(helper.replayCommitOnce(id, token, refuse, { nowMs: 71 * S, minIdleMs: -1 })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION' });
  });

  it('abandons only a pre-commit lease with the current token (W12)', async () => {
    const root = await tempRoot();
    const table = await openWork(root, { shardCount: 2 });
    const payload = { path: 'seed', target_branch: 9 };
    const id = workIdOf(payload);
    const first = ok(await table.claim(id, payload, { owner: 'first', worker: 1, nowMs: 10 * S }));
    expect(await table.abandon(id, 'wrong-token')).toEqual({ ok: false, reason: 'stale', id });
    expect(await table.abandon(id, first.token)).toEqual({ ok: true });
    expect(await store.readRaw(root, id).then((bytes) => bytes !== null)).toBe(false);
    if (store.name === 'files') expect(await exists(table.lockPath(id))).toBe(true); // lock files are never deleted
    const second = ok(await table.claim(id, payload, { owner: 'second', worker: 2, nowMs: 11 * S }));
    expect(second.attempts).toBe(1);
    ok(await table.beginCommit(id, second.token, { nowMs: 12 * S }));
    expect(await table.abandon(id, second.token)).toMatchObject({ ok: false, reason: 'stale' });
    expect(await store.readRaw(root, id).then((bytes) => bytes !== null)).toBe(true);
  });

  it('fails closed on a redirected record and rejects bad times and TTLs (W13)', async () => {
    const root = await tempRoot();
    const table = await openWork(root, { shardCount: 2 });
    const cId = 'c'.repeat(64);
    const redirected = canonicalJsonBytes({ schema: 1, kind: 'work', id: 'd'.repeat(64), status: 'leased', payload: { path: 'wrong' }, owner: 'master', previousOwner: '', worker: 0, token: 'token', updatedMs: 1000, attempts: 1, steals: 0 });
    await store.writeRaw(root, cId, redirected);
    expect(await table.claim(cId, { path: 'replacement' }, { owner: 'other', nowMs: 100 * S })).toMatchObject({ ok: false, reason: 'corrupt', corrupt: { id: cId } });
    expect(await store.readRaw(root, cId)).toEqual(redirected);
    expect(await table.recoverExpired({ nowMs: 100 * S })).toEqual([]);
    expect(await table.snapshotCounts({ nowMs: 100 * S })).toMatchObject({ corrupt: 1, leased: 0 });
    const eId = 'e'.repeat(64);
    expect(await codeOf(table.claim(eId, { path: 'seed' }, { owner: 'master', nowMs: Number.NaN }))).toBe('ERR_INVALID_OPTION');
    expect(await codeOf(table.claim(eId, { path: 'seed' }, { owner: 'master', nowMs: -1 }))).toBe('ERR_INVALID_OPTION');
    const first = ok(await table.claim(eId, { path: 'seed' }, { owner: 'master', nowMs: 100 * S }));
    expect(await codeOf(table.recoverExpired({ nowMs: 2 * S, leaseTtlMs: Number.POSITIVE_INFINITY }))).toBe('ERR_INVALID_OPTION');
    expect(await codeOf(table.claim('not-an-id', { path: 'seed' }, { owner: 'master', nowMs: 1 }))).toBe('ERR_INVALID_JOB');
    // TTL 0 takes a leased record even when its updatedMs lies in the future (clock skew).
    expect((await table.recoverExpired({ nowMs: 2 * S, leaseTtlMs: 0 })).map((e) => [e.id, e.payload])).toEqual([[eId, { path: 'seed' }]]);
    const forced = ok(await table.claim(eId, { path: 'seed' }, { owner: 'recovery', nowMs: 2 * S, leaseTtlMs: 0 }));
    expect(forced.token).not.toBe(first.token);
    expect(await table.complete(eId, first.token, { nowMs: 3 * S })).toBe(false);
  });

  it('fails closed on committing records without a manifest and on corrupt records (W14)', async () => {
    const root = await tempRoot();
    const table = await openWork(root, { shardCount: 2 });
    const id = 'f'.repeat(64);
    const { token } = ok(await table.claim(id, { path: 'seed' }, { owner: 'master', nowMs: 1 * S }));
    ok(await table.beginCommit(id, token, { nowMs: 2 * S }));
    expect(await codeOf(table.recoverCommittingRecords())).toBe('ERR_LEASE_CORRUPT');
    await store.writeRaw(root, id, canonicalJsonBytes({ schema: 0 }));
    expect(await codeOf(table.recoverCommittingRecords())).toBe('ERR_LEASE_CORRUPT');
    expect(await codeOf(table.snapshotRecords())).toBe('ERR_LEASE_CORRUPT');
  });
});

describe('FencedWorkLeaseTable (file store: barriers, file faults, lock files)', () => {
  it('renews a heartbeat batch with one directory barrier per touched shard (W3)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openWork(root, {}, { fsLayer });
    const tokens = new Map<string, string>();
    for (const id of [ID_A0, ID_B0, ID_C1]) tokens.set(id, ok(await table.claim(id, { path: id }, { owner: 'master', nowMs: 10 * S })).token);
    fsLayer.resetCounts();
    const result = await table.heartbeatMany(tokens, { nowMs: 19 * S });
    expect(result).toEqual({ renewed: [ID_A0, ID_C1, ID_B0].sort(), lost: [], corrupt: [], directoryBarriers: 2 });
    expect([...fsLayer.directoryBarrierPaths].sort()).toEqual([path.join(root, '000'), path.join(root, '001')]);
    expect(fsLayer.barriers()).toEqual({ file: 3, filesystem: 0, directory: 2 });
    for (const id of tokens.keys()) expect((await recordJson(table.recordPath(id))).updatedMs).toBe(19 * S);
  });

  it('restores every record of a heartbeat batch when a later record fails to write (W4)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openWork(root, {}, { fsLayer });
    const tokens = new Map<string, string>();
    for (const id of [ID_A0, ID_B0]) tokens.set(id, ok(await table.claim(id, { path: id }, { owner: 'master', nowMs: 10 * S })).token);
    const before = [await bytesOf(table.recordPath(ID_A0)), await bytesOf(table.recordPath(ID_B0))];
    fsLayer.fail({ op: 'write', path: (p) => p.includes(ID_B0) && p.endsWith('.tmp') });
    const error = await table.heartbeatMany(tokens, { nowMs: 19 * S }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ERR_LEASE_IO', details: { step: 'stage', restored: true } });
    expect([await bytesOf(table.recordPath(ID_A0)), await bytesOf(table.recordPath(ID_B0))]).toEqual(before);
    expect((await listFiles(root)).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('never acknowledges a heartbeat whose directory barrier failed, and restores the old expiry (W5)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openWork(root, {}, { fsLayer });
    const tokens = new Map<string, string>();
    for (const id of [ID_A0, ID_B0]) tokens.set(id, ok(await table.claim(id, { path: id }, { owner: 'master', nowMs: 10 * S })).token);
    const before = [await bytesOf(table.recordPath(ID_A0)), await bytesOf(table.recordPath(ID_B0))];
    fsLayer.resetCounts();
    fsLayer.fail({ op: 'syncDirectory' });
    const error = await table.heartbeatMany(tokens, { nowMs: 19 * S }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ERR_LEASE_IO', details: { step: 'directory-barrier', restored: true } });
    // One failed barrier, then the restore's barrier of the same shard.
    expect(fsLayer.count('syncDirectory')).toBe(2);
    const reopened = await openWork(root);
    expect([await bytesOf(reopened.recordPath(ID_A0)), await bytesOf(reopened.recordPath(ID_B0))]).toEqual(before);
  });

  it('classifies stale tokens as lost without an extra barrier (W6)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openWork(root, {}, { fsLayer });
    const current = ok(await table.claim(ID_A0, { path: 'a' }, { owner: 'master', nowMs: 10 * S })).token;
    ok(await table.claim(ID_C1, { path: 'c' }, { owner: 'master', nowMs: 10 * S }));
    const staleBytes = await bytesOf(table.recordPath(ID_C1));
    fsLayer.resetCounts();
    const result = await table.heartbeatMany([[ID_A0, current], [ID_C1, 'stale-token']], { nowMs: 19 * S });
    expect(result).toEqual({ renewed: [ID_A0], lost: [ID_C1], corrupt: [], directoryBarriers: 1 });
    expect(fsLayer.directoryBarrierPaths).toEqual([path.join(root, '000')]);
    expect(await bytesOf(table.recordPath(ID_C1))).toEqual(staleBytes);
  });

  it('splits a large heartbeat into batches of at most MAX_HEARTBEAT_BATCH locks', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openWork(root, { shardCount: 1 }, { fsLayer });
    const ids = Array.from({ length: MAX_HEARTBEAT_BATCH + 4 }, (_, i) => workIdOf({ i }));
    // Set up with one batch of claims: one barrier pass for all of them.
    const { outcomes } = await table.executeBatch(ids.map((id) => table.planClaim(id, { p: id }, { owner: 'm', nowMs: 1 * S })));
    const tokens = outcomes.map((o, i) => [ids[i]!, (o as { value: { token: string } }).value.token] as const);
    fsLayer.resetCounts();
    const result = await table.heartbeatMany(tokens, { nowMs: 2 * S });
    expect(result.renewed).toHaveLength(ids.length);
    expect(result.directoryBarriers).toBe(2);
    expect(fsLayer.barriers().directory).toBe(2);
  });

  it('removes the temp file and keeps the old record when the rename fails (W10)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openWork(root, { shardCount: 2 }, { fsLayer });
    fsLayer.fail({ op: 'rename', code: 'EIO' });
    const id = 'a'.repeat(64);
    expect(await codeOf(table.claim(id, { path: 'seed' }, { owner: 'master', nowMs: 1 * S }))).toBe('ERR_LEASE_IO');
    expect(await exists(table.recordPath(id))).toBe(false);
    expect((await listFiles(root)).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('restores the pre-claim state when the directory barrier fails, and a leftover from a failed restore expires after the TTL (W11)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openWork(root, { shardCount: 2 }, { fsLayer });
    const payload = { path: 'seed', origin: 'power-loss-test' };
    const id = workIdOf(payload);
    await mkdir(table.shardDirOf(id), { recursive: true });
    fsLayer.fail({ op: 'syncDirectory', path: table.shardDirOf(id) });
    const error = await table.claim(id, payload, { owner: 'master-a', nowMs: 10 * S }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ERR_LEASE_IO', details: { step: 'directory-barrier', restored: true } });
    expect(await exists(table.recordPath(id))).toBe(false);

    // Storage refuses the restore too: the new record stays, with a token nobody received.
    fsLayer.clearRules();
    fsLayer.fail({ op: 'syncDirectory', path: table.shardDirOf(id), times: Infinity });
    fsLayer.fail({ op: 'unlink', path: table.recordPath(id) });
    const second = await table.claim(id, payload, { owner: 'master-a', nowMs: 10 * S }).catch((e: unknown) => e);
    expect(second).toMatchObject({ code: 'ERR_LEASE_IO', details: { restored: false } });
    fsLayer.clearRules();
    const restarted = await openWork(root, { shardCount: 2 });
    const records = await restarted.snapshotRecords();
    expect(records.map((r) => [r.id, r.record.payload, r.record.status])).toEqual([[id, payload, 'leased']]);
    expect(await restarted.recoverExpired({ nowMs: 19 * S })).toEqual([]);
    expect((await restarted.recoverExpired({ nowMs: 20 * S })).map((e) => e.payload)).toEqual([payload]);
  });

  it('treats a symlink or a directory at the record path as corrupt and leaves it alone', async () => {
    const root = await tempRoot();
    const table = await openWork(root, { shardCount: 2 });
    const target = path.join(root, 'elsewhere.json');
    await writeFile(target, 'untouched');
    await mkdir(table.shardDirOf(ID_A0), { recursive: true });
    await symlink(target, table.recordPath(ID_A0));
    expect(await table.claim(ID_A0, { path: 'x' }, { owner: 'm', nowMs: 1 })).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(await readFile(target, 'utf8')).toBe('untouched');
    await mkdir(table.shardDirOf(ID_C1), { recursive: true });
    await mkdir(table.recordPath(ID_C1));
    expect(await table.claim(ID_C1, { path: 'x' }, { owner: 'm', nowMs: 1 })).toMatchObject({ ok: false, reason: 'corrupt' });
    expect((await lstat(table.recordPath(ID_C1))).isDirectory()).toBe(true);
  });

  it('bounds lock acquisition and never steals an old-looking lock (W15)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const holder = await openWork(root, { lockAcquireTimeoutMs: 1000, lockAgeHintMs: 1000 }, { fsLayer });
    const contender = await openWork(root, { lockAcquireTimeoutMs: 10, lockAgeHintMs: 1000 });
    const id = 'b'.repeat(64);
    let reached!: () => void;
    const atHook = new Promise<void>((resolve) => (reached = resolve));
    let proceed!: () => void;
    const released = new Promise<void>((resolve) => (proceed = resolve));
    // Hold the lock: the holder's claim pauses right after taking it, at the record read.
    fsLayer.hook({ op: 'open', path: (p) => p === holder.recordPath(id), run: async () => { reached(); await released; } });
    const held = holder.claim(id, { path: 'held' }, { owner: 'holder', nowMs: 1 * S });
    await atHook;
    await utimes(holder.lockPath(id), 1, 1);
    const error = await contender.claim(id, { path: 'seed' }, { owner: 'master', nowMs: 1 * S }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ERR_LOCK_TIMEOUT', details: { lockAgeHintMs: 1000 } });
    expect((await lstat(holder.lockPath(id))).isFile()).toBe(true);
    proceed();
    ok(await held);
    expect(await contender.claim(id, { path: 'seed' }, { owner: 'master', nowMs: 1 * S })).toMatchObject({ ok: false, reason: 'conflict' });
    expect(await contender.claim(id, { path: 'seed' }, { owner: 'master', nowMs: 20 * S })).toMatchObject({ ok: true });
  });

  it('excludes two table instances in one process with the in-process locker too', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const holder = await openWork(root, { coordination: 'single' }, { fsLayer, native: null });
    const contender = await openWork(root, { coordination: 'single', lockAcquireTimeoutMs: 10 }, { native: null });
    expect(holder.lockerKind).toBe('in-process');
    let reached!: () => void;
    const atHook = new Promise<void>((resolve) => (reached = resolve));
    let proceed!: () => void;
    const released = new Promise<void>((resolve) => (proceed = resolve));
    fsLayer.hook({ op: 'open', path: (p) => p === holder.recordPath(ID_A0), run: async () => { reached(); await released; } });
    const held = holder.claim(ID_A0, { p: 1 }, { owner: 'holder', nowMs: 1 * S });
    await atHook;
    expect(await codeOf(contender.claim(ID_A0, { p: 1 }, { owner: 'other', nowMs: 1 * S }))).toBe('ERR_LOCK_TIMEOUT');
    proceed();
    ok(await held);
    expect(await contender.claim(ID_A0, { p: 1 }, { owner: 'other', nowMs: 1 * S })).toMatchObject({ ok: false, reason: 'conflict' });
  });

  it('releases the lock after an exception inside the critical section (W16)', async () => {
    const root = await tempRoot();
    const table = await openWork(root, { lockAcquireTimeoutMs: 100 });
    const id = 'a'.repeat(64);
    const boom = { name: 'boom', lockIds: [id], apply: () => { throw new Error('inside the lock'); } };
    const { outcomes } = await table.executeBatch([boom]);
    expect(outcomes[0]).toMatchObject({ ok: false });
    ok(await table.claim(id, { path: 'after' }, { owner: 'm', nowMs: 1 }));
    expect((await lstat(table.lockPath(id))).isFile()).toBe(true);
  });

  it('refuses a directory or a symlink at the lock path and leaves it in place (W18, D31)', async () => {
    const root = await tempRoot();
    const table = await openWork(root, { shardCount: 2 });
    const dId = 'd'.repeat(64);
    await mkdir(table.lockPath(dId), { recursive: true });
    expect(await codeOf(table.claim(dId, { path: 'x' }, { owner: 'm', nowMs: 1 }))).toBe('ERR_LOCK_PATH');
    expect((await lstat(table.lockPath(dId))).isDirectory()).toBe(true);
    const eId = 'e'.repeat(64);
    const victim = path.join(root, 'victim');
    await writeFile(victim, 'keep');
    await mkdir(table.shardDirOf(eId), { recursive: true });
    await symlink(victim, table.lockPath(eId));
    expect(await codeOf(table.claim(eId, { path: 'x' }, { owner: 'm', nowMs: 1 }))).toBe('ERR_LOCK_PATH');
    expect(await readFile(victim, 'utf8')).toBe('keep');
    expect(await exists(table.recordPath(eId))).toBe(false);
  });

  it('never falls back to running without a lock when flock fails (W19)', async () => {
    const root = await tempRoot();
    const unsupported = (): never => { throw Object.assign(new Error('filesystem locking unsupported'), { code: 'EOPNOTSUPP' }); };
    // flock failing from the start: the table refuses to open (the metadata is written under a lock).
    const broken = { tryLockExclusive: unsupported, unlock: () => undefined, syncfs: () => undefined };
    expect(await openWork(root, {}, { native: broken }).catch((e: unknown) => e)).toMatchObject({ code: 'ERR_LEASE_IO', details: { errno: 'EOPNOTSUPP' } });
    // flock failing after open (the metadata lock worked): every claim fails, none runs unlocked.
    let locks = 0;
    const breaksAfterOpen = { tryLockExclusive: () => (locks++ === 0 ? true : unsupported()), unlock: () => undefined, syncfs: () => undefined };
    const table = await openWork(root, {}, { native: breaksAfterOpen });
    const id = 'e'.repeat(64);
    const error = await table.claim(id, { path: 'x' }, { owner: 'm', nowMs: 1 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ERR_LEASE_IO', details: { errno: 'EOPNOTSUPP' } });
    expect(await exists(table.recordPath(id))).toBe(false);
    const healthy = await openWork(root, { coordination: 'single' });
    ok(await healthy.claim(id, { path: 'x' }, { owner: 'm', nowMs: 1 }));
  });

  it('rejects unbounded or malformed durations and options with ERR_INVALID_OPTION (W20)', async () => {
    const root = await tempRoot();
    for (const bad of [{ leaseTtlMs: Number.POSITIVE_INFINITY }, { leaseTtlMs: 10 }, { lockAcquireTimeoutMs: Number.NaN }, { lockAgeHintMs: -1 }, { shardCount: 0 }, { coordination: 'many' }, { bogus: 1 }]) {
      expect(await codeOf(FencedWorkLeaseTable.open(root, bad))).toBe('ERR_INVALID_OPTION');
    }
  });

  it('refuses multi-coordinator mode without the native addon, and runs single-coordinator mode in-process', async () => {
    const root = await tempRoot();
    expect(await codeOf(openWork(root, { coordination: 'multi' }, { native: null }))).toBe('ERR_NATIVE_UNAVAILABLE');
    const single = await openWork(root, { coordination: 'single' }, { native: null });
    expect(single.lockerKind).toBe('in-process');
    ok(await single.claim(ID_A0, { path: 'x' }, { owner: 'm', nowMs: 1 }));
  });

  it('refuses to open a root with another shard count or table kind', async () => {
    const root = await tempRoot();
    await openWork(root, { shardCount: 4 });
    expect(await codeOf(openWork(root, { shardCount: 8 }))).toBe('ERR_INVALID_OPTION');
    const { FencedTargetLeaseTable } = await import('../../src/lease/target-lease-table.js');
    expect(await codeOf(FencedTargetLeaseTable.open(root, { shardCount: 4 }))).toBe('ERR_INVALID_OPTION');
  });

  it('refuses to open in multi-coordinator mode when the filesystem probe fails, naming the step', async () => {
    const root = await tempRoot();
    const { FsProbeError } = await import('../../src/errors.js');
    const probe = async (): Promise<void> => {
      throw new FsProbeError('flock did not exclude another process', { step: 'flock-exclusion' });
    };
    const error = await openWork(root, { verifyFilesystem: true }, { probe }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ERR_FS_PROBE', details: { step: 'flock-exclusion' } });
    let probed = 0;
    await openWork(root, { verifyFilesystem: true, coordination: 'single' }, { probe: async () => void (probed += 1) });
    expect(probed).toBe(0);
  });

  it.skipIf(loadNative() === null)('qualifies a real lease directory at open in multi-coordinator mode', async () => {
    const root = await tempRoot();
    const table = await openWork(root, { verifyFilesystem: true });
    expect((await table.claim(ID_A0, { p: 1 }, { owner: 'm', nowMs: 1 })).ok).toBe(true);
  });

  it.skipIf(loadNative() === null)('uses flock when the addon is built', async () => {
    const table = await openWork(await tempRoot());
    expect(table.lockerKind).toBe('flock');
  });
});
