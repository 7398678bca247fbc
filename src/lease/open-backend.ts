/**
 * Opening a table root's record backend: which store (`--lease-store`, or the one recorded in
 * the root's lease-table.json), then that store's own opening steps.
 */
import path from 'node:path';
import { nodeFsLayer, type FsLayer } from '../fs/fs-layer.js';
import type { NativeBindings } from '../native/bindings.js';
import { openEtcdRecordBackend, scanEtcdTable } from './etcd/etcd-backend.js';
import { openFileRecordBackend } from './files/file-backend.js';
import { LeaseLayout, META_FILE } from './table-layout.js';
import { scanRecords } from './files/record-scan.js';
import type { RecordKind } from './lease-record.js';
import { LEASE_TABLE_OPTIONS, type LeaseTableOptions } from './lease-table-options.js';
import type { LeaseStoreKind, RecordBackend, ScanEntry } from './backend-contract.js';
import { readTableMeta, type TableMeta } from './table-meta.js';
import { metadataLocker } from './table-root.js';
import { InternalError, LeaseCorruptError } from '../errors.js';
import type { StatFilesystem } from './filesystem-kind.js';
import { defaultStoreFor } from './store-choice.js';
import { openSqliteRecordBackend, scanSqliteRoot } from './sqlite/sqlite-backend.js';

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
  /** `statfs` (tests simulate a network filesystem); default `fs.promises.statfs`. */
  readonly statFilesystem?: StatFilesystem;
}

/**
 * The store of `root`: an explicit choice as given (the backend's own metadata check refuses a
 * root recorded with another store), `auto` as recorded, or the default for a new root: the etcd
 * store when `etcdEndpoints` is set, else the file store.
 *
 * The first read takes no lock. Metadata that does not parse may be one another opener is still
 * writing under the metadata lock (table-meta.ts), so it is read again under that lock before it
 * is called corrupt.
 */

export async function resolveLeaseStore(root: string, options: LeaseTableOptions, deps: LeaseTableDeps = {}): Promise<LeaseStoreKind> {
  if (options.store !== 'auto') return options.store;
  const fsLayer = deps.fsLayer ?? nodeFsLayer;
  const metaPath = path.join(path.resolve(root), META_FILE);
  let meta: TableMeta | undefined;
  try {
    meta = await readTableMeta(fsLayer, metaPath);
  } catch (error) {
    if (!(error instanceof LeaseCorruptError)) throw error;
    const locker = metadataLocker(options, deps);
    const handle = await locker.acquire(`${metaPath}.lock`, 'lease table metadata lock');
    try {
      meta = await readTableMeta(fsLayer, metaPath);
    } finally {
      await handle.release();
      await locker.close();
    }
  }
  return meta?.store ?? (options.etcdEndpoints !== undefined ? 'etcd' : (await defaultStoreFor(root, deps.statFilesystem)).store);
}

export async function openRecordBackend(root: string, options: LeaseTableOptions, deps: LeaseTableDeps, kind: RecordKind): Promise<RecordBackend> {
  const store = await resolveLeaseStore(root, options, deps);
  switch (store) {
    case 'files':
      return openFileRecordBackend(root, options, deps, kind);
    case 'sqlite':
      return openSqliteRecordBackend(root, options, deps, kind);
    case 'etcd':
      return openEtcdRecordBackend(root, options, deps, kind);
    default:
      throw new InternalError(`lease store ${store satisfies never} has no backend`);
  }
}

/**
 * Every record of the table at `root` described by `meta`, read-only and lock-free, without
 * opening the table (no metadata written, no probe, no locks): for `symfence leases` next to live
 * coordinators. An etcd table is read from the cluster `options` name (its endpoints, prefix,
 * TLS and auth).
 */
export async function scanTableRoot(root: string, meta: TableMeta, fsLayer: FsLayer = nodeFsLayer, options: LeaseTableOptions = LEASE_TABLE_OPTIONS.defaults): Promise<ScanEntry[]> {
  switch (meta.store) {
    case 'files':
      return scanRecords(fsLayer, new LeaseLayout(root, meta.shardCount), meta.kind);
    case 'sqlite':
      return scanSqliteRoot(root, meta.kind);
    case 'etcd':
      return scanEtcdTable(root, options, meta.kind);
    default:
      throw new InternalError(`lease store ${meta.store satisfies never} has no scan`);
  }
}
