/**
 * Where lease records live: the one seam between the lease semantics (claims, fencing, commit —
 * the tables and their `LeaseOperation`s, identical for every store) and the bytes (a sharded
 * directory of record files, a SQLite database, a coordination service). docs/leases.md
 * "Lease stores" compares the stores.
 *
 * A backend offers two things:
 * - **batches**: `begin()` opens a unit of "exclusive access, read, decide, make durable, answer".
 *   The executor (lease-operation.ts) drives every batch through the same phases, in this order:
 *   lock → read → decide (the operations view and stage) → commit → release. What is the same in
 *   every store — the records read, the changes staged over them, `view`, staging all-or-nothing,
 *   never over a corrupt record — is the batch overlay (batch-overlay.ts); a store's batch
 *   (`StoreBatch`) supplies only `lock`, `fetch`, `commit` and `release`. Contract every store keeps:
 *     - between `lock` and `release` no other batch, in this process or any other, can change or
 *       publish a locked record (files: `flock` per record; SQLite: one write transaction);
 *     - `commit` reports success only once every change is durable, and is all-or-nothing:
 *       on failure it rejects with `LeaseIoError` and the records read in this batch are what every
 *       reader sees afterwards (`details.restored` false only when that could not be ensured);
 *     - `fetch` validates each record exactly as a record file is validated (lease-record.ts): a
 *       corrupt record is a `corrupt` read, never a usable one;
 *     - `release` is idempotent and never throws; after a failed `lock` nothing is held.
 * - **scans**: `scan()` lists every record (valid or corrupt, with where it lives), lock-free: a
 *   snapshot, not a transaction.
 *
 * Optimistic stores (etcd) keep the same contract without holding anything between `lock` and
 * `commit`: `commit` is one transaction that compares every record the batch read and writes only
 * if none changed. When one did, `commit` rejects with `BatchConflictError` and changes nothing;
 * the executor then re-runs the batch from `begin()` (lease-operation.ts "Retries"). Operations
 * never act outside the store while deciding, so a re-run is always safe; a publication runs
 * between two batches (docs/leases.md "Publishing a committed result").
 */
import type { CanonicalJsonMemo } from './canonical-json.js';
import type { LeaseRecord, RecordKind, RecordRead } from './lease-record.js';

/** The lease stores symfence has. `auto` (the option) resolves to one of these at open. */
export const LEASE_STORES = ['files', 'sqlite', 'etcd'] as const;
export type LeaseStoreKind = (typeof LEASE_STORES)[number];

/** What a committed batch did. Barrier counts are 0 where a store has no such step. */
export interface BatchReport {
  /** Records written or deleted. */
  readonly published: number;
  /** File barriers issued (fsync calls, 1 for syncfs, 1 per durable database commit). */
  readonly fileBarriers: number;
  /** Directory barriers issued. */
  readonly directoryBarriers: number;
  /** Shard directories touched, sorted (file store only). */
  readonly directories: readonly string[];
}

export const EMPTY_BATCH_REPORT: BatchReport = Object.freeze({ published: 0, fileBarriers: 0, directoryBarriers: 0, directories: [] });

/**
 * A staged change: the record's next value and its bytes as the store keeps them (serialised
 * once, at staging; a record file's canonical JSON unless the backend has its own `encoder`).
 */
export interface StagedRecord {
  readonly record: LeaseRecord;
  readonly bytes: Buffer;
}

/**
 * An optimistic batch's commit found a record changed since its read: nothing was written, and
 * the batch may be run again from `begin()`. Never escapes the executor: past its retry deadline
 * it becomes a `LockTimeoutError`.
 */
export class BatchConflictError extends Error {
  constructor(readonly ids: readonly string[]) {
    super(`lease records changed during the batch: ${ids.slice(0, 4).join(', ')}${ids.length > 4 ? ', …' : ''}`);
  }
}

/**
 * A read as a store returns it: a record read (valid, absent, corrupt), or `unreadable` — the store
 * could not be asked (etcd offline) — which fails, with `error`, any operation that looks at it.
 */
export type FetchedRead = RecordRead | { readonly state: 'unreadable'; readonly error: unknown };

/** An answer record an operation decided from at a version it knew (`MoreReads.declared`, lease-operation.ts). */
export interface DeclaredAnswer {
  readonly leaseId: string;
  /** Read only when the batch fails (a claim computes it then, from a getter). */
  readonly answerId: string;
  readonly version: number;
}

/** One change a batch commits: the record as read before the batch, and what replaces it (null: delete). */
export interface StagedChange {
  readonly id: string;
  readonly before: RecordRead;
  readonly next: StagedRecord | null;
}

/**
 * What `StoreBatch.scanAnswers` found: the answer generation record, and each record listed with
 * it as its id and the `target` it names (undefined when the store lists names only, or the
 * record names none: the view then looks such a record up by id). `before`: the generation record
 * as read before the listing, where the listing is not one snapshot with `generation` (files).
 */
export interface AnswerScan {
  readonly generation: RecordRead;
  readonly before?: RecordRead;
  readonly listed: readonly (readonly [string, unknown])[];
}

/** What a store does in one batch; the batch overlay (batch-overlay.ts) does the rest. */
export interface StoreBatch {
  /**
   * Takes exclusive access to `ids` (new to this batch, each once, in no particular order: a store
   * that takes locks orders them itself). On failure nothing is held and nothing was written.
   */
  lock(ids: readonly string[]): Promise<void>;
  /**
   * Reads the records of `ids` (each once per batch), validated: each locked, or in `guarded`, ids
   * read without their own lock because another lock of the batch orders their writes
   * (lease-operation.ts, `readIds`). A store whose commit does not otherwise check what it read
   * must check the guarded ids: an optimistic store cannot rely on that other record alone, which
   * may be absent at the read and absent again at the commit with writes in between. Ids in
   * `pinned` are read without a lock too, and only by a store that versions answer records
   * (`relateAnswers`): answer records whose lease record the batch read absent. The store checks
   * each at commit in the compare of that lease record, which it may then take from a cache.
   */
  fetch(ids: readonly string[], guarded?: ReadonlySet<string>, pinned?: ReadonlySet<string>): Promise<ReadonlyMap<string, FetchedRead>>;
  /**
   * Ids this batch's operations know to be lease records, never answer records (every id a claim
   * locks), before the first `fetch`: a store that keeps answer records in a table of their own
   * (SQLite) reads and checks these in the lease table alone. Any other store ignores it.
   */
  leaseRecords?(ids: ReadonlySet<string>): void;
  /**
   * A store that versions answer records (`RecordBackend.relateAnswers`): answer records operations
   * decided from at versions they held, without reading them (`MoreReads.declared`). Checked at
   * commit like `pinned` reads, whether the batch writes or not.
   */
  declare?(declared: readonly DeclaredAnswer[]): void;
  /**
   * A store that versions answer records: answer records (each with its lease record's id) to read
   * in the same request as their lease records, if those are read from the server in this batch
   * (`LeaseOperation.readAlong`); a later `fetch` of one of them is answered from that read.
   */
  readAlong?(pairs: readonly (readonly [string, string])[]): void;
  /**
   * Marks `ids`, already read in this batch, as guarded (see `fetch`): an operation relies on a
   * record another operation's lock read, and that lock may write nothing. A store that checks
   * guarded ids at commit checks these too, against the read the batch already holds.
   */
  guard?(ids: readonly string[]): void;
  /**
   * Refuses, by throwing, changes this store cannot take (a transaction's size limit) before any
   * of them is staged. Called once per operation's changes, in staging order: the store keeps
   * what it admitted so far (a change of an id staged before replaces it).
   */
  admit?(changes: readonly (readonly [string, StagedRecord | null])[]): void;
  /**
   * A store that keeps an answer generation record (files, SQLite): reads that record
   * (`generationId`) and lists the id of every record that may be an answer record (a superset is
   * fine), takes no lock, and answers one of two ways (answers-view.ts, "Complete views"): SQLite
   * reads both in one read transaction, so the listing is exact at the generation read; the file
   * store reads the generation record before the listing and again after it (`AnswerScan.before`),
   * so the listing holds every answer record written before the first read, and the second lists
   * every one written since (when it still reaches back that far). Undefined when the store has
   * nothing to list (a lost SQLite database). Rejects with `LeaseIoError` when it cannot list.
   */
  scanAnswers?(generationId: string): Promise<AnswerScan | undefined>;
  /** Makes `changes` durable, all-or-nothing; rejects with `LeaseIoError`. */
  commit(changes: readonly StagedChange[]): Promise<BatchReport>;
  /** Ends the batch (rolls back an uncommitted one). Idempotent; never throws. */
  release(): Promise<void>;
}

/** `flock` (multi-coordinator safe) or `in-process` (single writer only). */
export type LockerKind = 'flock' | 'in-process';

/**
 * A store that keeps one file per record (the file store) says where each lives, for tools and
 * tests; no other part of the lease layer needs to know.
 */
export interface RecordFiles {
  readonly shardCount: number;
  readonly lockerKind: LockerKind;
  recordPath(id: string): string;
  lockPath(id: string): string;
  dirOf(id: string): string;
}

/** What a scan may leave out (`RecordBackend.scan`). */
export interface ScanOptions {
  /** Records that are `done` may be left out, where the store tells them apart cheaply. */
  readonly skipDone?: boolean;
}

export type ScanEntry =
  | { readonly state: 'valid'; readonly id: string; readonly path: string; readonly record: LeaseRecord }
  | { readonly state: 'corrupt'; readonly id: string | undefined; readonly path: string; readonly reason: string }
  /**
   * An older version of an answer record that a newer one replaced (etcd, docs/lease-format.md
   * "Answer versions"), left by a release that could not remove it: no record, only `bytes`.
   */
  | { readonly state: 'superseded'; readonly id: string; readonly path: string; readonly bytes: number };

export interface RecordBackend {
  readonly store: LeaseStoreKind;
  readonly kind: RecordKind;
  /** The table root this backend serves (a directory holding `lease-table.json`). */
  readonly root: string;
  begin(): StoreBatch;
  /** Where records live as files, for a store that keeps them so (optional capability). */
  readonly recordFiles?: RecordFiles;
  /**
   * The store's own encoding of staged records, made fresh for each batch (`memo` lives as long
   * as the batch). Default: the bytes of a record file (`serializeRecord`). Whatever it returns
   * is what `stageAll` receives; it throws `InvalidJobError` for a record a reader would call
   * corrupt, before anything is written.
   */
  encoder?(memo: CanonicalJsonMemo): (record: LeaseRecord) => StagedRecord;
  /**
   * Most distinct records one batch may touch (a transaction's size limit), or undefined for no
   * limit. The executor splits larger runs of operations into several batches.
   */
  readonly maxBatchRecords?: number;
  /**
   * True for an optimistic store (commits may reject with `BatchConflictError`; the executor
   * then runs the batch again).
   */
  readonly optimistic?: boolean;
  /** Optimistic stores: how long the executor re-runs a conflicting batch before `LockTimeoutError`, ms. */
  readonly conflictRetryMs?: number;
  /**
   * Stores whose leased records ride a server-side session (etcd): calls `listener` each time this
   * process gives a session up (its records are no longer ours); returns the unsubscribe.
   */
  onSessionLost?(listener: (event: { readonly reason: string; readonly sessionsLost: number }) => void): () => void;
  /**
   * Every record, valid or corrupt; `path` says where each lives (a file, `<db>#<id>`, …). With
   * `skipDone`, a record the store can tell is `done` without decoding it may be left out — a
   * hint for a scan that looks for leased records only (an expiry scan); a store may return all.
   */
  scan(options?: ScanOptions): Promise<ScanEntry[]>;
  /**
   * A store that versions answer records itself (etcd: every write a new key beside the lease
   * record's, docs/lease-format.md "Answer versions"): notes which lease record each answer record
   * belongs to, `[answerId, leaseId]`, before a batch reads or writes it. A target table without
   * it keeps its answer generation instead (answers-view.ts).
   */
  relateAnswers?(pairs: readonly (readonly [string, string])[]): void;
  /**
   * A store that versions answer records: the lease record id of every branch that has an answer
   * record, from a keys-only listing. Nothing rests on it being complete or current: a claim that
   * declares a member without an answer record (version 0, `MoreReads.declared`) is checked at
   * commit like any declared version, and a branch answered since costs a conflict and a read.
   */
  answeredBranches?(): Promise<ReadonlySet<string>>;
  /**
   * Releases what the backend keeps open between batches (lock fds, a database handle). Call it
   * when done with the table. Idempotent.
   */
  close(): Promise<void>;
}
