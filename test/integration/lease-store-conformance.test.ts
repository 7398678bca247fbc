/**
 * The lease guarantees every store keeps, run against each store of LEASE_STORES_UNDER_TEST
 * (files; etcd against a real local etcd): all-or-nothing group claims, conflicts, fencing of stale
 * tokens, committing records never taken over, corrupt records failing closed and left untouched,
 * the holder's TTL deciding expiry, per-operation batch outcomes, exactly-once replay between
 * racing coordinators, a done record's manifest offered to a claim that asks, and answers kept in
 * each branch's answer record (a question answered on an input is refused on that input by every
 * coordinator; claims and heartbeats never write answers).
 */
import { expect, it } from 'vitest';
import { canonicalJsonBytes } from '../../src/lease/canonical-json.js';
import { answerGenerationRecordId, answerRecordId, targetRecordId, workIdOf } from '../../src/lease/identity.js';
import { MAX_OPEN_INPUTS, MAX_SETTLED_INPUTS, type LeaseRecord, type RecordKind } from '../../src/lease/lease-record.js';
import type { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import type { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { S, openTarget, openWork, tempRoot } from '../helpers/lease-fixtures.js';
import { describeEachStore, type StoreContext } from '../helpers/lease-stores.js';

const GENERATION = answerGenerationRecordId();
/** The stores with an answer generation record: all but etcd, whose batches are bounded (answers-view.ts). */
const hasGeneration = (store: StoreContext): boolean => store.name !== 'etcd';
const generationIds = (store: StoreContext): string[] => (hasGeneration(store) ? [GENERATION] : []);

type Table = FencedWorkLeaseTable | FencedTargetLeaseTable;

/** Every record of a table (a released member's lease record is gone on every store). */
async function snapshotRecordsOf(table: FencedTargetLeaseTable): Promise<{ id: string; record: LeaseRecord }[]> {
  return table.snapshotRecords();
}

function range(from: number, to: number): bigint[] {
  const out: bigint[] = [];
  for (let t = from; t <= to; t += 1) out.push(BigInt(t));
  return out;
}

/** Raw access to one record's stored bytes, through the store's hooks (to plant and check corrupt values). */
async function rawRecord(store: StoreContext, table: Table, _kind: RecordKind, id: string, bytes?: Buffer): Promise<Buffer | null> {
  if (bytes) await store.writeRaw(table.root, id, bytes);
  return store.readRaw(table.root, id);
}

describeEachStore('lease store conformance', (store) => {
  const tables: Table[] = [];
  async function work(root: string, options: Record<string, unknown> = {}): Promise<FencedWorkLeaseTable> {
    const table = await openWork(root, { ...store.options(), ...options });
    tables.push(table);
    return table;
  }
  async function target(root: string, options: Record<string, unknown> = {}): Promise<FencedTargetLeaseTable> {
    const table = await openTarget(root, { ...store.options(), ...options });
    tables.push(table);
    return table;
  }
  async function closeAll(): Promise<void> {
    await Promise.all(tables.splice(0).map((t) => t.close()));
  }

  it('claims a group all-or-nothing and refuses an overlapping one without writing any member', async () => {
    try {
      const root = await tempRoot();
      const a = await target(root);
      const b = await target(root);
      expect(a.store).toBe(store.name);
      const first = await a.claimGroup([11n, 22n], { path: 'a' }, { owner: 'coord-a', nowMs: 100 * S });
      expect(first.ok).toBe(true);
      const refused = await b.claimGroup([22n, 33n], { path: 'b' }, { owner: 'coord-b', nowMs: 101 * S });
      expect(refused).toMatchObject({ ok: false, reason: 'conflict', holders: [{ target: 22n, owner: 'coord-a' }] });
      const ids = (await b.snapshotRecords()).map((e) => e.id).sort();
      expect(ids).toEqual([targetRecordId(11n), targetRecordId(22n)].sort());
      if (!first.ok) return;
      expect(await a.releaseGroup([11n, 22n], first.token)).toEqual({ ok: true });
      expect((await b.claimGroup([22n, 33n], { path: 'b' }, { owner: 'coord-b', nowMs: 102 * S })).ok).toBe(true);
    } finally {
      await closeAll();
    }
  });

  it('claims, renews and releases a 64-member group in one batch each', async () => {
    try {
      const root = await tempRoot();
      const table = await target(root);
      const group = range(1000, 1063);
      const claim = await table.claimGroup(group, { path: 'big' }, { owner: 'coord', nowMs: 10 * S });
      if (!claim.ok) throw new Error(`claim failed: ${claim.reason}`);
      expect((await table.snapshotCounts({ nowMs: 10 * S })).leased).toBe(64);
      expect(await table.heartbeatGroup(group, claim.token, { nowMs: 15 * S })).toEqual({ ok: true });
      expect((await table.snapshotRecords()).every((e) => e.record.updatedMs === 15 * S)).toBe(true);
      expect(await table.releaseGroup(group, claim.token)).toEqual({ ok: true });
      expect(await table.snapshotRecords()).toEqual([]);
    } finally {
      await closeAll();
    }
  });

  it('fences the old token once an expired group is taken over', async () => {
    try {
      const root = await tempRoot();
      const a = await target(root);
      const b = await target(root);
      const group = [77n, 88n];
      const old = await a.claimGroup(group, { path: 'a' }, { owner: 'coord-a', nowMs: 10 * S });
      if (!old.ok) throw new Error('claim failed');
      expect((await b.claimGroup(group, { path: 'b' }, { owner: 'coord-b', nowMs: 19 * S })).ok).toBe(false);
      const stolen = await b.claimGroup(group, { path: 'b' }, { owner: 'coord-b', nowMs: 20 * S });
      if (!stolen.ok) throw new Error('takeover failed');
      expect(await a.heartbeatGroup(group, old.token, { nowMs: 21 * S })).toMatchObject({ ok: false, reason: 'stale' });
      expect(await a.releaseGroup(group, old.token)).toMatchObject({ ok: false, reason: 'stale' });
      for (const entry of await a.snapshotRecords()) expect(entry.record).toMatchObject({ token: stolen.token, steals: 1, attempts: 2, previousOwner: 'coord-a' });
      expect(await b.releaseGroup(group, stolen.token)).toEqual({ ok: true });
    } finally {
      await closeAll();
    }
  });

  it('never takes over a committing record, not even with TTL 0, and completes it once', async () => {
    try {
      const root = await tempRoot();
      const a = await work(root);
      const b = await work(root);
      const id = workIdOf({ job: 'committing' });
      const claim = await a.claim(id, { job: 1 }, { owner: 'coord-a', nowMs: 10 * S });
      if (!claim.ok) throw new Error('claim failed');
      expect(await a.beginCommit(id, claim.token, { nowMs: 11 * S, commit: { findings: ['x'] } })).toEqual({ ok: true });
      expect(await b.claim(id, { job: 1 }, { owner: 'coord-b', nowMs: 10_000 * S })).toMatchObject({ ok: false, reason: 'conflict', holder: { status: 'committing' } });
      expect(await b.claim(id, { job: 1 }, { owner: 'coord-b', nowMs: 10_000 * S, leaseTtlMs: 0 })).toMatchObject({ ok: false, reason: 'conflict' });
      expect(await b.completeOnce(id, 'not-the-token', { nowMs: 12 * S })).toBe('stale');
      expect(await a.completeOnce(id, claim.token, { nowMs: 12 * S })).toBe('completed');
      expect(await a.completeOnce(id, claim.token, { nowMs: 13 * S })).toBe('already');
      expect(await b.claim(id, { job: 1 }, { owner: 'coord-b', nowMs: 10_000 * S, leaseTtlMs: 0 })).toMatchObject({ ok: false, reason: 'conflict', holder: { status: 'done' } });
    } finally {
      await closeAll();
    }
  });

  it('names a done record\'s manifest in a refused claim only when the claim asks for it (doneCommit)', async () => {
    try {
      const root = await tempRoot();
      const a = await work(root);
      const b = await work(root);
      const id = workIdOf({ job: 'traced' });
      const manifest = { schema: 1, trace: { sha256: 'ab'.repeat(32), size: 3, path: `traces/${id}.${'ab'.repeat(32)}` } };
      const claim = await a.claim(id, { job: 1 }, { owner: 'coord-a', nowMs: 10 * S });
      if (!claim.ok) throw new Error('claim failed');
      // While committing, the manifest is not offered: the work is not finished yet.
      expect(await a.beginCommit(id, claim.token, { nowMs: 11 * S, commit: manifest })).toEqual({ ok: true });
      const committing = await b.claim(id, { job: 1 }, { owner: 'coord-b', nowMs: 12 * S, doneCommit: true });
      expect(committing).toMatchObject({ ok: false, reason: 'conflict', holder: { status: 'committing', owner: 'coord-a' } });
      expect(committing.ok === false && committing.reason === 'conflict' ? committing.holder.commit : 'unset').toBeUndefined();
      expect(await a.completeOnce(id, claim.token, { nowMs: 13 * S })).toBe('completed');
      const asked = await b.claim(id, { job: 1 }, { owner: 'coord-b', nowMs: 14 * S, doneCommit: true });
      expect(asked).toMatchObject({ ok: false, reason: 'conflict', holder: { status: 'done', owner: 'coord-a', commit: manifest } });
      const plain = await b.claim(id, { job: 1 }, { owner: 'coord-b', nowMs: 14 * S });
      expect(plain).toMatchObject({ ok: false, reason: 'conflict', holder: { status: 'done', owner: 'coord-a' } });
      expect(plain.ok === false && plain.reason === 'conflict' ? Object.keys(plain.holder) : []).not.toContain('commit');
      expect(() => b.planClaim(id, { job: 1 }, { owner: 'coord-b', nowMs: 14 * S, doneCommit: 'yes' as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
    } finally {
      await closeAll();
    }
  });

  it('fails closed on a corrupt record and leaves its bytes as they were', async () => {
    try {
      const root = await tempRoot();
      const table = await target(root);
      const id = targetRecordId(101n);
      const corrupt = canonicalJsonBytes({ schema: 0, kind: 'target', id, status: 'leased', payload: {}, token: 'corrupt', updatedMs: 10 * S });
      await rawRecord(store, table, 'target', id, corrupt);
      expect(await table.claimGroup([101n, 102n], { path: 'x' }, { owner: 'c', nowMs: 20 * S })).toMatchObject({ ok: false, reason: 'corrupt', corrupt: [{ target: 101n }] });
      expect(await table.claimGroup([101n], { path: 'x' }, { owner: 'c', nowMs: 20 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
      expect(await table.heartbeatGroup([101n], 'corrupt', { nowMs: 20 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
      expect(await table.releaseGroup([101n], 'corrupt')).toMatchObject({ ok: false, reason: 'corrupt' });
      await expect(table.snapshotRecords()).rejects.toMatchObject({ code: 'ERR_LEASE_CORRUPT' });
      expect((await table.snapshotCounts({ nowMs: 20 * S })).corrupt).toBe(1);
      expect((await rawRecord(store, table, 'target', id))?.equals(corrupt)).toBe(true);
      expect((await table.snapshotRecords({ corrupt: 'skip' })).map((e) => e.id)).toEqual([]);

      const garbage = Buffer.from('{"not json');
      const wtable = await work(await tempRoot());
      const wid = workIdOf({ job: 'garbage' });
      await rawRecord(store, wtable, 'work', wid, garbage);
      expect(await wtable.claim(wid, { job: 1 }, { owner: 'c', nowMs: 20 * S, leaseTtlMs: 0 })).toMatchObject({ ok: false, reason: 'corrupt' });
      expect((await rawRecord(store, wtable, 'work', wid))?.equals(garbage)).toBe(true);
    } finally {
      await closeAll();
    }
  });

  it('judges expiry by the holder\'s TTL, not the reader\'s', async () => {
    try {
      const root = await tempRoot();
      const short = await work(root, { leaseTtlMs: 5 * S });
      const long = await work(root, { leaseTtlMs: 60 * S });
      const id = workIdOf({ job: 'ttl' });
      expect((await short.claim(id, { job: 1 }, { owner: 'short', nowMs: 100 * S })).ok).toBe(true);
      expect((await long.claim(id, { job: 1 }, { owner: 'long', nowMs: 104 * S })).ok).toBe(false);
      expect(await long.recoverExpired({ nowMs: 105 * S })).toMatchObject([{ id, owner: 'short' }]);
      expect((await long.claim(id, { job: 1 }, { owner: 'long', nowMs: 105 * S })).ok).toBe(true);
    } finally {
      await closeAll();
    }
  });

  it('keeps each operation\'s outcome in a batch: a failed one writes nothing, the others commit', async () => {
    try {
      const root = await tempRoot();
      const table = await work(root);
      const a = workIdOf({ job: 'batch-a' });
      const b = workIdOf({ job: 'batch-b' });
      const held = await table.claim(b, { job: 'b' }, { owner: 'other', nowMs: 10 * S });
      if (!held.ok) throw new Error('claim failed');
      const failing = { name: 'explodes', lockIds: [b], apply: () => { throw new Error('boom'); } };
      const result = await table.executeBatch([table.planClaim(a, { job: 'a' }, { owner: 'me', nowMs: 11 * S }), failing, table.planClaim(b, { job: 'b' }, { owner: 'me', nowMs: 11 * S })]);
      expect(result.outcomes[0]).toMatchObject({ ok: true, value: { ok: true } });
      expect(result.outcomes[1]).toMatchObject({ ok: false });
      expect(result.outcomes[2]).toMatchObject({ ok: true, value: { ok: false, reason: 'conflict' } });
      const records = new Map((await table.snapshotRecords()).map((e) => [e.id, e.record]));
      expect(records.get(a)?.owner).toBe('me');
      expect(records.get(b)?.token).toBe(held.token);
    } finally {
      await closeAll();
    }
  });

  it('lets exactly one of several racing coordinators claim a contended group', async () => {
    try {
      const root = await tempRoot();
      const racers = await Promise.all(range(1, 6).map(async () => target(root)));
      const group = range(500, 531);
      const results = await Promise.all(racers.map((t, i) => t.claimGroup(group, { i }, { owner: `coord-${i}`, nowMs: 10 * S })));
      expect(results.filter((r) => r.ok)).toHaveLength(1);
      const tokens = new Set((await racers[0]!.snapshotRecords()).map((e) => e.record.token));
      expect(tokens.size).toBe(1);
    } finally {
      await closeAll();
    }
  });

  it('publishes a replayed commit exactly once when two coordinators replay it at once', async () => {
    try {
      const root = await tempRoot();
      const owner = await work(root);
      const id = workIdOf({ job: 'replay' });
      const claim = await owner.claim(id, { job: 1 }, { owner: 'dead', nowMs: 10 * S });
      if (!claim.ok) throw new Error('claim failed');
      expect(await owner.beginCommit(id, claim.token, { nowMs: 11 * S, commit: { findings: ['f'] } })).toEqual({ ok: true });
      const survivors = await Promise.all([work(root), work(root), work(root)]);
      let published = 0;
      const results = await Promise.all(
        survivors.map((s) =>
          s.replayCommitOnce(
            id,
            claim.token,
            async () => {
              published += 1;
            },
            { nowMs: 100 * S, minIdleMs: 10 * S },
          ),
        ),
      );
      expect(published).toBe(1);
      expect(results.filter((r) => r === 'completed')).toHaveLength(1);
      // A loser finds the publication taken over (`live`: its taker is publishing) or done.
      expect(results.filter((r) => r !== 'completed').every((r) => r === 'already' || r === 'live')).toBe(true);
      expect((await owner.snapshotRecords())[0]?.record.status).toBe('done');
    } finally {
      await closeAll();
    }
  });
  /** An input's identity as the tables take it: 64 lowercase hex characters. */
  const input = (n: number): string => n.toString(16).padStart(64, '0');

  it('keeps what a run answered with the released members, and refuses a claim on that input from any coordinator', async () => {
    try {
      const root = await tempRoot();
      const a = await target(root);
      const b = await target(root);
      const claim = await a.claimGroup([1n, 2n, 3n], { path: 'a' }, { owner: 'coord-a', nowMs: 10 * S, input: input(1) });
      if (!claim.ok) throw new Error(`claim failed: ${claim.reason}`);
      expect(await a.releaseGroup([1n, 2n, 3n], claim.token, { nowMs: 11 * S, answers: { input: input(1), settled: [1n, 2n] } })).toEqual({ ok: true });
      // Every lease is gone; each answered member has an answer record with the input, and
      // the answer generation record counts the release's write of them.
      const all = await snapshotRecordsOf(b);
      expect(all.map((e) => e.id).sort()).toEqual([answerRecordId(1n), answerRecordId(2n), ...generationIds(store)].sort());
      if (hasGeneration(store)) expect(all.find((e) => e.id === GENERATION)!.record).toMatchObject({ role: 'answers-generation', status: 'done', generation: 1, since: 0, changed: [[1, '1'], [1, '2']] });
      const kept = all.filter((e) => e.id !== GENERATION);
      for (const e of kept) expect(e.record).toMatchObject({ role: 'answers', status: 'done', answered: true, settled: [input(1)], completedMs: 11 * S, owner: 'coord-a' });
      for (const e of kept) expect(e.record.targets).toBeUndefined();
      // The generation record is not counted: it is no lease.
      expect(await b.snapshotCounts({ nowMs: 12 * S })).toMatchObject({ leased: 0, done: 2, corrupt: 0 });

      // Another coordinator asking member 2 on the same input is refused, and nothing is written.
      const ids24 = [targetRecordId(2n), targetRecordId(4n), answerRecordId(2n), answerRecordId(4n)];
      const before = await Promise.all(ids24.map((id) => store.readRaw(root, id)));
      expect(await b.claimGroup([2n, 4n], { path: 'b' }, { owner: 'coord-b', nowMs: 12 * S, input: input(1) })).toEqual({ ok: false, reason: 'answered', answered: [2n] });
      const after = await Promise.all(ids24.map((id) => store.readRaw(root, id)));
      expect(after).toEqual(before);
      expect([after[1], after[3]]).toEqual([null, null]);

      // On another input the question is open: the claim holds. Its lease record carries no
      // answers (claims and heartbeats never write them), and the answer record is not touched
      // by the claim, the heartbeat or a release that answered nothing.
      const other = await b.claimGroup([2n, 4n], { path: 'b' }, { owner: 'coord-b', nowMs: 13 * S, input: input(2) });
      if (!other.ok) throw new Error(`claim failed: ${other.reason}`);
      const leased = (await b.snapshotRecords()).find((e) => e.id === targetRecordId(2n))!.record;
      expect(leased).toMatchObject({ status: 'leased', owner: 'coord-b', attempts: 1, previousOwner: '', steals: 0 });
      for (const field of ['answered', 'settled', 'open', 'role']) expect(leased[field]).toBeUndefined();
      expect(await b.heartbeatGroup([2n, 4n], other.token, { nowMs: 13.5 * S })).toEqual({ ok: true });
      expect(await a.claimGroup([2n], { path: 'a' }, { owner: 'coord-a', nowMs: 14 * S, input: input(1) })).toMatchObject({ ok: false, reason: 'answered' });
      expect(await b.releaseGroup([2n, 4n], other.token)).toEqual({ ok: true });
      expect((await store.readRaw(root, answerRecordId(2n)))?.equals(before[2]!)).toBe(true);
      expect((await snapshotRecordsOf(a)).map((e) => e.id).sort()).toEqual([answerRecordId(1n), answerRecordId(2n), ...generationIds(store)].sort());
      // A lane that asks a branch once in the campaign is refused it on any input.
      expect(await a.claimGroup([2n, 4n], { path: 'a' }, { owner: 'coord-a', nowMs: 14 * S, input: input(3), anyInput: true })).toEqual({ ok: false, reason: 'answered', answered: [2n] });
      expect(() => a.planClaimGroup([2n], { path: 'a' }, { owner: 'coord-a', nowMs: 14 * S, anyInput: 'yes' as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
      // A claim that names no input is not asked about answers.
      expect((await a.claimGroup([1n, 2n], { path: 'a' }, { owner: 'coord-a', nowMs: 15 * S })).ok).toBe(true);
    } finally {
      await closeAll();
    }
  });

  it('records a committed run\'s answers without its lease: beside another holder, refused by the next claim, idempotent for settled answers', async () => {
    try {
      const root = await tempRoot();
      const a = await target(root);
      const b = await target(root);
      // coord-b holds member 2 now; a result of the dead coord-a's lease answered 1 and 2 and left 3 open.
      const held = await b.claimGroup([2n], { path: 'b' }, { owner: 'coord-b', nowMs: 10 * S, input: input(2) });
      if (!held.ok) throw new Error(`claim failed: ${held.reason}`);
      const heldBytes = await store.readRaw(root, targetRecordId(2n));
      const writer = { owner: 'coord-a', token: 'dead-token', worker: 3 };
      const answers = { input: input(1), settled: [1n, 2n], open: [3n] };
      expect(await a.recordAnswers(answers, writer, 11 * S)).toEqual({ ok: true });
      // No lease record was touched: 2 is still coord-b's, 1 and 3 were never claimed.
      expect((await store.readRaw(root, targetRecordId(2n)))?.equals(heldBytes!)).toBe(true);
      expect(await store.readRaw(root, targetRecordId(1n))).toBeNull();
      expect(await store.readRaw(root, targetRecordId(3n))).toBeNull();
      const records = new Map((await snapshotRecordsOf(b)).map((e) => [e.id, e.record]));
      expect(records.get(answerRecordId(1n))).toMatchObject({ role: 'answers', status: 'done', answered: true, settled: [input(1)], owner: 'coord-a', token: 'dead-token', worker: 3, completedMs: 11 * S });
      expect(records.get(answerRecordId(3n))).toMatchObject({ role: 'answers', open: [[input(1), 1, 11 * S]] });
      expect(records.get(answerRecordId(3n))!.answered).toBeUndefined();
      // Both coordinators are refused the answered members on that input (before a held one).
      expect(await b.claimGroup([1n, 4n], { path: 'b' }, { owner: 'coord-b', nowMs: 12 * S, input: input(1) })).toEqual({ ok: false, reason: 'answered', answered: [1n] });
      expect(await a.claimGroup([2n, 5n], { path: 'a' }, { owner: 'coord-a', nowMs: 12 * S, input: input(1) })).toEqual({ ok: false, reason: 'answered', answered: [2n] });
      // The holder's release (answering on its own input) keeps what was recorded beside it.
      expect(await b.releaseGroup([2n], held.token, { nowMs: 13 * S, answers: { input: input(2), settled: [2n] } })).toEqual({ ok: true });
      expect((await snapshotRecordsOf(a)).find((e) => e.id === answerRecordId(2n))!.record).toMatchObject({ settled: [input(1), input(2)] });
      expect(await a.claimGroup([2n], { path: 'a' }, { owner: 'coord-a', nowMs: 14 * S, input: input(1) })).toEqual({ ok: false, reason: 'answered', answered: [2n] });
      // Recorded again (a replay after the release already wrote them): a settled answer stays as it was.
      const once = await store.readRaw(root, answerRecordId(2n));
      expect(await b.recordAnswers({ input: input(1), settled: [1n, 2n] }, { ...writer, token: 'replay-token' }, 20 * S)).toEqual({ ok: true });
      expect((await store.readRaw(root, answerRecordId(2n)))?.equals(once!)).toBe(true);
      expect((await snapshotRecordsOf(a)).find((e) => e.id === answerRecordId(1n))!.record).toMatchObject({ settled: [input(1)], answered: true, completedMs: 11 * S, token: 'dead-token' });
      // Bad arguments are refused before anything is written.
      expect(() => a.planRecordAnswers({ input: 'nope', settled: [1n] }, writer, 15 * S)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
      expect(() => a.planRecordAnswers({ input: input(1), settled: [1n] }, { ...writer, token: '' }, 15 * S)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
      expect(() => a.planRecordAnswers(undefined as never, writer, 15 * S)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
    } finally {
      await closeAll();
    }
  });

  it('refuses an answered member before a held one, and keeps the newest inputs within the bound', async () => {
    try {
      const root = await tempRoot();
      const table = await target(root);
      const cycles = MAX_SETTLED_INPUTS + 2;
      for (let i = 1; i <= cycles; i += 1) {
        const claim = await table.claimGroup([7n], { path: 'c' }, { owner: 'c', nowMs: i * S, input: input(i) });
        if (!claim.ok) throw new Error(`claim ${i} failed: ${claim.reason}`);
        expect(await table.releaseGroup([7n], claim.token, { nowMs: i * S, answers: { input: input(i), settled: [7n] } })).toEqual({ ok: true });
      }
      const records = await snapshotRecordsOf(table);
      expect(records.map((e) => e.id).sort()).toEqual([answerRecordId(7n), ...generationIds(store)].sort());
      // One generation per release that wrote the record; the target listed once, at the newest.
      if (hasGeneration(store)) expect(records.find((e) => e.id === GENERATION)!.record).toMatchObject({ generation: cycles, changed: [[cycles, '7']] });
      const record = records.find((e) => e.id === answerRecordId(7n))!.record;
      expect(record.settled).toHaveLength(MAX_SETTLED_INPUTS);
      expect(record.settled![0]).toBe(input(3));
      expect(record.settled![MAX_SETTLED_INPUTS - 1]).toBe(input(cycles));
      // The oldest inputs were forgotten: asked again there, the question is open.
      const held = await table.claimGroup([7n], { path: 'c' }, { owner: 'holder', nowMs: 100 * S, input: input(1) });
      expect(held.ok).toBe(true);
      // Held now; on an input it was answered on, the refusal says `answered`, not `conflict`.
      expect(await table.claimGroup([7n], { path: 'c' }, { owner: 'other', nowMs: 101 * S, input: input(cycles) })).toEqual({ ok: false, reason: 'answered', answered: [7n] });
      expect(await table.claimGroup([7n], { path: 'c' }, { owner: 'other', nowMs: 101 * S, input: input(2) })).toMatchObject({ ok: false, reason: 'conflict' });
    } finally {
      await closeAll();
    }
  });

  it('fails closed on a target record whose answers are malformed, and refuses a bad input before any write', async () => {
    try {
      const root = await tempRoot();
      const table = await target(root);
      const fields = (t: bigint, extra: Record<string, unknown>) => ({
        attempts: 1, id: targetRecordId(t), kind: 'target', owner: 'c', payload: {}, previousOwner: '', schema: 1, steals: 0,
        target: t.toString(10), targets: [t.toString(10)], token: 'tok', updatedMs: 10 * S, worker: 0, ...extra,
      });
      const planted: [bigint, Record<string, unknown>][] = [
        [201n, { status: 'done', settled: ['not-a-digest'], answered: true }],
        [202n, { status: 'done' }], // done, but no answer to keep
        [203n, { status: 'leased', settled: [input(1), input(1)], answered: true }],
        [204n, { status: 'committing', answered: true }],
        [205n, { status: 'leased', settled: [input(1)] }], // inputs settled, but not answered
        [206n, { status: 'done', open: [] }], // done, open but empty
        [207n, { status: 'done', open: [[input(1), 0, 5]] }], // no attempt counted
        [208n, { status: 'done', open: [[input(1), 1, 5], [input(1), 2, 6]] }], // an input twice
        [209n, { status: 'done', answered: true, settled: [input(1)], open: [[input(1), 1, 5]] }], // settled and open at once
        [210n, { status: 'done', open: [['ABC', 1, 5]] }],
        [211n, { status: 'done', open: [[input(1), 1]] }],
      ];
      for (const [t, extra] of planted) {
        const bytes = canonicalJsonBytes(fields(t, extra));
        await rawRecord(store, table, 'target', targetRecordId(t), bytes);
        expect(await table.claimGroup([t], { path: 'x' }, { owner: 'c', nowMs: 20 * S, input: input(2) })).toMatchObject({ ok: false, reason: 'corrupt' });
        expect((await rawRecord(store, table, 'target', targetRecordId(t)))?.equals(bytes)).toBe(true);
      }
      expect(() => table.planClaimGroup([300n], { path: 'x' }, { owner: 'c', nowMs: 20 * S, input: 'ABC' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
      expect(() => table.planReleaseGroup([300n], 'tok', { answers: { input: input(1), settled: [300n] } })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
      expect(() => table.planReleaseGroup([300n], 'tok', { nowMs: S, answers: { input: input(1), settled: [], open: ['300'] as never } })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
      for (const backoff of [{ baseMs: -1, maxAttempts: 3 }, { baseMs: 0, maxAttempts: 0 }, { baseMs: 10 }, 'soon']) {
        expect(() => table.planClaimGroup([300n], { path: 'x' }, { owner: 'c', nowMs: 20 * S, input: input(1), backoff: backoff as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
      }
      // A back-off needs the input it is about.
      expect(() => table.planClaimGroup([300n], { path: 'x' }, { owner: 'c', nowMs: 20 * S, backoff: { baseMs: 10, maxAttempts: 3 } })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
    } finally {
      await closeAll();
    }
  });

  it('fails closed on a malformed or corrupt answer record: claims asking about answers and releases that write it are refused, nothing written', async () => {
    try {
      const root = await tempRoot();
      const table = await target(root);
      const answerFields = (t: bigint, extra: Record<string, unknown>) => ({
        answered: true, attempts: 0, completedMs: 5 * S, id: answerRecordId(t), kind: 'target', owner: 'c', payload: {}, previousOwner: '', role: 'answers',
        schema: 1, settled: [input(1)], status: 'done', steals: 0, target: t.toString(10), token: 'tok', updatedMs: 5 * S, worker: 0, ...extra,
      });
      const planted: [bigint, Record<string, unknown>][] = [
        [221n, { role: 'answer' }], // an unknown role
        [222n, { status: 'leased' }], // an answer record is never a lease
        [223n, { targets: ['223'] }], // an answer record names no group
        [224n, { id: targetRecordId(224n) }], // its id is not the answer id of its target
        [225n, { settled: [input(1), input(1)] }],
      ];
      // Planted before the table's first claim: a record written by hand moves no answer
      // generation, so a table sees it when it scans the store (answers-view.ts "Complete views").
      const plantedBytes = new Map<bigint, Buffer>();
      for (const [t, extra] of planted) {
        plantedBytes.set(t, canonicalJsonBytes(answerFields(t, extra)));
        await rawRecord(store, table, 'target', answerRecordId(t), plantedBytes.get(t)!);
      }
      for (const [t] of planted) {
        const bytes = plantedBytes.get(t)!;
        expect(await table.claimGroup([t], { path: 'x' }, { owner: 'c', nowMs: 20 * S, input: input(2) })).toMatchObject({ ok: false, reason: 'corrupt', corrupt: [{ id: answerRecordId(t), target: t }] });
        expect(await rawRecord(store, table, 'target', targetRecordId(t))).toBeNull();
        // A claim that does not ask about answers does not read the answer record; its release
        // with an answer must write it, and is refused with the lease left held.
        const bare = await table.claimGroup([t], { path: 'x' }, { owner: 'c', nowMs: 20 * S });
        if (!bare.ok) throw new Error(`claim failed: ${bare.reason}`);
        expect(await table.releaseGroup([t], bare.token, { nowMs: 21 * S, answers: { input: input(2), settled: [t] } })).toEqual({ ok: false, reason: 'corrupt', corrupt: { id: answerRecordId(t), detail: expect.any(String) } });
        expect((await rawRecord(store, table, 'target', answerRecordId(t)))?.equals(bytes)).toBe(true);
        expect(await table.releaseGroup([t], bare.token)).toEqual({ ok: true });
      }
    } finally {
      await closeAll();
    }
  });

  it('honours answers a lease record of an older table carries, and moves them into the answer record with the first answer released', async () => {
    try {
      const root = await tempRoot();
      const table = await target(root);
      // Records as symfence wrote them before answer records: a released member with its answers.
      const older = (t: bigint, extra: Record<string, unknown>) => canonicalJsonBytes({
        attempts: 1, completedMs: 5 * S, id: targetRecordId(t), kind: 'target', owner: 'old', payload: {}, previousOwner: '', schema: 1, status: 'done', steals: 0,
        target: t.toString(10), targets: [t.toString(10)], token: 'tok', updatedMs: 5 * S, worker: 0, ...extra,
      });
      await rawRecord(store, table, 'target', targetRecordId(31n), older(31n, { answered: true, settled: [input(1)], open: [[input(2), 2, 5 * S]] }));
      await rawRecord(store, table, 'target', targetRecordId(32n), older(32n, { answered: true, settled: [input(1)] }));
      expect(await table.claimGroup([31n, 32n], { path: 'x' }, { owner: 'c', nowMs: 10 * S, input: input(1) })).toEqual({ ok: false, reason: 'answered', answered: [31n, 32n].sort((x, y) => (targetRecordId(x) < targetRecordId(y) ? -1 : 1)) });
      const policy = { baseMs: 100 * S, maxAttempts: 5 };
      expect(await table.claimGroup([31n], { path: 'x' }, { owner: 'c', nowMs: 10 * S, input: input(2), backoff: policy })).toMatchObject({ ok: false, reason: 'backoff', open: [{ target: 31n, attempts: 2 }] });
      // Claimed on another input, the lease record carries the older answers on; a bare release keeps them.
      const held = await table.claimGroup([31n, 32n], { path: 'x' }, { owner: 'c', nowMs: 10 * S, input: input(3) });
      if (!held.ok) throw new Error(`claim failed: ${held.reason}`);
      expect((await table.snapshotRecords()).find((e) => e.id === targetRecordId(32n))?.record).toMatchObject({ status: 'leased', answered: true, settled: [input(1)] });
      expect(await table.releaseGroup([32n, 31n], held.token, { nowMs: 11 * S, answers: { input: input(3), settled: [31n] } })).toEqual({ ok: true });
      const records = new Map((await snapshotRecordsOf(table)).map((e) => [e.id, e.record]));
      // 31 answered now: its older answers and the new one are in its answer record, its lease gone.
      expect(records.has(targetRecordId(31n))).toBe(false);
      expect(records.get(answerRecordId(31n))).toMatchObject({ role: 'answers', answered: true, settled: [input(1), input(3)], open: [[input(2), 2, 5 * S]] });
      // 32 learnt nothing now: it stays a `done` lease record with its answers, as before.
      expect(records.get(targetRecordId(32n))).toMatchObject({ status: 'done', answered: true, settled: [input(1)] });
      expect(records.has(answerRecordId(32n))).toBe(false);
      for (const [t, on] of [[31n, input(1)], [31n, input(3)], [32n, input(1)]] as const) {
        expect(await table.claimGroup([t], { path: 'x' }, { owner: 'c', nowMs: 12 * S, input: on })).toMatchObject({ ok: false, reason: 'answered' });
      }
    } finally {
      await closeAll();
    }
  });

  it('counts a question left open across coordinators, refuses it while the claimer\'s back-off lasts, and forgets it once answered', async () => {
    try {
      const root = await tempRoot();
      const a = await target(root);
      const b = await target(root);
      const policy = { baseMs: 10 * S, maxAttempts: 3 };
      const claim = await a.claimGroup([1n, 2n, 3n], { path: 'a' }, { owner: 'coord-a', nowMs: 10 * S, input: input(1), backoff: policy });
      if (!claim.ok) throw new Error(`claim failed: ${claim.reason}`);
      // Member 1 answered, member 2 left open, member 3 neither (not reached): every lease record
      // goes, and members 1 and 2 get answer records.
      expect(await a.releaseGroup([1n, 2n, 3n], claim.token, { nowMs: 11 * S, answers: { input: input(1), settled: [1n], open: [2n] } })).toEqual({ ok: true });
      const records = new Map((await snapshotRecordsOf(b)).map((e) => [e.id, e.record]));
      expect([...records.keys()].sort()).toEqual([answerRecordId(1n), answerRecordId(2n), ...generationIds(store)].sort());
      expect(records.get(answerRecordId(2n))).toMatchObject({ role: 'answers', status: 'done', open: [[input(1), 1, 11 * S]], completedMs: 11 * S });
      expect(records.get(answerRecordId(2n))?.answered).toBeUndefined();
      expect(records.get(answerRecordId(1n))?.open).toBeUndefined();

      // Another coordinator asking member 2 on that input within the back-off is refused, writing nothing.
      const ids24 = [targetRecordId(2n), answerRecordId(2n), targetRecordId(4n), answerRecordId(4n)];
      const before = await Promise.all(ids24.map((id) => store.readRaw(root, id)));
      expect(await b.claimGroup([2n, 4n], { path: 'b' }, { owner: 'coord-b', nowMs: 20 * S, input: input(1), backoff: policy })).toEqual({
        ok: false,
        reason: 'backoff',
        open: [{ target: 2n, attempts: 1, lastOpenMs: 11 * S }],
      });
      expect(await Promise.all(ids24.map((id) => store.readRaw(root, id)))).toEqual(before);
      expect([before[2], before[3]]).toEqual([null, null]);
      // Without a policy, or on another input, the claim is not about that open question.
      for (const options of [{ input: input(1) }, { input: input(2), backoff: policy }]) {
        const held = await b.claimGroup([2n], { path: 'b' }, { owner: 'coord-b', nowMs: 20 * S, ...options });
        if (!held.ok) throw new Error(`claim failed: ${held.reason}`);
        expect(await b.releaseGroup([2n], held.token)).toEqual({ ok: true });
      }
      // The back-off ends 10 s after the release; the second open release counts attempt 2.
      const second = await b.claimGroup([2n], { path: 'b' }, { owner: 'coord-b', nowMs: 21 * S, input: input(1), backoff: policy });
      if (!second.ok) throw new Error(`claim failed: ${second.reason}`);
      expect((await a.snapshotRecords()).find((e) => e.id === answerRecordId(2n))?.record).toMatchObject({ status: 'done', open: [[input(1), 1, 11 * S]] });
      expect(await b.releaseGroup([2n], second.token, { nowMs: 22 * S, answers: { input: input(1), settled: [], open: [2n] } })).toEqual({ ok: true });
      // Attempt 2 waits 2 · 10 s.
      expect(await a.claimGroup([2n], { path: 'a' }, { owner: 'coord-a', nowMs: 41 * S, input: input(1), backoff: policy })).toMatchObject({ ok: false, reason: 'backoff', open: [{ target: 2n, attempts: 2, lastOpenMs: 22 * S }] });
      const third = await a.claimGroup([2n], { path: 'a' }, { owner: 'coord-a', nowMs: 42 * S, input: input(1), backoff: policy });
      if (!third.ok) throw new Error(`claim failed: ${third.reason}`);
      expect(await a.releaseGroup([2n], third.token, { nowMs: 43 * S, answers: { input: input(1), settled: [], open: [2n] } })).toEqual({ ok: true });
      // Left open as often as the policy allows: refused for good under it, not under a laxer one.
      expect(await b.claimGroup([2n], { path: 'b' }, { owner: 'coord-b', nowMs: 1000 * S, input: input(1), backoff: policy })).toMatchObject({ ok: false, reason: 'backoff', open: [{ target: 2n, attempts: 3 }] });
      const lax = await b.claimGroup([2n], { path: 'b' }, { owner: 'coord-b', nowMs: 1000 * S, input: input(1), backoff: { baseMs: 10 * S, maxAttempts: 5 } });
      if (!lax.ok) throw new Error(`claim failed: ${lax.reason}`);
      // Answered at last: the open row goes, the answer stays, and the question is refused `answered`.
      expect(await b.releaseGroup([2n], lax.token, { nowMs: 1001 * S, answers: { input: input(1), settled: [2n] } })).toEqual({ ok: true });
      const answered = (await a.snapshotRecords()).find((e) => e.id === answerRecordId(2n))?.record;
      expect(answered).toMatchObject({ status: 'done', answered: true, settled: [input(1)] });
      expect(answered?.open).toBeUndefined();
      expect(await a.claimGroup([2n], { path: 'a' }, { owner: 'coord-a', nowMs: 1002 * S, input: input(1), backoff: policy })).toEqual({ ok: false, reason: 'answered', answered: [2n] });
    } finally {
      await closeAll();
    }
  });

  it('keeps the inputs most recently left open within the bound, and a member only left open through a bare release', async () => {
    try {
      const root = await tempRoot();
      const table = await target(root);
      const cycles = MAX_OPEN_INPUTS + 2;
      for (let i = 1; i <= cycles; i += 1) {
        const claim = await table.claimGroup([9n], { path: 'c' }, { owner: 'c', nowMs: i * S, input: input(i) });
        if (!claim.ok) throw new Error(`claim ${i} failed: ${claim.reason}`);
        expect(await table.releaseGroup([9n], claim.token, { nowMs: i * S, answers: { input: input(i), settled: [], open: [9n] } })).toEqual({ ok: true });
      }
      const open = (await table.snapshotRecords()).find((e) => e.id === answerRecordId(9n))!.record.open!;
      expect(open).toHaveLength(MAX_OPEN_INPUTS);
      expect(open[0]).toEqual([input(3), 1, 3 * S]);
      expect(open[MAX_OPEN_INPUTS - 1]).toEqual([input(cycles), 1, cycles * S]);

      // A member only ever left open keeps its row through a claim and a bare release.
      const first = await table.claimGroup([5n], { path: 'c' }, { owner: 'c', nowMs: S, input: input(1) });
      if (!first.ok) throw new Error('claim failed');
      await table.releaseGroup([5n], first.token, { nowMs: 2 * S, answers: { input: input(1), settled: [], open: [5n] } });
      const again = await table.claimGroup([5n], { path: 'c' }, { owner: 'c', nowMs: 3 * S, input: input(2) });
      if (!again.ok) throw new Error('claim failed');
      const row = [[input(1), 1, 2 * S]];
      expect((await table.snapshotRecords()).find((e) => e.id === answerRecordId(5n))?.record).toMatchObject({ status: 'done', open: row });
      expect(await table.releaseGroup([5n], again.token)).toEqual({ ok: true });
      expect((await table.snapshotRecords()).find((e) => e.id === answerRecordId(5n))?.record).toMatchObject({ status: 'done', open: row });
      expect((await snapshotRecordsOf(table)).find((e) => e.id === targetRecordId(5n))).toBeUndefined();
      // Answered on its open input: the row gives way to the answer.
      const last = await table.claimGroup([5n], { path: 'c' }, { owner: 'c', nowMs: 4 * S, input: input(1) });
      if (!last.ok) throw new Error('claim failed');
      expect(await table.releaseGroup([5n], last.token, { nowMs: 5 * S, answers: { input: input(1), settled: [5n], open: [5n] } })).toEqual({ ok: true });
      const settled = (await table.snapshotRecords()).find((e) => e.id === answerRecordId(5n))?.record;
      expect(settled).toMatchObject({ status: 'done', answered: true, settled: [input(1)] });
      expect(settled?.open).toBeUndefined();
    } finally {
      await closeAll();
    }
  });
});
