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
 * Schema 3: `PRAGMA application_id` = `SQLITE_APPLICATION_ID` marks the file as symfence's,
 * `PRAGMA user_version` = 3 is the schema, table `symfence_table` records the table kind, table
 * `lease_records` holds one row per record and `lease_groups` the part every member of a target
 * group shares, once per group (the row layout is sqlite-rows.ts). Table `answer_records` (the
 * same columns) holds the answer records (docs/lease-format.md "Answers"), apart from the lease
 * records: a branch's answers stay for the table's life while its lease record lives only while
 * the branch is held, and in one B-tree the many answer rows would spread the few held lease
 * rows over many pages, each of which a claim or heartbeat then writes again.
 *
 * Older schemas are upgraded in place by the first writer that opens them, in the same
 * transaction that checks them, and their rows stay valid as they are: schema 1 (no
 * `lease_groups`, every row a whole record) gets the schema-2 tables, schema 2 gets
 * `answer_records` (answer records written before it stay in `lease_records`, where reads still
 * find them, until their next write moves them).
 */
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { LeaseCorruptError, LeaseStoreReplacedError, LeaseStoreSchemaError, LockTimeoutError, NativeUnavailableError } from '../../errors.js';
import { leaseIoError } from '../lease-io-error.js';
import type { RecordKind } from '../lease-record.js';
import { SqliteFileIdentity } from './sqlite-identity.js';

export type SqliteDatabase = BetterSqlite3.Database;

/** The database file of a table root. */
export const SQLITE_FILE = 'lease-table.sqlite';
/** `PRAGMA application_id`: ASCII `SYMF`. */
export const SQLITE_APPLICATION_ID = 0x53594d46;
/** `PRAGMA user_version` of the schema this version writes and reads. */
export const SQLITE_SCHEMA_VERSION = 3;
/** The older schemas a writer upgrades (and a reader still reads). */
const SQLITE_SCHEMA_V1 = 1;
const SQLITE_SCHEMA_V2 = 2;
/** Pause between attempts on a busy database, ms (the flock locker's retry period too). */
const BUSY_RETRY_MS = 1;

const GROUPS_SQL = 'CREATE TABLE lease_groups (id INTEGER PRIMARY KEY AUTOINCREMENT, hash BLOB NOT NULL UNIQUE, content TEXT NOT NULL) STRICT;';
const RECORDS_SQL = (name: string): string => `CREATE TABLE ${name} (id TEXT PRIMARY KEY NOT NULL, record ANY NOT NULL, group_id INTEGER) STRICT, WITHOUT ROWID;`;
const SCHEMA_SQL = `
CREATE TABLE symfence_table (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) STRICT;
${RECORDS_SQL('lease_records')}
${GROUPS_SQL}
${RECORDS_SQL('answer_records')}
`;
/** Schema 1 → 2: the records table rebuilt with the new columns; every row keeps its whole record. */
const UPGRADE_V1_SQL = `
${RECORDS_SQL('lease_records_v2')}
INSERT INTO lease_records_v2 (id, record) SELECT id, record FROM lease_records;
DROP TABLE lease_records;
ALTER TABLE lease_records_v2 RENAME TO lease_records;
${GROUPS_SQL}
`;
/** Schema 2 → 3: the answer records' own table (file comment). */
const UPGRADE_V2_SQL = RECORDS_SQL('answer_records');

/** One object of `sqlite_schema` as a schema has it: `sql` null for SQLite's own automatic indexes. */
interface SchemaObject {
  readonly type: 'table' | 'index';
  readonly name: string;
  readonly tblName: string;
  /** The exact `CREATE` text SQLite stores (for a renamed table, its name may be quoted). */
  readonly sql: string | null;
}

const table = (name: string, sql: string): SchemaObject => ({ type: 'table', name, tblName: name, sql });
const autoIndex = (tblName: string): SchemaObject => ({ type: 'index', name: `sqlite_autoindex_${tblName}_1`, tblName, sql: null });
const stripSemicolon = (sql: string): string => sql.trim().replace(/;$/, '');
const KIND_TABLE = table('symfence_table', 'CREATE TABLE symfence_table (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) STRICT');

const SCHEMA_V2_OBJECTS: readonly SchemaObject[] = [
  KIND_TABLE,
  autoIndex('symfence_table'),
  table('lease_records', stripSemicolon(RECORDS_SQL('lease_records'))),
  table('lease_groups', stripSemicolon(GROUPS_SQL)),
  autoIndex('lease_groups'),
  table('sqlite_sequence', 'CREATE TABLE sqlite_sequence(name,seq)'),
];

/**
 * Every object of `sqlite_schema` per schema version, and nothing else: a trigger, a view, another
 * table or index, or a table of other columns or constraints (a missing primary key) is refused
 * (docs/lease-format.md "SQLite store"). A trigger could delete a row a claim just wrote, a view
 * or a rebuilt table could answer differently than the rows do.
 */
const EXPECTED_OBJECTS: ReadonlyMap<number, readonly SchemaObject[]> = new Map([
  [SQLITE_SCHEMA_V1, [KIND_TABLE, autoIndex('symfence_table'), table('lease_records', 'CREATE TABLE lease_records (id TEXT PRIMARY KEY NOT NULL, record BLOB NOT NULL) STRICT'), autoIndex('lease_records')]],
  [SQLITE_SCHEMA_V2, SCHEMA_V2_OBJECTS],
  [SQLITE_SCHEMA_VERSION, [...SCHEMA_V2_OBJECTS, table('answer_records', stripSemicolon(RECORDS_SQL('answer_records')))]],
]);

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

function sqliteUnavailable(): InstanceType<typeof NativeUnavailableError> {
  return new NativeUnavailableError(
    `the SQLite lease store needs better-sqlite3, which is not loadable: ${loadError?.message ?? 'unknown reason'}. Reinstall with \`npm ci\`, or use --lease-store files.`,
    { module: 'better-sqlite3', reason: loadError?.message ?? null },
  );
}

/** True for SQLite's "another connection holds the lock" results. */
function isBusy(error: unknown): boolean {
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

function lockTimeout(deadline: BusyDeadline): InstanceType<typeof LockTimeoutError> {
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
 * The error of a failed SQLite call on the database at `file`, one code per kind of damage
 * (docs/leases.md "SQLite damage"): not a database at all → `ERR_LEASE_STORE_SCHEMA`; a database
 * whose pages are damaged (truncated, a corrupt b-tree: `SQLITE_CORRUPT`) → `ERR_LEASE_CORRUPT`;
 * anything else SQLite reports (I/O errors, a full disk, permissions) → `ERR_LEASE_IO`. A
 * `SymfenceError` passes through unchanged.
 */
export function sqliteFailure(file: string, error: unknown, step: string, what: string): Error {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return error as Error;
  if (code === 'SQLITE_NOTADB') return schemaError(file, 'is not a SQLite database');
  if (code === 'SQLITE_CORRUPT' || code.startsWith('SQLITE_CORRUPT_')) {
    return new LeaseCorruptError(`lease database ${file} is damaged (${(error as Error).message}): ${what} failed; restore it from a backup or move it away (its leases are lost)`, { path: file, step, sqlite: code });
  }
  return leaseIoError(`${what} of lease database ${file} failed: ${(error as Error).message}`, { path: file, step, sqlite: code }, error);
}

/** The error of a table whose database is no longer the one at its path (sqlite-identity.ts). */
export function storeReplaced(file: string, reason: string): InstanceType<typeof LeaseStoreReplacedError> {
  return new LeaseStoreReplacedError(`lease database ${file} is no longer the one this table opened: ${reason}; every lease of the table is lost`, { path: file, reason });
}

/** The header fields and object count of a database, read in one snapshot. */
interface Header {
  readonly applicationId: number;
  readonly version: number;
  /** Objects of `sqlite_schema` (SQLite's own included). */
  readonly objects: number;
}

function readHeader(db: SqliteDatabase): Header {
  const read = (): Header => ({
    applicationId: db.pragma('application_id', { simple: true }) as number,
    version: db.pragma('user_version', { simple: true }) as number,
    objects: (db.prepare('SELECT count(*) AS n FROM sqlite_schema').get() as { n: number }).n,
  });
  if (db.inTransaction) return read();
  // One read transaction: another connection's commit cannot fall between the three reads.
  db.exec('BEGIN');
  try {
    return read();
  } finally {
    if (db.inTransaction) db.exec('COMMIT');
  }
}

/** An empty database: the file of a table whose creator has not written the schema (yet). */
function isEmpty(header: Header): boolean {
  return header.applicationId === 0 && header.version === 0 && header.objects === 0;
}

/** An open writable database and the identity of its files (sqlite-identity.ts). */
interface OpenedDatabase {
  readonly db: SqliteDatabase;
  readonly identity: SqliteFileIdentity;
}

/**
 * Opens (creating if needed) the read-write database of `root` for a table of `kind`, in WAL
 * mode with `synchronous=FULL`, and checks or creates its schema in one `BEGIN IMMEDIATE`
 * transaction. The caller holds the root's metadata lock (store-root.ts): of coordinators
 * opening a new root at once, one creates the database while the others wait, then check it.
 * The schema is written with `application_id` in that one transaction, so a creator killed
 * half-way leaves an empty database, which the next opener initialises.
 */
export async function openWritableDatabase(root: string, kind: RecordKind, deadline: Omit<BusyDeadline, 'description' | 'path'>): Promise<OpenedDatabase> {
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
    const header = await retryBusy(() => readHeader(db), busy);
    if (header.applicationId !== 0 && header.applicationId !== SQLITE_APPLICATION_ID) throw schemaError(file, `belongs to another application (application_id 0x${header.applicationId.toString(16)})`);
    // Refused before any setting changes: a foreign database without an application_id (it has
    // tables, or a user_version) is not switched to WAL on its way to being refused.
    if (!isEmpty(header)) checkSchema(db, file, kind, header);
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
    // The database, its WAL and its shm index are all open now: their identity is what every
    // later check compares the paths with.
    const identity = SqliteFileIdentity.capture(file);
    if (typeof identity === 'string') throw storeReplaced(file, identity);
    return { db, identity };
  } catch (error) {
    db.close();
    throw sqliteFailure(file, error, 'open', 'opening');
  }
}

function checkOrCreateSchema(db: SqliteDatabase, file: string, kind: RecordKind): void {
  const header = readHeader(db);
  if (isEmpty(header)) {
    db.exec(SCHEMA_SQL);
    db.prepare('INSERT INTO symfence_table (key, value) VALUES (?, ?)').run('kind', kind);
    db.pragma(`application_id = ${SQLITE_APPLICATION_ID}`);
    db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
    return;
  }
  checkSchema(db, file, kind, header);
  if (header.version === SQLITE_SCHEMA_V1) db.exec(UPGRADE_V1_SQL);
  if (header.version === SQLITE_SCHEMA_V1 || header.version === SQLITE_SCHEMA_V2) {
    db.exec(UPGRADE_V2_SQL);
    db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
  }
}

/**
 * Fails closed with `ERR_LEASE_STORE_SCHEMA` unless the database is symfence's, of a known schema,
 * holds exactly that schema's objects (`EXPECTED_OBJECTS`) and a table of `kind`.
 */
function checkSchema(db: SqliteDatabase, file: string, kind: RecordKind, header: Header): void {
  const { applicationId, version } = header;
  if (applicationId !== SQLITE_APPLICATION_ID) throw schemaError(file, applicationId === 0 ? 'is not a symfence lease database (no application_id)' : `belongs to another application (application_id 0x${applicationId.toString(16)})`);
  if (version > SQLITE_SCHEMA_VERSION) throw schemaError(file, `has schema ${version}, newer than this version of symfence reads (${SQLITE_SCHEMA_VERSION}); upgrade symfence`);
  const expected = EXPECTED_OBJECTS.get(version);
  if (expected === undefined) throw schemaError(file, `has unknown schema ${version}`);
  const found = db.prepare('SELECT type, name, tbl_name AS tblName, sql FROM sqlite_schema ORDER BY name, type').all() as { type: unknown; name: unknown; tblName: unknown; sql: unknown }[];
  const wanted = new Map(expected.map((object) => [object.name, object]));
  for (const object of found) {
    const want = typeof object.name === 'string' ? wanted.get(object.name) : undefined;
    if (want === undefined) throw schemaError(file, `holds ${describeObject(object)}, which schema ${version} does not have`);
    if (object.type !== want.type || object.tblName !== want.tblName || !sameSql(object.sql, want)) {
      throw schemaError(file, `holds ${describeObject(object)} of another definition than schema ${version}'s (${want.sql ?? `an automatic index of ${want.tblName}`})`);
    }
    wanted.delete(want.name);
  }
  const missing = [...wanted.keys()];
  if (missing.length > 0) throw schemaError(file, `lacks ${missing.join(', ')} of schema ${version}`);
  const stored = (db.prepare("SELECT value FROM symfence_table WHERE key = 'kind'").get() as { value?: unknown } | undefined)?.value;
  if (stored !== kind) throw schemaError(file, `holds a ${typeof stored === 'string' ? stored : 'unknown'} table, not a ${kind} table`);
}

function describeObject(object: { type: unknown; name: unknown; sql: unknown }): string {
  const sql = typeof object.sql === 'string' ? `: ${object.sql.length > 200 ? `${object.sql.slice(0, 200)}…` : object.sql}` : '';
  return `${String(object.type)} ${JSON.stringify(String(object.name))}${sql}`;
}

/** The stored text of a table: its `CREATE TABLE` exactly, its name also quoted (`ALTER TABLE … RENAME` quotes it). */
function sameSql(sql: unknown, want: SchemaObject): boolean {
  if (want.sql === null || sql === null) return sql === want.sql;
  if (sql === want.sql) return true;
  const prefix = `CREATE TABLE ${want.name} `;
  return typeof sql === 'string' && want.sql.startsWith(prefix) && sql === `CREATE TABLE "${want.name}" ${want.sql.slice(prefix.length)}`;
}

/** The schema of `db` (read-only readers read an older one as it is; a writer upgrades it). */
export function schemaVersion(db: SqliteDatabase): number {
  return db.pragma('user_version', { simple: true }) as number;
}

/** True when `db` has schema 1: no group rows, no answer table. */
export function isSchemaV1(db: SqliteDatabase): boolean {
  return schemaVersion(db) === SQLITE_SCHEMA_V1;
}

/** True when `db` has the answer records' own table (schema 3). */
export function hasAnswerTable(db: SqliteDatabase): boolean {
  return schemaVersion(db) >= SQLITE_SCHEMA_VERSION;
}

/**
 * Opens the database of `root` read-only (`symfence leases`): the database file is never changed
 * and no setting is (SQLite creates its `-wal`/`-shm` files when no writer has them open); the
 * schema is checked. Undefined when the database does not exist yet, or is still empty (a table
 * whose metadata was written but which never opened its database, or whose creator is writing the
 * schema right now, holds no record).
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
    const header = readHeader(db);
    if (isEmpty(header)) {
      db.close();
      return undefined;
    }
    checkSchema(db, file, kind, header);
    return db;
  } catch (error) {
    db.close();
    throw sqliteFailure(file, error, 'open', 'opening');
  }
}
