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
 * Expiry: `leased` target records are attached to the writer's session lease (etcd-connection.ts)
 * and vanish when it expires on the server, besides expiring by their own TTL as in every store —
 * except a lease record of an older table that still carries answers (docs/lease-format.md
 * "Answers"), which must outlive its holder and expires by its TTL. Answer records and released
 * lease records (pinning an answer record, docs/lease-format.md "Answer pins") are `done`.
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
import { invalidOption } from '../../config/values.js';
import { LeaseCorruptError } from '../../errors.js';
import { canonicalJsonBytes } from '../canonical-json.js';
import { EtcdUnavailableError } from '../../errors.js';
import { connectEtcd, etcdClientConfig, OPEN_ATTEMPTS, withFreshDeadlines, type EtcdConnection } from './etcd-connection.js';
import { leaseIoError } from '../lease-io-error.js';
import { isRecordId } from '../identity.js';
import { maxRecordBytes, parseRecord, type RecordKind, type RecordRead } from '../lease-record.js';
import type { LeaseTableOptions } from '../lease-table-options.js';
import type { LeaseTableDeps } from '../open-backend.js';
import { EtcdBatch, MAX_BATCH_RECORDS, MAX_TXN_OPS, type ReadRecord } from './etcd-batch.js';
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
    const wanted = canonicalJsonBytes({ schema: META_SCHEMA, kind: this.kind, store: 'etcd' });
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
      throw new EtcdUnavailableError(`cannot check the table metadata in etcd (${key.toString()}): ${(error as Error).message}`, { key: key.toString() });
    });
    if (result.succeeded) return;
    const existing = result.responses[0]?.response_range?.kvs[0]?.value;
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
  async readRecords(ids: readonly string[]): Promise<Map<string, ReadRecord>> {
    const out = new Map<string, ReadRecord>();
    let revision: string | undefined;
    for (let start = 0; start < ids.length; start += MAX_TXN_OPS) {
      const slice = ids.slice(start, start + MAX_TXN_OPS);
      const at = revision === undefined ? {} : { revision };
      const result = await this.connection.client.kv.txn({ compare: [], success: slice.map((id) => ({ request_range: { key: this.recordKey(id), ...at } })), failure: [] }, this.connection.call());
      revision ??= String(result.header.revision);
      slice.forEach((id, i) => {
        const kv = result.responses[i]?.response_range?.kvs[0];
        if (!kv) {
          const absent: ReadRecord = { read: { state: 'absent' }, modRevision: '0', lease: '0' };
          out.set(id, absent);
          this.quiet.note(this.kind, id, absent);
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
      const page = await this.connection.client.kv.range({ key: from, range_end: end, limit: SCAN_PAGE, ...(revision !== undefined ? { revision } : {}) }, this.connection.call()).catch((error: unknown) => {
        throw leaseIoError(`etcd scan of ${this.base}r/ failed: ${(error as Error).message}`, { step: 'scan' }, error);
      });
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
