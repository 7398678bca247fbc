/**
 * One batch of the etcd store (etcd-backend.ts has the keys, the protocol and why): reads
 * with revisions, staging within the transaction limits, one compare-and-write commit, and the
 * exclusive lock keys of a batch with side effects.
 */
import { defineError, LockTimeoutError } from '../../errors.js';
import type { EtcdRecordBackend } from './etcd-backend.js';
import { leaseIoError } from '../lease-io-error.js';
import type { RecordRead } from '../lease-record.js';
import { BatchConflictError, EMPTY_BATCH_REPORT, type BatchReport, type LockOptions, type RecordBatch, type StagedRecord } from '../backend-contract.js';

/** A record or batch does not fit one etcd transaction. Nothing was written. */
export const LeaseRecordTooLargeError = defineError('ERR_LEASE_RECORD_TOO_LARGE', 'LeaseRecordTooLargeError');

/** etcd's default `--max-txn-ops`: compares, and separately writes, per transaction. */
export const MAX_TXN_OPS = 128;
/** Records per batch: each may need a record compare and a lock compare. */
export const MAX_BATCH_RECORDS = MAX_TXN_OPS / 2;
/** Largest total of keys and values one commit writes (etcd's default request limit is 1.5 MiB). */
export const MAX_TXN_BYTES = 1024 * 1024 + 256 * 1024;
export interface ReadRecord {
  readonly read: RecordRead;
  /** '0' for an absent record. */
  readonly modRevision: string;
  /** Session lease the record is attached to ('0': none). */
  readonly lease: string;
}

export class EtcdBatch implements RecordBatch {
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
  /** Records the server could not be asked about (offline batch): id → the read's failure. */
  readonly #unreadable = new Map<string, unknown>();
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
      if (this.answerOffline(pending, error)) return;
      throw leaseIoError(`etcd read failed: ${(error as Error).message}`, { step: 'read', ids: pending.slice(0, 8), restored: true }, error);
    }
    for (const [id, read] of reads) this.#reads.set(id, read);
  }

  /**
   * The server cannot be reached. A record last seen attached to a session this process has given
   * up is definitely no longer ours: it reads as `absent` (a heartbeat then reports it lost and
   * the coordinator aborts its run) without waiting for the server. Any other record is unknown:
   * an operation that looks at one fails with `ERR_LEASE_IO` (so a claim sharing the I/O thread's
   * batch does not hide a loss from a heartbeat). False when no record is known lost.
   */
  private answerOffline(ids: readonly string[], cause: unknown): boolean {
    const connection = this.#backend.connection;
    const isLost = (id: string): boolean => {
      const lease = this.#backend.attachedLease.get(id);
      return lease !== undefined && lease !== '0' && connection.isLostLease(lease);
    };
    if (!ids.some(isLost)) return false;
    this.#offline = true;
    for (const id of ids) {
      if (isLost(id)) this.#reads.set(id, { read: { state: 'absent' }, modRevision: '0', lease: '0' });
      else this.#unreadable.set(id, cause);
    }
    return true;
  }

  view(id: string): RecordRead {
    const staged = this.#staged.get(id);
    if (staged !== undefined) return staged === null ? { state: 'absent' } : { state: 'valid', record: staged.record, bytes: staged.bytes };
    const read = this.#reads.get(id);
    if (!read) {
      if (this.#unreadable.has(id)) throw leaseIoError(`etcd cannot be reached to read lease record ${id}`, { step: 'read', ids: [id], restored: true }, this.#unreadable.get(id));
      throw new Error(`record ${id} was not read in this batch`);
    }
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
      // Only leased *target* records ride the session on the server (a dead coordinator's targets
      // are freed at once); a leased work record keeps its payload until its TTL ends, so another
      // coordinator can take the work over (recoverExpired), as in every store.
      const attach = next?.record.status === 'leased' && backend.kind === 'target';
      success.push(next ? { request_put: { key, value: next.bytes, lease: attach ? leaseId : 0 } } : { request_delete_range: { key } });
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
    // Leased records written under a session are remembered with it (offline answers), whether
    // or not the server attached them; the map stays as small as this process's live leases.
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

