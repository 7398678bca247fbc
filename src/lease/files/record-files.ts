/**
 * Reading records and making shard directories exist, through the fs layer. No locking here:
 * callers hold the record's lock (mutations) or accept a racy snapshot (scans).
 */
import { leaseIoError } from '../lease-io-error.js';
import path from 'node:path';
import { LockPathError } from '../../errors.js';
import { readBoundedFile } from '../../fs/bounded-read.js';
import { errnoCode, type FsLayer } from '../../fs/fs-layer.js';
import { maxRecordBytes, parseRecord, type RecordKind, type RecordRead } from '../lease-record.js';
import type { RecordReadCache } from '../record-read-cache.js';

/**
 * Reads one record through `readBoundedFile` (bounded-read.ts). Absent → `absent`. A symlink,
 * directory, FIFO, socket, device or other non-regular file at the record path, a file larger
 * than a record of `kind` can be, unparseable bytes or a failed validation → `corrupt` with a
 * reason (fails closed); `cache` reuses the parse of unchanged bytes (record-read-cache.ts). Any other read error (EIO, EACCES …) rejects with `LeaseIoError`: the
 * caller has mutated nothing yet.
 */
export async function readRecord(fsLayer: FsLayer, recordPath: string, id: string, kind: RecordKind, cache?: RecordReadCache): Promise<RecordRead> {
  let read;
  try {
    read = await readBoundedFile(fsLayer, recordPath, { maxBytes: maxRecordBytes(kind) });
  } catch (error) {
    const code = errnoCode(error);
    throw leaseIoError(`cannot read record ${recordPath}: ${(error as Error).message}`, { path: recordPath, errno: code, step: 'read' }, error);
  }
  if (read.state === 'absent') return read;
  if (read.state === 'refused') return { state: 'corrupt', reason: `record ${read.reason}` };
  return cache !== undefined ? cache.parse(read.bytes, id) : parseRecord(read.bytes, id, kind);
}

/**
 * Checks that a shard directory (or the root) is still a real directory, not a symlink or file
 * swapped in after the table first used it. One `lstat` per batch and directory: cheap next to
 * the lock opens that follow, and it means a record operation never writes through a link.
 */
export async function checkDirectory(fsLayer: FsLayer, dir: string): Promise<void> {
  let stat;
  try {
    stat = await fsLayer.lstat(dir);
  } catch (error) {
    throw leaseIoError(`cannot stat ${dir}: ${(error as Error).message}`, { path: dir, errno: errnoCode(error), step: 'mkdir' }, error);
  }
  if (!stat.isDirectory) {
    throw new LockPathError(`${dir} is not a directory${stat.isSymbolicLink ? ' (symlink)' : ''}; refusing to use it for lease records`, { path: dir });
  }
}

/**
 * Creates `dir` (and missing ancestors) durably: each new directory is synced, then its parent,
 * so the new name survives a crash before any record is published inside it. An existing
 * directory costs one `lstat` and no barrier. A non-directory (or symlink) in the way is refused.
 */
export async function ensureDirectoryDurable(fsLayer: FsLayer, dir: string): Promise<void> {
  const missing: string[] = [];
  let current = path.resolve(dir);
  for (;;) {
    try {
      const stat = await fsLayer.lstat(current);
      if (!stat.isDirectory) {
        throw new LockPathError(`${current} is not a directory${stat.isSymbolicLink ? ' (symlink)' : ''}; refusing to use it for lease records`, { path: current });
      }
      break;
    } catch (error) {
      if (error instanceof LockPathError) throw error;
      if (errnoCode(error) !== 'ENOENT') {
        throw leaseIoError(`cannot stat ${current}: ${(error as Error).message}`, { path: current, errno: errnoCode(error), step: 'mkdir' }, error);
      }
      missing.push(current);
      const parent = path.dirname(current);
      if (parent === current) break;
      current = parent;
    }
  }
  for (const component of missing.reverse()) {
    try {
      await fsLayer.mkdir(component);
    } catch (error) {
      // A concurrent coordinator may create the same shard directory first.
      if (errnoCode(error) !== 'EEXIST') {
        throw leaseIoError(`cannot create ${component}: ${(error as Error).message}`, { path: component, errno: errnoCode(error), step: 'mkdir' }, error);
      }
      const stat = await fsLayer.lstat(component);
      if (!stat.isDirectory) throw new LockPathError(`${component} is not a directory; refusing to use it for lease records`, { path: component });
    }
    try {
      await fsLayer.syncDirectory(component);
      await fsLayer.syncDirectory(path.dirname(component));
    } catch (error) {
      throw leaseIoError(`cannot make ${component} durable: ${(error as Error).message}`, { path: component, errno: errnoCode(error), step: 'mkdir' }, error);
    }
  }
}
