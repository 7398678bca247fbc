/**
 * Staged findings in etcd: with the etcd lease store, a coordinator's staged findings live in the
 * cluster beside its records (`<etcdPrefix>/staged/<workId>.<sha256>`), so that a survivor on
 * another host can replay a dead host's committing result from them (docs/leases.md "The etcd
 * store"); shared traces likewise (`<etcdPrefix>/traces/<workId>.<sha256>`, docs/campaign.md
 * "Shared traces"). Each of the lease root's two directories maps to its key prefix. It is a `StagingClient` plus the `readFile` of `StagedFindings` (staged-findings.ts),
 * which keeps its manifest, naming, verification and lifecycle unchanged.
 *
 * Contract: `stageFiles` resolves only once every file is committed by the cluster (a raft commit
 * is durable on a quorum); each file is one key written by one transaction, whole or not at all,
 * so there are no temps to sweep. A staged file larger than `MAX_ETCD_STAGED_BYTES` (etcd's
 * request limit) is refused with `ERR_STAGED_FINDING_TOO_LARGE` before anything is written: the
 * commit then fails loudly (the job's result is reported as not committed), it is never dropped
 * in silence. Keys carry no lease: staged findings outlive their stager, like committing records.
 * Files outside the two directories (solver outputs, parent inputs) are read from disk.
 *
 * A shared trace's last use (for the trace store's cap, trace-store-cap.ts) is a revision: the
 * trace key's own, or that of its use key `<etcdPrefix>/trace-use/<name>` (an empty value), put by
 * each adoption in a transaction that requires the trace to exist. One small write per adoption,
 * instead of rewriting the trace (up to 1 MiB kept in etcd's history until a compaction); the use
 * key goes with its trace in every removal.
 */
import path from 'node:path';
import { InternalError, StagedFindingTooLargeError } from '../errors.js';
import { connectEtcd, etcdClientConfig, etcdIoError, type EtcdConnection } from '../lease/etcd/etcd-connection.js';
import { MAX_TXN_BYTES, MAX_TXN_OPS } from '../lease/etcd/etcd-batch.js';
import type { LeaseTableOptions } from '../lease/lease-table-options.js';
import type { PublishedFile } from '../io/io-requests.js';
import { readFindingFile, type StagingClient } from './staged-findings.js';
import { STAGED_DIR, TRACES_DIR } from './commit-manifest.js';
import type { TraceUse } from './trace-store-cap.js';

/** The key directory of the traces' use keys, beside `traces/`. */
export const TRACE_USE_DIR = 'trace-use';

/** Largest finding staged in etcd, bytes (under etcd's default 1.5 MiB request limit; AFL++'s inputs are at most 1 MiB by default). */
export const MAX_ETCD_STAGED_BYTES = 1024 * 1024 + 64 * 1024;

function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  end[end.length - 1]! += 1; // the prefix ends in '/', never 0xff
  return end;
}

export class EtcdStagedFindings implements StagingClient, TraceUse {
  readonly #connection: EtcdConnection;
  /** Local directory (`<leaseRoot>/staged`, `<leaseRoot>/traces`) → its key prefix. */
  readonly #bases: ReadonlyMap<string, string>;
  /** `<leaseRoot>/traces`, whose files have use keys. */
  readonly #tracesDir: string;
  /** `<etcdPrefix>/trace-use/`. */
  readonly #useBase: string;

  private constructor(connection: EtcdConnection, prefix: string, leaseRoot: string) {
    this.#connection = connection;
    const root = prefix.replace(/\/+$/, '');
    this.#bases = new Map([STAGED_DIR, TRACES_DIR].map((dir) => [path.resolve(leaseRoot, dir), `${root}/${dir}/`]));
    this.#tracesDir = path.resolve(leaseRoot, TRACES_DIR);
    this.#useBase = `${root}/${TRACE_USE_DIR}/`;
  }

  /** Connects with the lease table options (`store: 'etcd'` and its client settings). */
  static async open(options: LeaseTableOptions, leaseRoot: string): Promise<EtcdStagedFindings> {
    return new EtcdStagedFindings(await connectEtcd(etcdClientConfig(options)), options.etcdPrefix, leaseRoot);
  }

  /** The key prefix of a local directory; anything but the two mapped ones is a programming error. */
  private base(dir: string): string {
    const base = this.#bases.get(path.resolve(dir));
    if (base === undefined) throw new InternalError(`${dir} is not a directory staged in etcd`);
    return base;
  }

  private key(dir: string, name: string): Buffer {
    return Buffer.from(this.base(dir) + name);
  }

  /** An etcd request, its failure as `ERR_LEASE_IO` naming the step. */
  private async request<T>(step: string, send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (error) {
      throw etcdIoError(`etcd ${step} of staged findings failed: ${(error as Error).message}`, { step }, error);
    }
  }

  async ensureDir(): Promise<void> {
    // Nothing to create: the keys' prefix is the directory.
  }

  async listDir(dir: string): Promise<string[]> {
    return [...(await this.listRevisions(this.base(dir))).keys()];
  }

  /** Name → `mod_revision` of every key under `base`, in pages of keys only. */
  private async listRevisions(base: string): Promise<Map<string, number>> {
    const prefix = Buffer.from(base);
    const names = new Map<string, number>();
    let from = prefix;
    for (;;) {
      const page = await this.request('list', () => this.#connection.client.kv.range({ key: from, range_end: prefixEnd(prefix), keys_only: true, limit: 1000 }, this.#connection.call()));
      for (const kv of page.kvs) names.set(kv.key.subarray(prefix.length).toString('utf8'), Number(kv.mod_revision));
      if (!page.more || page.kvs.length === 0) return names;
      from = Buffer.concat([page.kvs[page.kvs.length - 1]!.key, Buffer.from([0])]);
    }
  }

  /** `TraceUse`: the later of the revisions of a trace's key and of its use key. */
  async lastUse(dir: string, names: readonly string[]): Promise<Map<string, number>> {
    const written = await this.listRevisions(this.base(dir));
    const used = path.resolve(dir) === this.#tracesDir ? await this.listRevisions(this.#useBase) : new Map<string, number>();
    const out = new Map<string, number>();
    for (const name of names) {
      const revision = written.get(name);
      if (revision !== undefined) out.set(name, Math.max(revision, used.get(name) ?? 0));
    }
    return out;
  }

  /** `TraceUse`: puts the trace's use key, only while the trace exists (no use key outlives its trace). */
  async touch(dir: string, name: string): Promise<void> {
    const trace = this.key(dir, name);
    await this.request('touch', () =>
      this.#connection.client.kv.txn(
        {
          compare: [{ key: trace, target: 'Create', result: 'Greater', create_revision: 0 }],
          success: [{ request_put: { key: Buffer.from(this.#useBase + name), value: Buffer.alloc(0) } }],
          failure: [],
        },
        this.#connection.call(),
      ),
    );
  }

  async stageFiles(dir: string, files: readonly PublishedFile[]): Promise<void> {
    for (const file of files) {
      if (file.bytes.length > MAX_ETCD_STAGED_BYTES) {
        throw new StagedFindingTooLargeError(`staged finding ${file.name} has ${file.bytes.length} bytes; the etcd store stages at most ${MAX_ETCD_STAGED_BYTES}`, {
          name: file.name,
          bytes: file.bytes.length,
          limit: MAX_ETCD_STAGED_BYTES,
        });
      }
    }
    // As few transactions as the request limits allow; each file is whole in one of them.
    let batch: PublishedFile[] = [];
    let bytes = 0;
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      const puts = batch.map((f) => ({ request_put: { key: this.key(dir, f.name), value: Buffer.from(f.bytes) } }));
      await this.request('stage', () => this.#connection.client.kv.txn({ compare: [], success: puts, failure: [] }, this.#connection.call()));
      batch = [];
      bytes = 0;
    };
    for (const file of files) {
      if (batch.length >= MAX_TXN_OPS || bytes + file.bytes.length > MAX_TXN_BYTES) await flush();
      batch.push(file);
      bytes += file.bytes.length;
    }
    await flush();
  }

  async removeFiles(dir: string, names: readonly string[]): Promise<number> {
    // A trace's use key goes in the same transaction as the trace.
    const withUse = path.resolve(dir) === this.#tracesDir;
    const perTxn = withUse ? Math.floor(MAX_TXN_OPS / 2) : MAX_TXN_OPS;
    let removed = 0;
    for (let start = 0; start < names.length; start += perTxn) {
      const slice = names.slice(start, start + perTxn);
      const deletes = slice.map((name) => ({ request_delete_range: { key: this.key(dir, name) } }));
      const uses = withUse ? slice.map((name) => ({ request_delete_range: { key: Buffer.from(this.#useBase + name) } })) : [];
      const result = await this.request('remove', () => this.#connection.client.kv.txn({ compare: [], success: [...deletes, ...uses], failure: [] }, this.#connection.call()));
      for (const response of result.responses.slice(0, deletes.length)) removed += Number(response.response_delete_range?.deleted ?? 0);
    }
    return removed;
  }

  /** `StagedFindings`' reader: staged and trace paths from etcd (`ENOENT` when absent), others from disk. */
  readonly readFile = async (file: string): Promise<Uint8Array> => {
    const dir = path.dirname(path.resolve(file));
    if (!this.#bases.has(dir)) return readFindingFile(file);
    const name = path.basename(file);
    const page = await this.request('read', () => this.#connection.client.kv.range({ key: this.key(dir, name) }, this.#connection.call()));
    const kv = page.kvs[0];
    if (!kv) throw Object.assign(new Error(`ENOENT: staged finding ${name} is not in etcd`), { code: 'ENOENT', path: file });
    return new Uint8Array(kv.value);
  };

  close(): Promise<void> {
    return this.#connection.release();
  }
}
