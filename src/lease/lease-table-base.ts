/**
 * What the work table and the target table share: opening a root (options, locker, metadata),
 * the durability context, cross-request batch execution, scans and counts, and argument checks.
 */
import { checkOptionsObject, invalidOption } from '../config/values.js';
import { LeaseCorruptError } from '../errors.js';
import { nodeFsLayer, type FsLayer } from '../fs/fs-layer.js';
import type { NativeBindings } from '../native/bindings.js';
import { canonicalJson } from './canonical-json.js';
import type { BatchReport, DurabilityContext } from './durability-batch.js';
import { LeaseLayout } from './lease-layout.js';
import { executeOperations, checkNowMs, type ExecutionResult, type LeaseOperation } from './lease-operation.js';
import { isExpiredLease, MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH, type JsonObject, type LeaseRecord, type RecordKind } from './lease-record.js';
import type { ExpiredLease, LeaseCounts, SnapshotEntry } from './lease-results.js';
import { scanRecords } from './lease-scan.js';
import { LEASE_TABLE_OPTIONS, type LeaseTableOptions } from './lease-table-options.js';
import { createRecordLocker, type RecordLocker } from './record-lock.js';
import { checkDirectory, ensureDirectoryDurable } from './record-store.js';
import { ensureTableMeta } from './table-meta.js';
import { randomBytes } from 'node:crypto';
import { probeFilesystem } from './fs-probe.js';

/** Injected collaborators (tests, benches, the I/O thread). */
export interface LeaseTableDeps {
  /** Default: the real filesystem. */
  readonly fsLayer?: FsLayer;
  /** Monotonic clock for lock deadlines, ms. Default `performance.now`. */
  readonly monotonicNowMs?: () => number;
  /** Native addon override (tests); default `loadNative()`. `null` = behave as if not built. */
  readonly native?: NativeBindings | null;
  /** Filesystem qualification (tests); default `probeFilesystem` from fs-probe.ts. */
  readonly probe?: (dir: string) => Promise<unknown>;
}

/** Roots already qualified by this process (the probe costs a child process). */
const probedRoots = new Set<string>();

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

export interface OpenedCore {
  readonly options: LeaseTableOptions;
  readonly ctx: DurabilityContext;
}

/** Resolves options, picks the locker, creates the root durably and checks its metadata. */
export async function openCore(root: string, input: object | undefined, deps: LeaseTableDeps, kind: RecordKind): Promise<OpenedCore> {
  if (typeof root !== 'string' || root === '') throw invalidOption('root', 'a directory path', root);
  if (input !== undefined) checkOptionsObject(input, 'options');
  const options = LEASE_TABLE_OPTIONS.resolve(input ?? {});
  const fsLayer = deps.fsLayer ?? nodeFsLayer;
  const locker: RecordLocker = createRecordLocker(options.coordination, {
    fsLayer,
    lockAcquireTimeoutMs: options.lockAcquireTimeoutMs,
    lockAgeHintMs: options.lockAgeHintMs,
    monotonicNowMs: deps.monotonicNowMs,
    native: deps.native,
    lockFdCacheSize: options.lockFdCacheSize,
  });
  const layout = new LeaseLayout(root, options.shardCount);
  await ensureDirectoryDurable(fsLayer, layout.root);
  if (options.coordination === 'multi' && options.verifyFilesystem && !probedRoots.has(layout.root)) {
    // Refuses to open (FsProbeError naming the failed step) on a filesystem that cannot keep
    // the lease protocol's promises, e.g. flock that does not exclude another process.
    await (deps.probe ?? ((dir: string) => probeFilesystem(dir, { native: deps.native })))(layout.root);
    if (!deps.probe) probedRoots.add(layout.root);
  }
  await ensureTableMeta(fsLayer, layout, kind, locker);
  const known = new Set<string>([layout.root]);
  const ctx: DurabilityContext = {
    fsLayer,
    locker,
    layout,
    kind,
    fileBarrier: options.fileBarrier,
    directoryBarrier: options.directoryBarrier,
    async ensureDirectory(dir: string): Promise<void> {
      // A known directory is re-checked (one lstat) on every batch: a shard swapped for a symlink
      // after first use must be refused as a fresh table would refuse it, never written through.
      if (known.has(dir)) return checkDirectory(fsLayer, dir);
      await ensureDirectoryDurable(fsLayer, dir);
      known.add(dir);
    },
  };
  return { options, ctx };
}

export abstract class LeaseTableBase {
  readonly options: LeaseTableOptions;
  protected readonly ctx: DurabilityContext;

  protected constructor(core: OpenedCore) {
    this.options = core.options;
    this.ctx = core.ctx;
  }

  /** Absolute table root. */
  get root(): string {
    return this.ctx.layout.root;
  }

  get shardCount(): number {
    return this.ctx.layout.shardCount;
  }

  /** `flock` (multi-coordinator safe) or `in-process` (single writer only). */
  get lockerKind(): RecordLocker['kind'] {
    return this.ctx.locker.kind;
  }

  /**
   * Closes the lock-file fds this table keeps open between operations. The table stays usable
   * (later locks open and close their fds); call it when done with the table. Idempotent.
   */
  close(): Promise<void> {
    return this.ctx.locker.close();
  }

  /** Path of a record file (for tools and tests). */
  recordPath(id: string): string {
    return this.ctx.layout.recordPath(id);
  }

  /** Path of a record's lock file. */
  lockPath(id: string): string {
    return this.ctx.layout.lockPath(id);
  }

  /** Shard directory of a record id. */
  shardDirOf(id: string): string {
    return this.ctx.layout.dirOf(id);
  }

  /**
   * Runs several planned operations through ONE durability batch: their locks are taken together
   * (ascending id), and one barrier pass covers all their writes. The caller must not put two
   * operations on the same id into one batch unless it wants the second to see the first's result.
   * Lock failures reject the call; per-operation outcomes are returned in order.
   */
  executeBatch(operations: readonly LeaseOperation<unknown>[]): Promise<ExecutionResult> {
    return executeOperations(this.ctx, operations);
  }

  protected async runOne<R>(op: LeaseOperation<R>): Promise<{ value: R; report: BatchReport }> {
    const { outcomes, report } = await executeOperations(this.ctx, [op as LeaseOperation<unknown>]);
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
    const entries = await scanRecords(this.ctx.fsLayer, this.ctx.layout, this.ctx.kind);
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
    const entries = await scanRecords(this.ctx.fsLayer, this.ctx.layout, this.ctx.kind);
    const expired = entries.flatMap((e) => (e.state === 'valid' && isExpiredLease(e.record, nowMs, ttlMs, this.options.maxClockSkewMs) ? [{ id: e.id, record: e.record }] : []));
    expired.sort(byUpdatedThenId);
    const picked = limit > 0 ? expired.slice(0, limit) : expired;
    return picked.map(({ id, record }) => ({ id, payload: record.payload, owner: record.owner, token: record.token, updatedMs: record.updatedMs }));
  }

  /** Counts by status; `expired` ⊆ `leased` under the table TTL; corrupt entries counted apart. */
  async snapshotCounts(options: AtTime): Promise<LeaseCounts> {
    checkCallOptions(options);
    const nowMs = checkNowMs(options.nowMs);
    const entries = await scanRecords(this.ctx.fsLayer, this.ctx.layout, this.ctx.kind);
    const counts = { leased: 0, expired: 0, committing: 0, done: 0, corrupt: 0 };
    for (const entry of entries) {
      if (entry.state === 'corrupt') {
        counts.corrupt += 1;
        continue;
      }
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
 * `maxBytes` and `MAX_PAYLOAD_DEPTH` levels (else throws `ERR_INVALID_JOB` while walking it).
 */
export function normalizePayload(payload: unknown, name = 'payload', maxBytes = MAX_PAYLOAD_BYTES): JsonObject {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) throw invalidOption(name, 'a plain object', payload);
  return JSON.parse(canonicalJson(payload, { maxBytes, maxDepth: MAX_PAYLOAD_DEPTH })) as JsonObject;
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
