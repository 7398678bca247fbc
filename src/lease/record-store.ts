/**
 * Reading records and making shard directories exist, through the fs layer. No locking here:
 * callers hold the record's lock (mutations) or accept a racy snapshot (scans).
 */
import fs from 'node:fs';
import { leaseIoError } from './lease-io-error.js';
import path from 'node:path';
import { LockPathError } from '../errors.js';
import { errnoCode, type FsLayer } from '../io/fs-layer.js';
import type { LeaseLayout } from './lease-layout.js';
import { parseRecord, type RecordKind, type RecordRead } from './lease-record.js';

// No fstat before reading. O_NOFOLLOW refuses a symlink at open; O_NONBLOCK keeps a FIFO planted
// at the path from blocking open(2) forever (holding the record's lock and a libuv pool thread) —
// its positioned read then fails with ESPIPE; a directory fails the read with EISDIR. Every one of
// those ends as `corrupt`, as an fstat check would; for regular files O_NONBLOCK changes nothing.
const READ_FLAGS = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;

/**
 * Reads one record. Absent → `absent`. A symlink, directory or other non-regular file at the
 * record path, unparseable bytes or a failed validation → `corrupt` (fails closed). Any other read
 * error (EIO, EACCES …) rejects with `LeaseIoError`: the caller has mutated nothing yet.
 */
export async function readRecord(fsLayer: FsLayer, recordPath: string, id: string, kind: RecordKind): Promise<RecordRead> {
  let fd: number;
  try {
    fd = await fsLayer.open(recordPath, READ_FLAGS);
  } catch (error) {
    const code = errnoCode(error);
    if (code === 'ENOENT') return { state: 'absent' };
    if (code === 'ELOOP') return { state: 'corrupt', reason: 'record path is a symlink' };
    throw leaseIoError(`cannot open record ${recordPath}: ${(error as Error).message}`, { path: recordPath, errno: code, step: 'read' }, error);
  }
  try {
    const bytes = await fsLayer.readAll(fd);
    return parseRecord(bytes, id, kind);
  } catch (error) {
    const code = errnoCode(error);
    if (code === 'EISDIR') return { state: 'corrupt', reason: 'record path is a directory' };
    if (code === 'EAGAIN' || code === 'ESPIPE') return { state: 'corrupt', reason: 'record path is not a regular file' };
    throw leaseIoError(`cannot read record ${recordPath}: ${(error as Error).message}`, { path: recordPath, errno: code, step: 'read' }, error);
  } finally {
    await fsLayer.close(fd).catch(() => undefined);
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
