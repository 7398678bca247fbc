// The SQLite store's schema-2 rows under hostile conditions: a field a newer writer added survives
// a heartbeat whatever its name, a group row stays while any member names it, a joined record is
// bounded as a record file is (in bytes), a group row damaged by another connection is seen, and
// a scan is one snapshot (a commit landing between its statements cannot make it report
// corruption that never existed).
import { createHash } from 'node:crypto';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type BetterSqlite3 from 'better-sqlite3';
import { targetRecordId } from '../../src/lease/identity.js';
import { inspectLeaseTable } from '../../src/lease/lease-inspect.js';
import { maxRecordBytes } from '../../src/lease/lease-record.js';
import { SQLITE_FILE } from '../../src/lease/sqlite/sqlite-database.js';
import { scanDatabase } from '../../src/lease/sqlite/sqlite-backend.js';
import { openTarget, S, tempRoot } from '../helpers/lease-fixtures.js';
import { leaseStoreUnderTest } from '../helpers/lease-stores.js';
import { group, Sqlite, withDb } from '../helpers/sqlite-tables.js';

const sqlite = leaseStoreUnderTest('sqlite');

describe.skipIf(sqlite.unavailable?.() !== undefined && process.env['CI'] !== 'true')('SQLite schema-2 rows (review)', () => {
  it('keeps an extra field named __proto__ that a newer writer added through a heartbeat', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    const targets = [7n];
    const claim = await table.claimGroup(targets, {}, { owner: 'c1', nowMs: 10 * S });
    if (!claim.ok) throw new Error('claim failed');
    const id = targetRecordId(7n);
    // A newer writer's record: every field of this version plus one more, an own "__proto__".
    const whole = (await sqlite.readRaw(root, id))!.toString('utf8').trimEnd();
    await sqlite.writeRaw(root, id, `${whole.slice(0, -1)},"__proto__":"kept"}\n`);
    expect((await table.snapshotRecords()).find((e) => e.id === id)?.record).toHaveProperty(['__proto__'], 'kept');

    expect(await table.heartbeatGroup(targets, claim.token, { nowMs: 20 * S })).toEqual({ ok: true });
    const after = (await sqlite.readRaw(root, id))!.toString('utf8');
    expect(after).toContain('"updatedMs":20000');
    expect(after).toContain('"__proto__":"kept"');
    await table.close();
  });

  it('keeps a group row while any member still names it: a takeover of half the group leaves the other half readable', async () => {
    const root = await tempRoot();
    const writer = await openTarget(root, { store: 'sqlite', leaseTtlMs: 10 * S });
    const targets = group(5);
    const first = await writer.claimGroup(targets, { seed: 'a' }, { owner: 'c1', nowMs: 10 * S });
    if (!first.ok) throw new Error('claim failed');
    await writer.close();

    // The lease expired; another coordinator takes over half of the group.
    const table = await openTarget(root, { store: 'sqlite', leaseTtlMs: 10 * S });
    const takeover = await table.claimGroup(targets.slice(0, 32), { seed: 'b' }, { owner: 'c2', nowMs: 30 * S });
    expect(takeover.ok).toBe(true);
    await table.close();

    // The 32 members nobody touched must still read as they did (their group row kept).
    const untouched = new Set(targets.slice(32).map((t) => targetRecordId(t)));
    const named = withDb(root, (db) => db.prepare('SELECT DISTINCT r.group_id AS g, (SELECT count(*) FROM lease_groups WHERE id = r.group_id) AS present FROM lease_records r').all() as { g: number; present: number }[]);
    expect(named).toHaveLength(2);
    expect(named.filter((n) => n.present === 0)).toEqual([]);
    const after = await inspectLeaseTable(root, { nowMs: 30 * S, leaseTtlMs: 10 * S });
    expect(after.counts.corrupt).toBe(0);
    // leased counts every leased record; expired, the ones among them past their TTL.
    expect([after.counts.leased, after.counts.expired]).toEqual([64, 32]);
    expect([...untouched].every((id) => !after.corrupt.some((c) => c.id === id))).toBe(true);
  });

  it('calls a member whose joined record is over the record bound corrupt, as the same bytes in a record file would be', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    const targets = [9n];
    const claim = await table.claimGroup(targets, { seed: 'p'.repeat(600_000) }, { owner: 'c1', nowMs: 10 * S });
    if (!claim.ok) throw new Error('claim failed');
    await table.close();
    const id = targetRecordId(9n);
    // Each row is under the bound on its own; joined they are a 1.2 MB record.
    withDb(root, (db) => {
      const row = db.prepare('SELECT record FROM lease_records WHERE id = ?').get(id) as { record: string };
      db.prepare('UPDATE lease_records SET record = ? WHERE id = ?').run(`${row.record.slice(0, -1)},"zz":"${'z'.repeat(600_000)}"}`, id);
    });
    const joined = (await sqlite.readRaw(root, id))!;
    expect(joined.length).toBeGreaterThan(maxRecordBytes('target'));
    const fresh = await openTarget(root, { store: 'sqlite' });
    expect(await fresh.claimGroup(targets, {}, { owner: 'c2', nowMs: 10 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
    await fresh.close();
    const inspection = await inspectLeaseTable(root, { nowMs: 10 * S, leaseTtlMs: 60 * S });
    expect(inspection.corrupt.map((c) => c.id)).toEqual([id]);
  });

  it('measures a text row against the record bound in bytes, as a record file is measured', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    const targets = [11n];
    const claim = await table.claimGroup(targets, {}, { owner: 'c1', nowMs: 10 * S });
    if (!claim.ok) throw new Error('claim failed');
    await table.close();
    const id = targetRecordId(11n);
    // A whole-record text row: 500,000 three-byte characters are 1.5 MB of UTF-8 in 0.5 M code units.
    const whole = (await sqlite.readRaw(root, id))!.toString('utf8').trimEnd();
    const text = `${whole.slice(0, -1)},"zz":"${'\u20ac'.repeat(500_000)}"}`;
    expect(Buffer.byteLength(text)).toBeGreaterThan(maxRecordBytes('target'));
    withDb(root, (db) => db.prepare('UPDATE lease_records SET record = ?, group_id = NULL WHERE id = ?').run(text, id));
    withDb(root, (db) => db.prepare('DELETE FROM lease_groups').run());
    const fresh = await openTarget(root, { store: 'sqlite' });
    expect(await fresh.claimGroup(targets, {}, { owner: 'c2', nowMs: 10 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
    await fresh.close();
  });

  it('measures a member row and its group row together in bytes: two multibyte halves under the bound each join to a record over it', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    const targets = [13n];
    const claim = await table.claimGroup(targets, {}, { owner: 'c1', nowMs: 10 * S });
    if (!claim.ok) throw new Error('claim failed');
    await table.close();
    const id = targetRecordId(13n);
    // Each half: 200,000 three-byte characters, 600 kB of UTF-8 in 200,000 code units.
    const wide = '\u20ac'.repeat(200_000);
    withDb(root, (db) => {
      const member = db.prepare('SELECT record, group_id FROM lease_records WHERE id = ?').get(id) as { record: string; group_id: number };
      const fields = JSON.parse((db.prepare('SELECT content FROM lease_groups WHERE id = ?').get(member.group_id) as { content: string }).content) as Record<string, unknown>;
      const content = JSON.stringify({ ...fields, payload: { wide } });
      db.prepare('UPDATE lease_groups SET content = ?, hash = ? WHERE id = ?').run(content, createHash('sha256').update(content, 'utf8').digest(), member.group_id);
      db.prepare('UPDATE lease_records SET record = ? WHERE id = ?').run(`${member.record.slice(0, -1)},"zz":"${wide}"}`, id);
    });
    expect(Buffer.byteLength(wide) * 2).toBeGreaterThan(maxRecordBytes('target'));
    expect(Buffer.byteLength(wide) + 1000).toBeLessThan(maxRecordBytes('target'));
    const fresh = await openTarget(root, { store: 'sqlite' });
    expect(await fresh.claimGroup(targets, {}, { owner: 'c2', nowMs: 10 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
    await fresh.close();
  });

  it('sees a group row damaged after this table cached it: the release fails closed and the damaged row stays', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    const targets = group(7);
    const claim = await table.claimGroup(targets, { seed: 'x' }, { owner: 'c1', nowMs: 10 * S });
    if (!claim.ok) throw new Error('claim failed');
    // Another connection damages the group row (its content no longer matches its hash).
    withDb(root, (db) => db.prepare('UPDATE lease_groups SET content = \'{"payload":{},"targets":["1"]}\'').run());
    const damaged = withDb(root, (db) => db.prepare('SELECT id, hash, content FROM lease_groups').all());
    // A record file whose bytes changed is read again and found corrupt; so must this group's members be.
    expect(await table.releaseGroup(targets, claim.token)).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(withDb(root, (db) => db.prepare('SELECT id, hash, content FROM lease_groups').all())).toEqual(damaged);
    await table.close();
  });

  it('scans one snapshot: a release committed by another connection between its reads reports no corruption', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    const claim = await table.claimGroup(group(6), { seed: 's' }, { owner: 'c1', nowMs: 10 * S });
    if (!claim.ok) throw new Error('claim failed');
    await table.close();
    const file = path.join(root, SQLITE_FILE);
    const reader = new Sqlite(file, { readonly: true, fileMustExist: true });
    const other = new Sqlite(file, { fileMustExist: true });
    let released = false;
    // Another coordinator's release (its rows and their group row, in one transaction) commits
    // after the scan has read the member rows and before it reads the group rows.
    const db = new Proxy(reader, {
      get(target, prop) {
        if (prop === 'prepare') {
          return (sql: string) => {
            if (!released && sql.includes('FROM lease_groups')) {
              other.transaction(() => {
                other.prepare('DELETE FROM lease_records').run();
                other.prepare('DELETE FROM lease_groups').run();
              }).immediate();
              released = true;
            }
            return target.prepare(sql);
          };
        }
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    try {
      const entries = scanDatabase(db, file, 'target');
      expect(released).toBe(true);
      expect(entries.filter((e) => e.state === 'corrupt').map((e) => (e.state === 'corrupt' ? e.reason : ''))).toEqual([]);
    } finally {
      reader.close();
      other.close();
    }
  });
});
