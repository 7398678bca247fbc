/**
 * `<root>/lease-table.json`: what kind of table a root holds and its shard count. Written once,
 * exclusively, by the first table opened on the root; every later open checks it, because two
 * coordinators with different shard counts would place the same id at different paths (and lock
 * different files) — silent double leases.
 */
import fs from 'node:fs';
import { leaseIoError } from './lease-io-error.js';
import { invalidOption } from '../config/values.js';
import { LeaseCorruptError } from '../errors.js';
import { readBoundedFile } from '../fs/bounded-read.js';
import { errnoCode, type FsLayer } from '../fs/fs-layer.js';
import { canonicalJsonBytes } from './canonical-json.js';
import type { LeaseLayout } from './lease-layout.js';
import type { RecordKind } from './lease-record.js';
import type { RecordLocker } from './record-lock.js';

export const TABLE_META_SCHEMA = 1;
/** Largest metadata file read: the canonical JSON is under 60 bytes. */
const MAX_META_BYTES = 4096;

export interface TableMeta {
  readonly schema: typeof TABLE_META_SCHEMA;
  readonly kind: RecordKind;
  readonly shardCount: number;
}

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
  let value: Partial<TableMeta> | undefined;
  try {
    value = JSON.parse(bytes.toString('utf8')) as Partial<TableMeta>;
  } catch {
    value = undefined;
  }
  if (
    !value ||
    value.schema !== TABLE_META_SCHEMA ||
    (value.kind !== 'work' && value.kind !== 'target') ||
    typeof value.shardCount !== 'number' ||
    !Number.isSafeInteger(value.shardCount) ||
    value.shardCount < 1
  ) {
    const hint = bytes.length === 0 ? ' (empty: a creator crashed before writing it; delete it if no table was ever used here)' : '';
    throw new LeaseCorruptError(`lease table metadata ${metaPath} is corrupt${hint}`, { path: metaPath });
  }
  return value as TableMeta;
}

/**
 * Creates the metadata (exclusive create, fsync, directory barrier) or checks the existing one,
 * under `<root>/lease-table.json.lock`: a coordinator opening a new root while another is still
 * writing its metadata waits for the lock instead of reading a half-written file and calling it
 * corrupt. A file left empty by a crash during creation stays corrupt (fail closed; the error
 * says to delete it).
 */
export async function ensureTableMeta(fsLayer: FsLayer, layout: LeaseLayout, kind: RecordKind, locker: RecordLocker): Promise<void> {
  const handle = await locker.acquire(`${layout.metaPath}.lock`, 'lease table metadata lock');
  try {
    await createOrCheckMeta(fsLayer, layout, kind);
  } finally {
    await handle.release();
  }
}

async function createOrCheckMeta(fsLayer: FsLayer, layout: LeaseLayout, kind: RecordKind): Promise<void> {
  const wanted: TableMeta = { schema: TABLE_META_SCHEMA, kind, shardCount: layout.shardCount };
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
      await fsLayer.close(fd).catch(() => undefined);
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
  if (existing.shardCount !== layout.shardCount) {
    throw invalidOption('shardCount', `${existing.shardCount} (the shard count recorded in ${layout.metaPath})`, layout.shardCount);
  }
}
