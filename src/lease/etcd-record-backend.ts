/**
 * The etcd store (`RecordBackend`): one etcd key per record, for coordinators on many hosts
 * (docs/leases.md "The etcd store").
 *
 * Keys under the `etcdPrefix` option: `<prefix>/<kind>/meta` (the table's kind and store, checked
 * at every open), `<prefix>/<kind>/r/<id>` (a record: the same canonical JSON bytes a record file
 * holds, validated by the same reader — a corrupt value fails closed), `<prefix>/<kind>/l/<id>`
 * (an exclusive lock, attached to the holder's session).
 *
 * Batches are optimistic (record-backend.ts):
 *   - `lock` takes nothing, unless exclusive: then one transaction creates every lock key
 *     (all or none), attached to this process's session, and it is retried until
 *     `lockAcquireTimeoutMs` → `LockTimeoutError`;
 *   - `read` is one read transaction per up to `MAX_TXN_OPS` keys: each record with its
 *     `mod_revision` (0 for an absent one);
 *   - `commit` is ONE transaction: for every record it writes or deletes, compare `mod_revision`
 *     with the read one (an absent record: `create_revision == 0`); for every one that was
 *     `committing` when read, compare that no other batch holds its lock (or that ours is still
 *     held); then every put and delete. A failed compare writes nothing →
 *     `BatchConflictError` (the executor re-runs the batch), or `LeaseIoError` in an exclusive
 *     batch, which is never re-run.
 *
 * Fencing: a record's `mod_revision` is etcd's cluster-wide revision of its last write, so the
 * claim that wrote a token has a revision greater than every earlier claim of that record, and
 * every later transaction on the record (heartbeat, release, beginCommit, complete, replay)
 * commits only if the record is still at the revision it read — the one whose token it checked.
 * A holder whose lease was taken over (new token, new revision) can write nothing more.
 *
 * Expiry: `leased` records are attached to the writer's session lease (etcd-connection.ts) and
 * vanish when it expires on the server, besides expiring by their own TTL as in every store.
 * `committing` and `done` records are attached to no lease: they are never lost to an expiry.
 *
 * Limits: a transaction carries at most `MAX_TXN_OPS` (etcd's default `--max-txn-ops`) compares
 * and as many writes, so a batch touches at most `MAX_BATCH_RECORDS` = 64 records (a full group);
 * its writes may total at most `MAX_TXN_BYTES` (under etcd's default 1.5 MiB request limit). A
 * record or batch above that is refused with `ERR_LEASE_RECORD_TOO_LARGE` before anything is
 * written (a commit manifest too big for etcd is never silently dropped).
 */
import path from 'node:path';
import { invalidOption } from '../config/values.js';
import { defineError, LeaseCorruptError, LockTimeoutError } from '../errors.js';
import { nodeFsLayer } from '../fs/fs-layer.js';
import { canonicalJsonBytes } from './canonical-json.js';
import { connectEtcd, etcdClientConfig, type EtcdConnection } from './etcd-connection.js';
import { isRecordId } from './identity.js';
import { LeaseLayout } from './lease-layout.js';
import { leaseIoError } from './lease-io-error.js';
import { maxRecordBytes, parseRecord, type RecordKind, type RecordRead } from './lease-record.js';
import type { LeaseTableOptions } from './lease-table-options.js';
import type { LeaseTableDeps } from './open-record-backend.js';
import { BatchConflictError, EMPTY_BATCH_REPORT, type BatchReport, type LockOptions, type RecordBackend, type RecordBatch, type ScanEntry, type StagedRecord } from './record-backend.js';
import { createRecordLocker } from './record-lock.js';
import { ensureDirectoryDurable } from './record-store.js';
import { ensureTableMeta } from './table-meta.js';

/** A record or batch does not fit one etcd transaction. Nothing was written. */
export const LeaseRecordTooLargeError = defineError('ERR_LEASE_RECORD_TOO_LARGE', 'LeaseRecordTooLargeError');

/** etcd's default `--max-txn-ops`: compares, and separately writes, per transaction. */
export const MAX_TXN_OPS = 128;
/** Records per batch: each may need a record compare and a lock compare. */
export const MAX_BATCH_RECORDS = MAX_TXN_OPS / 2;
/** Largest total of keys and values one commit writes (etcd's default request limit is 1.5 MiB). */
export const MAX_TXN_BYTES = 1024 * 1024 + 256 * 1024;
/** Keys listed per scan request. */
const SCAN_PAGE = 256;

const META_SCHEMA = 2;

/** `<prefix>` without trailing slashes; refused when empty. */
function normalizePrefix(prefix: string): string {
  const trimmed = prefix.replace(/\/+$/, '');
  if (trimmed === '' || /[\0\n]/.test(trimmed)) throw invalidOption('etcdPrefix', 'a non-empty key prefix', prefix);
  return trimmed;
}

/** The next key after every key starting with `prefix` (etcd's prefix range end). */
function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

export async function openEtcdRecordBackend(root: string, options: LeaseTableOptions, deps: LeaseTableDeps, kind: RecordKind): Promise<EtcdRecordBackend> {
  const config = etcdClientConfig(options);
  const prefix = normalizePrefix(options.etcdPrefix);
  const fsLayer = deps.fsLayer ?? nodeFsLayer;
  // The local root keeps lease-table.json (so `auto` and `symfence leases` know the store) and
  // this host's staged findings; the records themselves are in etcd.
  const layout = new LeaseLayout(root, 1);
  await ensureDirectoryDurable(fsLayer, layout.root);
  const locker = createRecordLocker(options.coordination, {
    fsLayer,
    lockAcquireTimeoutMs: options.lockAcquireTimeoutMs,
    lockAgeHintMs: options.lockAgeHintMs,
    monotonicNowMs: deps.monotonicNowMs,
    native: deps.native,
    lockFdCacheSize: 0,
  });
  try {
    await ensureTableMeta(fsLayer, layout, kind, 'etcd', locker);
  } finally {
    await locker.close();
  }
  const connection = await connectEtcd(config, deps.monotonicNowMs);
  const backend = new EtcdRecordBackend(connection, layout.root, prefix, kind, options, deps.monotonicNowMs ?? (() => performance.now()));
  try {
    await backend.ensureMeta();
  } catch (error) {
    await backend.close();
    throw error;
  }
  return backend;
}

export class EtcdRecordBackend implements RecordBackend {
  readonly store = 'etcd';
  readonly optimistic = true;
  readonly maxBatchRecords = MAX_BATCH_RECORDS;
  readonly conflictRetryMs: number;
  /** `<prefix>/<kind>/` */
  readonly base: string;
  /** Last known session lease of each record this process read or wrote ('0': none). */
  readonly attachedLease = new Map<string, string>();
  #closed = false;

  constructor(
    readonly connection: EtcdConnection,
    readonly root: string,
    readonly prefix: string,
    readonly kind: RecordKind,
    readonly options: LeaseTableOptions,
    readonly monotonicNowMs: () => number,
  ) {
    this.base = `${prefix}/${kind}/`;
    this.conflictRetryMs = options.lockAcquireTimeoutMs;
  }

  recordKey(id: string): Buffer {
    return Buffer.from(`${this.base}r/${id}`);
  }

  lockKey(id: string): Buffer {
    return Buffer.from(`${this.base}l/${id}`);
  }

  /** Where a record lives, for scans and errors. */
  where(id: string): string {
    return `etcd:${this.base}r/${id}`;
  }

  /** Creates `<prefix>/<kind>/meta` or checks it: a prefix holds one kind of table of one store. */
  async ensureMeta(): Promise<void> {
    const key = Buffer.from(`${this.base}meta`);
    const wanted = canonicalJsonBytes({ schema: META_SCHEMA, kind: this.kind, store: 'etcd' });
    const kv = this.connection.client.kv;
    const result = await kv.txn(
      {
        compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
        success: [{ request_put: { key, value: wanted } }],
        failure: [{ request_range: { key } }],
      },
      this.connection.call(),
    );
    if (result.succeeded) return;
    const existing = result.responses[0]?.response_range?.kvs[0]?.value;
    if (!existing || !existing.equals(wanted)) {
      throw new LeaseCorruptError(`etcd key ${key.toString()} does not describe a ${this.kind} table of the etcd store: ${existing?.toString('utf8').slice(0, 200) ?? '(gone)'}`, { key: key.toString() });
    }
  }

  begin(): RecordBatch {
    if (this.#closed) throw new Error('etcd lease table is closed');
    return new EtcdBatch(this);
  }

  /** Reads the records of `ids` (at most `MAX_TXN_OPS` per request). */
  async readRecords(ids: readonly string[]): Promise<Map<string, ReadRecord>> {
    const out = new Map<string, ReadRecord>();
    for (let start = 0; start < ids.length; start += MAX_TXN_OPS) {
      const slice = ids.slice(start, start + MAX_TXN_OPS);
      const result = await this.connection.client.kv.txn({ compare: [], success: slice.map((id) => ({ request_range: { key: this.recordKey(id) } })), failure: [] }, this.connection.call());
      slice.forEach((id, i) => {
        const kv = result.responses[i]?.response_range?.kvs[0];
        if (!kv) {
          out.set(id, { read: { state: 'absent' }, modRevision: '0', lease: '0' });
          this.attachedLease.delete(id);
          return;
        }
        out.set(id, { read: this.parse(kv.value, id), modRevision: String(kv.mod_revision), lease: String(kv.lease) });
        if (String(kv.lease) !== '0') this.attachedLease.set(id, String(kv.lease));
        else this.attachedLease.delete(id);
      });
    }
    return out;
  }

  parse(value: Buffer, id: string): RecordRead {
    if (value.length > maxRecordBytes(this.kind)) return { state: 'corrupt', reason: `value of ${value.length} bytes exceeds the ${maxRecordBytes(this.kind)}-byte record bound` };
    return parseRecord(value, id, this.kind);
  }

  onSessionLost(listener: (event: { readonly reason: string; readonly sessionsLost: number }) => void): () => void {
    return this.connection.onSessionLost(({ reason }) => listener({ reason, sessionsLost: this.connection.stats.lost }));
  }

  async scan(): Promise<ScanEntry[]> {
    const prefix = Buffer.from(`${this.base}r/`);
    const end = prefixEnd(prefix);
    const entries: ScanEntry[] = [];
    let from = prefix;
    let revision: string | undefined;
    for (;;) {
      const page = await this.connection.client.kv.range({ key: from, range_end: end, limit: SCAN_PAGE, ...(revision !== undefined ? { revision } : {}) }, this.connection.call());
      // Every page at the first page's revision: one consistent snapshot.
      revision ??= String(page.header.revision);
      for (const kv of page.kvs) {
        const id = kv.key.subarray(prefix.length).toString('utf8');
        const where = `etcd:${kv.key.toString('utf8')}`;
        if (!isRecordId(id)) {
          entries.push({ state: 'corrupt', id: undefined, path: where, reason: 'key does not end in a record id' });
          continue;
        }
        const read = this.parse(kv.value, id);
        entries.push(read.state === 'valid' ? { state: 'valid', id, path: where, record: read.record } : { state: 'corrupt', id, path: where, reason: read.state === 'corrupt' ? read.reason : 'absent' });
      }
      if (!page.more || page.kvs.length === 0) break;
      from = Buffer.concat([page.kvs[page.kvs.length - 1]!.key, Buffer.from([0])]);
    }
    return entries;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.connection.release();
  }
}

interface ReadRecord {
  readonly read: RecordRead;
  /** '0' for an absent record. */
  readonly modRevision: string;
  /** Session lease the record is attached to ('0': none). */
  readonly lease: string;
}

class EtcdBatch implements RecordBatch {
  readonly #backend: EtcdRecordBackend;
  readonly #reads = new Map<string, ReadRecord>();
  readonly #staged = new Map<string, StagedRecord | null>();
  /** Exclusive locks held: id → the lock key's mod_revision. */
  readonly #locks = new Map<string, string>();
  /** The session lease the locks are attached to. */
  #lockLease = '0';
  #stagedBytes = 0;
  /** Read without the server (it could not be reached): answers only, no commit with writes. */
  #offline = false;
  #released = false;

  constructor(backend: EtcdRecordBackend) {
    this.#backend = backend;
  }

  async lock(ids: Iterable<string>, options?: LockOptions): Promise<void> {
    if (!options?.exclusive) return;
    const wanted = [...new Set(ids)].sort();
    const backend = this.#backend;
    const connection = backend.connection;
    const startMs = backend.monotonicNowMs();
    for (let attempt = 1; ; attempt++) {
      const leaseId = await connection.sessionLeaseId(backend.options.leaseTtlMs).catch((error: unknown) => {
        throw leaseIoError(`cannot open an etcd session for locks: ${(error as Error).message}`, { step: 'lock' }, error);
      });
      const result = await connection.client.kv
        .txn(
          {
            compare: wanted.map((id) => ({ key: backend.lockKey(id), target: 'Create' as const, result: 'Equal' as const, create_revision: 0 })),
            success: wanted.map((id) => ({ request_put: { key: backend.lockKey(id), value: Buffer.from(String(process.pid)), lease: leaseId } })),
            failure: [],
          },
          connection.call(),
        )
        .catch((error: unknown) => {
          throw leaseIoError(`etcd lock transaction failed: ${(error as Error).message}`, { step: 'lock', ids: wanted }, error);
        });
      if (result.succeeded) {
        const revision = String(result.header.revision);
        for (const id of wanted) this.#locks.set(id, revision);
        this.#lockLease = leaseId;
        return;
      }
      const waitedMs = backend.monotonicNowMs() - startMs;
      if (waitedMs >= backend.options.lockAcquireTimeoutMs) {
        throw new LockTimeoutError(`etcd lease record lock not acquired within ${backend.options.lockAcquireTimeoutMs} ms`, { ids: wanted, waitedMs: Math.round(waitedMs), attempts: attempt });
      }
      await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(200, 2 ** attempt)));
    }
  }

  async read(ids: Iterable<string>): Promise<void> {
    const pending = [...new Set(ids)].filter((id) => !this.#reads.has(id)).sort();
    if (pending.length === 0) return;
    let reads: Map<string, ReadRecord>;
    try {
      reads = await this.#backend.readRecords(pending);
    } catch (error) {
      if (this.answerOffline(pending)) return;
      throw leaseIoError(`etcd read failed: ${(error as Error).message}`, { step: 'read', ids: pending.slice(0, 8), restored: true }, error);
    }
    for (const [id, read] of reads) this.#reads.set(id, read);
  }

  /**
   * The server cannot be reached: when every record asked for was last seen attached to a session
   * this process has given up, each is definitely no longer ours — answer `absent` (a heartbeat
   * then reports it lost and the coordinator aborts its run) without waiting for the server.
   */
  private answerOffline(ids: readonly string[]): boolean {
    const connection = this.#backend.connection;
    const lost = ids.every((id) => {
      const lease = this.#backend.attachedLease.get(id);
      return lease !== undefined && lease !== '0' && connection.isLostLease(lease);
    });
    if (!lost) return false;
    this.#offline = true;
    for (const id of ids) this.#reads.set(id, { read: { state: 'absent' }, modRevision: '0', lease: '0' });
    return true;
  }

  view(id: string): RecordRead {
    const staged = this.#staged.get(id);
    if (staged !== undefined) return staged === null ? { state: 'absent' } : { state: 'valid', record: staged.record, bytes: staged.bytes };
    const read = this.#reads.get(id);
    if (!read) throw new Error(`record ${id} was not read in this batch`);
    return read.read;
  }

  stageAll(changes: Iterable<readonly [string, StagedRecord | null]>): void {
    const list = [...changes];
    let bytes = 0;
    for (const [id, next] of list) {
      const read = this.#reads.get(id);
      if (!read) throw new Error(`stage of ${id} without read`);
      if (read.read.state === 'corrupt') throw new Error(`stage over corrupt record ${id}: corrupt records are never overwritten`);
      bytes += this.#backend.recordKey(id).length + (next?.bytes.length ?? 0);
    }
    if (this.#stagedBytes + bytes > MAX_TXN_BYTES) {
      throw new LeaseRecordTooLargeError(`lease records of ${this.#stagedBytes + bytes} bytes do not fit one etcd transaction (at most ${MAX_TXN_BYTES} bytes); nothing was written`, {
        bytes: this.#stagedBytes + bytes,
        limit: MAX_TXN_BYTES,
        ids: list.map(([id]) => id).slice(0, 8),
      });
    }
    this.#stagedBytes += bytes;
    for (const [id, next] of list) this.#staged.set(id, next);
  }

  async commit(): Promise<BatchReport> {
    if (this.#staged.size === 0) return EMPTY_BATCH_REPORT;
    const backend = this.#backend;
    const connection = backend.connection;
    const ids = [...this.#staged.keys()].sort();
    if (this.#offline) throw leaseIoError('etcd cannot be reached; nothing was written', { step: 'commit', ids: ids.slice(0, 8), restored: true }, undefined);
    if (this.#locks.size > 0 && connection.isLostLease(this.#lockLease)) {
      throw leaseIoError('the etcd session holding this batch\'s locks was lost; nothing was written', { step: 'commit', ids: ids.slice(0, 8), restored: true }, undefined);
    }
    const needsSession = ids.some((id) => this.#staged.get(id)?.record.status === 'leased');
    let leaseId = '0';
    if (needsSession) {
      try {
        leaseId = await connection.sessionLeaseId(backend.options.leaseTtlMs);
      } catch (error) {
        throw leaseIoError(`cannot open an etcd session: ${(error as Error).message}; nothing was written`, { step: 'session', ids: ids.slice(0, 8), restored: true }, error);
      }
    }
    const compare = [];
    const success = [];
    for (const id of ids) {
      const read = this.#reads.get(id)!;
      const key = backend.recordKey(id);
      compare.push(read.modRevision === '0' ? { key, target: 'Create' as const, result: 'Equal' as const, create_revision: 0 } : { key, target: 'Mod' as const, result: 'Equal' as const, mod_revision: read.modRevision });
      if (read.read.state === 'valid' && read.read.record.status === 'committing') {
        const held = this.#locks.get(id);
        const lockKey = backend.lockKey(id);
        // A committing record may be under a survivor's exclusive replay: wait for it to finish.
        compare.push(held === undefined ? { key: lockKey, target: 'Create' as const, result: 'Equal' as const, create_revision: 0 } : { key: lockKey, target: 'Mod' as const, result: 'Equal' as const, mod_revision: held });
      }
      const next = this.#staged.get(id);
      success.push(next ? { request_put: { key, value: next.bytes, lease: next.record.status === 'leased' ? leaseId : 0 } } : { request_delete_range: { key } });
    }
    let result;
    try {
      result = await connection.client.kv.txn({ compare, success, failure: [] }, connection.call());
    } catch (error) {
      const restored = await this.unchanged(ids);
      throw leaseIoError(`etcd transaction failed: ${(error as Error).message}${restored ? '; nothing was written' : ''}`, { step: 'commit', ids: ids.slice(0, 8), restored }, error);
    }
    if (!result.succeeded) {
      if (this.#locks.size > 0) throw leaseIoError('an exclusively locked etcd batch found its records changed (its lock was lost); nothing was written', { step: 'commit', ids: ids.slice(0, 8), restored: true }, undefined);
      throw new BatchConflictError(ids);
    }
    // Only records on a session need remembering (offline answers); the map stays as small as
    // this process's live leases.
    for (const id of ids) {
      if (this.#staged.get(id)?.record.status === 'leased') backend.attachedLease.set(id, leaseId);
      else backend.attachedLease.delete(id);
    }
    return { published: ids.length, fileBarriers: 1, directoryBarriers: 0, directories: [] };
  }

  /** After an unknown outcome: true when every staged record is still as read (nothing applied). */
  private async unchanged(ids: readonly string[]): Promise<boolean> {
    try {
      const now = await this.#backend.readRecords(ids);
      return ids.every((id) => now.get(id)?.modRevision === this.#reads.get(id)?.modRevision);
    } catch {
      return false;
    }
  }

  async release(): Promise<void> {
    if (this.#released) return;
    this.#released = true;
    if (this.#locks.size === 0) return;
    const backend = this.#backend;
    const locks = [...this.#locks];
    this.#locks.clear();
    // Each lock is deleted only if it is still ours; a failure leaves it to expire with the session.
    await Promise.all(
      locks.map(([id, revision]) =>
        backend.connection.client.kv
          .txn(
            {
              compare: [{ key: backend.lockKey(id), target: 'Mod', result: 'Equal', mod_revision: revision }],
              success: [{ request_delete_range: { key: backend.lockKey(id) } }],
              failure: [],
            },
            backend.connection.call(),
          )
          .catch(() => undefined),
      ),
    );
  }
}

/** Scans an etcd table for `symfence leases` (read-only: no metadata written, no session). */
export async function scanEtcdTable(root: string, options: LeaseTableOptions, kind: RecordKind): Promise<ScanEntry[]> {
  const connection = await connectEtcd(etcdClientConfig(options));
  const backend = new EtcdRecordBackend(connection, path.resolve(root), normalizePrefix(options.etcdPrefix), kind, options, () => performance.now());
  try {
    return await backend.scan();
  } finally {
    await backend.close();
  }
}
