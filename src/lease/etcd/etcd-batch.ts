/**
 * One batch of the etcd store (etcd-backend.ts has the keys, the protocol and why): reads
 * with revisions, staging within the transaction limits, and one compare-and-write commit.
 */
import { LeaseRecordTooLargeError } from '../../errors.js';
import type { ICompare } from 'etcd3/lib/rpc.js';
import type { EtcdRecordBackend } from './etcd-backend.js';
import { leaseIoError } from '../lease-io-error.js';
import { carriesAnswers, type RecordRead } from '../lease-record.js';
import { BatchConflictError, EMPTY_BATCH_REPORT, type BatchReport, type FetchedRead, type StagedChange, type StagedRecord, type StoreBatch } from '../backend-contract.js';

/** etcd's default `--max-txn-ops`: compares, and separately writes, per transaction. */
export const MAX_TXN_OPS = 128;
/**
 * Records a batch compares: a full target group with its answer records. A record the batch writes
 * costs a compare (and its write), as does one it took from the quiet records or read guarded;
 * a pinned read costs none (answer-pins.ts). etcd counts compares and writes separately against
 * `MAX_TXN_OPS`; reads are split into requests of `MAX_TXN_OPS` at one revision.
 */
export const MAX_BATCH_RECORDS = MAX_TXN_OPS;
/** Largest total of keys and values one commit writes (etcd's default request limit is 1.5 MiB). */
export const MAX_TXN_BYTES = 1024 * 1024 + 256 * 1024;
export interface ReadRecord {
  readonly read: RecordRead;
  /** '0' for an absent record. */
  readonly modRevision: string;
  /** Session lease the record is attached to ('0': none). */
  readonly lease: string;
}

export class EtcdBatch implements StoreBatch {
  readonly #backend: EtcdRecordBackend;
  readonly #reads = new Map<string, ReadRecord>();
  /** Read without the server (it could not be reached): answers only, no commit with writes. */
  #offline = false;
  /** Ids this batch took from the backend's quiet records instead of the server (compared at commit). */
  readonly #served = new Set<string>();
  /**
   * Ids read without their own lock (`fetch`'s `guarded`): compared at commit like served ones.
   * The record that guards them elsewhere proves nothing here: absent at the read and absent
   * again at the commit, it passes its compare though another coordinator claimed and released it
   * in between, and wrote the guarded record.
   */
  readonly #guarded = new Set<string>();

  constructor(backend: EtcdRecordBackend) {
    this.#backend = backend;
  }

  /** Optimistic: nothing is taken; the commit compares what was read. */
  async lock(): Promise<void> {}

  /**
   * Reads `ids`: those the backend knows quiet (absent or `done`, `EtcdRecordBackend.quiet`) from
   * there, the rest from the server. Every record taken from there is compared at commit (written
   * or not), so the commit lands only if each was still what this batch decided from. A batch that
   * writes nothing has decided only refusals on them (`answered`, `backoff`), which a newer value
   * of an answer record would only confirm: answers are added, open rows only move later.
   * `pinned` ids always come from the server and are compared never: the operation checks them
   * against the answer pins of its lease records, which are compared (answer-pins.ts).
   */
  async fetch(ids: readonly string[], guarded?: ReadonlySet<string>, pinned?: ReadonlySet<string>): Promise<Map<string, FetchedRead>> {
    if (guarded !== undefined) for (const id of ids) if (guarded.has(id)) this.#guarded.add(id);
    const fetched = new Map<string, FetchedRead>();
    const ask: string[] = [];
    for (const id of ids) {
      const known = pinned?.has(id) === true ? undefined : this.#backend.quiet.get(id);
      if (known === undefined) ask.push(id);
      else {
        this.#reads.set(id, known);
        this.#served.add(id);
        fetched.set(id, known.read);
      }
    }
    if (ask.length === 0) return fetched;
    let reads: Map<string, ReadRecord>;
    try {
      reads = await this.#backend.readRecords(ask);
    } catch (error) {
      const offline = this.answerOffline(ask, error);
      if (offline === undefined) throw leaseIoError(`etcd read failed: ${(error as Error).message}`, { step: 'read', ids: ask.slice(0, 8), restored: true }, error);
      for (const [id, read] of offline) fetched.set(id, read);
      return fetched;
    }
    for (const [id, read] of reads) {
      this.#reads.set(id, read);
      fetched.set(id, read.read);
    }
    return fetched;
  }

  /**
   * The server cannot be reached. A record last seen attached to a session this process has given
   * up is definitely no longer ours: it reads as `absent` (a heartbeat then reports it lost and
   * the coordinator aborts its run) without waiting for the server. Any other record is
   * unreadable: an operation that looks at one fails with `ERR_LEASE_IO` (so a claim sharing the
   * I/O thread's batch does not hide a loss from a heartbeat). Undefined when no record is known lost.
   */
  private answerOffline(ids: readonly string[], cause: unknown): Map<string, FetchedRead> | undefined {
    const connection = this.#backend.connection;
    const isLost = (id: string): boolean => {
      const lease = this.#backend.attachedLease.get(id);
      return lease !== undefined && lease !== '0' && connection.isLostLease(lease);
    };
    if (!ids.some(isLost)) return undefined;
    this.#offline = true;
    const fetched = new Map<string, FetchedRead>();
    for (const id of ids) {
      if (isLost(id)) {
        this.#reads.set(id, { read: { state: 'absent' }, modRevision: '0', lease: '0' });
        fetched.set(id, { state: 'absent' });
      } else fetched.set(id, { state: 'unreadable', error: cause });
    }
    return fetched;
  }

  /** Ids read earlier in this batch, now relied on without their lock: compared at commit (`fetch`). */
  guard(ids: readonly string[]): void {
    for (const id of ids) if (this.#reads.has(id)) this.#guarded.add(id);
  }

  /** A batch's writes must fit one transaction (`MAX_TXN_BYTES`): refused whole, before staging. */
  admit(changes: readonly (readonly [string, StagedRecord | null])[], staged: ReadonlyMap<string, StagedRecord | null>): void {
    // Record ids are ASCII (identity.ts), so a key's size is the prefix's bytes plus the id's
    // length: no key is built here, for every staged record on every operation of the batch.
    const prefixBytes = this.#backend.recordKeyPrefixBytes;
    const sizeOf = (id: string, next: StagedRecord | null): number => prefixBytes + id.length + (next?.bytes.length ?? 0);
    const incoming = new Map(changes);
    let bytes = 0;
    for (const [id, next] of staged) if (!incoming.has(id)) bytes += sizeOf(id, next);
    for (const [id, next] of incoming) bytes += sizeOf(id, next);
    if (bytes > MAX_TXN_BYTES) {
      throw new LeaseRecordTooLargeError(`lease records of ${bytes} bytes do not fit one etcd transaction (at most ${MAX_TXN_BYTES} bytes); nothing was written`, {
        bytes,
        limit: MAX_TXN_BYTES,
        ids: changes.map(([id]) => id).slice(0, 8),
      });
    }
  }

  async commit(changes: readonly StagedChange[]): Promise<BatchReport> {
    if (changes.length === 0) {
      await this.confirmServed();
      return EMPTY_BATCH_REPORT;
    }
    const backend = this.#backend;
    const connection = backend.connection;
    const staged = new Map(changes.map((change) => [change.id, change.next]));
    const ids = [...staged.keys()].sort();
    if (this.#offline) throw leaseIoError('etcd cannot be reached; nothing was written', { step: 'commit', ids: ids.slice(0, 8), restored: true }, undefined);
    const needsSession = ids.some((id) => staged.get(id)?.record.status === 'leased');
    let leaseId = '0';
    if (needsSession) {
      try {
        leaseId = await connection.sessionLeaseId(backend.options.leaseTtlMs);
      } catch (error) {
        throw leaseIoError(`cannot open an etcd session: ${(error as Error).message}; nothing was written`, { step: 'session', ids: ids.slice(0, 8), restored: true }, error);
      }
    }
    const compare: ICompare[] = [];
    const success = [];
    const attached = new Set<string>();
    // Records taken from the quiet ones and not written: compared all the same (`fetch`).
    for (const id of this.#served) if (!staged.has(id)) compare.push(this.unchangedSinceRead(id));
    for (const id of this.#guarded) if (!staged.has(id) && !this.#served.has(id)) compare.push(this.unchangedSinceRead(id));
    for (const id of ids) {
      compare.push(this.unchangedSinceRead(id));
      const key = backend.recordKey(id);
      const next = staged.get(id);
      // Only leased *target* records ride the session on the server (a dead coordinator's targets
      // are freed at once); a leased work record keeps its payload until its TTL ends, so another
      // coordinator can take the work over (recoverExpired), as in every store. A lease record
      // of an older table that still carries answers (docs/lease-format.md "Answers") rides no
      // session either: the server would delete its answers with it. Its lease ends by its TTL.
      const attach = next?.record.status === 'leased' && backend.kind === 'target' && !carriesAnswers(next.record);
      if (attach) attached.add(id);
      success.push(next ? { request_put: { key, value: next.bytes, lease: attach ? leaseId : 0 } } : { request_delete_range: { key } });
    }
    let result;
    try {
      result = await connection.client.kv.txn({ compare, success, failure: [] }, connection.call());
    } catch (error) {
      backend.quiet.forget([...ids, ...this.#served]);
      const restored = await this.unchanged(ids);
      throw leaseIoError(`etcd transaction failed: ${(error as Error).message}${restored ? '; nothing was written' : ''}`, { step: 'commit', ids: ids.slice(0, 8), restored }, error);
    }
    if (!result.succeeded) {
      // Some record was not what this batch read: the run again reads them all from the server.
      backend.quiet.forget([...ids, ...this.#served]);
      throw new BatchConflictError(ids);
    }
    const revision = String(result.header.revision);
    for (const id of ids) {
      const next = staged.get(id);
      backend.quiet.note(backend.kind, id, next ? { read: { state: 'valid', record: next.record, bytes: next.bytes }, modRevision: revision, lease: attached.has(id) ? leaseId : '0' } : { read: { state: 'absent' }, modRevision: '0', lease: '0' });
    }
    // Leased records written under a session are remembered with it (offline answers): target
    // records the server attached, and work records, which a given-up session makes ours no more
    // either; a target record with answers rode no session, so losing one says nothing of it. The
    // map stays as small as this process's live leases.
    for (const id of ids) {
      const record = staged.get(id)?.record;
      if (record?.status === 'leased' && (backend.kind !== 'target' || attached.has(id))) backend.attachedLease.set(id, leaseId);
      else backend.attachedLease.delete(id);
    }
    return { published: ids.length, fileBarriers: 1, directoryBarriers: 0, directories: [] };
  }

  /**
   * A batch that writes nothing but decided from records taken from the quiet ones: one
   * transaction of compares alone confirms they are still current, so what it answered (a refusal
   * `answered` rather than `backoff`, say) is what a read now would give; otherwise
   * `BatchConflictError`, and the run again reads them from the server.
   */
  private async confirmServed(): Promise<void> {
    if (this.#served.size === 0 || this.#offline) return;
    const backend = this.#backend;
    const compare = [...this.#served].map((id) => this.unchangedSinceRead(id));
    let succeeded: boolean;
    try {
      succeeded = (await backend.connection.client.kv.txn({ compare, success: [], failure: [] }, backend.connection.call())).succeeded;
    } catch (error) {
      backend.quiet.forget(this.#served);
      throw leaseIoError(`etcd read failed: ${(error as Error).message}`, { step: 'read', ids: [...this.#served].slice(0, 8), restored: true }, error);
    }
    if (!succeeded) {
      backend.quiet.forget(this.#served);
      throw new BatchConflictError([...this.#served]);
    }
  }

  /** The compare that holds while `id` is as this batch read it (absent: never created since). */
  private unchangedSinceRead(id: string): ICompare {
    const key = this.#backend.recordKey(id);
    const read = this.#reads.get(id)!;
    return read.modRevision === '0' ? { key, target: 'Create', result: 'Equal', create_revision: 0 } : { key, target: 'Mod', result: 'Equal', mod_revision: read.modRevision };
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

  /** Nothing is held between the read and the commit. */
  async release(): Promise<void> {}
}
