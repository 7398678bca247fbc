/**
 * The table root every store keeps on this host: a directory holding `lease-table.json` (which
 * store, which kind; table-meta.ts) and its `.lock`. The file store keeps its records there too;
 * the SQLite store its database; the etcd store only the metadata and this host's staged findings.
 */
import { nodeFsLayer } from '../fs/fs-layer.js';
import { LeaseLayout } from './table-layout.js';
import type { RecordKind } from './lease-record.js';
import type { LeaseTableOptions } from './lease-table-options.js';
import type { LeaseTableDeps } from './open-backend.js';
import type { LeaseStoreKind } from './backend-contract.js';
import { createRecordLocker, type RecordLocker } from './files/record-lock.js';
import { ensureDirectoryDurable } from './files/record-files.js';
import { ensureTableMeta } from './table-meta.js';

/** A locker for the metadata lock alone (no fd cache: it is taken once per open). */
export function metadataLocker(options: LeaseTableOptions, deps: LeaseTableDeps): RecordLocker {
  return createRecordLocker(options.coordination, {
    fsLayer: deps.fsLayer ?? nodeFsLayer,
    lockAcquireTimeoutMs: options.lockAcquireTimeoutMs,
    lockAgeHintMs: options.lockAgeHintMs,
    monotonicNowMs: deps.monotonicNowMs,
    native: deps.native,
    lockFdCacheSize: 0,
  });
}

/**
 * Creates the root durably and creates or checks its metadata for `store` (refusing a root
 * recorded with another store or kind). Returns the root's one-shard layout (its paths).
 */
export async function ensureStoreRoot(root: string, options: LeaseTableOptions, deps: LeaseTableDeps, kind: RecordKind, store: LeaseStoreKind): Promise<LeaseLayout> {
  return withStoreRoot(root, options, deps, kind, store, async (layout) => layout);
}

/**
 * `ensureStoreRoot`, then `whileLocked` still under the root's metadata lock (a store whose own
 * files must be created by one opener at a time: the SQLite database), resolving to its result.
 */
export async function withStoreRoot<T>(root: string, options: LeaseTableOptions, deps: LeaseTableDeps, kind: RecordKind, store: LeaseStoreKind, whileLocked: (layout: LeaseLayout) => Promise<T>): Promise<T> {
  const fsLayer = deps.fsLayer ?? nodeFsLayer;
  const layout = new LeaseLayout(root, 1);
  await ensureDirectoryDurable(fsLayer, layout.root);
  const locker = metadataLocker(options, deps);
  try {
    return await ensureTableMeta(fsLayer, layout, kind, store, locker, () => whileLocked(layout));
  } finally {
    await locker.close();
  }
}
