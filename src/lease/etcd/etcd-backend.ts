/**
 * The etcd store (`RecordBackend`): one etcd key per record, for coordinators on many hosts
 * (docs/leases.md "The etcd store").
 *
 * Keys under the `etcdPrefix` option: `<prefix>/<kind>/meta` (the table's kind and store, checked
 * at every open) and `<prefix>/<kind>/r/<id>` (a record: the same canonical JSON bytes a record
 * file holds, validated by the same reader — a corrupt value fails closed).
 *
 * Batches are optimistic (backend-contract.ts):
 *   - `lock` takes nothing;
 *   - `read` is one read transaction per up to `MAX_TXN_OPS` keys, every one at the first one's
 *     revision: each record with its `mod_revision` (0 for an absent one);
 *   - `commit` is ONE transaction: for every record it writes or deletes, compare `mod_revision`
 *     with the read one (an absent record: `create_revision == 0`), then every put and delete. A
 *     failed compare writes nothing → `BatchConflictError` (the executor re-runs the batch).
 *
 * Fencing: a record's `mod_revision` is etcd's cluster-wide revision of its last write, so the
 * claim that wrote a token has a revision greater than every earlier claim of that record, and
 * every later transaction on the record (heartbeat, release, beginCommit, complete, replay)
 * commits only if the record is still at the revision it read — the one whose token it checked.
 * A holder whose lease was taken over (new token, new revision) can write nothing more.
 *
 * Answer versions (target tables; docs/lease-format.md "Answer versions"): a branch's answer record
 * is not kept at its own id's key. Every write of it is a new version at `<prefix>/target/r/<lease
 * id>/<suffix>`, the suffix counting down as the version counts up (`versionSuffix`), so that the
 * branch's keys are, in order: its lease record, then its answer versions, newest first. A version
 * is never rewritten; the release that writes version n + 1 deletes version n (in a transaction of
 * its own when its own is full). A read of an answer record takes the first key of the branch's
 * answer range. A claim that decided from version n of a member whose lease record it read absent
 * checks both at once: `[<lease key>, <key of version n>)` holds no key (create revision 0) — no
 * lease taken since, no newer answer written. etcd answers that compare from its in-memory index
 * alone, as it does a compare on an absent key; a compare on a key that exists reads the key from
 * its backend (measured: 0.4–0.6 ms more per claim batch of 128 members than compares on absent
 * keys, docs/leases.md "Shared answers"). Which lease record an answer record belongs to the target
 * table says (`relateAnswers`): the two ids are digests of the same target.
 *
 * Expiry: `leased` target records are attached to the writer's session lease (etcd-connection.ts)
 * and vanish when it expires on the server, besides expiring by their own TTL as in every store —
 * except a lease record of an older table that still carries answers (docs/lease-format.md
 * "Answers"), which must outlive its holder and expires by its TTL. Answer records are `done`.
 * Leased work records expire by their TTL only, so that their payload survives for a takeover
 * (`recoverExpired`); this process still remembers which of its sessions wrote them, for the
 * offline answers (etcd-batch.ts). `committing` and `done` records are attached to no
 * lease: they are never lost to an expiry.
 *
 * Limits: a transaction carries at most `MAX_TXN_OPS` (etcd's default `--max-txn-ops`) compares
 * and as many writes; a batch compares at most `MAX_BATCH_RECORDS` = 128 records (a full group
 * and its answer records; lease-operation.ts "Size");
 * its writes may total at most `MAX_TXN_BYTES` (under etcd's default 1.5 MiB request limit). A
 * record or batch above that is refused with `ERR_LEASE_RECORD_TOO_LARGE` before anything is
 * written (a commit manifest too big for etcd is never silently dropped).
 */
import path from 'node:path';
import type { IKeyValue } from 'etcd3';
import { invalidOption } from '../../config/values.js';
import { LeaseCorruptError } from '../../errors.js';
import { canonicalJsonBytes } from '../canonical-json.js';
import { EtcdUnavailableError } from '../../errors.js';
import { connectEtcd, etcdClientConfig, etcdIoError, OPEN_ATTEMPTS, withAlarm, withFreshDeadlines, withRemedy, type EtcdConnection } from './etcd-connection.js';
import { leaseIoError } from '../lease-io-error.js';
import { answerRecordId, isRecordId, targetRecordId } from '../identity.js';
import { isDecimalTarget } from '../lease-record.js';
import { maxRecordBytes, parseRecord, type RecordKind, type RecordRead } from '../lease-record.js';
import type { LeaseTableOptions } from '../lease-table-options.js';
import type { LeaseTableDeps } from '../open-backend.js';
import { EtcdBatch, MAX_BATCH_RECORDS, MAX_TXN_OPS, type ReadRecord } from './etcd-batch.js';
import { MAX_ANSWER_VERSION, versionOfSuffix, versionSuffix } from './answer-version-keys.js';
import type { RecordBackend, ScanEntry, StoreBatch } from '../backend-contract.js';
import { ensureStoreRoot } from '../table-root.js';


/** Entries `QuietRecords` keeps. */
const QUIET_RECORDS = 65_536;

/** Records last seen absent or `done`, least recently used first out (`EtcdRecordBackend.quiet`). */
export class QuietRecords {
  readonly #entries = new Map<string, ReadRecord>();

  get(id: string): ReadRecord | undefined {
    const hit = this.#entries.get(id);
    if (hit === undefined) return undefined;
    this.#entries.delete(id);
    this.#entries.set(id, hit);
    return hit;
  }

  /** Keeps `record` as `id`'s value when it is a target table's absent or `done` record; forgets `id` otherwise. */
  note(kind: RecordKind, id: string, record: ReadRecord): void {
    this.#entries.delete(id);
    const quiet = record.read.state === 'absent' || (record.read.state === 'valid' && record.read.record.status === 'done');
    if (kind !== 'target' || !quiet) return;
    if (this.#entries.size >= QUIET_RECORDS) this.#entries.delete(this.#entries.keys().next().value as string);
    this.#entries.set(id, record);
  }

  forget(ids: Iterable<string>): void {
    for (const id of ids) this.#entries.delete(id);
  }
}

/** A branch's keys in use: its answer range, and the keys of the versions last asked for. */
interface BranchKeys {
  /** Made when first asked for: a claim of a branch without answers compares up to `end` alone. */
  after?: Buffer;
  start?: Buffer;
  end?: Buffer;
  /**
   * The keys of the two newest versions asked for: a release writes version n+1 and removes n, and
   * the next claim compares up to n+1, so each version's key is made once.
   */
  readonly versions: [number, number]; // -1: none yet
  readonly versionKeys: [Buffer | undefined, Buffer | undefined];
}

/** Branches whose range keys `EtcdRecordBackend.branchKeys` keeps. */
const BRANCH_KEYS = 8192;

/** Keys listed per scan request. */
const SCAN_PAGE = 256;

/**
 * Layout of the keys, per kind: 3 for target tables since answer records are versioned (schema 2
 * kept released lease records pinning answer records at their own ids), 2 for work tables.
 */
const metaSchema = (kind: RecordKind): number => (kind === 'target' ? 3 : 2);


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
  // The local root keeps lease-table.json (so `auto` and `symfence leases` know the store) and
  // this host's staged findings; the records themselves are in etcd.
  const layout = await ensureStoreRoot(root, options, deps, kind, 'etcd');
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
  readonly maxBatchRecords = MAX_BATCH_RECORDS;
  readonly conflictRetryMs: number;
  /** `<prefix>/<kind>/` */
  readonly base: string;
  /** Last known session lease of each record this process read or wrote ('0': none). */
  readonly attachedLease = new Map<string, string>();
  /**
   * Target records as this process last read or wrote them while absent or `done` (answer records,
   * free targets), with their revision. A batch takes these from here instead of the server and
   * compares every one it took at commit (etcd-batch.ts), so a stale entry costs a conflict and a
   * fresh read, never a decision on an old value.
   */
  readonly quiet = new QuietRecords();
  /** Lease record id of each answer record a target table named (`relateAnswers`), least recently named first out. */
  readonly #answerLeases = new Map<string, string>();
  /** `branchKeys` made so far, oldest first out. */
  readonly #branchKeys = new Map<string, BranchKeys>();
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

  /** The key of version `version` of the answer record of the branch whose lease record is `leaseId`. */
  answerKey(leaseId: string, version: number): Buffer {
    const keys = this.branchKeys(leaseId);
    const { versions, versionKeys } = keys;
    if (versions[0] === version) return versionKeys[0]!;
    if (versions[1] === version) return versionKeys[1]!;
    const slot = versions[0] < versions[1] ? 0 : 1;
    const key = Buffer.from(`${this.base}r/${leaseId}/${versionSuffix(version)}`);
    versions[slot] = version;
    versionKeys[slot] = key;
    return key;
  }

  /** First key of a branch's answer versions (`r/<lease id>/`); its lease record's key sorts just before. */
  answersStart(leaseId: string): Buffer {
    const keys = this.branchKeys(leaseId);
    return (keys.start ??= Buffer.from(`${this.base}r/${leaseId}/`));
  }

  /** The first key after the lease record's (`r/<lease id>` and a zero byte): where a read of the branch's answers starts. */
  afterLease(leaseId: string): Buffer {
    const keys = this.branchKeys(leaseId);
    return (keys.after ??= Buffer.from(`${this.base}r/${leaseId}\0`));
  }

  /** The key after every key of the branch (`r/<lease id>0`: '0' follows '/'). */
  branchEnd(leaseId: string): Buffer {
    const keys = this.branchKeys(leaseId);
    return (keys.end ??= Buffer.from(`${this.base}r/${leaseId}0`));
  }

  /** A branch's range keys, made once while the branch is in use (a claim compares with both). */
  private branchKeys(leaseId: string): BranchKeys {
    let keys = this.#branchKeys.get(leaseId);
    if (keys === undefined) {
      if (this.#branchKeys.size >= BRANCH_KEYS) this.#branchKeys.delete(this.#branchKeys.keys().next().value as string);
      keys = { versions: [-1, -1], versionKeys: [undefined, undefined] };
      this.#branchKeys.set(leaseId, keys);
    }
    return keys;
  }

  relateAnswers(pairs: readonly (readonly [string, string])[]): void {
    for (const [answerId, leaseId] of pairs) {
      if (this.#answerLeases.get(answerId) === leaseId) continue;
      this.#answerLeases.delete(answerId);
      if (this.#answerLeases.size >= QUIET_RECORDS) this.#answerLeases.delete(this.#answerLeases.keys().next().value as string);
      this.#answerLeases.set(answerId, leaseId);
    }
  }

  /** The lease record id of answer record `id`, when a target table named it; undefined for any other record. */
  answerLeaseOf(id: string): string | undefined {
    return this.#answerLeases.get(id);
  }

  /** Bytes of `recordKey(id)` before the id. */
  get recordKeyPrefixBytes(): number {
    return Buffer.byteLength(`${this.base}r/`);
  }

  /** Where a record lives, for scans and errors. */
  where(id: string): string {
    return `etcd:${this.base}r/${id}`;
  }

  /** Creates `<prefix>/<kind>/meta` or checks it: a prefix holds one kind of table of one store. */
  async ensureMeta(): Promise<void> {
    const key = Buffer.from(`${this.base}meta`);
    const wanted = canonicalJsonBytes({ schema: metaSchema(this.kind), kind: this.kind, store: 'etcd' });
    const kv = this.connection.client.kv;
    const result = await withFreshDeadlines(OPEN_ATTEMPTS, () =>
      kv.txn(
        {
          compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
          success: [{ request_put: { key, value: wanted } }],
          failure: [{ request_range: { key } }],
        },
        this.connection.call(),
      ),
    ).catch((error: unknown) => {
      throw new EtcdUnavailableError(withRemedy(`cannot check the table metadata in etcd (${key.toString()}): ${(error as Error).message}`, error), withAlarm({ key: key.toString() }, error));
    });
    if (result.succeeded) return;
    const existing = result.responses[0]?.response_range?.kvs[0]?.value;
    if (existing !== undefined && this.kind === 'target' && existing.equals(canonicalJsonBytes({ schema: 2, kind: 'target', store: 'etcd' }))) {
      throw new LeaseCorruptError(
        `etcd prefix ${this.prefix} holds a target table of an earlier layout (schema 2, answer records pinned by released lease records); this version keeps answer records as versions (schema 3, docs/lease-format.md "Answer versions"): give the campaign a new --etcd-prefix, or delete the keys under ${this.base}`,
        { key: key.toString(), schema: 2 },
      );
    }
    if (!existing || !existing.equals(wanted)) {
      throw new LeaseCorruptError(`etcd key ${key.toString()} does not describe a ${this.kind} table of the etcd store: ${existing?.toString('utf8').slice(0, 200) ?? '(gone)'}`, { key: key.toString() });
    }
  }

  begin(): StoreBatch {
    if (this.#closed) throw leaseIoError(`etcd lease table ${this.base} is closed`, { step: 'batch' }, undefined);
    return new EtcdBatch(this);
  }

  /**
   * Reads the records of `ids` (at most `MAX_TXN_OPS` per request), all at the revision of the
   * first request: one snapshot, so a batch that decides from a record it does not write (a claim
   * reading a branch's answer record) sees it as it was when the records it does write were read.
   */
  async readRecords(ids: readonly string[], relations?: ReadonlyMap<string, string>): Promise<Map<string, ReadRecord>> {
    const out = new Map<string, ReadRecord>();
    // Which are answer records, decided now, before any request goes out (`relateAnswers`).
    const leaseOf = new Map<string, string>();
    for (const id of ids) {
      const leaseId = relations?.get(id) ?? this.answerLeaseOf(id);
      if (leaseId !== undefined) leaseOf.set(id, leaseId);
    }
    // One request per branch: an answer record read with its lease record is one range over the
    // branch, the lease record's key first (limit 2: it, and the newest version after it).
    const wanted = new Set(ids);
    const withLease = new Map<string, string>();
    for (const [answerId, leaseId] of leaseOf) if (wanted.has(leaseId) && !leaseOf.has(leaseId)) withLease.set(leaseId, answerId);
    const asks = ids.filter((id) => !(leaseOf.has(id) && withLease.get(leaseOf.get(id)!) === id));
    let revision: string | undefined;
    for (let start = 0; start < asks.length; start += MAX_TXN_OPS) {
      const slice = asks.slice(start, start + MAX_TXN_OPS);
      const at = revision === undefined ? {} : { revision };
      // An answer record: the first key after its lease record's, the newest version — or any
      // stray key a claim's compare would cover, which then reads as corrupt, never unseen.
      const request = (id: string): object => {
        const leaseId = leaseOf.get(id);
        if (leaseId !== undefined) return { request_range: { key: this.afterLease(leaseId), range_end: this.branchEnd(leaseId), limit: 1, ...at } };
        if (withLease.has(id)) return { request_range: { key: this.recordKey(id), range_end: this.branchEnd(id), limit: 2, ...at } };
        return { request_range: { key: this.recordKey(id), ...at } };
      };
      const result = await this.connection.client.kv.txn({ compare: [], success: slice.map(request), failure: [] }, this.connection.call());
      revision ??= String(result.header.revision);
      slice.forEach((id, i) => {
        const kvs = result.responses[i]?.response_range?.kvs ?? [];
        const answerId = withLease.get(id);
        if (answerId === undefined) {
          this.noteRead(out, id, kvs[0], leaseOf.get(id));
          return;
        }
        const leaseKv = kvs[0] !== undefined && kvs[0].key.equals(this.recordKey(id)) ? kvs[0] : undefined;
        this.noteRead(out, id, leaseKv, undefined);
        this.noteRead(out, answerId, leaseKv !== undefined ? kvs[1] : kvs[0], id);
      });
    }
    return out;
  }

  /** What a read found at record `id` (`kv`: its key and value, undefined when absent); `leaseId` when it is an answer record. */
  private noteRead(out: Map<string, ReadRecord>, id: string, kv: { key: Buffer; value: Buffer; mod_revision: string | number; lease: string | number } | undefined, leaseId: string | undefined): void {
    if (!kv) {
      const absent: ReadRecord = { read: { state: 'absent' }, modRevision: '0', lease: '0', ...(leaseId !== undefined ? { answers: { leaseId, version: 0 } } : {}) };
      out.set(id, absent);
      this.quiet.note(this.kind, id, absent);
      this.attachedLease.delete(id);
      return;
    }
    if (leaseId !== undefined) {
      const record = this.answerVersion(kv.key, kv.value, id, leaseId, String(kv.mod_revision));
      out.set(id, record);
      this.quiet.note(this.kind, id, record);
      this.attachedLease.delete(id);
      return;
    }
    const read = this.parse(kv.value, id);
    const record = { read, modRevision: String(kv.mod_revision), lease: String(kv.lease) };
    out.set(id, record);
    this.quiet.note(this.kind, id, record);
    // Target records: the server's attachment is the truth. Work records are never attached
    // on the server; what this process wrote under its session is remembered at commit.
    if (this.kind === 'target' && String(kv.lease) !== '0') this.attachedLease.set(id, String(kv.lease));
    else if (this.kind === 'target' || read.state !== 'valid' || read.record.status !== 'leased') this.attachedLease.delete(id);
  }

  /** The answer version `key` names in the branch of `leaseId`; undefined when it is no version key of that branch. */
  private versionOfKey(key: Buffer, leaseId: string): number | undefined {
    const start = this.answersStart(leaseId);
    return key.subarray(0, start.length).equals(start) ? versionOfSuffix(key.subarray(start.length).toString('utf8')) : undefined;
  }

  /**
   * An answer record read at `key`: valid only when it is an answer record of `id` whose
   * `version` the key's suffix names; corrupt otherwise (the version the key names is then still
   * what a commit must find newest, so a corrupt version is never written over).
   */
  answerVersion(key: Buffer, value: Buffer, id: string, leaseId: string, modRevision: string): ReadRecord {
    const version = this.versionOfKey(key, leaseId);
    if (version === undefined) return { read: { state: 'corrupt', reason: `key ${key.toString('utf8')} is not an answer version of lease record ${leaseId}` }, modRevision, lease: '0', answers: { leaseId, version: 0 } };
    let read = this.parse(value, id);
    if (read.state === 'valid' && (read.record.role !== 'answers' || read.record.version !== version)) {
      read = { state: 'corrupt', reason: `the answer record at version ${version} ${read.record.role !== 'answers' ? 'is no answer record' : `says version ${String(read.record.version)}`}`, bytes: value };
    }
    return { read, modRevision, lease: '0', answers: { leaseId, version } };
  }

  parse(value: Buffer, id: string): RecordRead {
    if (value.length > maxRecordBytes(this.kind)) return { state: 'corrupt', reason: `value of ${value.length} bytes exceeds the ${maxRecordBytes(this.kind)}-byte record bound` };
    return parseRecord(value, id, this.kind);
  }

  onSessionLost(listener: (event: { readonly reason: string; readonly sessionsLost: number }) => void): () => void {
    return this.connection.onSessionLost(({ reason }) => listener({ reason, sessionsLost: this.connection.stats.lost }));
  }

  /**
   * Every key under `r/` (with its value unless `keysOnly`), as its id after `r/` and the key-value,
   * a page at a time, every page at the first page's revision: one consistent snapshot.
   */
  private async *records(keysOnly: boolean, what: string): AsyncGenerator<readonly [string, IKeyValue]> {
    const prefix = Buffer.from(`${this.base}r/`);
    const end = prefixEnd(prefix);
    let from = prefix;
    let revision: string | undefined;
    for (;;) {
      const request = { key: from, range_end: end, limit: keysOnly ? SCAN_PAGE * 16 : SCAN_PAGE, ...(keysOnly ? { keys_only: true } : {}), ...(revision !== undefined ? { revision } : {}) };
      const page = await this.connection.client.kv.range(request, this.connection.call()).catch((error: unknown) => {
        throw etcdIoError(`etcd ${what} of ${this.base}r/ failed: ${(error as Error).message}`, { step: 'scan' }, error);
      });
      revision ??= String(page.header.revision);
      for (const kv of page.kvs) yield [kv.key.subarray(prefix.length).toString('utf8'), kv];
      if (!page.more || page.kvs.length === 0) return;
      from = Buffer.concat([page.kvs[page.kvs.length - 1]!.key, Buffer.from([0])]);
    }
  }

  async scan(): Promise<ScanEntry[]> {
    const entries: ScanEntry[] = [];
    /** Lease record id → answer record id of the branches whose newest answer version was listed. */
    const newestOf = new Map<string, string | null>();
    for await (const [id, kv] of this.records(false, 'scan')) {
      const where = `etcd:${kv.key.toString('utf8')}`;
      const slash = id.indexOf('/');
      if (slash >= 0 && this.kind === 'target') {
        // An answer version: the first of its branch is the answer record, the rest superseded.
        const entry = this.scanAnswerVersion(kv.key, kv.value, id.slice(0, slash), where, newestOf);
        if (entry !== undefined) entries.push(entry);
        continue;
      }
      if (!isRecordId(id)) {
        entries.push({ state: 'corrupt', id: undefined, path: where, reason: 'key does not end in a record id' });
        continue;
      }
      const read = this.parse(kv.value, id);
      entries.push(read.state === 'valid' ? { state: 'valid', id, path: where, record: read.record } : { state: 'corrupt', id, path: where, reason: read.state === 'corrupt' ? read.reason : 'absent' });
    }
    return entries;
  }

  /** `RecordBackend.answeredBranches`: the lease ids of the branches with an answer version, from their keys alone. */
  async answeredBranches(): Promise<ReadonlySet<string>> {
    const answered = new Set<string>();
    for await (const [id] of this.records(true, 'listing of the answer records')) {
      const slash = id.indexOf('/');
      if (slash > 0) answered.add(id.slice(0, slash));
    }
    return answered;
  }

  /**
   * A scanned answer version of the branch whose lease record is `leaseId`: the answer record
   * when it is the branch's first (newest), `superseded` after it; corrupt when its key or value
   * is not a version of that branch's answer record. `newestOf` holds, per branch, the id of its
   * newest version, or null when that one is corrupt: the versions behind a corrupt one are not
   * listed at all (undefined). Claims fail closed on the corrupt one meanwhile; once an operator
   * removes it, the newest of those is the answer record again, so `leases check` must never take
   * them for superseded and delete them.
   */
  private scanAnswerVersion(key: Buffer, value: Buffer, leaseId: string, where: string, newestOf: Map<string, string | null>): ScanEntry | undefined {
    if (!isRecordId(leaseId) || this.versionOfKey(key, leaseId) === undefined) return { state: 'corrupt', id: undefined, path: where, reason: `key is not an answer version of a lease record` };
    // After the branch's first version, every version is an older one.
    const newest = newestOf.get(leaseId);
    if (newest === null) return undefined;
    if (newest !== undefined) return { state: 'superseded', id: newest, path: where, bytes: value.length };
    let target: unknown;
    try {
      target = (JSON.parse(value.toString('utf8')) as { target?: unknown }).target;
    } catch {
      target = undefined;
    }
    if (!isDecimalTarget(target) || targetRecordId(BigInt(target)) !== leaseId) {
      newestOf.set(leaseId, null);
      return { state: 'corrupt', id: undefined, path: where, reason: `not an answer record of the branch of lease record ${leaseId}` };
    }
    const id = answerRecordId(BigInt(target));
    const read = this.answerVersion(key, value, id, leaseId, '0').read;
    newestOf.set(leaseId, read.state === 'valid' ? id : null);
    return read.state === 'valid' ? { state: 'valid', id, path: where, record: read.record } : { state: 'corrupt', id, path: where, reason: read.state === 'corrupt' ? read.reason : 'absent' };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.connection.release();
  }
}

/**
 * Deletes the answer versions a newer one replaced that a release left behind (`symfence leases
 * check`): nothing reads them, and a version is never written again, so each goes without a compare.
 * Returns how many were deleted.
 */
export async function removeSupersededAnswers(root: string, options: LeaseTableOptions): Promise<number> {
  const connection = await connectEtcd(etcdClientConfig(options));
  const backend = new EtcdRecordBackend(connection, path.resolve(root), normalizePrefix(options.etcdPrefix), 'target', options, () => performance.now());
  try {
    const keys = (await backend.scan()).flatMap((e) => (e.state === 'superseded' ? [Buffer.from(e.path.slice('etcd:'.length))] : []));
    for (let start = 0; start < keys.length; start += MAX_TXN_OPS) {
      const success = keys.slice(start, start + MAX_TXN_OPS).map((key) => ({ request_delete_range: { key } }));
      await connection.client.kv.txn({ compare: [], success, failure: [] }, connection.call()).catch((error: unknown) => {
        throw etcdIoError(`etcd removal of replaced answer versions failed: ${(error as Error).message}`, { step: 'commit' }, error);
      });
    }
    return keys.length;
  } finally {
    await backend.close();
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
