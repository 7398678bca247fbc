// The schema check compares the whole of sqlite_schema with the schema's objects: a database with
// one object more (a trigger that deletes what a claim writes, a view, a table, an index) or one
// of another definition (lease_records without its primary key) is refused at open and by
// `symfence leases check` with ERR_LEASE_STORE_SCHEMA. A damaged database (truncated, or with
// corrupt pages) is ERR_LEASE_CORRUPT wherever it is met, never a raw SQLite error.
import { openSync, closeSync, writeSync, statSync, truncateSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SQLITE_FILE } from '../../src/lease/sqlite/sqlite-database.js';
import { runCliCaptured } from '../helpers/cli-in-process.js';
import { codeOfAsync } from '../helpers/error-code.js';
import { openTarget, S, tempRoot } from '../helpers/lease-fixtures.js';
import { leaseStoreUnderTest } from '../helpers/lease-stores.js';
import { group, withDb } from '../helpers/sqlite-tables.js';

const sqlite = leaseStoreUnderTest('sqlite');

/** A lease directory with a target table holding `groups` claimed groups; returns it and the table root. */
async function leaseDir(groups = 1): Promise<{ dir: string; root: string }> {
  const dir = await tempRoot();
  const root = path.join(dir, 'targets');
  const table = await openTarget(root, { store: 'sqlite', coordination: 'single' });
  for (let i = 0; i < groups; i += 1) await table.claimGroup(group(i), { job: i }, { owner: 'c1', nowMs: 10 * S });
  await table.close();
  return { dir, root };
}

const TAMPERING: readonly { name: string; sql: string }[] = [
  { name: 'a trigger that deletes every row a claim inserts', sql: 'CREATE TRIGGER t AFTER INSERT ON lease_records BEGIN DELETE FROM lease_records WHERE id = NEW.id; END' },
  { name: 'a view', sql: 'CREATE VIEW v AS SELECT id FROM lease_records' },
  { name: 'another table', sql: 'CREATE TABLE notes (x)' },
  { name: 'an index', sql: 'CREATE INDEX by_group ON lease_records (group_id)' },
  {
    name: 'lease_records without its primary key',
    sql: 'CREATE TABLE r2 (id TEXT NOT NULL, record ANY NOT NULL, group_id INTEGER) STRICT; INSERT INTO r2 SELECT * FROM lease_records; DROP TABLE lease_records; ALTER TABLE r2 RENAME TO lease_records',
  },
];

describe.skipIf(sqlite.unavailable?.() !== undefined && process.env['CI'] !== 'true')('SQLite schema check', () => {
  for (const { name, sql } of TAMPERING) {
    it(`refuses a database with ${name}, at open and in leases check (ERR_LEASE_STORE_SCHEMA)`, async () => {
      const { dir, root } = await leaseDir();
      withDb(root, (db) => db.exec(sql));
      expect(await codeOfAsync(openTarget(root, { store: 'sqlite', coordination: 'single' }))).toBe('ERR_LEASE_STORE_SCHEMA');
      const check = await runCliCaptured('leases', 'check', dir);
      expect(check.code).not.toBe(0);
      expect(check.err).toContain('ERR_LEASE_STORE_SCHEMA');
      expect(check.err).not.toContain('SQLITE_');
    });
  }

  it('opens a database whose lease_records was rebuilt by the schema-1 upgrade (its name quoted by ALTER TABLE RENAME)', async () => {
    const { root } = await leaseDir();
    withDb(root, (db) => db.exec('CREATE TABLE r2 (id TEXT PRIMARY KEY NOT NULL, record ANY NOT NULL, group_id INTEGER) STRICT, WITHOUT ROWID; INSERT INTO r2 SELECT * FROM lease_records; DROP TABLE lease_records; ALTER TABLE r2 RENAME TO lease_records'));
    const table = await openTarget(root, { store: 'sqlite', coordination: 'single' });
    expect((await table.snapshotRecords()).length).toBe(64);
    await table.close();
  });

  it('calls a truncated database and one with corrupt pages ERR_LEASE_CORRUPT, at open or first read and in leases check', async () => {
    for (const damage of ['truncated', 'corrupt pages'] as const) {
      const { dir, root } = await leaseDir(64);
      const file = path.join(root, SQLITE_FILE);
      withDb(root, (db) => db.pragma('wal_checkpoint(TRUNCATE)'));
      const size = statSync(file).size;
      expect(size).toBeGreaterThan(64 * 4096);
      if (damage === 'truncated') truncateSync(file, Math.floor(size / 2 / 4096) * 4096);
      else {
        const fd = openSync(file, 'r+');
        try {
          for (let page = 3; page < size / 4096; page += 2) writeSync(fd, Buffer.alloc(4096, 0xa5), 0, 4096, page * 4096);
        } finally {
          closeSync(fd);
        }
      }
      const opened = await openTarget(root, { store: 'sqlite', coordination: 'single' }).catch((error: unknown) => error as Error);
      if (opened instanceof Error) expect((opened as { code?: string }).code, `${damage}: open`).toBe('ERR_LEASE_CORRUPT');
      else {
        expect(await codeOfAsync(opened.snapshotRecords()), `${damage}: scan`).toBe('ERR_LEASE_CORRUPT');
        await opened.close();
      }
      const check = await runCliCaptured('leases', 'check', dir);
      expect(check.code, damage).not.toBe(0);
      expect(check.err, damage).toContain('ERR_LEASE_CORRUPT');
      expect(check.err, damage).not.toContain('ERR_LEASE_IO');
      expect(check.err, damage).not.toContain('ERR_LEASE_STORE_SCHEMA');
    }
  });
});
