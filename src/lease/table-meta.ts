/**
 * `<root>/lease-table.json`: what kind of table a root holds, in which store, and (file store) its
 * shard count. Written once, exclusively, by the first table opened on the root; every later open
 * checks it: two coordinators with different shard counts would place the same id at different
 * paths (and lock different files), and two on different stores would never see each other's
 * leases — silent double leases either way.
 *
 * Schema 1 (`{ kind, schema, shardCount }`) is a file table, byte for byte as it always was.
 * Schema 2 adds `store` and is written for every other store, so that a symfence that knows only
 * schema 1 refuses such a root instead of opening it as an (empty) file table.
 */
import fs from 'node:fs';
import { leaseIoError } from './lease-io-error.js';
import { invalidOption } from '../config/values.js';
import { LeaseCorruptError } from '../errors.js';
import { readBoundedFile } from '../fs/bounded-read.js';
import { errnoCode, type FsLayer } from '../fs/fs-layer.js';
import { canonicalJsonBytes } from './canonical-json.js';
import type { LeaseLayout } from './table-layout.js';
import type { RecordKind } from './lease-record.js';
import { LEASE_STORES, type LeaseStoreKind } from './backend-contract.js';
import type { RecordLocker } from './files/record-lock.js';

const TABLE_META_SCHEMA = 1;
/** Schema of a root whose store is not the file store. */
const TABLE_META_SCHEMA_STORE = 2;
/** Largest metadata file read: the canonical JSON is under 80 bytes. */
const MAX_META_BYTES = 4096;

export interface TableMeta {
  readonly schema: typeof TABLE_META_SCHEMA | typeof TABLE_META_SCHEMA_STORE;
  readonly kind: RecordKind;
  readonly store: LeaseStoreKind;
  readonly shardCount: number;
}

const STORES: readonly string[] = LEASE_STORES;

/** Reads a root's metadata; undefined when there is none. Throws `LeaseCorruptError` for garbage. */
export async function readTableMeta(fsLayer: FsLayer, metaPath: string): Promise<TableMeta | undefined> {
  let read;
  try {
    read = await readBoundedFile(fsLayer, metaPath, { maxBytes: MAX_META_BYTES });
  } catch (error) {
    throw new LeaseCorruptError(`cannot read lease table metadata ${metaPath}: ${(error as Error).message}`, { path: metaPath });
  }
  if (read.state === 'absent') return undefined;
  if (read.state === 'refused') throw new LeaseCorruptError(`lease table metadata ${metaPath} is corrupt: ${read.reason}`, { path: metaPath, reason: read.reason });
  const bytes = read.bytes;
  let value: Partial<Record<keyof TableMeta, unknown>> | undefined;
  try {
    value = JSON.parse(bytes.toString('utf8')) as Partial<Record<keyof TableMeta, unknown>>;
  } catch {
    value = undefined;
  }
  if (
    !value ||
    typeof value !== 'object' ||
    !(
      (value.schema === TABLE_META_SCHEMA && value.store === undefined) ||
      (value.schema === TABLE_META_SCHEMA_STORE && STORES.includes(value.store as string) && value.store !== 'files')
    ) ||
    (value.kind !== 'work' && value.kind !== 'target') ||
    typeof value.shardCount !== 'number' ||
    !Number.isSafeInteger(value.shardCount) ||
    value.shardCount < 1
  ) {
    const hint = bytes.length === 0 ? ' (empty: a creator crashed before writing it; delete it if no table was ever used here)' : '';
    throw new LeaseCorruptError(`lease table metadata ${metaPath} is corrupt${hint}`, { path: metaPath });
  }
  return { schema: value.schema, kind: value.kind, store: (value.store as LeaseStoreKind | undefined) ?? 'files', shardCount: value.shardCount };
}

/**
 * Creates the metadata (exclusive create, fsync, directory barrier) or checks the existing one,
 * under `<root>/lease-table.json.lock`: a coordinator opening a new root while another is still
 * writing its metadata waits for the lock instead of reading a half-written file and calling it
 * corrupt. A file left empty by a crash during creation stays corrupt (fail closed; the error
 * says to delete it).
 */
export async function ensureTableMeta(fsLayer: FsLayer, layout: LeaseLayout, kind: RecordKind, store: LeaseStoreKind, locker: RecordLocker): Promise<void>;
/** The same, then `whileLocked` before the lock is released; resolves to its result. */
export async function ensureTableMeta<T>(fsLayer: FsLayer, layout: LeaseLayout, kind: RecordKind, store: LeaseStoreKind, locker: RecordLocker, whileLocked: () => Promise<T>): Promise<T>;
export async function ensureTableMeta<T>(fsLayer: FsLayer, layout: LeaseLayout, kind: RecordKind, store: LeaseStoreKind, locker: RecordLocker, whileLocked?: () => Promise<T>): Promise<T | void> {
  const handle = await locker.acquire(`${layout.metaPath}.lock`, 'lease table metadata lock');
  try {
    await createOrCheckMeta(fsLayer, layout, kind, store);
    return await whileLocked?.();
  } finally {
    await handle.release();
  }
}

async function createOrCheckMeta(fsLayer: FsLayer, layout: LeaseLayout, kind: RecordKind, store: LeaseStoreKind): Promise<void> {
  const wanted = store === 'files' ? { schema: TABLE_META_SCHEMA, kind, shardCount: layout.shardCount } : { schema: TABLE_META_SCHEMA_STORE, kind, store, shardCount: layout.shardCount };
  let fd: number | undefined;
  try {
    fd = await fsLayer.open(layout.metaPath, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o644);
  } catch (error) {
    if (errnoCode(error) !== 'EEXIST') {
      throw leaseIoError(`cannot create ${layout.metaPath}: ${(error as Error).message}`, { path: layout.metaPath, errno: errnoCode(error), step: 'meta' }, error);
    }
  }
  if (fd !== undefined) {
    try {
      await fsLayer.writeAll(fd, canonicalJsonBytes(wanted));
      await fsLayer.fsync(fd);
    } finally {
      await fsLayer.close(fd).catch(() => undefined); // the metadata is durable (fsync above) or its error is thrown; the close loses nothing
    }
    await fsLayer.syncDirectory(layout.root);
    return;
  }
  const existing = await readTableMeta(fsLayer, layout.metaPath);
  if (!existing) {
    // Deleted between our EEXIST and the read: only an operator does that. Refuse rather than loop.
    throw new LeaseCorruptError(`lease table metadata ${layout.metaPath} vanished while opening the table`, { path: layout.metaPath });
  }
  if (existing.kind !== kind) {
    throw invalidOption('root', `a ${kind} lease table directory`, `${layout.root} (holds a ${existing.kind} table)`);
  }
  if (existing.store !== store) {
    throw invalidOption('store', `${existing.store} (the lease store recorded in ${layout.metaPath}; a lease directory keeps the store it was created with)`, store);
  }
  if (store === 'files' && existing.shardCount !== layout.shardCount) {
    throw invalidOption('shardCount', `${existing.shardCount} (the shard count recorded in ${layout.metaPath})`, layout.shardCount);
  }
}
