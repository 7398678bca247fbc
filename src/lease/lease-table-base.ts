/**
 * What the work table and the target table share: opening a root (options, record backend),
 * cross-request batch execution, scans and counts, and argument checks. Nothing here knows which
 * store holds the records (backend-contract.ts).
 */
import { checkOptionsObject, invalidOption } from '../config/values.js';
import { LeaseCorruptError, LeaseStoreUnsupportedError } from '../errors.js';
import { canonicalJson } from './canonical-json.js';
import { deepFreeze } from './deep-freeze.js';
import { executeOperations, checkNowMs, type ExecutionResult, type LeaseOperation } from './lease-operation.js';
import { isExpiredLease, MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH, type JsonObject, type LeaseRecord, type RecordKind } from './lease-record.js';
import type { ExpiredLease, LeaseCounts, SnapshotEntry } from './lease-results.js';
import { LEASE_TABLE_OPTIONS, type LeaseTableOptions } from './lease-table-options.js';
import { openRecordBackend, type LeaseTableDeps } from './open-backend.js';
import type { BatchReport, LeaseStoreKind, LockerKind, RecordBackend, RecordFiles } from './backend-contract.js';
import { randomBytes } from 'node:crypto';

export type { LeaseTableDeps } from './open-backend.js';

/** Most records one heartbeat batch locks at once (bounds open lock fds). */
export const HEARTBEAT_BATCH_RECORDS = 256;

/** Options of the per-call time. */
export interface AtTime {
  /** Current time, ms since the epoch (injected clock). */
  readonly nowMs: number;
}

export interface ReplayOptions extends AtTime {
  /**
   * Replay only when the record has not been renewed for this long (checked under its lock):
   * another coordinator's result is left to its owner while the owner is alive. Default 0.
   */
  readonly minIdleMs?: number;
}

export interface ClaimIdentity extends AtTime {
  /** Coordinator name; non-empty. */
  readonly owner: string;
  /** Worker index (informational); default 0. */
  readonly worker?: number;
}

interface OpenedCore {
  readonly options: LeaseTableOptions;
  readonly backend: RecordBackend;
}

/** Resolves options and opens the root's record backend (its store, locks and metadata). */
export async function openCore(root: string, input: object | undefined, deps: LeaseTableDeps, kind: RecordKind): Promise<OpenedCore> {
  if (typeof root !== 'string' || root === '') throw invalidOption('root', 'a directory path', root);
  if (input !== undefined) checkOptionsObject(input, 'options');
  const options = LEASE_TABLE_OPTIONS.resolve(input ?? {});
  return { options, backend: await openRecordBackend(root, options, deps, kind) };
}

export abstract class LeaseTableBase {
  readonly options: LeaseTableOptions;
  protected readonly backend: RecordBackend;

  protected constructor(core: OpenedCore) {
    this.options = core.options;
    this.backend = core.backend;
  }

  /** Absolute table root. */
  get root(): string {
    return this.backend.root;
  }

  /** The store this table's records live in. */
  get store(): LeaseStoreKind {
    return this.backend.store;
  }

  /** Shard directories of a file table (1 for a store without shards). */
  get shardCount(): number {
    return this.backend.recordFiles?.shardCount ?? 1;
  }

  /** `flock` (multi-coordinator safe) or `in-process` (single writer only), for a file table. */
  get lockerKind(): LockerKind | undefined {
    return this.backend.recordFiles?.lockerKind;
  }

  /**
   * Tells `listener` whenever the store gives up this process's session (etcd: its keep-alive
   * deadline passed; the leased records on it are no longer ours). A no-op for stores without
   * sessions. Returns the unsubscribe.
   */
  onSessionLost(listener: (event: { readonly reason: string; readonly sessionsLost: number }) => void): () => void {
    return this.backend.onSessionLost?.(listener) ?? (() => undefined);
  }

  /**
   * Most leases one heartbeat batch renews: `MAX_HEARTBEAT_BATCH` (work-lease-table.ts), or fewer
   * where the store bounds a transaction (`RecordBackend.maxBatchRecords`).
   */
  get heartbeatBatchSize(): number {
    return Math.min(HEARTBEAT_BATCH_RECORDS, this.backend.maxBatchRecords ?? HEARTBEAT_BATCH_RECORDS);
  }

  /**
   * Releases what the table keeps open between operations (lock-file fds, a database handle);
   * call it when done with the table. A file table stays usable (later locks open and close their
   * fds). Idempotent.
   */
  close(): Promise<void> {
    return this.backend.close();
  }

  /** Path of a record file (file store; for tools and tests). */
  recordPath(id: string): string {
    return this.recordFiles().recordPath(id);
  }

  /** Path of a record's lock file (file store). */
  lockPath(id: string): string {
    return this.recordFiles().lockPath(id);
  }

  /** Shard directory of a record id (file store). */
  shardDirOf(id: string): string {
    return this.recordFiles().dirOf(id);
  }

  private recordFiles(): RecordFiles {
    const files = this.backend.recordFiles;
    if (files === undefined) {
      throw new LeaseStoreUnsupportedError(`a ${this.backend.store} lease table has no record files: record, lock and shard paths are the file store's`, { store: this.backend.store });
    }
    return files;
  }

  /**
   * Runs several planned operations through ONE batch of the record backend: their locks are taken together
   * (ascending id), and one barrier pass covers all their writes. The caller must not put two
   * operations on the same id into one batch unless it wants the second to see the first's result.
   * Lock failures reject the call; per-operation outcomes are returned in order.
   */
  executeBatch(operations: readonly LeaseOperation<unknown>[]): Promise<ExecutionResult> {
    return executeOperations(this.backend, operations);
  }

  protected async runOne<R>(op: LeaseOperation<R>): Promise<{ value: R; report: BatchReport }> {
    const { outcomes, report } = await this.executeBatch([op as LeaseOperation<unknown>]);
    const outcome = outcomes[0]!;
    if (!outcome.ok) throw outcome.error;
    return { value: outcome.value as R, report };
  }

  /**
   * Every valid record, sorted by (updatedMs, id). Lock-free snapshot. Rejects with
   * `LeaseCorruptError` if any record is corrupt (a snapshot must not silently skip state), unless
   * `corrupt: 'skip'`: a scan that acts on records one by one (commit recovery) must not let one
   * damaged record stop it from acting on all the others (`symfence leases check` lists them).
   */
  async snapshotRecords(options: { readonly limit?: number; readonly corrupt?: 'reject' | 'skip' } = {}): Promise<SnapshotEntry[]> {
    checkCallOptions(options, 'snapshotRecords options');
    const limit = checkLimit(options.limit);
    const entries = await this.backend.scan();
    const corrupt = entries.filter((e) => e.state === 'corrupt');
    if (corrupt.length > 0 && options.corrupt !== 'skip') {
      const first = corrupt[0]!;
      throw new LeaseCorruptError(`invalid fenced lease record: ${first.id ?? first.path} (${first.reason})`, {
        corrupt: corrupt.map((e) => ({ id: e.id, path: e.path, reason: e.reason })),
      });
    }
    const valid = entries.flatMap((e) => (e.state === 'valid' ? [{ id: e.id, record: e.record }] : []));
    valid.sort(byUpdatedThenId);
    return limit > 0 ? valid.slice(0, limit) : valid;
  }

  /**
   * Leased records that may be claimed again: TTL 0 (explicit forced takeover) takes every leased
   * record, even one dated in the future. Read-only; the caller follows up with a claim using the
   * same TTL. Corrupt, committing and done records are skipped.
   */
  async recoverExpired(options: AtTime & { readonly leaseTtlMs?: number; readonly limit?: number }): Promise<ExpiredLease[]> {
    checkCallOptions(options);
    const nowMs = checkNowMs(options.nowMs);
    const ttlMs = options.leaseTtlMs === undefined ? this.options.leaseTtlMs : checkTtlMs(options.leaseTtlMs);
    const limit = checkLimit(options.limit);
    // Only leased records can have expired: the store may leave out the done ones, which in a long
    // campaign are nearly all of a work table (one per job), without decoding them.
    const entries = await this.backend.scan({ skipDone: true });
    const expired = entries.flatMap((e) => (e.state === 'valid' && isExpiredLease(e.record, nowMs, ttlMs, this.options.maxClockSkewMs) ? [{ id: e.id, record: e.record }] : []));
    expired.sort(byUpdatedThenId);
    const picked = limit > 0 ? expired.slice(0, limit) : expired;
    return picked.map(({ id, record }) => ({ id, payload: record.payload, owner: record.owner, token: record.token, updatedMs: record.updatedMs }));
  }

  /**
   * Counts by status; `expired` ⊆ `leased` under the table TTL; corrupt entries counted apart; the
   * answer generation record and superseded answer versions (etcd) not at all.
   */
  async snapshotCounts(options: AtTime): Promise<LeaseCounts> {
    checkCallOptions(options);
    const nowMs = checkNowMs(options.nowMs);
    const entries = await this.backend.scan();
    const counts = { leased: 0, expired: 0, committing: 0, done: 0, corrupt: 0 };
    for (const entry of entries) {
      if (entry.state === 'corrupt') {
        counts.corrupt += 1;
        continue;
      }
      if (entry.state === 'superseded') continue;
      // The answer generation record (answers-view.ts) is no lease and no answer: not counted, as in `symfence leases`.
      if (entry.record.role === 'answers-generation') continue;
      counts[entry.record.status] += 1;
      if (isExpiredLease(entry.record, nowMs, this.options.leaseTtlMs, this.options.maxClockSkewMs)) counts.expired += 1;
    }
    return counts;
  }
}

function byUpdatedThenId(a: { id: string; record: LeaseRecord }, b: { id: string; record: LeaseRecord }): number {
  return a.record.updatedMs - b.record.updatedMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** A missing or non-object options argument is an `ERR_INVALID_OPTION`, not a `TypeError`. */
export function checkCallOptions(options: unknown, name = 'options'): void {
  checkOptionsObject(options, name);
}

export function checkLimit(limit: unknown): number {
  if (limit === undefined) return 0;
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 0) throw invalidOption('limit', 'a non-negative integer (0 = no limit)', limit);
  return limit;
}

/** A per-call TTL: finite, ≥ 0 (0 = forced takeover of any leased record). */
export function checkTtlMs(ttlMs: unknown, name = 'leaseTtlMs'): number {
  if (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs < 0) throw invalidOption(name, 'a finite non-negative number of milliseconds', ttlMs);
  return ttlMs;
}

export function checkOwner(owner: unknown): string {
  if (typeof owner !== 'string' || owner === '') throw invalidOption('owner', 'a non-empty coordinator name', owner);
  return owner;
}

export function checkWorker(worker: unknown): number {
  if (worker === undefined) return 0;
  if (typeof worker !== 'number' || !Number.isSafeInteger(worker) || worker < 0) throw invalidOption('worker', 'a non-negative integer', worker);
  return worker;
}

/**
 * Validates and normalises a payload: a plain object, canonical-JSON serialisable within
 * `maxBytes` and `MAX_PAYLOAD_DEPTH` levels, with no `bigint` in it (else throws `ERR_INVALID_JOB`
 * while walking it).
 * The result is deeply frozen: it is stored as is in every record of the call, and a frozen value
 * is serialised once per batch (canonical-json.ts "Memo").
 */
export function normalizePayload(payload: unknown, name = 'payload', maxBytes = MAX_PAYLOAD_BYTES): JsonObject {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) throw invalidOption(name, 'a plain object', payload);
  // Bigints are refused rather than written as strings: a payload reads back as it was given.
  return deepFreeze(JSON.parse(canonicalJson(payload, { maxBytes, maxDepth: MAX_PAYLOAD_DEPTH, bigints: 'refuse' })) as JsonObject);
}

/** A fencing token: `<owner>:<worker>:<pid>:<nowMs>:<random>` — opaque, compared by equality. */
export function makeToken(owner: string, worker: number, nowMs: number): string {
  return `${owner}:${worker}:${process.pid}:${nowMs}:${randomBytes(8).toString('hex')}`;
}

/** Counters of a claim that replaces `previous` (or creates a fresh record). */
export function claimCounters(previous: LeaseRecord | undefined, owner: string): { attempts: number; steals: number; previousOwner: string } {
  if (!previous) return { attempts: 1, steals: 0, previousOwner: '' };
  return {
    attempts: previous.attempts + 1,
    steals: previous.steals + (previous.owner !== owner ? 1 : 0),
    previousOwner: previous.owner,
  };
}

/** True when `token` is usable for comparison (non-empty string). */
export function isToken(token: unknown): token is string {
  return typeof token === 'string' && token !== '';
}
