/**
 * The SQLite store (`RecordBackend`): one database per table root (sqlite-database.ts), one row
 * per record, for coordinators on one host (docs/leases.md "Lease stores").
 *
 * Batches are optimistic, and the database's write lock is held only for one synchronous
 * transaction — never across an `await`, so no other writer of the host waits on an event-loop
 * turn of ours, let alone on a publication. `fetch` reads the rows (outside any write
 * transaction; WAL readers never block and are never blocked); the operations decide; `commit`
 * then runs, in one synchronous call, `BEGIN IMMEDIATE` (the write lock), a check that nothing
 * this batch read has changed since (`data_version` and this connection's own commit count say
 * whether anything at all did; only then are the rows read again and compared), every staged
 * row, and `COMMIT`: one durable WAL append answers every operation of the batch, and because
 * the transaction is atomic a crash at any point leaves every group of the batch wholly written
 * or wholly absent — never a partial group. A changed row rolls the transaction back and the
 * batch is run again from a fresh read (`BatchConflictError`, lease-operation.ts "Retries").
 *
 * Nothing blocks the thread waiting for the lock: the busy timeout is 0 and SQLite's busy results
 * are retried asynchronously — each attempt begins the whole transaction again — until
 * `lockAcquireTimeoutMs` on the injected monotonic clock, then the batch fails closed with
 * `ERR_LOCK_TIMEOUT`.
 *
 * Identity (sqlite-identity.ts): every commit, under the write lock right before its `COMMIT`,
 * checks that the database, `-wal` and `-shm` paths still name the files this connection opened;
 * so does every scan. On a mismatch the table has lost the database for good
 * (`lost`): the old file is never read or written again, the batch that found it runs again, and
 * from then on every record reads as absent — a heartbeat, `beginCommit` or publication answers
 * `stale`, as over a deleted record file — and a batch that would write anything (a claim) fails
 * with `ERR_LEASE_STORE_REPLACED`.
 */
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { LeaseStoreReplacedError, LeaseStoreUnsupportedError } from '../../errors.js';
import { detectFilesystemKind } from '../filesystem-kind.js';
import { withStoreRoot } from '../table-root.js';
import type { SqliteFileIdentity } from './sqlite-identity.js';
import { leaseIoError } from '../lease-io-error.js';
import { isRecordId, targetRecordId } from '../identity.js';
import { canonicalJsonMemo, type CanonicalJsonMemo } from '../canonical-json.js';
import { isDecimalTarget, type LeaseRecord, type RecordKind, type RecordRead } from '../lease-record.js';
import type { LeaseTableOptions } from '../lease-table-options.js';
import type { LeaseTableDeps } from '../open-backend.js';
import { BatchConflictError, EMPTY_BATCH_REPORT, type AnswerScan, type BatchReport, type RecordBackend, type ScanEntry, type ScanOptions, type StagedChange, type StagedRecord, type StoreBatch } from '../backend-contract.js';
import { decodeRow, GroupCache, GroupMoves, parseGroupRow, sqliteEncoder, SqliteStagedRecord, type GroupEntry } from './sqlite-rows.js';
import { hasAnswerTable, isSchemaV1, openReadOnlyDatabase, openWritableDatabase, retryBusy, sqliteFailure, SQLITE_FILE, storeReplaced, type BusyDeadline, type SqliteDatabase } from './sqlite-database.js';
import type BetterSqlite3 from 'better-sqlite3';

/**
 * Rows SQLite itself sees are `done` — text whose top-level `status` is `"done"`, read by its JSON
 * functions in C, about 1.5 µs a row against some 30 µs for decoding and validating one here —
 * left out of a `skipDone` scan. Anything else (blobs, a group member's row, text that is not
 * JSON, another status) is returned and decoded as always, so nothing corrupt is hidden from a
 * scan that acts on leased records.
 */
const NOT_DONE = "WHERE NOT (typeof(record) = 'text' AND json_valid(record) AND json_extract(record, '$.status') IS 'done')";

/**
 * Every row of `db` (with `skipDone`, those `NOT_DONE` keeps), validated (sqlite-rows.ts);
 * `file#id` names where each lives. One read transaction: a batch of another connection
 * committing meanwhile cannot make the rows and the group rows they name disagree.
 */
export function scanDatabase(db: SqliteDatabase, file: string, kind: RecordKind, options: ScanOptions = {}): ScanEntry[] {
  db.exec('BEGIN');
  try {
    return scanSnapshot(db, file, kind, options.skipDone === true);
  } finally {
    if (db.inTransaction) db.exec('COMMIT');
  }
}

function scanSnapshot(db: SqliteDatabase, file: string, kind: RecordKind, skipDone: boolean): ScanEntry[] {
  const v1 = isSchemaV1(db);
  const where = skipDone ? ` ${NOT_DONE}` : '';
  const records = (v1 ? 'SELECT id, record, NULL AS group_id FROM lease_records' : 'SELECT id, record, group_id FROM lease_records') + where;
  const rows = db.prepare(hasAnswerTable(db) ? `${records} UNION ALL SELECT id, record, group_id FROM answer_records${where} ORDER BY id` : `${records} ORDER BY id`).all() as Row[];
  const groups = new Map<number, { hash: unknown; content: unknown }>();
  if (!v1) for (const { id, hash, content } of db.prepare('SELECT id, hash, content FROM lease_groups').all() as { id: number; hash: unknown; content: unknown }[]) groups.set(id, { hash, content });
  const parsed = new Map<number, GroupEntry | string>();
  const group = (groupId: number): GroupEntry | string => {
    let entry = parsed.get(groupId);
    if (entry === undefined) parsed.set(groupId, (entry = parseGroupRow(groupId, groups.get(groupId), kind)));
    return entry;
  };
  return rows.map(({ id, record, group_id }): ScanEntry => {
    const where = `${file}#${String(id)}`;
    if (typeof id !== 'string' || !isRecordId(id)) return { state: 'corrupt', id: undefined, path: where, reason: 'row id is not a record id' };
    const read = decodeRow(id, record, group_id, kind, group);
    if (read.state === 'valid') return { state: 'valid', id, path: where, record: read.record };
    return { state: 'corrupt', id, path: where, reason: read.state === 'corrupt' ? read.reason : 'absent' };
  });
}

interface Row {
  readonly id: unknown;
  readonly record: unknown;
  readonly group_id: unknown;
}

/**
 * Creates the root durably, refuses a network filesystem (`ERR_LEASE_STORE_UNSUPPORTED`, before
 * anything is written there), creates or checks lease-table.json (schema 2, store `sqlite`: an
 * older symfence refuses the root instead of opening it as an empty file table), then opens (or
 * creates) the database and checks its schema.
 */
export async function openSqliteRecordBackend(root: string, options: LeaseTableOptions, deps: LeaseTableDeps, kind: RecordKind): Promise<SqliteRecordBackend> {
  const monotonicNowMs = deps.monotonicNowMs ?? (() => performance.now());
  const filesystem = await detectFilesystemKind(root, deps.statFilesystem);
  if (filesystem.network) {
    throw new LeaseStoreUnsupportedError(`the SQLite lease store cannot be used for ${path.resolve(root)}: ${filesystem.reason}. Use --lease-store files (or auto) there.`, {
      root: path.resolve(root),
      store: 'sqlite',
      filesystem: filesystem.name,
      fsType: filesystem.type,
    });
  }
  // Under the root's metadata lock: of coordinators opening a new root at once, exactly one
  // creates the database; the others open it once its schema is complete.
  const { db, identity } = await withStoreRoot(root, options, deps, kind, 'sqlite', () =>
    openWritableDatabase(path.resolve(root), kind, {
      monotonicNowMs,
      deadlineMs: monotonicNowMs() + options.lockAcquireTimeoutMs,
      lockAcquireTimeoutMs: options.lockAcquireTimeoutMs,
    }),
  );
  return new SqliteRecordBackend(path.resolve(root), kind, db, options.lockAcquireTimeoutMs, monotonicNowMs, identity);
}

/**
 * Read-only scan of a root's database, for `symfence leases`: the database file and its rows are
 * never changed. SQLite itself creates the `-wal`/`-shm` files beside it when no writer has them
 * open (a WAL reader needs the shared-memory index), as any reader of the table would.
 */
export function scanSqliteRoot(root: string, kind: RecordKind): ScanEntry[] {
  const db = openReadOnlyDatabase(path.resolve(root), kind);
  if (!db) return [];
  const file = path.join(path.resolve(root), SQLITE_FILE);
  try {
    return scanDatabase(db, file, kind);
  } catch (error) {
    throw sqliteFailure(file, error, 'scan', 'a scan');
  } finally {
    db.close();
  }
}

/** A row as read, and whether it lives in `answer_records` (1) or `lease_records` (0). */
interface SelectedRow {
  readonly record: unknown;
  readonly group_id: unknown;
  readonly answers: number;
}

/** A row of `selectMany`: a `SelectedRow` with its id. */
interface SelectedRowOf extends SelectedRow {
  readonly id: unknown;
}

interface Statements {
  /** A record's row in either table (an answer record of schema 2 may still be in `lease_records`). */
  readonly select: BetterSqlite3.Statement<[string, string], SelectedRow>;
  /** A lease record's row, from the lease table alone (`StoreBatch.leaseRecords`). */
  readonly selectLease: BetterSqlite3.Statement<[string], SelectedRow>;
  /** `SELECT_CHUNK` lease records' rows, from the lease table alone. */
  readonly selectManyLease: BetterSqlite3.Statement<string[], SelectedRowOf>;
  /** `select` of `SELECT_CHUNK` ids at once (twice over: one list per table), each row with its id. */
  readonly selectMany: BetterSqlite3.Statement<string[], SelectedRowOf>;
  readonly upsert: BetterSqlite3.Statement<[string, string, number | null]>;
  readonly upsertAnswer: BetterSqlite3.Statement<[string, string]>;
  readonly remove: BetterSqlite3.Statement<[string]>;
  readonly removeAnswer: BetterSqlite3.Statement<[string]>;
  readonly removeChunk: BetterSqlite3.Statement<string[]>;
  readonly selectGroup: BetterSqlite3.Statement<[number], { hash: unknown; content: unknown }>;
  readonly addGroup: BetterSqlite3.Statement<[Buffer, string], { id: number }>;
  readonly removeGroup: BetterSqlite3.Statement<[number]>;
  readonly selectGroupOf: BetterSqlite3.Statement<[string], number | null>;
  readonly dataVersion: BetterSqlite3.Statement<[]>;
  readonly answerIds: BetterSqlite3.Statement<[], [string, unknown]>;
}

/**
 * A row as this connection knows it: its record (valid or absent), the group row it names, its
 * stored text (null: no row), which a commit compares to find out whether it changed, and its
 * table (true: `answer_records`).
 */
interface KnownRow {
  readonly read: RecordRead;
  readonly groupId: number | null;
  readonly text: unknown;
  readonly answers: boolean;
}

const ABSENT_ROW: KnownRow = Object.freeze({ read: Object.freeze({ state: 'absent' as const }), groupId: null, text: null, answers: false });

/**
 * True for a record that lives in `answer_records` (sqlite-database.ts, file comment): an answer
 * record, and the answer generation record that counts their writes.
 */
function isAnswerRecord(record: LeaseRecord): boolean {
  return record.role !== undefined;
}

/** Ids per multi-row DELETE. */
const REMOVE_CHUNK = 64;

/**
 * Ids one `selectMany` reads (a shorter chunk is padded with '', which no row has). One statement
 * per chunk instead of one per id: 128 ids read in about half the time of 128 single selects.
 */
const SELECT_CHUNK = 64;

/** The `target` a row's JSON text names, read by SQLite itself (NULL for anything else). */
const TARGET_OF = "CASE WHEN typeof(record) = 'text' AND json_valid(record) THEN json_extract(record, '$.target') END";

/** Rows a backend keeps knowing between batches. */
const KNOWN_ROWS = 65_536;

class SqliteRecordBackend implements RecordBackend {
  readonly store = 'sqlite';
  readonly file: string;
  readonly conflictRetryMs: number;
  private closed = false;
  /** Commits of this connection (they leave its `data_version` unchanged). */
  commits = 0;
  readonly statements: Statements;
  /** Parsed group rows by id (immutable content, ids never reused). */
  readonly groupCache = new GroupCache();
  /**
   * Rows as this connection last read or wrote them, exact for as long as no other connection
   * has committed: SQLite's `data_version` changes exactly then (this connection's own commits
   * leave it). A batch that finds it unchanged under its write lock needs no `SELECT` for these
   * ids; one that finds it changed starts over from the database.
   */
  private readonly known = new Map<string, KnownRow>();
  private knownVersion: number | undefined;
  /** Why the database at the path is no longer the one open here, once a check found it (sticky). */
  private lostReason: string | undefined;

  constructor(
    readonly root: string,
    readonly kind: RecordKind,
    readonly db: SqliteDatabase,
    readonly lockAcquireTimeoutMs: number,
    readonly monotonicNowMs: () => number,
    private readonly identity?: SqliteFileIdentity,
  ) {
    this.file = path.join(root, SQLITE_FILE);
    this.conflictRetryMs = lockAcquireTimeoutMs;
    this.statements = {
      // The answer table first: a row there is the record (file comment of sqlite-database.ts).
      select: db.prepare('SELECT record, group_id, 1 AS answers FROM answer_records WHERE id = ? UNION ALL SELECT record, group_id, 0 FROM lease_records WHERE id = ?'),
      selectLease: db.prepare('SELECT record, group_id, 0 AS answers FROM lease_records WHERE id = ?'),
      selectManyLease: db.prepare(`SELECT id, record, group_id, 0 AS answers FROM lease_records WHERE id IN (${Array.from({ length: SELECT_CHUNK }, () => '?').join(', ')})`),
      selectMany: db.prepare(
        `SELECT id, record, group_id, 1 AS answers FROM answer_records WHERE id IN (${Array.from({ length: SELECT_CHUNK }, () => '?').join(', ')}) ` +
          `UNION ALL SELECT id, record, group_id, 0 FROM lease_records WHERE id IN (${Array.from({ length: SELECT_CHUNK }, () => '?').join(', ')})`,
      ),
      upsert: db.prepare('INSERT INTO lease_records (id, record, group_id) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET record = excluded.record, group_id = excluded.group_id'),
      upsertAnswer: db.prepare('INSERT INTO answer_records (id, record, group_id) VALUES (?, ?, NULL) ON CONFLICT (id) DO UPDATE SET record = excluded.record'),
      remove: db.prepare('DELETE FROM lease_records WHERE id = ?'),
      removeAnswer: db.prepare('DELETE FROM answer_records WHERE id = ?'),
      removeChunk: db.prepare(`DELETE FROM lease_records WHERE id IN (${Array.from({ length: REMOVE_CHUNK }, () => '?').join(', ')})`),
      selectGroup: db.prepare('SELECT hash, content FROM lease_groups WHERE id = ?'),
      // An existing row of the same content is the same group row: its id is returned.
      addGroup: db.prepare('INSERT INTO lease_groups (hash, content) VALUES (?, ?) ON CONFLICT (hash) DO UPDATE SET hash = excluded.hash RETURNING id'),
      removeGroup: db.prepare('DELETE FROM lease_groups WHERE id = ?'),
      selectGroupOf: db.prepare('SELECT group_id FROM lease_records WHERE id = ?').pluck() as BetterSqlite3.Statement<[string], number | null>,
      dataVersion: db.prepare('PRAGMA data_version').pluck(),
      // Every row with the target it names: the lease table's too, where a schema-2 table's answer
      // records stay until rewritten (a view tells a lease record by its id, answers-view.ts).
      answerIds: db.prepare(`SELECT id, ${TARGET_OF} AS target FROM answer_records UNION ALL SELECT id, ${TARGET_OF} FROM lease_records`).raw() as BetterSqlite3.Statement<[], [string, unknown]>,
    };
  }

  begin(): StoreBatch {
    return new SqliteRecordBatch(this);
  }

  /** SQLite's `data_version`: changes exactly when another connection has committed. */
  dataVersion(): number {
    return this.statements.dataVersion.get() as number;
  }

  /** Why the database was lost, once a check found it (the file comment, "Identity"); else undefined. */
  lost(): string | undefined {
    return this.lostReason;
  }

  /**
   * Compares the paths with the files this connection opened (three `stat` calls): undefined while
   * they match; else why not, from then on for good.
   */
  checkIdentity(): string | undefined {
    if (this.lostReason === undefined && this.identity !== undefined) {
      const reason = this.identity.check();
      if (reason !== undefined) {
        this.lostReason = reason;
        this.forgetRows();
      }
    }
    return this.lostReason;
  }

  /** The rows known exactly as of `version`, the `data_version` just read (the class comment on `known`). */
  knownRows(version: number): Map<string, KnownRow> {
    if (version !== this.knownVersion) {
      this.known.clear();
      // Another connection may have changed group rows too (only by damaging one: this store
      // never changes a group row's content); they are read and checked again.
      this.groupCache.clear();
      this.knownVersion = version;
    }
    return this.known;
  }

  /** Records what a row now holds, as read or as committed by this connection. */
  rememberRow(id: string, row: KnownRow): void {
    this.known.delete(id);
    if (this.known.size >= KNOWN_ROWS) this.known.delete(this.known.keys().next().value as string);
    this.known.set(id, row);
  }

  /** After a commit that failed: nothing this connection knew about rows can be trusted. */
  forgetRows(): void {
    this.known.clear();
    this.knownVersion = undefined;
  }

  encoder(memo: CanonicalJsonMemo): (record: LeaseRecord) => StagedRecord {
    return sqliteEncoder(memo);
  }

  /** Group row `groupId`: the cache, else the database (checked against its hash). */
  group(groupId: number): GroupEntry | string {
    const cached = this.groupCache.get(groupId);
    if (cached !== undefined) return cached;
    const row = this.statements.selectGroup.get(groupId);
    const entry = parseGroupRow(groupId, row, this.kind);
    if (typeof entry !== 'string') this.groupCache.remember(groupId, entry.hex, entry.fields, entry.size);
    return entry;
  }

  /** Refuses a batch on a closed table: nothing is read or written. */
  checkOpen(step: string): void {
    if (this.closed) throw leaseIoError(`lease database ${this.file} is closed`, { path: this.file, step }, undefined);
  }

  /** The deadline of one write-lock wait, from now. */
  lockDeadline(): BusyDeadline {
    return {
      monotonicNowMs: this.monotonicNowMs,
      deadlineMs: this.monotonicNowMs() + this.lockAcquireTimeoutMs,
      lockAcquireTimeoutMs: this.lockAcquireTimeoutMs,
      description: `the write lock of lease database ${this.file}`,
      path: this.file,
    };
  }

  async scan(options?: ScanOptions): Promise<ScanEntry[]> {
    this.checkOpen('scan');
    // The rows of a database that is no longer the table's describe nobody's leases.
    const lost = this.checkIdentity();
    if (lost !== undefined) throw storeReplaced(this.file, lost);
    return retryBusy(() => scanDatabase(this.db, this.file, this.kind, options), {
      monotonicNowMs: this.monotonicNowMs,
      deadlineMs: this.monotonicNowMs() + this.lockAcquireTimeoutMs,
      lockAcquireTimeoutMs: this.lockAcquireTimeoutMs,
      description: `a read of lease database ${this.file}`,
      path: this.file,
    }).catch((error: unknown) => {
      throw sqliteFailure(this.file, error, 'scan', 'a scan');
    });
  }

  /**
   * Closes the database. No transaction is ever open between two calls (each is one synchronous
   * commit), so nothing is cut short; a batch that reads or commits after `close()` fails with
   * `ERR_LEASE_IO`, having written nothing. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}

/** A staged record as this store writes it: its own encoding, or a record encoded elsewhere encoded again. */
function asSqliteStaged(staged: StagedRecord): SqliteStagedRecord {
  return staged instanceof SqliteStagedRecord ? staged : sqliteEncoder(canonicalJsonMemo())(staged.record);
}

/** One optimistic batch: reads, then one synchronous write transaction (file comment). */
class SqliteRecordBatch implements StoreBatch {
  /** The row each id held when this batch read it. */
  private readonly rows = new Map<string, Pick<KnownRow, 'groupId' | 'text' | 'answers'>>();
  /**
   * `data_version` and this connection's commit count before the first read: both unchanged at
   * commit → no connection, this one included, has committed since, and no row can have changed.
   */
  private mark: { readonly version: number; readonly commits: number } | undefined;
  /** The batch read after the database was lost: every record as absent, nothing from the old file. */
  private readLost = false;
  /** Ids the batch's operations know to be lease records: read, and checked, in the lease table alone. */
  private leaseOnly: ReadonlySet<string> = new Set();

  constructor(private readonly backend: SqliteRecordBackend) {}

  /** Optimistic: nothing is taken; the commit checks what was read. */
  async lock(): Promise<void> {
    this.backend.checkOpen('lock');
  }

  /**
   * `StoreBatch.leaseRecords`: the answer table is not looked at for these ids. It holds answer
   * records and the generation record only, and a claim's 128 ids probed there cost about as much
   * as reading them from the lease table once it holds a campaign's answers.
   */
  leaseRecords(ids: ReadonlySet<string>): void {
    this.leaseOnly = ids;
  }

  async fetch(ids: readonly string[]): Promise<Map<string, RecordRead>> {
    this.backend.checkOpen('read');
    if (this.backend.lost() !== undefined) {
      // The table's leases went with its database: nothing of the old file is read.
      this.readLost = true;
      for (const id of ids) this.rows.set(id, ABSENT_ROW);
      return new Map(ids.map((id) => [id, { state: 'absent' }]));
    }
    const { select, selectLease } = this.backend.statements;
    const leaseOnly = this.leaseOnly;
    let known: Map<string, KnownRow>;
    try {
      const version = this.backend.dataVersion();
      this.mark ??= { version, commits: this.backend.commits };
      known = this.backend.knownRows(version);
    } catch (error) {
      throw leaseIoError(`lease database read failed: ${(error as Error).message}`, { path: this.backend.file, step: 'read' }, error);
    }
    const reads = new Map<string, RecordRead>();
    const missing: string[] = [];
    for (const id of ids) {
      const hit = known.get(id);
      // A lease record known from the answer table (a row put there by hand) is read from its own.
      if (hit !== undefined && !(hit.answers && leaseOnly.has(id))) {
        reads.set(id, hit.read);
        // The known row itself (immutable): its group id and text are what this batch read.
        this.rows.set(id, hit);
      } else missing.push(id);
    }
    // The rows of the ids not known, a chunk per statement (the answer table's row first, as `select`).
    const selected = new Map<string, SelectedRow>();
    if (missing.length > 1) {
      const leaseIds = leaseOnly.size === 0 ? [] : missing.filter((id) => leaseOnly.has(id));
      const otherIds = leaseIds.length === 0 ? missing : missing.filter((id) => !leaseOnly.has(id));
      const chunks = (list: readonly string[], lease: boolean): (readonly [string[], boolean])[] =>
        Array.from({ length: Math.ceil(list.length / SELECT_CHUNK) }, (_, i) => [list.slice(i * SELECT_CHUNK, (i + 1) * SELECT_CHUNK), lease] as const);
      for (const [chunk, lease] of [...chunks(leaseIds, true), ...chunks(otherIds, false)]) {
        const params = chunk.length === SELECT_CHUNK ? chunk : [...chunk, ...Array.from({ length: SELECT_CHUNK - chunk.length }, () => '')];
        let rows: SelectedRowOf[];
        try {
          rows = lease ? this.backend.statements.selectManyLease.all(...params) : (this.backend.statements.selectMany.all(...params, ...params) as SelectedRowOf[]);
        } catch (error) {
          throw leaseIoError(`lease database read of ${chunk[0]} and ${chunk.length - 1} more failed: ${(error as Error).message}`, { path: this.backend.file, step: 'read', id: chunk[0] }, error);
        }
        for (const row of rows) {
          const id = String(row.id);
          if (!selected.has(id) || row.answers === 1) selected.set(id, row);
        }
      }
    }
    for (const id of missing) {
      let row: SelectedRow | undefined;
      let read: RecordRead;
      try {
        row = missing.length > 1 ? selected.get(id) : leaseOnly.has(id) ? selectLease.get(id) : select.get(id, id);
        read = row === undefined ? { state: 'absent' } : decodeRow(id, row.record, row.group_id, this.backend.kind, (groupId) => this.backend.group(groupId));
      } catch (error) {
        throw leaseIoError(`lease database read of ${id} failed: ${(error as Error).message}`, { path: this.backend.file, step: 'read', id }, error);
      }
      const groupId = row !== undefined && typeof row.group_id === 'number' ? row.group_id : null;
      const text = row?.record ?? null;
      const seen: KnownRow = { read, groupId, text, answers: row?.answers === 1 };
      reads.set(id, read);
      this.rows.set(id, seen);
      // A corrupt row is read again every time: an operator may repair it.
      if (read.state !== 'corrupt') this.backend.rememberRow(id, seen);
    }
    return reads;
  }

  /** One read transaction: the generation record's row and every row with the target it names (`StoreBatch.scanAnswers`). */
  async scanAnswers(generationId: string): Promise<AnswerScan | undefined> {
    this.backend.checkOpen('scan');
    if (this.backend.lost() !== undefined) return undefined;
    const { db, statements } = this.backend;
    try {
      db.exec('BEGIN');
      try {
        const row = statements.select.get(generationId, generationId);
        const generation = row === undefined ? ({ state: 'absent' } as const) : decodeRow(generationId, row.record, row.group_id, this.backend.kind, (groupId) => this.backend.group(groupId));
        return { generation, listed: statements.answerIds.all() };
      } finally {
        db.exec('COMMIT');
      }
    } catch (error) {
      throw leaseIoError(`lease database scan of the answer records failed: ${(error as Error).message}`, { path: this.backend.file, step: 'read' }, error);
    }
  }

  /**
   * Under the write lock: ids whose row is not what this batch read. None when no connection has
   * committed since the first read (the common case: no row is read again).
   */
  private changedSinceRead(): string[] {
    if (this.mark !== undefined && this.backend.commits === this.mark.commits && this.backend.dataVersion() === this.mark.version) return [];
    const { select, selectLease } = this.backend.statements;
    const changed: string[] = [];
    for (const [id, seen] of this.rows) {
      const row = this.leaseOnly.has(id) ? selectLease.get(id) : select.get(id, id);
      const groupId = row !== undefined && typeof row.group_id === 'number' ? row.group_id : null;
      if ((row?.record ?? null) !== seen.text || groupId !== seen.groupId || (row?.answers === 1) !== seen.answers) changed.push(id);
    }
    return changed;
  }

  /**
   * One synchronous write transaction, begun again on every busy attempt until the lock deadline:
   * `BEGIN IMMEDIATE`, the check that nothing read has changed (else `BatchConflictError`), every
   * staged row, `COMMIT` (one durable WAL append). On any failure the transaction is rolled back —
   * nothing of the batch reaches any reader — and the batch rejects with `LeaseIoError`.
   */
  async commit(list: readonly StagedChange[]): Promise<BatchReport> {
    if (list.length === 0) return EMPTY_BATCH_REPORT;
    this.backend.checkOpen('commit');
    const lost = this.backend.lost();
    if (lost !== undefined) {
      // Read from the old database: run again (every record now reads as absent). Read as lost:
      // a write would go to a file no other coordinator sees.
      if (!this.readLost) throw new BatchConflictError(list.map((c) => c.id));
      throw storeReplaced(this.backend.file, lost);
    }
    const moves = new GroupMoves();
    // Each staged row (in staging order: one transaction needs no lock order), and the group row
    // it named before if it stays there (a heartbeat of an unchanged group); a row in a new group
    // row learns its id once that row is written.
    const planned = list.map(({ id, next }) => {
      const staged = next === null ? null : asSqliteStaged(next);
      const before = this.rows.get(id)?.groupId ?? null;
      const stays = moves.move(before, before === null ? undefined : this.backend.groupCache.get(before)?.hex, staged?.group ?? null);
      return { id, staged, kept: stays ? before : null };
    });
    const rows = await retryBusy(() => this.transact(planned, moves), this.backend.lockDeadline());
    this.backend.commits += 1;
    for (const { id, staged, named } of rows) {
      if (staged === null) {
        this.backend.rememberRow(id, ABSENT_ROW);
        continue;
      }
      const group = staged.group;
      this.backend.rememberRow(id, { read: { state: 'valid', record: staged.record }, groupId: named, text: staged.text, answers: isAnswerRecord(staged.record) });
      if (group !== null && named !== null) this.backend.groupCache.remember(named, group.hex, group.fields, group.content.length);
    }
    return { published: list.length, fileBarriers: 1, directoryBarriers: 0, directories: [] };
  }

  /**
   * The transaction itself, synchronous from `BEGIN IMMEDIATE` to `COMMIT`. A busy `BEGIN`
   * throws SQLite's own error (nothing is held; the caller retries); every later failure is a
   * `LeaseIoError` or `BatchConflictError` after the rollback.
   */
  private transact(planned: readonly { id: string; staged: SqliteStagedRecord | null; kept: number | null }[], moves: GroupMoves): { id: string; staged: SqliteStagedRecord | null; named: number | null }[] {
    const { db, statements, file } = this.backend;
    this.backend.checkOpen('commit');
    db.exec('BEGIN IMMEDIATE');
    let step = 'check';
    try {
      const changed = this.changedSinceRead();
      if (changed.length > 0) throw new BatchConflictError(changed);
      step = 'write';
      const groupIds = new Map<string, number>();
      for (const [hex, blob] of moves.added) groupIds.set(hex, statements.addGroup.get(blob.hash, blob.content)!.id);
      // The group row each row names once written (null: a whole record, or the row deleted).
      const rows = planned.map(({ id, staged, kept }) => ({ id, staged, named: staged?.group ? (kept ?? groupIds.get(staged.group.hex)!) : null }));
      const removed: string[] = [];
      for (const { id, staged, named } of rows) {
        const seen = this.rows.get(id);
        if (staged === null) {
          if (seen?.answers === true) statements.removeAnswer.run(id);
          else removed.push(id);
        } else if (isAnswerRecord(staged.record)) {
          statements.upsertAnswer.run(id, staged.text);
          // An answer record a schema-2 table kept with the lease records moves to its own table.
          if (seen !== undefined && !seen.answers && seen.text !== null) statements.remove.run(id);
        } else {
          statements.upsert.run(id, staged.text, named);
          // Only a row written into the answer table by hand can be another record: it goes, or it would hide this one.
          if (seen?.answers === true) statements.removeAnswer.run(id);
        }
      }
      // Deletions in statements of REMOVE_CHUNK ids (a released group is one), the rest singly.
      let next = 0;
      for (; next + REMOVE_CHUNK <= removed.length; next += REMOVE_CHUNK) statements.removeChunk.run(...removed.slice(next, next + REMOVE_CHUNK));
      for (; next < removed.length; next += 1) statements.remove.run(removed[next]!);
      if (moves.left.size > 0) {
        const written = new Map(rows.map(({ id, named }) => [id, named]));
        for (const groupId of moves.left) if (!this.stillNamed(groupId, written)) statements.removeGroup.run(groupId);
      }
      step = 'commit';
      // Under the write lock, right before the COMMIT: a database replaced since this batch read
      // it rolls the batch back (nothing reaches the lost file) and the batch runs again against
      // the lost table, where every record reads as absent (file comment, "Identity").
      if (this.backend.checkIdentity() !== undefined) throw new BatchConflictError(planned.map((p) => p.id));
      db.exec('COMMIT');
      return rows;
    } catch (error) {
      this.backend.forgetRows();
      let restored = true;
      try {
        if (db.inTransaction) db.exec('ROLLBACK');
      } catch {
        restored = !db.inTransaction;
      }
      if (error instanceof BatchConflictError && restored) throw error;
      if (error instanceof LeaseStoreReplacedError) throw error;
      throw leaseIoError(`lease database ${step} failed: ${(error as Error).message}; ${restored ? 'nothing was written' : 'rollback incomplete'}`, {
        step,
        path: file,
        sqlite: (error as { code?: unknown }).code ?? null,
        restored,
      }, error);
    }
  }

  /**
   * True when some row still names group row `groupId` once this batch's rows are written. Only
   * a member of that group's own target list can name it (a row whose target is not in its
   * group's list is not a valid member), so these few ids are all there is to check: from this
   * batch where it read or writes them — every id, when a whole group is released — and from the
   * database otherwise (a takeover of part of a group). A group row this cannot read is kept.
   */
  private stillNamed(groupId: number, written: ReadonlyMap<string, number | null>): boolean {
    const entry = this.backend.group(groupId);
    if (typeof entry === 'string') return true;
    const targets = entry.fields['targets'];
    if (!Array.isArray(targets)) return true;
    for (const target of targets) {
      // A list a reader would not accept leaves the row in place (it is reported, not guessed at).
      if (!isDecimalTarget(target)) return true;
      const id = targetRecordId(BigInt(target));
      const named = written.has(id) ? written.get(id) : this.rows.has(id) ? this.rows.get(id)!.groupId : (this.backend.statements.selectGroupOf.get(id) ?? null);
      if (named === groupId) return true;
    }
    return false;
  }

  /** Nothing is held between two calls. */
  async release(): Promise<void> {}
}
