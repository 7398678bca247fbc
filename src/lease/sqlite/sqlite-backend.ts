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
import { LeaseStoreUnsupportedError } from '../../errors.js';
import { detectFilesystemKind } from '../filesystem-kind.js';
import { ensureStoreRoot } from '../table-root.js';
import { leaseIoError } from '../lease-io-error.js';
import { isRecordId, targetRecordId } from '../identity.js';
import { canonicalJsonMemo, type CanonicalJsonMemo } from '../canonical-json.js';
import { isDecimalTarget, type LeaseRecord, type RecordKind, type RecordRead } from '../lease-record.js';
import { RecordReadCache } from '../record-read-cache.js';
import type { LeaseTableOptions } from '../lease-table-options.js';
import type { LeaseTableDeps } from '../open-backend.js';
import { EMPTY_BATCH_REPORT, type BatchReport, type RecordBackend, type ScanEntry, type StagedChange, type StagedRecord, type StoreBatch } from '../backend-contract.js';
import { decodeRow, GroupCache, GroupMoves, memberTag, parseGroupRow, sqliteEncoder, SqliteStagedRecord, type GroupEntry } from './sqlite-rows.js';
import { isSchemaV1, lockTimeout, openReadOnlyDatabase, openWritableDatabase, retryBusy, SQLITE_FILE, type BusyDeadline, type SqliteDatabase } from './sqlite-database.js';
import type BetterSqlite3 from 'better-sqlite3';

/** Pause between checks while another batch of this process holds the connection, ms. */
const HANDOFF_POLL_MS = 2;

/**
 * Every row of `db`, validated (sqlite-rows.ts); `file#id` names where each lives. One read
 * transaction: a batch of another connection committing meanwhile cannot make the rows and the
 * group rows they name disagree (inside a write transaction of this connection the reads already
 * share its snapshot).
 */
export function scanDatabase(db: SqliteDatabase, file: string, kind: RecordKind): ScanEntry[] {
  if (db.inTransaction) return scanSnapshot(db, file, kind);
  db.exec('BEGIN');
  try {
    return scanSnapshot(db, file, kind);
  } finally {
    if (db.inTransaction) db.exec('COMMIT');
  }
}

function scanSnapshot(db: SqliteDatabase, file: string, kind: RecordKind): ScanEntry[] {
  const v1 = isSchemaV1(db);
  const rows = db.prepare(v1 ? 'SELECT id, record, NULL AS group_id FROM lease_records ORDER BY id' : 'SELECT id, record, group_id FROM lease_records ORDER BY id').all() as Row[];
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
  readonly select: BetterSqlite3.Statement<[string], { record: unknown; group_id: unknown }>;
  readonly upsert: BetterSqlite3.Statement<[string, string, number | null]>;
  readonly remove: BetterSqlite3.Statement<[string]>;
  readonly removeChunk: BetterSqlite3.Statement<string[]>;
  readonly selectGroup: BetterSqlite3.Statement<[number], { hash: unknown; content: unknown }>;
  readonly addGroup: BetterSqlite3.Statement<[Buffer, string], { id: number }>;
  readonly removeGroup: BetterSqlite3.Statement<[number]>;
  readonly selectGroupOf: BetterSqlite3.Statement<[string], number | null>;
  readonly dataVersion: BetterSqlite3.Statement<[]>;
}

/** A row as this connection knows it: its record (valid or absent) and the group row it names. */
interface KnownRow {
  readonly read: RecordRead;
  readonly groupId: number | null;
}

/** Ids per multi-row DELETE. */
const REMOVE_CHUNK = 64;

/** Rows a backend keeps knowing between batches. */
const KNOWN_ROWS = 65_536;

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
      select: db.prepare('SELECT record, group_id FROM lease_records WHERE id = ?'),
      upsert: db.prepare('INSERT INTO lease_records (id, record, group_id) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET record = excluded.record, group_id = excluded.group_id'),
      remove: db.prepare('DELETE FROM lease_records WHERE id = ?'),
      removeChunk: db.prepare(`DELETE FROM lease_records WHERE id IN (${Array.from({ length: REMOVE_CHUNK }, () => '?').join(', ')})`),
      selectGroup: db.prepare('SELECT hash, content FROM lease_groups WHERE id = ?'),
      // An existing row of the same content is the same group row: its id is returned.
      addGroup: db.prepare('INSERT INTO lease_groups (hash, content) VALUES (?, ?) ON CONFLICT (hash) DO UPDATE SET hash = excluded.hash RETURNING id'),
      removeGroup: db.prepare('DELETE FROM lease_groups WHERE id = ?'),
      selectGroupOf: db.prepare('SELECT group_id FROM lease_records WHERE id = ?').pluck() as BetterSqlite3.Statement<[string], number | null>,
      dataVersion: db.prepare('PRAGMA data_version').pluck(),
    };
  }

  begin(): StoreBatch {
    return new SqliteRecordBatch(this);
  }

  /** The rows known exactly at this point of a write transaction (the class comment on `known`). */
  knownRows(): Map<string, KnownRow> {
    const version = this.statements.dataVersion.get() as number;
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

/** A staged record as this store writes it: its own encoding, or a record encoded elsewhere encoded again. */
function asSqliteStaged(staged: StagedRecord): SqliteStagedRecord {
  return staged instanceof SqliteStagedRecord ? staged : sqliteEncoder(canonicalJsonMemo())(staged.record);
}

type BatchState = 'open' | 'locked' | 'committed' | 'failed' | 'released';

/** One write transaction (phases in backend-contract.ts). */
export class SqliteRecordBatch implements StoreBatch {
  /** The group row each read row named (null: a whole record, or no row). */
  private readonly readGroups = new Map<string, number | null>();
  private state: BatchState = 'open';

  constructor(private readonly backend: SqliteRecordBackend) {}

  /** The first call opens the transaction: every record is excluded from then on. */
  async lock(): Promise<void> {
    if (this.state !== 'open' && this.state !== 'locked') throw new Error(`sqlite batch is ${this.state}, expected open`);
    if (this.state === 'open') {
      await this.backend.acquire(this);
      this.state = 'locked';
    }
  }

  async fetch(ids: readonly string[]): Promise<Map<string, RecordRead>> {
    this.assertState('locked');
    const { select } = this.backend.statements;
    let known: Map<string, KnownRow>;
    try {
      known = this.backend.knownRows();
    } catch (error) {
      throw leaseIoError(`lease database read failed: ${(error as Error).message}`, { path: this.backend.file, step: 'read' }, error);
    }
    const reads = new Map<string, RecordRead>();
    for (const id of ids) {
      const hit = known.get(id);
      if (hit !== undefined) {
        reads.set(id, hit.read);
        this.readGroups.set(id, hit.groupId);
        continue;
      }
      let row: { record: unknown; group_id: unknown } | undefined;
      let read: RecordRead;
      try {
        row = select.get(id);
        read = row === undefined ? { state: 'absent' } : decodeRow(id, row.record, row.group_id, this.backend.kind, (groupId) => this.backend.group(groupId), this.backend.readCache);
      } catch (error) {
        throw leaseIoError(`lease database read of ${id} failed: ${(error as Error).message}`, { path: this.backend.file, step: 'read', id }, error);
      }
      const groupId = row !== undefined && typeof row.group_id === 'number' ? row.group_id : null;
      reads.set(id, read);
      this.readGroups.set(id, groupId);
      // A corrupt row is read again every time: an operator may repair it.
      if (read.state !== 'corrupt') this.backend.rememberRow(id, { read, groupId });
    }
    return reads;
  }

  /**
   * Writes every staged row and commits (one durable WAL append). On any failure the transaction
   * is rolled back — nothing of the batch reaches any reader — and the batch rejects with
   * `LeaseIoError`.
   */
  async commit(list: readonly StagedChange[]): Promise<BatchReport> {
    this.assertState('locked');
    const { db, statements, file } = this.backend;
    // In staging order: one transaction needs no lock order, and its rows are atomic together.
    let step = 'write';
    const moves = new GroupMoves();
    // Each staged row, and the group row it named before if it stays there (a heartbeat of an
    // unchanged group); a row in a new group row learns its id once that row is written.
    const planned = list.map(({ id, next }) => {
      const staged = next === null ? null : asSqliteStaged(next);
      const before = this.readGroups.get(id) ?? null;
      const stays = moves.move(before, before === null ? undefined : this.backend.groupCache.get(before)?.hex, staged?.group ?? null);
      return { id, staged, kept: stays ? before : null };
    });
    let rows: { id: string; staged: SqliteStagedRecord | null; named: number | null }[] = [];
    try {
      const groupIds = new Map<string, number>();
      for (const [hex, blob] of moves.added) groupIds.set(hex, statements.addGroup.get(blob.hash, blob.content)!.id);
      // The group row each row names once written (null: a whole record, or the row deleted).
      rows = planned.map(({ id, staged, kept }) => ({ id, staged, named: staged?.group ? (kept ?? groupIds.get(staged.group.hex)!) : null }));
      const removed: string[] = [];
      for (const { id, staged, named } of rows) {
        if (staged === null) removed.push(id);
        else statements.upsert.run(id, staged.text, named);
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
      db.exec('COMMIT');
    } catch (error) {
      this.state = 'failed';
      this.backend.forgetRows();
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
    for (const { id, staged, named } of rows) {
      if (staged === null) {
        this.backend.readCache.forget(id);
        this.backend.rememberRow(id, { read: { state: 'absent' }, groupId: null });
        continue;
      }
      const group = staged.group;
      this.backend.readCache.remember(id, staged.text, staged.record, group === null || named === null ? undefined : memberTag(named, group.hex));
      this.backend.rememberRow(id, { read: { state: 'valid', record: staged.record }, groupId: named });
      if (group !== null && named !== null) this.backend.groupCache.remember(named, group.hex, group.fields, group.content.length);
    }
    if (list.length === 0) return EMPTY_BATCH_REPORT;
    return { published: list.length, fileBarriers: 1, directoryBarriers: 0, directories: [] };
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
      const named = written.has(id) ? written.get(id) : this.readGroups.has(id) ? this.readGroups.get(id) : (this.backend.statements.selectGroupOf.get(id) ?? null);
      if (named === groupId) return true;
    }
    return false;
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
