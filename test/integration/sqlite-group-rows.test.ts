// The SQLite store's row layout: a target group's payload and targets live once, in a
// reference-counted, content-addressed group row; members hold their own fields. Checked on the
// database itself (a second connection), through fresh tables (no cache to hide a bad row), and
// through the read-only inspection `symfence leases` uses.
import { createRequire } from 'node:module';
import { copyFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type BetterSqlite3 from 'better-sqlite3';
import { canonicalJsonBytes } from '../../src/lease/canonical-json.js';
import { targetRecordId } from '../../src/lease/identity.js';
import { inspectLeaseTable } from '../../src/lease/lease-inspect.js';
import { serializeRecord, type LeaseRecord } from '../../src/lease/lease-record.js';
import { SQLITE_APPLICATION_ID, SQLITE_FILE, SQLITE_SCHEMA_VERSION } from '../../src/lease/sqlite-database.js';
import { openTarget, S, tempRoot } from '../helpers/lease-fixtures.js';
import { leaseStoreUnderTest } from '../helpers/lease-stores.js';

const Sqlite = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
const sqlite = leaseStoreUnderTest('sqlite');

/** 64 full-width targets per group: the size a real group's list has. */
function group(index: number): bigint[] {
  return Array.from({ length: 64 }, (_, i) => (0x9e3779b97f4a7c15n * BigInt(index * 64 + i + 1)) % 2n ** 64n || 1n);
}

function withDb<T>(root: string, use: (db: BetterSqlite3.Database) => T): T {
  const db = new Sqlite(path.join(root, SQLITE_FILE), { fileMustExist: true, timeout: 10_000 });
  try {
    return use(db);
  } finally {
    db.close();
  }
}

const groupRows = (root: string) => withDb(root, (db) => db.prepare('SELECT id, refs, length(content) AS size FROM lease_groups ORDER BY id').all() as { id: number; refs: number; size: number }[]);

/** Every row as the test's own connection sees it: id → [record text or blob (base64), group id or null]. */
const memberRows = (root: string) =>
  withDb(root, (db) => new Map((db.prepare('SELECT id, record, group_id FROM lease_records ORDER BY id').all() as { id: string; record: Buffer | string; group_id: number | null }[]).map((r) => [r.id, [typeof r.record === 'string' ? r.record : `blob:${r.record.toString('base64')}`, r.group_id] as const])));

describe.skipIf(sqlite.unavailable?.() !== undefined && process.env['CI'] !== 'true')('SQLite group rows', () => {
  it('stores a group payload and target list once, counts its members, and drops it with the last member', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    const [a, b] = [group(0), group(1)];
    const claimA = await table.claimGroup(a, { seed: 'id:000001' }, { owner: 'c1', nowMs: 10 * S });
    const claimB = await table.claimGroup(b, { seed: 'id:000002' }, { owner: 'c1', nowMs: 10 * S });
    if (!claimA.ok || !claimB.ok) throw new Error('claims failed');
    const groups = groupRows(root);
    expect(groups.map((g) => g.refs)).toEqual([64, 64]);
    const members = memberRows(root);
    expect(members.size).toBe(128);
    for (const [text, groupId] of members.values()) {
      expect(text).not.toContain('"targets"');
      expect(text).not.toContain('"payload"');
      expect(groups.map((g) => g.id)).toContain(groupId);
    }
    // A member row is a fraction of the whole record; the record read back is the whole record.
    const whole = (await sqlite.readRaw(root, targetRecordId(a[0]!)))!;
    expect(members.get(targetRecordId(a[0]!))![0].length * 3).toBeLessThan(whole.length);
    const snapshot = await table.snapshotRecords();
    const first = snapshot.find((e) => e.id === targetRecordId(a[0]!))!.record;
    expect(serializeRecord(first)).toEqual(whole);
    expect(first.targets).toHaveLength(64);
    expect(first.payload).toEqual({ seed: 'id:000001' });

    // A heartbeat rewrites the members' own fields only: the same group rows, the same counts.
    expect(await table.heartbeatGroup(a, claimA.token, { nowMs: 20 * S })).toEqual({ ok: true });
    expect(groupRows(root)).toEqual(groups);

    expect(await table.releaseGroup(a, claimA.token)).toEqual({ ok: true });
    expect(groupRows(root).map((g) => g.refs)).toEqual([64]);
    expect(await table.releaseGroup(b, claimB.token)).toEqual({ ok: true });
    expect(groupRows(root)).toEqual([]);
    expect(memberRows(root).size).toBe(0);
    await table.close();
  });

  it('shares a group row between two groups with the same payload and targets only while both name it', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite', leaseTtlMs: 10 * S });
    const targets = group(2);
    const first = await table.claimGroup(targets, { seed: 'same' }, { owner: 'c1', nowMs: 10 * S });
    // Expired, so another coordinator takes the whole group over: same payload and list, one row.
    const second = await table.claimGroup(targets, { seed: 'same' }, { owner: 'c2', nowMs: 30 * S });
    if (!first.ok || !second.ok) throw new Error('claims failed');
    expect(groupRows(root).map((g) => g.refs)).toEqual([64]);
    const third = await table.claimGroup(targets, { seed: 'other' }, { owner: 'c3', nowMs: 50 * S });
    if (!third.ok) throw new Error('claim failed');
    expect(groupRows(root).map((g) => g.refs)).toEqual([64]);
    const record = (await table.snapshotRecords())[0]!.record;
    expect([record.owner, record.previousOwner, record.attempts, record.steals, record.payload]).toEqual(['c3', 'c2', 3, 2, { seed: 'other' }]);
    await table.close();
  });

  it('fails closed on a damaged or missing group row: every member is corrupt, nothing is overwritten, and leases check names it', async () => {
    const root = await tempRoot();
    const writer = await openTarget(root, { store: 'sqlite' });
    const targets = group(3);
    const claim = await writer.claimGroup(targets, { seed: 'x' }, { owner: 'c1', nowMs: 10 * S });
    if (!claim.ok) throw new Error('claim failed');
    await writer.close();
    const damages: [string, (db: BetterSqlite3.Database) => void, string][] = [
      ['changed content', (db) => db.prepare('UPDATE lease_groups SET content = \'{"payload":{},"targets":["1"]}\'').run(), 'does not match its hash'],
      ['deleted', (db) => db.prepare('DELETE FROM lease_groups').run(), 'is missing'],
    ];
    for (const [label, damage, reason] of damages) {
      withDb(root, damage);
      const before = memberRows(root);
      // A fresh table: nothing cached from the writes above.
      const table = await openTarget(root, { store: 'sqlite' });
      const conflict = await table.claimGroup(targets, { seed: 'y' }, { owner: 'c2', nowMs: 10 * S });
      expect(conflict, label).toMatchObject({ ok: false, reason: 'corrupt' });
      expect(conflict.ok ? 0 : conflict.reason === 'corrupt' ? conflict.corrupt.length : 0, label).toBe(64);
      expect(await table.releaseGroup(targets, claim.token), label).toMatchObject({ ok: false, reason: 'corrupt' });
      expect(memberRows(root), label).toEqual(before);
      const inspection = await inspectLeaseTable(root, { nowMs: 10 * S, leaseTtlMs: 60 * S });
      expect(inspection.counts.corrupt, label).toBeGreaterThanOrEqual(64);
      expect(inspection.corrupt.filter((c) => c.id !== null).every((c) => c.reason.includes(reason)), label).toBe(true);
      await table.close();
    }
    // The deleted row leaves 64 members and no group row; a count that disagrees is reported too.
    const stray = withDb(root, (db) => Number(db.prepare("INSERT INTO lease_groups (hash, content, refs) VALUES (?, '{}', 5)").run(Buffer.alloc(32, 7)).lastInsertRowid));
    const inspection = await inspectLeaseTable(root, { nowMs: 10 * S, leaseTtlMs: 60 * S });
    expect(inspection.corrupt.filter((c) => c.id === null).map((c) => [c.path.endsWith(`#group:${stray}`), c.reason])).toEqual([[true, `group row ${stray} counts 5 members but 0 records name it`]]);
  });

  it('upgrades a schema-1 database in place: its whole-record rows stay readable and usable, and leases reads it before the upgrade', async () => {
    const root = await tempRoot();
    await (await openTarget(root, { store: 'sqlite' })).close();
    // A schema-1 database, as the first SQLite store wrote it: one whole record per row.
    const v1 = path.join(await tempRoot(), 'v1.sqlite');
    const targets = [5n, 6n];
    const token = 'c1:0:1:10000:00000000000000aa';
    const db = new Sqlite(v1);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE symfence_table (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) STRICT; CREATE TABLE lease_records (id TEXT PRIMARY KEY NOT NULL, record BLOB NOT NULL) STRICT;');
    db.prepare("INSERT INTO symfence_table (key, value) VALUES ('kind', 'target')").run();
    const ids = targets.map((t) => targetRecordId(t)).sort();
    const sorted = [...targets].sort((x, y) => (targetRecordId(x) < targetRecordId(y) ? -1 : 1)).map(String);
    for (const target of targets) {
      const record: LeaseRecord = { schema: 1, kind: 'target', id: targetRecordId(target), status: 'leased', payload: {}, owner: 'c1', previousOwner: '', worker: 0, token, updatedMs: 10 * S, leaseTtlMs: 60 * S, attempts: 1, steals: 0, target: String(target), targets: sorted };
      db.prepare('INSERT INTO lease_records (id, record) VALUES (?, ?)').run(record.id, canonicalJsonBytes(record));
    }
    db.pragma(`application_id = ${SQLITE_APPLICATION_ID}`);
    db.pragma('user_version = 1');
    db.close();
    await rm(path.join(root, SQLITE_FILE));
    await copyFile(v1, path.join(root, SQLITE_FILE));

    const before = await inspectLeaseTable(root, { nowMs: 10 * S, leaseTtlMs: 60 * S });
    expect(before.counts).toMatchObject({ leased: 2, corrupt: 0 });
    const table = await openTarget(root, { store: 'sqlite' });
    expect(withDb(root, (conn) => conn.pragma('user_version', { simple: true }))).toBe(SQLITE_SCHEMA_VERSION);
    expect([...memberRows(root).keys()]).toEqual(ids);
    expect([...memberRows(root).values()].map(([record, groupId]) => [record.startsWith('blob:'), groupId])).toEqual([[true, null], [true, null]]);
    expect(await table.claimGroup(targets, {}, { owner: 'c2', nowMs: 20 * S })).toMatchObject({ ok: false, reason: 'conflict' });
    expect(await table.releaseGroup(targets, token)).toEqual({ ok: true });
    const again = await table.claimGroup(targets, {}, { owner: 'c2', nowMs: 20 * S });
    expect(again.ok).toBe(true);
    expect(groupRows(root).map((g) => g.refs)).toEqual([2]);
    await table.close();
  });
});
