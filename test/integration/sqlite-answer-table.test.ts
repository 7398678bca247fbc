// The SQLite store keeps answer records (docs/lease-format.md "Answers") in their own table,
// `answer_records`, apart from the lease records a claim or heartbeat writes: checked on the
// database itself (a second connection) and through fresh tables. A schema-2 database, whose
// answer records sit among the lease records, is upgraded in place by the first writer; its
// answers are honoured where they are and moved by their next write.
import { describe, expect, it } from 'vitest';
import { answerGenerationRecordId, answerRecordId, targetRecordId } from '../../src/lease/identity.js';
import { inspectLeaseTable } from '../../src/lease/lease-inspect.js';
import { SQLITE_SCHEMA_VERSION } from '../../src/lease/sqlite/sqlite-database.js';
import { openTarget, S, tempRoot } from '../helpers/lease-fixtures.js';
import { leaseStoreUnderTest } from '../helpers/lease-stores.js';
import { withDb } from '../helpers/sqlite-tables.js';

const sqlite = leaseStoreUnderTest('sqlite');

const INPUT_A = 'a'.repeat(64);
const INPUT_B = 'b'.repeat(64);
const TARGETS = [11n, 12n, 13n];

/** The ids of the rows of `table`, sorted. */
const idsIn = (root: string, table: 'lease_records' | 'answer_records'): string[] =>
  withDb(root, (db) => (db.prepare(`SELECT id FROM ${table} ORDER BY id`).all() as { id: string }[]).map((r) => r.id));

/** The stored text of `id`'s row in `table`, or undefined. */
const rowText = (root: string, table: 'lease_records' | 'answer_records', id: string): string | undefined =>
  withDb(root, (db) => (db.prepare(`SELECT record FROM ${table} WHERE id = ?`).get(id) as { record: string } | undefined)?.record);

const answerIds = (targets: readonly bigint[]): string[] => targets.map((t) => answerRecordId(t)).sort();

describe.skipIf(sqlite.unavailable?.() !== undefined && process.env['CI'] !== 'true')('SQLite answer table', () => {
  it('writes answer records into answer_records and lease records into lease_records; claims and heartbeats leave the answer rows untouched', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    try {
      const first = await table.claimGroup(TARGETS, {}, { owner: 'c1', nowMs: 10 * S, input: INPUT_A });
      if (!first.ok) throw new Error('claim failed');
      expect(idsIn(root, 'lease_records')).toEqual(TARGETS.map((t) => targetRecordId(t)).sort());
      expect(idsIn(root, 'answer_records')).toEqual([]);
      expect(await table.releaseGroup(TARGETS, first.token, { nowMs: 11 * S, answers: { input: INPUT_A, settled: [11n, 12n], open: [13n] } })).toEqual({ ok: true });
      expect(idsIn(root, 'lease_records')).toEqual([]);
      // The answer records, and the answer generation record that counts their writes.
      expect(idsIn(root, 'answer_records')).toEqual([...answerIds(TARGETS), answerGenerationRecordId()].sort());
      const before = answerIds(TARGETS).map((id) => rowText(root, 'answer_records', id));
      expect(JSON.parse(before[answerIds(TARGETS).indexOf(answerRecordId(11n))]!)).toMatchObject({ role: 'answers', answered: true, settled: [INPUT_A] });

      // Another input: a claim and a heartbeat write lease rows only.
      const second = await table.claimGroup(TARGETS, {}, { owner: 'c2', nowMs: 20 * S, input: INPUT_B });
      if (!second.ok) throw new Error('second claim failed');
      expect(await table.heartbeatGroup(TARGETS, second.token, { nowMs: 21 * S })).toEqual({ ok: true });
      expect(idsIn(root, 'lease_records')).toHaveLength(3);
      expect(answerIds(TARGETS).map((id) => rowText(root, 'answer_records', id))).toEqual(before);
      expect(await table.releaseGroup(TARGETS, second.token)).toEqual({ ok: true });
    } finally {
      await table.close();
    }
    // A fresh table (no cache) reads the answers from their table.
    const fresh = await openTarget(root, { store: 'sqlite' });
    try {
      expect(await fresh.claimGroup(TARGETS, {}, { owner: 'c3', nowMs: 30 * S, input: INPUT_A })).toMatchObject({ ok: false, reason: 'answered', answered: [11n, 12n] });
      const inspected = await inspectLeaseTable(root, { nowMs: 30 * S, leaseTtlMs: 60 * S });
      expect(inspected.counts).toMatchObject({ corrupt: 0 });
    } finally {
      await fresh.close();
    }
  });

  it('upgrades a schema-2 database: its answer records are honoured where they are and moved to answer_records by their next write', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    const claim = await table.claimGroup(TARGETS, {}, { owner: 'c1', nowMs: 10 * S, input: INPUT_A });
    if (!claim.ok) throw new Error('claim failed');
    expect(await table.releaseGroup(TARGETS, claim.token, { nowMs: 11 * S, answers: { input: INPUT_A, settled: [11n] } })).toEqual({ ok: true });
    await table.close();
    const moved = answerRecordId(11n);
    const text = rowText(root, 'answer_records', moved)!;
    // The database as schema 2 had it: the answer record among the lease records, no answer table.
    withDb(root, (db) => {
      db.prepare('INSERT INTO lease_records (id, record, group_id) VALUES (?, ?, NULL)').run(moved, text);
      db.exec('DROP TABLE answer_records');
      db.pragma('user_version = 2');
    });
    // A read-only reader (symfence leases) reads schema 2 as it is.
    expect((await inspectLeaseTable(root, { nowMs: 12 * S, leaseTtlMs: 60 * S })).counts).toMatchObject({ corrupt: 0 });

    const upgraded = await openTarget(root, { store: 'sqlite' });
    try {
      expect(withDb(root, (db) => db.pragma('user_version', { simple: true }))).toBe(SQLITE_SCHEMA_VERSION);
      expect(idsIn(root, 'answer_records')).toEqual([]);
      expect(idsIn(root, 'lease_records')).toEqual([moved]);
      // Honoured where it is.
      expect(await upgraded.claimGroup(TARGETS, {}, { owner: 'c2', nowMs: 20 * S, input: INPUT_A })).toMatchObject({ ok: false, reason: 'answered', answered: [11n] });
      // Its next write moves it, with the new answer, to the answer table.
      const next = await upgraded.claimGroup(TARGETS, {}, { owner: 'c2', nowMs: 21 * S, input: INPUT_B });
      if (!next.ok) throw new Error('claim on another input failed');
      expect(await upgraded.releaseGroup(TARGETS, next.token, { nowMs: 22 * S, answers: { input: INPUT_B, settled: [11n] } })).toEqual({ ok: true });
      expect(idsIn(root, 'lease_records')).toEqual([]);
      expect(idsIn(root, 'answer_records')).toEqual([moved, answerGenerationRecordId()].sort());
      expect(JSON.parse(rowText(root, 'answer_records', moved)!)).toMatchObject({ role: 'answers', answered: true, settled: [INPUT_A, INPUT_B] });
      expect(await upgraded.claimGroup([11n], {}, { owner: 'c3', nowMs: 23 * S, input: INPUT_A })).toMatchObject({ ok: false, reason: 'answered' });
    } finally {
      await upgraded.close();
    }
  });

  it('reads the lease records of a target table from the lease table alone: a lease-shaped row put in the answer table by hand changes no claim, heartbeat or release, and symfence leases reports it', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    try {
      // A lease record of c1 on 21, moved by hand into the answer table, where no lease record lives.
      const first = await table.claimGroup([21n], {}, { owner: 'c1', nowMs: 10 * S });
      if (!first.ok) throw new Error('claim failed');
      const lease = targetRecordId(21n);
      const text = rowText(root, 'lease_records', lease)!;
      withDb(root, (db) => {
        db.prepare('DELETE FROM lease_records WHERE id = ?').run(lease);
        db.prepare('INSERT INTO answer_records (id, record, group_id) VALUES (?, ?, NULL)').run(lease, text);
      });
      // The branch is free where lease records live: claimed, kept and released as any other.
      const second = await table.claimGroup([21n, 22n], {}, { owner: 'c2', nowMs: 11 * S, input: INPUT_A });
      if (!second.ok) throw new Error(`claim failed: ${second.reason}`);
      expect(await table.heartbeatGroup([21n, 22n], second.token, { nowMs: 12 * S })).toEqual({ ok: true });
      expect(await table.releaseGroup([21n, 22n], second.token, { nowMs: 13 * S, answers: { input: INPUT_A, settled: [21n] } })).toEqual({ ok: true });
      expect(rowText(root, 'answer_records', lease)).toBe(text);
      expect(idsIn(root, 'lease_records')).toEqual([]);
      // A fresh table (another coordinator) decides the same.
      const other = await openTarget(root, { store: 'sqlite' });
      try {
        expect(await other.claimGroup([21n], {}, { owner: 'c3', nowMs: 14 * S, input: INPUT_A })).toMatchObject({ ok: false, reason: 'answered', answered: [21n] });
        expect((await other.claimGroup([21n], {}, { owner: 'c3', nowMs: 15 * S, input: INPUT_B })).ok).toBe(true);
      } finally {
        await other.close();
      }
      const inspected = await inspectLeaseTable(root, { nowMs: 16 * S, leaseTtlMs: 60 * S });
      expect(inspected.counts.corrupt).toBeGreaterThan(0);
    } finally {
      await table.close();
    }
  });

  it('a damaged answer row left among the lease records by a schema-2 table still fails claims closed once the table has scanned', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    try {
      // Valid JSON that lost its role: no lease record (its id is 31's answer record id), no answer record.
      const damaged = answerRecordId(31n);
      withDb(root, (db) => {
        db.prepare('INSERT INTO lease_records (id, record, group_id) VALUES (?, ?, NULL)').run(damaged, JSON.stringify({ id: damaged, target: '31', settled: [INPUT_A] }));
      });
      expect(await table.claimGroup([31n, 32n], {}, { owner: 'c1', nowMs: 10 * S, input: INPUT_A })).toMatchObject({ ok: false, reason: 'corrupt', corrupt: [{ id: damaged, target: 31n }] });
      expect(table.answerScans).toEqual({ scans: 0, failed: 0 });
      // Once there is a generation record to scan from: still read, still refused.
      const other = await table.claimGroup([33n], {}, { owner: 'c1', nowMs: 11 * S, input: INPUT_A });
      if (!other.ok) throw new Error('claim failed');
      expect(await table.releaseGroup([33n], other.token, { nowMs: 12 * S, answers: { input: INPUT_A, settled: [33n] } })).toEqual({ ok: true });
      await table.claimGroup([34n], {}, { owner: 'c1', nowMs: 13 * S, input: INPUT_A });
      expect(await table.claimGroup([31n, 32n], {}, { owner: 'c1', nowMs: 14 * S, input: INPUT_A })).toMatchObject({ ok: false, reason: 'corrupt', corrupt: [{ id: damaged, target: 31n }] });
      expect(table.answerScans).toEqual({ scans: 1, failed: 0 });
    } finally {
      await table.close();
    }
  });
});
