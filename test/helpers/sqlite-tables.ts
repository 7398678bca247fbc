// For tests that look inside a SQLite lease table: realistic target groups, and a connection of
// the test's own to the table's database (outside the table under test).
import { createRequire } from 'node:module';
import path from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { SQLITE_FILE } from '../../src/lease/sqlite/sqlite-database.js';

export const Sqlite = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

/** 64 full-width targets, distinct per `index`: the size a real group's list has. */
export function group(index: number): bigint[] {
  return Array.from({ length: 64 }, (_, i) => (0x9e3779b97f4a7c15n * BigInt(index * 64 + i + 1)) % 2n ** 64n || 1n);
}

/** Runs `use` on a fresh connection to the database of the table at `root`, then closes it. */
export function withDb<T>(root: string, use: (db: BetterSqlite3.Database) => T): T {
  const db = new Sqlite(path.join(root, SQLITE_FILE), { fileMustExist: true, timeout: 10_000 });
  try {
    return use(db);
  } finally {
    db.close();
  }
}
