// The SQLite store's row layout: what the members of a claimed target group share (holder, token,
// times, payload, targets) lives once, in a content-addressed group row that goes with the last
// member naming it; members hold their own fields. Checked on the
// database itself (a second connection), through fresh tables (no cache to hide a bad row), and
// through the read-only inspection `symfence leases` uses.
import { copyFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type BetterSqlite3 from 'better-sqlite3';
import { canonicalJsonBytes } from '../../src/lease/canonical-json.js';
import { targetRecordId } from '../../src/lease/identity.js';
import { inspectLeaseTable } from '../../src/lease/lease-inspect.js';
import { serializeRecord, type LeaseRecord } from '../../src/lease/lease-record.js';
import { SQLITE_APPLICATION_ID, SQLITE_FILE, SQLITE_SCHEMA_VERSION } from '../../src/lease/sqlite/sqlite-database.js';
import { openTarget, S, tempRoot } from '../helpers/lease-fixtures.js';
import { leaseStoreUnderTest } from '../helpers/lease-stores.js';
import { group, Sqlite, withDb } from '../helpers/sqlite-tables.js';

const sqlite = leaseStoreUnderTest('sqlite');

/** Every group row: its id, its size, and how many member rows name it. */
const groupRows = (root: string) =>
  withDb(root, (db) => db.prepare('SELECT g.id, (SELECT count(*) FROM lease_records r WHERE r.group_id = g.id) AS refs, length(g.content) AS size FROM lease_groups g ORDER BY g.id').all() as { id: number; refs: number; size: number }[]);

/** Every row as the test's own connection sees it: id → [record text or blob (base64), group id or null]. */
const memberRows = (root: string) =>
  withDb(root, (db) => new Map((db.prepare('SELECT id, record, group_id FROM lease_records ORDER BY id').all() as { id: string; record: Buffer | string; group_id: number | null }[]).map((r) => [r.id, [typeof r.record === 'string' ? r.record : `blob:${r.record.toString('base64')}`, r.group_id] as const])));

describe.skipIf(sqlite.unavailable?.() !== undefined && process.env['CI'] !== 'true')('SQLite group rows', () => {
  it('stores what a claim shares once, counts its members, moves them on a heartbeat, and drops the row with the last member', async () => {
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
      for (const field of ['"targets"', '"payload"', '"token"', '"owner"', '"updatedMs"']) expect(text).not.toContain(field);
      expect(groups.map((g) => g.id)).toContain(groupId);
    }
    // A member row is a small fraction of the whole record; the record read back is the whole record.
    const whole = (await sqlite.readRaw(root, targetRecordId(a[0]!)))!;
    expect(members.get(targetRecordId(a[0]!))![0].length * 8).toBeLessThan(whole.length);
    const snapshot = await table.snapshotRecords();
    const first = snapshot.find((e) => e.id === targetRecordId(a[0]!))!.record;
    expect(serializeRecord(first)).toEqual(whole);
    expect(first.targets).toHaveLength(64);
    expect([first.payload, first.owner, first.token, first.updatedMs]).toEqual([{ seed: 'id:000001' }, 'c1', claimA.token, 10 * S]);

    // A heartbeat gives the group a new group row (its time changed) and drops the old one.
    expect(await table.heartbeatGroup(a, claimA.token, { nowMs: 20 * S })).toEqual({ ok: true });
    const beaten = groupRows(root);
    expect(beaten.map((g) => g.refs)).toEqual([64, 64]);
    expect(beaten.map((g) => g.id)).not.toContain(groups[0]!.id);
    expect(beaten.map((g) => g.id)).toContain(groups[1]!.id);
    expect((await table.snapshotRecords()).filter((e) => e.record.updatedMs === 20 * S)).toHaveLength(64);

    expect(await table.releaseGroup(a, claimA.token)).toEqual({ ok: true });
    expect(groupRows(root)).toEqual([groups[1]]);
    expect(await table.releaseGroup(b, claimB.token)).toEqual({ ok: true });
    expect(groupRows(root)).toEqual([]);
    expect(memberRows(root).size).toBe(0);
    await table.close();
  });

  it('moves every member of a taken-over group to the new claim and keeps each member its own counters', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite', leaseTtlMs: 10 * S });
    const targets = group(2);
    const first = await table.claimGroup(targets.slice(0, 32), { seed: 'same' }, { owner: 'c1', nowMs: 10 * S });
    // Expired, so another coordinator takes the whole group over: half the members were leased before.
    const second = await table.claimGroup(targets, { seed: 'other' }, { owner: 'c2', nowMs: 30 * S });
    if (!first.ok || !second.ok) throw new Error('claims failed');
    expect(groupRows(root).map((g) => g.refs)).toEqual([64]);
    const records = (await table.snapshotRecords()).map((e) => e.record);
    const counters = (r: (typeof records)[number]) => [r.owner, r.previousOwner, r.attempts, r.steals, r.payload];
    const taken = new Set(targets.slice(0, 32).map(String));
    expect(records.filter((r) => taken.has(r.target!)).map(counters)).toEqual(Array(32).fill(['c2', 'c1', 2, 1, { seed: 'other' }]));
    expect(records.filter((r) => !taken.has(r.target!)).map(counters)).toEqual(Array(32).fill(['c2', '', 1, 0, { seed: 'other' }]));
    await table.close();
  });

  it('trusts what a table last saw only until another connection commits: then it reads the rows again', async () => {
    const root = await tempRoot();
    const [a, b] = [await openTarget(root, { store: 'sqlite' }), await openTarget(root, { store: 'sqlite' })];
    const targets = group(4);
    const claim = await a.claimGroup(targets, { seed: 's' }, { owner: 'c1', nowMs: 10 * S });
    if (!claim.ok) throw new Error('claim failed');
    // The other table moves the group to a new group row; the first releases it from there.
    expect(await b.heartbeatGroup(targets, claim.token, { nowMs: 20 * S })).toEqual({ ok: true });
    expect(await a.releaseGroup(targets, claim.token)).toEqual({ ok: true });
    expect(groupRows(root)).toEqual([]);
    expect(memberRows(root).size).toBe(0);
    expect((await inspectLeaseTable(root, { nowMs: 20 * S, leaseTtlMs: 60 * S })).counts.corrupt).toBe(0);

    // Claimed by the first, released by the second: the first sees the targets free again.
    const again = await a.claimGroup(targets, {}, { owner: 'c1', nowMs: 30 * S });
    if (!again.ok) throw new Error('claim failed');
    expect(await b.releaseGroup(targets, again.token)).toEqual({ ok: true });
    expect((await a.claimGroup(targets, {}, { owner: 'c2', nowMs: 31 * S })).ok).toBe(true);
    // A row changed by any other writer is seen at the next batch.
    await sqlite.writeRaw(root, targetRecordId(targets[0]!), '{"schema":');
    expect(await a.claimGroup(targets, {}, { owner: 'c3', nowMs: 32 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
    await a.close();
    await b.close();
  });

  it('fails closed on a damaged or missing group row: every member is corrupt, nothing is overwritten, and leases check lists them', async () => {
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

describe.skipIf(sqlite.unavailable?.() !== undefined && process.env['CI'] !== 'true')('SQLite group rows under a random workload', () => {
  it('keeps every member naming a present group row and leaves no group row nobody names, across two tables', async () => {
    const root = await tempRoot();
    const tables = [await openTarget(root, { store: 'sqlite', leaseTtlMs: 10 * S }), await openTarget(root, { store: 'sqlite', leaseTtlMs: 10 * S })];
    // A small pool of targets, so that claims overlap, take over expired members and split groups.
    const pool = Array.from({ length: 24 }, (_, i) => BigInt(i + 1));
    const held: { targets: bigint[]; token: string }[] = [];
    let seed = 0x2545f491;
    const next = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    let nowMs = 100 * S;
    for (let step = 0; step < 300; step += 1) {
      const table = tables[next(2)]!;
      nowMs += next(3) * S;
      const action = next(4);
      if (action <= 1 || held.length === 0) {
        const start = next(pool.length);
        const targets = pool.slice(start, start + 1 + next(6));
        const claim = await table.claimGroup(targets, { step }, { owner: `c${next(2)}`, nowMs });
        if (claim.ok) held.push({ targets, token: claim.token });
      } else {
        const [lease] = held.splice(next(held.length), 1);
        if (action === 2) {
          const beat = await table.heartbeatGroup(lease!.targets, lease!.token, { nowMs });
          if (beat.ok) held.push(lease!);
        } else await table.releaseGroup(lease!.targets, lease!.token);
      }
      const orphans = withDb(root, (db) => db.prepare('SELECT count(*) FROM lease_groups g WHERE NOT EXISTS (SELECT 1 FROM lease_records r WHERE r.group_id = g.id)').pluck().get());
      const missing = withDb(root, (db) => db.prepare('SELECT count(*) FROM lease_records r WHERE r.group_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM lease_groups g WHERE g.id = r.group_id)').pluck().get());
      expect([step, orphans, missing]).toEqual([step, 0, 0]);
    }
    const inspection = await inspectLeaseTable(root, { nowMs, leaseTtlMs: 10 * S });
    expect(inspection.counts.corrupt).toBe(0);
    for (const table of tables) await table.close();
  });
});
