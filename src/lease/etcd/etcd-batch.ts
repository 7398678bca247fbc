/**
 * One batch of the etcd store (etcd-backend.ts has the keys, the protocol and why): reads
 * with revisions, staging within the transaction limits, and one compare-and-write commit.
 */
import { LeaseRecordTooLargeError } from '../../errors.js';
import type { ICompare, ITxnResponse } from 'etcd3/lib/rpc.js';
import type { EtcdRecordBackend } from './etcd-backend.js';
import { MAX_ANSWER_VERSION } from './answer-version-keys.js';
import { etcdIoError } from './etcd-connection.js';
import { leaseIoError } from '../lease-io-error.js';
import { carriesAnswers, type RecordRead } from '../lease-record.js';
import { BatchConflictError, EMPTY_BATCH_REPORT, type BatchReport, type DeclaredAnswer, type FetchedRead, type StagedChange, type StagedRecord, type StoreBatch } from '../backend-contract.js';

/** etcd's default `--max-txn-ops`: compares, and separately writes, per transaction. */
export const MAX_TXN_OPS = 128;
/**
 * Records a batch compares: a full target group with its answer records. A record the batch writes
 * costs a compare (and its write), as does one it took from the quiet records or read guarded; an
 * answer record read pinned shares the compare of its lease record (etcd-backend.ts "Answer
 * versions"). etcd counts compares and writes separately against `MAX_TXN_OPS`; reads are split
 * into requests of `MAX_TXN_OPS` at one revision.
 */
export const MAX_BATCH_RECORDS = MAX_TXN_OPS;
/** Bytes an answer version's key has beyond a record key: `/` and the version suffix. */
const ANSWER_KEY_EXTRA = 17;
/** Largest total of keys and values one commit writes (etcd's default request limit is 1.5 MiB). */
export const MAX_TXN_BYTES = 1024 * 1024 + 256 * 1024;
export interface ReadRecord {
  readonly read: RecordRead;
  /** '0' for an absent record. */
  readonly modRevision: string;
  /** Session lease the record is attached to ('0': none). */
  readonly lease: string;
  /**
   * Answer records (etcd-backend.ts "Answer versions"): the id of the branch's lease record, and
   * the version read (0: none yet). `modRevision` is then that version's key's.
   */
  readonly answers?: { readonly leaseId: string; readonly version: number };
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
  /** Lease record id → the id of its branch's answer record, for each answer record this batch read. */
  readonly #answerOf = new Map<string, string>();
  /** Lease record id → its branch's answer record id, to read with it (`readAlong`). */
  readonly #along = new Map<string, string>();
  /** Answer records read with their lease records (`readAlong`), until a `fetch` asks for them. */
  readonly #alongReads = new Map<string, ReadRecord>();
  /** Lease record id → the answer version an operation decided from without a read (`declare`). */
  readonly #declared = new Map<string, number>();
  /** What `#declared` came from: their answer records are forgotten from the quiet records with the reads on a conflict. */
  readonly #declaredAnswers: DeclaredAnswer[] = [];
  /** Bytes of the keys and values staged so far (`admit`), and each staged id's share. */
  #stagedBytes = 0;
  readonly #stagedSizes = new Map<string, number>();

  constructor(backend: EtcdRecordBackend) {
    this.#backend = backend;
  }

  /** Optimistic: nothing is taken; the commit compares what was read. */
  async lock(): Promise<void> {}

  /**
   * Reads `ids`: those the backend knows quiet (absent or `done`, `EtcdRecordBackend.quiet`) from
   * there, the rest from the server. Every record taken from there is compared at commit (written
   * or not), so the commit lands only if each was still what this batch decided from; a batch that
   * writes nothing confirms them with compares alone (`confirmServed`). `pinned` answer records
   * are read the same way; their lease record's compare covers them (`checks`).
   */
  async fetch(ids: readonly string[], guarded?: ReadonlySet<string>): Promise<Map<string, FetchedRead>> {
    if (guarded !== undefined) for (const id of ids) if (guarded.has(id)) this.#guarded.add(id);
    const fetched = new Map<string, FetchedRead>();
    const ask: string[] = [];
    for (const id of ids) {
      // Read from the server with its lease record, at this batch's revision (`readAlong`).
      const along = this.#alongReads.get(id);
      if (along !== undefined) {
        this.#alongReads.delete(id);
        this.note(id, along);
        fetched.set(id, along.read);
        continue;
      }
      const known = this.#backend.quiet.get(id);
      if (known === undefined) ask.push(id);
      else {
        this.note(id, known);
        this.#served.add(id);
        fetched.set(id, known.read);
      }
    }
    if (ask.length === 0) return fetched;
    const asked = this.#along.size > 0 ? new Set(ask) : undefined;
    const along = asked === undefined ? [] : ask.flatMap((id) => {
      const answerId = this.#along.get(id);
      return answerId !== undefined && !asked.has(answerId) && !this.#reads.has(answerId) ? [answerId] : [];
    });
    let reads: Map<string, ReadRecord>;
    try {
      reads = await this.#backend.readRecords(along.length > 0 ? [...ask, ...along] : ask);
    } catch (error) {
      const offline = this.answerOffline(ask, error);
      if (offline === undefined) throw etcdIoError(`etcd read failed: ${(error as Error).message}`, { step: 'read', ids: ask.slice(0, 8), restored: true }, error);
      for (const [id, read] of offline) fetched.set(id, read);
      return fetched;
    }
    const alongIds = new Set(along);
    for (const [id, read] of reads) {
      if (alongIds.has(id)) {
        this.#alongReads.set(id, read);
        continue;
      }
      this.note(id, read);
      fetched.set(id, read.read);
    }
    return fetched;
  }

  readAlong(pairs: readonly (readonly [string, string])[]): void {
    for (const [answerId, leaseId] of pairs) this.#along.set(leaseId, answerId);
  }

  /** After a failed commit: every record this batch relied on is read from the server next time. */
  private forgetAll(): void {
    this.#backend.quiet.forget(this.#reads.keys());
    this.#backend.quiet.forget(this.#declaredAnswers.map((d) => d.answerId));
  }

  private note(id: string, read: ReadRecord): void {
    this.#reads.set(id, read);
    if (read.answers !== undefined) this.#answerOf.set(read.answers.leaseId, id);
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

  /**
   * Answer versions operations decided from without reading them: each is checked at commit in its
   * lease record's compare, written or not, as a record taken from the quiet ones is.
   */
  declare(declared: readonly DeclaredAnswer[]): void {
    for (const answer of declared) {
      const { leaseId, version } = answer;
      this.#declaredAnswers.push(answer);
      const known = this.#declared.get(leaseId);
      // Two operations of the batch that knew different versions: one knew an old one.
      if (known !== undefined && known !== version) {
        this.forgetAll();
        throw new BatchConflictError([leaseId]);
      }
      this.#declared.set(leaseId, version);
    }
  }

  /** Ids read earlier in this batch, now relied on without their lock: compared at commit (`fetch`). */
  guard(ids: readonly string[]): void {
    for (const id of ids) if (this.#reads.has(id)) this.#guarded.add(id);
  }

  /**
   * A batch's writes must fit one transaction (`MAX_TXN_BYTES`): refused whole, before staging.
   * The bytes staged so far are kept as a running total (`#stagedBytes`, each id's share in
   * `#stagedSizes`), so a batch of many operations is checked in time linear in its records.
   */
  admit(changes: readonly (readonly [string, StagedRecord | null])[]): void {
    // Record ids are ASCII (identity.ts), so a key's size is the prefix's bytes plus the id's
    // length: no key is built here, for every staged record on every operation of the batch.
    const prefixBytes = this.#backend.recordKeyPrefixBytes;
    // An answer record's key is its lease record's id and a version suffix (etcd-backend.ts).
    const sizeOf = (id: string, next: StagedRecord | null): number => prefixBytes + id.length + (next?.record.role === 'answers' ? ANSWER_KEY_EXTRA : 0) + (next?.bytes.length ?? 0);
    const incoming = new Map<string, number>();
    for (const [id, next] of changes) incoming.set(id, sizeOf(id, next));
    let bytes = this.#stagedBytes;
    for (const [id, size] of incoming) bytes += size - (this.#stagedSizes.get(id) ?? 0);
    if (bytes > MAX_TXN_BYTES) {
      throw new LeaseRecordTooLargeError(`lease records of ${bytes} bytes do not fit one etcd transaction (at most ${MAX_TXN_BYTES} bytes); nothing was written`, {
        bytes,
        limit: MAX_TXN_BYTES,
        ids: changes.map(([id]) => id).slice(0, 8),
      });
    }
    // A deletion the overlay finds to be no change stays counted: the bound errs on the safe side.
    for (const [id, size] of incoming) this.#stagedSizes.set(id, size);
    this.#stagedBytes = bytes;
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
        throw etcdIoError(`cannot open an etcd session: ${(error as Error).message}; nothing was written`, { step: 'session', ids: ids.slice(0, 8), restored: true }, error);
      }
    }
    // Records taken from the quiet ones or read guarded are checked whether written or not (`fetch`).
    const compare = this.checks([this.#served, this.#declared.keys(), this.#guarded, ids]);
    const success = [];
    const attached = new Set<string>();
    // Answer versions the new ones replace: removed in the same transaction when it has room.
    const superseded: Buffer[] = [];
    for (const id of ids) {
      const next = staged.get(id);
      const answers = this.#reads.get(id)?.answers;
      if (answers !== undefined) {
        // A new version of an answer record, at a key of its own (etcd-backend.ts "Answer versions").
        const version = next?.record.version;
        if (next === null || next === undefined || typeof version !== 'number' || version <= answers.version || version > MAX_ANSWER_VERSION) {
          this.forgetAll();
          throw leaseIoError(`etcd answer record ${id} must be written as a version after ${answers.version}; nothing was written`, { step: 'commit', ids: [id], restored: true }, undefined);
        }
        success.push({ request_put: { key: backend.answerKey(answers.leaseId, version), value: next.bytes } });
        if (answers.version > 0) superseded.push(backend.answerKey(answers.leaseId, answers.version));
        continue;
      }
      if (next?.record.role === 'answers') {
        this.forgetAll();
        throw leaseIoError(`etcd answer record ${id} was not related to its lease record; nothing was written`, { step: 'commit', ids: [id], restored: true }, undefined);
      }
      const key = backend.recordKey(id);
      // Only leased *target* records ride the session on the server (a dead coordinator's targets
      // are freed at once); a leased work record keeps its payload until its TTL ends, so another
      // coordinator can take the work over (recoverExpired), as in every store. A lease record
      // of an older table that still carries answers (docs/lease-format.md "Answers") rides no
      // session either: the server would delete its answers with it. Its lease ends by its TTL.
      const attach = next?.record.status === 'leased' && backend.kind === 'target' && !carriesAnswers(next.record);
      if (attach) attached.add(id);
      success.push(next ? { request_put: { key, value: next.bytes, lease: attach ? leaseId : 0 } } : { request_delete_range: { key } });
    }
    const sweepLater = success.length + superseded.length > MAX_TXN_OPS;
    if (!sweepLater) for (const key of superseded) success.push({ request_delete_range: { key } });
    const request = { compare, success, failure: [] };
    let response: ITxnResponse | undefined;
    let failure: unknown;
    try {
      response = await connection.client.kv.txn(request, connection.call());
    } catch (error) {
      failure = error;
    }
    let revision: string;
    if (response === undefined) {
      this.forgetAll();
      // The outcome is unknown: the answer was lost, or etcd applied the transaction and answered
      // an error all the same (the write that crosses its space quota). The records read again say.
      const after = await this.readBack(ids, staged);
      if (after.applied === undefined) {
        const restored = after.unchanged;
        throw etcdIoError(`etcd transaction failed: ${(failure as Error).message}${restored ? '; nothing was written' : ''}`, { step: 'commit', ids: ids.slice(0, 8), restored }, failure);
      }
      revision = after.applied;
    } else if (!response.succeeded) {
      this.forgetAll();
      // Some record was not what this batch read: the run again reads them all from the server.
      if (connection.sends(request) <= 1) throw new BatchConflictError(ids);
      // Unless the client sent the transaction again after a failure on the wire: the first
      // attempt may have been applied, and this one's compares failed on its own writes.
      const after = await this.readBack(ids, staged);
      if (after.unread === true) throw etcdIoError('etcd transaction sent again after a failure on the wire, and its records could not be read back: whether it was applied is unknown', { step: 'commit', ids: ids.slice(0, 8), restored: false }, undefined);
      if (after.applied === undefined) throw new BatchConflictError(ids);
      revision = after.applied;
    } else revision = String(response.header.revision);
    for (const id of ids) {
      const next = staged.get(id);
      const answers = this.#reads.get(id)?.answers;
      if (answers !== undefined && next) backend.quiet.note(backend.kind, id, { read: { state: 'valid', record: next.record, bytes: next.bytes }, modRevision: revision, lease: '0', answers: { leaseId: answers.leaseId, version: next.record.version! } });
      else backend.quiet.note(backend.kind, id, next ? { read: { state: 'valid', record: next.record, bytes: next.bytes }, modRevision: revision, lease: attached.has(id) ? leaseId : '0' } : { read: { state: 'absent' }, modRevision: '0', lease: '0' });
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
    if (sweepLater) await this.removeSuperseded(superseded);
    return { published: ids.length, fileBarriers: 1, directoryBarriers: 0, directories: [] };
  }

  /**
   * Removes answer versions a committed batch replaced, in transactions of their own (the batch's
   * own had no room). Nothing reads a replaced version (a read takes the newest, a claim's compare
   * covers only newer ones), so this may fail: a version left behind is space only, listed by
   * `symfence leases` and removed by `symfence leases check`.
   */
  private async removeSuperseded(keys: readonly Buffer[]): Promise<void> {
    const connection = this.#backend.connection;
    for (let start = 0; start < keys.length; start += MAX_TXN_OPS) {
      const success = keys.slice(start, start + MAX_TXN_OPS).map((key) => ({ request_delete_range: { key } }));
      // A failure leaves the versions behind (see above); the batch has committed all the same.
      await connection.client.kv.txn({ compare: [], success, failure: [] }, connection.call()).catch(() => undefined);
    }
  }

  /**
   * The compares that hold while every record `idLists` names, and every answer record this batch
   * read of those records' branches, is as this batch read it. A lease record read absent whose
   * branch's answer record the batch read (at version n, 0 for none) is checked with that answer
   * record in one compare on keys that do not exist: `[lease key, key of version n)` is empty — no
   * lease taken, no newer version written (etcd-backend.ts "Answer versions"). Any other answer
   * record: no version after n; any other record: `unchangedSinceRead`. At most one compare per
   * lease record and per guarded answer record, so never more than the executor counted.
   */
  private checks(idLists: readonly Iterable<string>[]): ICompare[] {
    const backend = this.#backend;
    const compare: ICompare[] = [];
    const done = new Set<string>();
    for (const ids of idLists) {
      for (const id of ids) {
        if (done.has(id)) continue;
        done.add(id);
        const read = this.#reads.get(id)!;
        // An answer record read as some other record (its relation was missing then): never trusted.
        if (read.answers === undefined && backend.answerLeaseOf(id) !== undefined) {
          this.forgetAll();
          throw leaseIoError(`etcd answer record ${id} was read without its lease record; nothing was written`, { step: 'commit', ids: [id], restored: true }, undefined);
        }
        const leaseId = read.answers?.leaseId ?? id;
        const answerId = read.answers !== undefined ? id : this.#answerOf.get(id);
        // A corrupt answer record only refuses claims (`corrupt`): nothing is decided from it to check.
        const answerRecord = answerId === undefined ? undefined : this.#reads.get(answerId);
        if (answerRecord?.read.state === 'corrupt') {
          if (answerId !== undefined) done.add(answerId);
          if (read.answers !== undefined) continue;
        }
        const answerRead = answerRecord?.read.state === 'corrupt' ? undefined : answerRecord?.answers;
        const declared = this.#declared.get(leaseId);
        // An operation that decided from an older version than another one read in this batch.
        if (declared !== undefined && answerRead !== undefined && declared !== answerRead.version) {
          this.forgetAll();
          throw new BatchConflictError([leaseId]);
        }
        const version = answerRead?.version ?? declared;
        const lease = this.#reads.get(leaseId);
        if (version !== undefined && lease !== undefined && lease.modRevision === '0') {
          done.add(leaseId);
          if (answerId !== undefined) done.add(answerId);
          compare.push(this.noNewer(leaseId, version, backend.recordKey(leaseId)));
        } else if (read.answers !== undefined) compare.push(this.noNewer(leaseId, read.answers.version, backend.answersStart(leaseId)));
        else compare.push(this.unchangedSinceRead(id));
      }
    }
    return compare;
  }

  /** No key in `[from, key of answer version `version`)` of the branch of `leaseId` (the whole branch from `from` for version 0). */
  private noNewer(leaseId: string, version: number, from: Buffer): ICompare {
    const backend = this.#backend;
    return { key: from, range_end: version === 0 ? backend.branchEnd(leaseId) : backend.answerKey(leaseId, version), target: 'Create', result: 'Equal', create_revision: 0 };
  }

  /**
   * A batch that writes nothing but decided from records taken from the quiet ones: one
   * transaction of compares alone confirms they are still current, so what it answered (a refusal
   * `answered` rather than `backoff`, say) is what a read now would give; otherwise
   * `BatchConflictError`, and the run again reads them from the server.
   */
  private async confirmServed(): Promise<void> {
    if ((this.#served.size === 0 && this.#declared.size === 0) || this.#offline) return;
    const backend = this.#backend;
    const compare = this.checks([this.#served, this.#declared.keys()]);
    let succeeded: boolean;
    try {
      succeeded = (await backend.connection.client.kv.txn({ compare, success: [], failure: [] }, backend.connection.call())).succeeded;
    } catch (error) {
      this.forgetAll();
      throw etcdIoError(`etcd read failed: ${(error as Error).message}`, { step: 'read', ids: [...this.#served].slice(0, 8), restored: true }, error);
    }
    if (!succeeded) {
      this.forgetAll();
      throw new BatchConflictError([...this.#served]);
    }
  }

  /** The compare that holds while `id` is as this batch read it (absent: never created since). */
  private unchangedSinceRead(id: string): ICompare {
    const key = this.#backend.recordKey(id);
    const read = this.#reads.get(id)!;
    return read.modRevision === '0' ? { key, target: 'Create', result: 'Equal', create_revision: 0 } : { key, target: 'Mod', result: 'Equal', mod_revision: read.modRevision };
  }

  /**
   * After a transaction whose outcome is unknown, its records read again:
   * - `unchanged`: every one is still as this batch read it, so nothing was applied;
   * - `applied` (the revision it was applied at): every record it wrote was written since the
   *   batch read it and holds exactly the bytes it wrote, all at one revision, and every record it
   *   deleted is absent. A transaction applies whole, and the bytes it wrote carry this batch's
   *   token, so no other writer left them there (and a record that already held them, a renewal
   *   at the same time as the last, proves nothing: it must have been written again); the batch
   *   then goes on as committed (docs/leases.md "The etcd store");
   * - neither (the read failed too: `unread`; or another writer came between): the outcome stays
   *   unknown.
   */
  private async readBack(ids: readonly string[], staged: ReadonlyMap<string, StagedRecord | null>): Promise<{ readonly unchanged: boolean; readonly applied?: string; readonly unread?: true }> {
    let now: Map<string, ReadRecord>;
    try {
      const relations = new Map<string, string>();
      for (const id of ids) {
        const answers = this.#reads.get(id)?.answers;
        if (answers !== undefined) relations.set(id, answers.leaseId);
      }
      now = await this.#backend.readRecords(ids, relations);
    } catch {
      return { unchanged: false, unread: true };
    }
    if (ids.every((id) => now.get(id)?.modRevision === this.#reads.get(id)?.modRevision)) return { unchanged: true };
    let applied: string | undefined;
    for (const id of ids) {
      const next = staged.get(id) ?? null;
      const read = now.get(id);
      if (next === null) {
        if (read?.read.state !== 'absent') return { unchanged: false };
        continue;
      }
      if (read?.read.state !== 'valid' || read.modRevision === this.#reads.get(id)?.modRevision || read.read.bytes?.equals(next.bytes) !== true) return { unchanged: false };
      if (applied !== undefined && applied !== read.modRevision) return { unchanged: false };
      applied = read.modRevision;
    }
    // Deletions alone prove nothing: another writer may have deleted the records as well.
    return applied === undefined ? { unchanged: false } : { unchanged: false, applied };
  }

  /** Nothing is held between the read and the commit. */
  async release(): Promise<void> {}
}
