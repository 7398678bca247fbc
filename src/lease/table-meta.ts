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
import { errnoCode, type FsLayer } from '../io/fs-layer.js';
import { canonicalJsonBytes } from './canonical-json.js';
import type { LeaseLayout } from './lease-layout.js';
import type { RecordKind } from './lease-record.js';

export const TABLE_META_SCHEMA = 1;

export interface TableMeta {
  readonly schema: typeof TABLE_META_SCHEMA;
  readonly kind: RecordKind;
  readonly shardCount: number;
}

/** Reads a root's metadata; undefined when there is none. Throws `LeaseCorruptError` for garbage. */
export async function readTableMeta(fsLayer: FsLayer, metaPath: string): Promise<TableMeta | undefined> {
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO at the path must not block open(2) forever (see record-store.ts).
    fd = await fsLayer.open(metaPath, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return undefined;
    throw new LeaseCorruptError(`cannot read lease table metadata ${metaPath}: ${(error as Error).message}`, { path: metaPath });
  }
  let bytes: Buffer;
  try {
    if (!(await fsLayer.fstat(fd)).isFile) throw new LeaseCorruptError(`lease table metadata ${metaPath} is not a regular file`, { path: metaPath });
    bytes = await fsLayer.readAll(fd);
  } finally {
    await fsLayer.close(fd).catch(() => undefined);
  }
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
    throw new LeaseCorruptError(`lease table metadata ${metaPath} is corrupt`, { path: metaPath });
  }
  return value as TableMeta;
}

/**
 * Creates the metadata (exclusive create, fsync, directory barrier) or checks the existing one.
 * A concurrent creator may leave the file empty for a moment: re-read briefly before calling it
 * corrupt.
 */
export async function ensureTableMeta(fsLayer: FsLayer, layout: LeaseLayout, kind: RecordKind): Promise<void> {
  const wanted: TableMeta = { schema: TABLE_META_SCHEMA, kind, shardCount: layout.shardCount };
  for (let attempt = 0; ; attempt += 1) {
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
    let existing: TableMeta | undefined;
    try {
      existing = await readTableMeta(fsLayer, layout.metaPath);
    } catch (error) {
      if (attempt < 50) {
        await new Promise((resolve) => setTimeout(resolve, 2));
        continue;
      }
      throw error;
    }
    if (!existing) continue;
    if (existing.kind !== kind) {
      throw invalidOption('root', `a ${kind} lease table directory`, `${layout.root} (holds a ${existing.kind} table)`);
    }
    if (existing.shardCount !== layout.shardCount) {
      throw invalidOption('shardCount', `${existing.shardCount} (the shard count recorded in ${layout.metaPath})`, layout.shardCount);
    }
    return;
  }
}
