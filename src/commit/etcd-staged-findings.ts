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
 */
import path from 'node:path';
import { InternalError, StagedFindingTooLargeError } from '../errors.js';
import { leaseIoError } from '../lease/lease-io-error.js';
import { connectEtcd, etcdClientConfig, type EtcdConnection } from '../lease/etcd/etcd-connection.js';
import { MAX_TXN_BYTES, MAX_TXN_OPS } from '../lease/etcd/etcd-batch.js';
import type { LeaseTableOptions } from '../lease/lease-table-options.js';
import type { PublishedFile } from '../io/io-requests.js';
import { readFindingFile, type StagingClient } from './staged-findings.js';
import { STAGED_DIR, TRACES_DIR } from './commit-manifest.js';

/** Largest finding staged in etcd, bytes (under etcd's default 1.5 MiB request limit; AFL++'s inputs are at most 1 MiB by default). */
export const MAX_ETCD_STAGED_BYTES = 1024 * 1024 + 64 * 1024;

function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  end[end.length - 1]! += 1; // the prefix ends in '/', never 0xff
  return end;
}

export class EtcdStagedFindings implements StagingClient {
  readonly #connection: EtcdConnection;
  /** Local directory (`<leaseRoot>/staged`, `<leaseRoot>/traces`) → its key prefix. */
  readonly #bases: ReadonlyMap<string, string>;

  private constructor(connection: EtcdConnection, prefix: string, leaseRoot: string) {
    this.#connection = connection;
    const root = prefix.replace(/\/+$/, '');
    this.#bases = new Map([STAGED_DIR, TRACES_DIR].map((dir) => [path.resolve(leaseRoot, dir), `${root}/${dir}/`]));
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
      throw leaseIoError(`etcd ${step} of staged findings failed: ${(error as Error).message}`, { step }, error);
    }
  }

  async ensureDir(): Promise<void> {
    // Nothing to create: the keys' prefix is the directory.
  }

  async listDir(dir: string): Promise<string[]> {
    const prefix = Buffer.from(this.base(dir));
    const names: string[] = [];
    let from = prefix;
    for (;;) {
      const page = await this.request('list', () => this.#connection.client.kv.range({ key: from, range_end: prefixEnd(prefix), keys_only: true, limit: 1000 }, this.#connection.call()));
      for (const kv of page.kvs) names.push(kv.key.subarray(prefix.length).toString('utf8'));
      if (!page.more || page.kvs.length === 0) return names;
      from = Buffer.concat([page.kvs[page.kvs.length - 1]!.key, Buffer.from([0])]);
    }
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
    let removed = 0;
    for (let start = 0; start < names.length; start += MAX_TXN_OPS) {
      const slice = names.slice(start, start + MAX_TXN_OPS);
      const deletes = slice.map((name) => ({ request_delete_range: { key: this.key(dir, name) } }));
      const result = await this.request('remove', () => this.#connection.client.kv.txn({ compare: [], success: deletes, failure: [] }, this.#connection.call()));
      for (const response of result.responses) removed += Number(response.response_delete_range?.deleted ?? 0);
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
