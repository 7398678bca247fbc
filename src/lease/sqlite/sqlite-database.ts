/**
 * The SQLite lease database of one table root: `<root>/lease-table.sqlite` (plus SQLite's own
 * `-wal` and `-shm` files next to it). Opening, the connection settings, and the schema check
 * (docs/lease-format.md "SQLite store").
 *
 * Settings, per connection: WAL journal (readers never block the writer, and a commit is one
 * sequential append), `synchronous=FULL` (the WAL is fsynced at every commit, so a commit that
 * returned survives power loss), and a busy timeout of 0: SQLite's busy handler would sleep on
 * the calling thread, which for the I/O thread stalls every other request. Contention is
 * retried asynchronously by the caller instead, until a monotonic deadline (`retryBusy`).
 *
 * Schema 2: `PRAGMA application_id` = `SQLITE_APPLICATION_ID` marks the file as symfence's,
 * `PRAGMA user_version` = 2 is the schema, table `symfence_table` records the table kind, table
 * `lease_records` holds one row per record and `lease_groups` the part every member of a target
 * group shares, once per group (the row layout is sqlite-rows.ts). Schema 1 (no `lease_groups`,
 * every row a whole record) is upgraded in place by the first writer that opens it, in the same
 * transaction that checks it; its rows stay valid as they are.
 */
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { LeaseStoreSchemaError, LockTimeoutError, NativeUnavailableError } from '../../errors.js';
import { leaseIoError } from '../lease-io-error.js';
import type { RecordKind } from '../lease-record.js';

export type SqliteDatabase = BetterSqlite3.Database;

/** The database file of a table root. */
export const SQLITE_FILE = 'lease-table.sqlite';
/** `PRAGMA application_id`: ASCII `SYMF`. */
export const SQLITE_APPLICATION_ID = 0x53594d46;
/** `PRAGMA user_version` of the schema this version writes and reads. */
export const SQLITE_SCHEMA_VERSION = 2;
/** The older schema a writer upgrades (and a reader still reads). */
const SQLITE_SCHEMA_V1 = 1;
/** Pause between attempts on a busy database, ms (the flock locker's retry period too). */
const BUSY_RETRY_MS = 1;

const GROUPS_SQL = 'CREATE TABLE lease_groups (id INTEGER PRIMARY KEY AUTOINCREMENT, hash BLOB NOT NULL UNIQUE, content TEXT NOT NULL) STRICT;';
const RECORDS_SQL = (name: string): string => `CREATE TABLE ${name} (id TEXT PRIMARY KEY NOT NULL, record ANY NOT NULL, group_id INTEGER) STRICT, WITHOUT ROWID;`;
const SCHEMA_SQL = `
CREATE TABLE symfence_table (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) STRICT;
${RECORDS_SQL('lease_records')}
${GROUPS_SQL}
`;
/** Schema 1 → 2: the records table rebuilt with the new columns; every row keeps its whole record. */
const UPGRADE_V1_SQL = `
${RECORDS_SQL('lease_records_v2')}
INSERT INTO lease_records_v2 (id, record) SELECT id, record FROM lease_records;
DROP TABLE lease_records;
ALTER TABLE lease_records_v2 RENAME TO lease_records;
${GROUPS_SQL}
`;

let loaded: typeof BetterSqlite3 | null | undefined;
let loadError: Error | undefined;

/** better-sqlite3, loaded on first use; null when its native build is missing or broken. */
export function loadSqlite(): typeof BetterSqlite3 | null {
  if (loaded !== undefined) return loaded;
  try {
    loaded = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
    // The binding loads lazily on the first database: open one now so a broken build shows here.
    new loaded(':memory:').close();
  } catch (error) {
    loaded = null;
    loadError = error as Error;
  }
  return loaded;
}

export function sqliteUnavailable(): InstanceType<typeof NativeUnavailableError> {
  return new NativeUnavailableError(
    `the SQLite lease store needs better-sqlite3, which is not loadable: ${loadError?.message ?? 'unknown reason'}. Reinstall with \`npm ci\`, or use --lease-store files.`,
    { module: 'better-sqlite3', reason: loadError?.message ?? null },
  );
}

/** True for SQLite's "another connection holds the lock" results. */
export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || (typeof code === 'string' && (code.startsWith('SQLITE_BUSY_') || code.startsWith('SQLITE_LOCKED_')));
}

export interface BusyDeadline {
  readonly monotonicNowMs: () => number;
  readonly deadlineMs: number;
  readonly lockAcquireTimeoutMs: number;
  /** For the timeout message: what was being acquired. */
  readonly description: string;
  readonly path: string;
}

/**
 * Runs `attempt` until it does not fail with SQLITE_BUSY, pausing `BUSY_RETRY_MS` between tries
 * (the event loop runs meanwhile), then fails closed with `LockTimeoutError` at the deadline.
 */
export async function retryBusy<T>(attempt: () => T, deadline: BusyDeadline): Promise<T> {
  for (;;) {
    try {
      return attempt();
    } catch (error) {
      if (!isBusy(error)) throw error;
    }
    if (deadline.monotonicNowMs() >= deadline.deadlineMs) throw lockTimeout(deadline);
    await new Promise<void>((resolve) => setTimeout(resolve, BUSY_RETRY_MS));
  }
}

export function lockTimeout(deadline: BusyDeadline): InstanceType<typeof LockTimeoutError> {
  return new LockTimeoutError(
    `timed out after ${deadline.lockAcquireTimeoutMs}ms acquiring ${deadline.description}; SQLite write locks are never time-stolen`,
    { path: deadline.path, lockAcquireTimeoutMs: deadline.lockAcquireTimeoutMs },
  );
}

/** Refuses a database path that exists but is not a regular file (a symlink, a directory). */
function checkDatabasePath(file: string): boolean {
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw leaseIoError(`cannot stat ${file}: ${(error as Error).message}`, { path: file, step: 'open' }, error);
  }
  if (!stat.isFile()) throw new LeaseStoreSchemaError(`lease database ${file} is not a regular file`, { path: file, reason: 'not a regular file' });
  return true;
}

function schemaError(file: string, reason: string): InstanceType<typeof LeaseStoreSchemaError> {
  return new LeaseStoreSchemaError(`lease database ${file} ${reason}; refusing to open it`, { path: file, reason });
}

/**
 * Opens (creating if needed) the read-write database of `root` for a table of `kind`, in WAL
 * mode with `synchronous=FULL`, and checks or creates its schema in one `BEGIN IMMEDIATE`
 * transaction (two coordinators creating it at once: one creates, the other checks).
 */
export async function openWritableDatabase(root: string, kind: RecordKind, deadline: Omit<BusyDeadline, 'description' | 'path'>): Promise<SqliteDatabase> {
  const Sqlite = loadSqlite();
  if (!Sqlite) throw sqliteUnavailable();
  const file = path.join(root, SQLITE_FILE);
  checkDatabasePath(file);
  const busy = { ...deadline, description: `the lease database ${file}`, path: file };
  let db: SqliteDatabase;
  try {
    db = new Sqlite(file, { timeout: 0 });
  } catch (error) {
    throw leaseIoError(`cannot open lease database ${file}: ${(error as Error).message}`, { path: file, step: 'open' }, error);
  }
  try {
    // Reads the header: a file that is not a database fails here, before anything is written.
    const applicationId = await retryBusy(() => db.pragma('application_id', { simple: true }) as number, busy).catch((error: unknown) => {
      if ((error as { code?: unknown }).code === 'SQLITE_NOTADB') throw schemaError(file, 'is not a SQLite database');
      throw error;
    });
    if (applicationId !== 0 && applicationId !== SQLITE_APPLICATION_ID) throw schemaError(file, `belongs to another application (application_id 0x${applicationId.toString(16)})`);
    // Refused before any setting changes: a foreign database without an application_id (it has
    // tables, or a user_version) is not switched to WAL on its way to being refused.
    if (applicationId === 0) {
      const version = await retryBusy(() => db.pragma('user_version', { simple: true }) as number, busy);
      const objects = await retryBusy(() => (db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'").get() as { n: number }).n, busy);
      if (version !== 0 || objects !== 0) checkSchema(db, file, kind, applicationId, version);
    }
    const mode = await retryBusy(() => db.pragma('journal_mode = WAL', { simple: true }) as string, busy);
    if (mode !== 'wal') throw leaseIoError(`lease database ${file} cannot use the WAL journal (journal_mode ${mode})`, { path: file, step: 'open' }, undefined);
    db.pragma('synchronous = FULL');
    await retryBusy(() => db.exec('BEGIN IMMEDIATE'), busy);
    try {
      checkOrCreateSchema(db, file, kind);
      db.exec('COMMIT');
    } finally {
      if (db.inTransaction) db.exec('ROLLBACK');
    }
    return db;
  } catch (error) {
    db.close();
    if ((error as { code?: unknown }).code === 'SQLITE_NOTADB') throw schemaError(file, 'is not a SQLite database');
    if (typeof (error as { code?: unknown }).code === 'string' && String((error as { code: string }).code).startsWith('SQLITE_')) {
      throw leaseIoError(`cannot open lease database ${file}: ${(error as Error).message}`, { path: file, step: 'open', sqlite: (error as { code: string }).code }, error);
    }
    throw error;
  }
}

function checkOrCreateSchema(db: SqliteDatabase, file: string, kind: RecordKind): void {
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  const version = db.pragma('user_version', { simple: true }) as number;
  const objects = (db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'").get() as { n: number }).n;
  if (applicationId === 0 && version === 0 && objects === 0) {
    db.exec(SCHEMA_SQL);
    db.prepare('INSERT INTO symfence_table (key, value) VALUES (?, ?)').run('kind', kind);
    db.pragma(`application_id = ${SQLITE_APPLICATION_ID}`);
    db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
    return;
  }
  checkSchema(db, file, kind, applicationId, version);
  if (version === SQLITE_SCHEMA_V1) {
    db.exec(UPGRADE_V1_SQL);
    db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
  }
}

function checkSchema(db: SqliteDatabase, file: string, kind: RecordKind, applicationId: number, version: number): void {
  if (applicationId !== SQLITE_APPLICATION_ID) throw schemaError(file, applicationId === 0 ? 'is not a symfence lease database (no application_id)' : `belongs to another application (application_id 0x${applicationId.toString(16)})`);
  if (version > SQLITE_SCHEMA_VERSION) throw schemaError(file, `has schema ${version}, newer than this version of symfence reads (${SQLITE_SCHEMA_VERSION}); upgrade symfence`);
  if (version !== SQLITE_SCHEMA_VERSION && version !== SQLITE_SCHEMA_V1) throw schemaError(file, `has unknown schema ${version}`);
  let stored: string | undefined;
  try {
    stored = (db.prepare("SELECT value FROM symfence_table WHERE key = 'kind'").get() as { value?: string } | undefined)?.value;
    if (version === SQLITE_SCHEMA_V1) db.prepare('SELECT id, record FROM lease_records LIMIT 0').all();
    else {
      db.prepare('SELECT id, record, group_id FROM lease_records LIMIT 0').all();
      db.prepare('SELECT id, hash, content FROM lease_groups LIMIT 0').all();
    }
  } catch (error) {
    throw schemaError(file, `lacks the schema-${version} tables (${(error as Error).message})`);
  }
  if (stored !== kind) throw schemaError(file, `holds a ${stored ?? 'unknown'} table, not a ${kind} table`);
}

/** True when `db` has schema 1 (read-only readers read it as it is; a writer upgrades it). */
export function isSchemaV1(db: SqliteDatabase): boolean {
  return (db.pragma('user_version', { simple: true }) as number) === SQLITE_SCHEMA_V1;
}

/**
 * Opens the database of `root` read-only (`symfence leases`): the database file is never changed
 * and no setting is (SQLite creates its `-wal`/`-shm` files when no writer has them open); the
 * schema is checked. Undefined when the database does not exist yet (a table whose
 * metadata was written but which never opened its database holds no record).
 */
export function openReadOnlyDatabase(root: string, kind: RecordKind): SqliteDatabase | undefined {
  const Sqlite = loadSqlite();
  if (!Sqlite) throw sqliteUnavailable();
  const file = path.join(root, SQLITE_FILE);
  if (!checkDatabasePath(file)) return undefined;
  let db: SqliteDatabase;
  try {
    db = new Sqlite(file, { readonly: true, fileMustExist: true, timeout: 0 });
  } catch (error) {
    throw leaseIoError(`cannot open lease database ${file} read-only: ${(error as Error).message}`, { path: file, step: 'open' }, error);
  }
  try {
    checkSchema(db, file, kind, db.pragma('application_id', { simple: true }) as number, db.pragma('user_version', { simple: true }) as number);
    return db;
  } catch (error) {
    db.close();
    if ((error as { code?: unknown }).code === 'SQLITE_NOTADB') throw schemaError(file, 'is not a SQLite database');
    throw error;
  }
}
