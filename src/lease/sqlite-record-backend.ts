/**
 * The SQLite store (`RecordBackend`): one database per table root (sqlite-database.ts), one row
 * per record, for coordinators on one host (docs/leases.md "Lease stores").
 *
 * A batch is one write transaction. `lock` is `BEGIN IMMEDIATE`: it takes the database's single
 * write lock, so every record — not only the locked ids — is excluded from other writers until
 * `release`, in this process (one connection, handed to one batch at a time) and in every other
 * (SQLite's file locks). Readers are never blocked (WAL). `commit` writes every staged row and
 * commits: one durable WAL append answers every operation of the batch, and because the
 * transaction is atomic a crash at any point leaves every group of the batch wholly written or
 * wholly absent — never a partial group.
 *
 * Nothing blocks the thread waiting for a lock: the busy timeout is 0 and both the in-process
 * hand-off and SQLite's busy results are retried asynchronously until `lockAcquireTimeoutMs` on
 * the injected monotonic clock, then the batch fails closed with `ERR_LOCK_TIMEOUT`.
 */
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { LeaseStoreUnsupportedError } from '../errors.js';
import { detectFilesystemKind } from './filesystem-kind.js';
import { ensureStoreRoot } from './store-root.js';
import { leaseIoError } from './lease-io-error.js';
import { isRecordId } from './identity.js';
import { maxRecordBytes, parseRecord, type RecordKind, type RecordRead } from './lease-record.js';
import { RecordReadCache } from './record-read-cache.js';
import type { LeaseTableOptions } from './lease-table-options.js';
import type { LeaseTableDeps } from './open-record-backend.js';
import { EMPTY_BATCH_REPORT, type BatchReport, type RecordBackend, type RecordBatch, type ScanEntry, type StagedRecord } from './record-backend.js';
import { lockTimeout, openReadOnlyDatabase, openWritableDatabase, retryBusy, SQLITE_FILE, type BusyDeadline, type SqliteDatabase } from './sqlite-database.js';
import type BetterSqlite3 from 'better-sqlite3';

/** Pause between checks while another batch of this process holds the connection, ms. */
const HANDOFF_POLL_MS = 2;

/** A row as validated: the same rules as a record file (lease-record.ts), plus the row's own. */
export function rowRead(id: string, record: unknown, kind: RecordKind, cache?: RecordReadCache): RecordRead {
  if (!Buffer.isBuffer(record)) return { state: 'corrupt', reason: `record is a ${record === null ? 'null' : typeof record}, not a blob` };
  if (record.length > maxRecordBytes(kind)) return { state: 'corrupt', reason: `record is ${record.length} bytes, over the ${maxRecordBytes(kind)}-byte bound` };
  return cache !== undefined ? cache.parse(record, id) : parseRecord(record, id, kind);
}

/** Every row of `db`, validated; `file#id` names where each lives. */
export function scanDatabase(db: SqliteDatabase, file: string, kind: RecordKind): ScanEntry[] {
  const rows = db.prepare('SELECT id, record FROM lease_records ORDER BY id').all() as { id: unknown; record: unknown }[];
  return rows.map(({ id, record }): ScanEntry => {
    const where = `${file}#${String(id)}`;
    if (typeof id !== 'string' || !isRecordId(id)) return { state: 'corrupt', id: undefined, path: where, reason: 'row id is not a record id' };
    const read = rowRead(id, record, kind);
    if (read.state === 'valid') return { state: 'valid', id, path: where, record: read.record };
    return { state: 'corrupt', id, path: where, reason: read.state === 'corrupt' ? read.reason : 'absent' };
  });
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
  await ensureStoreRoot(root, options, deps, kind, 'sqlite');
  const db = await openWritableDatabase(path.resolve(root), kind, {
    monotonicNowMs,
    deadlineMs: monotonicNowMs() + options.lockAcquireTimeoutMs,
    lockAcquireTimeoutMs: options.lockAcquireTimeoutMs,
  });
  return new SqliteRecordBackend(path.resolve(root), kind, db, options.lockAcquireTimeoutMs, monotonicNowMs);
}

/**
 * Read-only scan of a root's database, for `symfence leases`: the database file and its rows are
 * never changed. SQLite itself creates the `-wal`/`-shm` files beside it when no writer has them
 * open (a WAL reader needs the shared-memory index), as any reader of the table would.
 */
export function scanSqliteRoot(root: string, kind: RecordKind): ScanEntry[] {
  const db = openReadOnlyDatabase(path.resolve(root), kind);
  if (!db) return [];
  try {
    return scanDatabase(db, path.join(path.resolve(root), SQLITE_FILE), kind);
  } finally {
    db.close();
  }
}

interface Statements {
  readonly select: BetterSqlite3.Statement<[string], { record: unknown }>;
  readonly upsert: BetterSqlite3.Statement<[string, Buffer]>;
  readonly remove: BetterSqlite3.Statement<[string]>;
}

export class SqliteRecordBackend implements RecordBackend {
  readonly store = 'sqlite';
  readonly file: string;
  /** The batch that owns the connection (its open transaction), if any. */
  private owner: SqliteRecordBatch | undefined;
  private closed = false;
  private closedDb: Promise<void> = Promise.resolve();
  readonly statements: Statements;
  /** Parsed rows this process read or wrote last, reused while their bytes are unchanged. */
  readonly readCache: RecordReadCache;

  constructor(
    readonly root: string,
    readonly kind: RecordKind,
    readonly db: SqliteDatabase,
    readonly lockAcquireTimeoutMs: number,
    readonly monotonicNowMs: () => number,
  ) {
    this.file = path.join(root, SQLITE_FILE);
    this.readCache = new RecordReadCache(kind);
    this.statements = {
      select: db.prepare('SELECT record FROM lease_records WHERE id = ?'),
      upsert: db.prepare('INSERT INTO lease_records (id, record) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET record = excluded.record'),
      remove: db.prepare('DELETE FROM lease_records WHERE id = ?'),
    };
  }

  begin(): RecordBatch {
    return new SqliteRecordBatch(this);
  }

  /**
   * Hands the connection to `batch` and opens its write transaction, both retried until the
   * deadline. On failure nothing is held.
   */
  async acquire(batch: SqliteRecordBatch): Promise<void> {
    if (this.closed) throw leaseIoError(`lease database ${this.file} is closed`, { path: this.file, step: 'lock' }, undefined);
    const deadline: BusyDeadline = {
      monotonicNowMs: this.monotonicNowMs,
      deadlineMs: this.monotonicNowMs() + this.lockAcquireTimeoutMs,
      lockAcquireTimeoutMs: this.lockAcquireTimeoutMs,
      description: `the write lock of lease database ${this.file}`,
      path: this.file,
    };
    while (this.owner !== undefined) {
      if (this.monotonicNowMs() >= deadline.deadlineMs) throw lockTimeout(deadline);
      await new Promise<void>((resolve) => setTimeout(resolve, HANDOFF_POLL_MS));
      if (this.closed) throw leaseIoError(`lease database ${this.file} is closed`, { path: this.file, step: 'lock' }, undefined);
    }
    this.owner = batch;
    try {
      await retryBusy(() => this.db.exec('BEGIN IMMEDIATE'), deadline);
    } catch (error) {
      this.owner = undefined;
      if ((error as { code?: unknown }).code === 'ERR_LOCK_TIMEOUT') throw error;
      throw leaseIoError(`cannot lock lease database ${this.file}: ${(error as Error).message}`, { path: this.file, step: 'lock', restored: true }, error);
    }
  }

  /** Ends `batch`'s transaction (rolling back what it did not commit) and frees the connection. */
  finish(batch: SqliteRecordBatch): void {
    if (this.owner !== batch) return;
    try {
      if (this.db.inTransaction) this.db.exec('ROLLBACK');
    } catch {
      // A failed rollback leaves SQLite to roll the transaction back itself (it does on the next
      // statement, or its journal does at the next open); nothing this batch staged was committed.
    }
    this.owner = undefined;
  }

  async scan(): Promise<ScanEntry[]> {
    // A read on the shared connection: inside another batch's open transaction it sees the last
    // committed state (that batch writes only in its synchronous commit), else its own snapshot.
    return retryBusy(() => scanDatabase(this.db, this.file, this.kind), {
      monotonicNowMs: this.monotonicNowMs,
      deadlineMs: this.monotonicNowMs() + this.lockAcquireTimeoutMs,
      lockAcquireTimeoutMs: this.lockAcquireTimeoutMs,
      description: `a read of lease database ${this.file}`,
      path: this.file,
    });
  }

  /**
   * Closes the database once no batch holds it: a batch in progress keeps the write lock (and so
   * its exclusion of every record) until its own release, as a held `flock` outlives a file
   * table's close — otherwise another coordinator could publish a result this batch is still
   * publishing. Batches that ask for the connection after `close()` fail with `ERR_LEASE_IO`.
   */
  async close(): Promise<void> {
    if (this.closed) return this.closedDb;
    this.closed = true;
    this.closedDb = (async () => {
      while (this.owner !== undefined) await new Promise<void>((resolve) => setTimeout(resolve, HANDOFF_POLL_MS));
      this.db.close();
    })();
    return this.closedDb;
  }
}

type BatchState = 'open' | 'locked' | 'committed' | 'failed' | 'released';

/** One write transaction (phases in record-backend.ts). */
export class SqliteRecordBatch implements RecordBatch {
  private readonly locked = new Set<string>();
  private readonly reads = new Map<string, RecordRead>();
  private readonly mutations = new Map<string, StagedRecord | null>();
  private state: BatchState = 'open';

  constructor(private readonly backend: SqliteRecordBackend) {}

  /** The first call opens the transaction (all records excluded from then on); later ones add ids. */
  async lock(ids: Iterable<string>): Promise<void> {
    if (this.state !== 'open' && this.state !== 'locked') throw new Error(`sqlite batch is ${this.state}, expected open`);
    const list = [...ids];
    if (this.state === 'open') {
      await this.backend.acquire(this);
      this.state = 'locked';
    }
    for (const id of list) this.locked.add(id);
  }

  async read(ids: Iterable<string>): Promise<void> {
    this.assertState('locked');
    const { select } = this.backend.statements;
    for (const id of new Set(ids)) {
      if (this.reads.has(id)) continue;
      if (!this.locked.has(id)) throw new Error(`read of ${id} without its lock`);
      let row: { record: unknown } | undefined;
      try {
        row = select.get(id);
      } catch (error) {
        throw leaseIoError(`lease database read of ${id} failed: ${(error as Error).message}`, { path: this.backend.file, step: 'read', id }, error);
      }
      this.reads.set(id, row === undefined ? { state: 'absent' } : rowRead(id, row.record, this.backend.kind, this.backend.readCache));
    }
  }

  view(id: string): RecordRead {
    const next = this.mutations.get(id);
    if (next !== undefined) return next ? { state: 'valid', record: next.record, bytes: next.bytes } : { state: 'absent' };
    const read = this.reads.get(id);
    if (!read) throw new Error(`record ${id} was not read in this batch`);
    return read;
  }

  /** All-or-nothing: every id is checked (locked, read, not corrupt) before the first is staged. */
  stageAll(changes: Iterable<readonly [string, StagedRecord | null]>): void {
    this.assertState('locked');
    const list = [...changes];
    for (const [id] of list) {
      const read = this.reads.get(id);
      if (!read || !this.locked.has(id)) throw new Error(`stage of ${id} without lock and read`);
      if (read.state === 'corrupt') throw new Error(`stage over corrupt record ${id}: corrupt records are never overwritten`);
    }
    for (const [id, next] of list) {
      if (next === null && !this.mutations.has(id) && this.reads.get(id)!.state === 'absent') continue;
      this.mutations.set(id, next);
    }
  }

  /**
   * Writes every staged row and commits (one durable WAL append). On any failure the transaction
   * is rolled back — nothing of the batch reaches any reader — and the batch rejects with
   * `LeaseIoError`.
   */
  async commit(): Promise<BatchReport> {
    this.assertState('locked');
    const { db, statements, file } = this.backend;
    const list = [...this.mutations.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
    let step = 'write';
    try {
      for (const [id, next] of list) {
        if (next) statements.upsert.run(id, next.bytes);
        else statements.remove.run(id);
      }
      step = 'commit';
      db.exec('COMMIT');
    } catch (error) {
      this.state = 'failed';
      let restored = true;
      try {
        if (db.inTransaction) db.exec('ROLLBACK');
      } catch {
        restored = !db.inTransaction;
      }
      throw leaseIoError(`lease database ${step} failed: ${(error as Error).message}; ${restored ? 'nothing was written' : 'rollback incomplete'}`, {
        step,
        path: file,
        sqlite: (error as { code?: unknown }).code ?? null,
        restored,
      }, error);
    }
    this.state = 'committed';
    for (const [id, next] of list) {
      if (next) this.backend.readCache.remember(id, next.bytes, next.record);
      else this.backend.readCache.forget(id);
    }
    if (list.length === 0) return EMPTY_BATCH_REPORT;
    return { published: list.length, fileBarriers: 1, directoryBarriers: 0, directories: [] };
  }

  async release(): Promise<void> {
    if (this.state === 'released') return;
    const wasOpen = this.state === 'open';
    this.state = 'released';
    if (!wasOpen) this.backend.finish(this);
  }

  private assertState(expected: BatchState): void {
    if (this.state !== expected) throw new Error(`sqlite batch is ${this.state}, expected ${expected}`);
  }
}
