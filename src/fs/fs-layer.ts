/**
 * The injectable filesystem layer: every open, read, write, barrier, rename, unlink, mkdir and
 * readdir the lease tables (and later the AFL queue writer) perform goes through an `FsLayer`.
 *
 * Why an interface and not `node:fs` directly: durability is a protocol (content barrier, then
 * publication, then directory barrier), and the only way to prove a protocol is to fail each step
 * on purpose and look at the bytes left on disk. `FaultInjectingFsLayer` (fault-fs-layer.ts) wraps
 * this real layer for that, and counts the barriers exactly.
 *
 * File descriptors are plain numbers so they can be handed to the native addon (`flock`,
 * `syncfs`). Every method rejects with Node's errno-carrying `Error` (`code` = `ENOENT`, `EIO` …).
 */
import fs from 'node:fs';
import { promisify } from 'node:util';
import { loadNative } from '../native/bindings.js';

/** What kind of filesystem object a stat describes. */
export type FsFileType = 'file' | 'directory' | 'symlink' | 'fifo' | 'socket' | 'character-device' | 'block-device' | 'unknown';

/** The subset of `fs.Stats` the lease code needs. */
export interface FsStat {
  readonly type: FsFileType;
  readonly isFile: boolean;
  readonly isDirectory: boolean;
  readonly isSymbolicLink: boolean;
  readonly size: number;
  /** Device and inode: tell whether a path still names the file an fd was opened on. */
  readonly dev: number;
  readonly ino: number;
  /** Last modification, ms since the epoch (how old a leftover temp file is). */
  readonly mtimeMs: number;
}

/** Names of the operations, used by fault injection and counters. */
export type FsOperation =
  | 'open'
  | 'close'
  | 'read'
  | 'write'
  | 'fsync'
  | 'syncfs'
  | 'fstat'
  | 'lstat'
  | 'rename'
  | 'unlink'
  | 'mkdir'
  | 'readdir'
  | 'syncDirectory'
  | 'utimes';

export interface FsLayer {
  /** `open(2)`; `flags` are `fs.constants` bits. Resolves to a file descriptor. */
  open(path: string, flags: number, mode?: number): Promise<number>;
  close(fd: number): Promise<void>;
  /**
   * Reads the (regular) file behind `fd` from offset 0, until a short read or until more than
   * `maxBytes` bytes were read (default: no bound). A result longer than `maxBytes` (at most
   * `maxBytes + 1` bytes) tells the caller the file is larger than it accepts; use
   * `readBoundedFile` (bounded-read.ts), which checks type and size first.
   */
  readAll(fd: number, maxBytes?: number): Promise<Buffer>;
  /** One `pread(2)` of up to `buffer.length` bytes at `position`; resolves to the bytes read (0 at end of file). */
  readAt(fd: number, buffer: Buffer, position: number): Promise<number>;
  /** Writes all of `data` at the current offset (loops over short writes). */
  writeAll(fd: number, data: Uint8Array): Promise<void>;
  /** File barrier: `fsync(fd)`. */
  fsync(fd: number): Promise<void>;
  /**
   * Filesystem barrier: `syncfs(fd)` (native addon). Rejects with `ENOSYS` when the addon is not
   * built; callers choose this strategy explicitly.
   */
  syncfs(fd: number): Promise<void>;
  fstat(fd: number): Promise<FsStat>;
  /** `lstat(2)`: never follows a final symlink. */
  lstat(path: string): Promise<FsStat>;
  /** Atomic `rename(2)`; replaces an existing destination. */
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  /** Creates one directory (not recursive). */
  mkdir(path: string, mode?: number): Promise<void>;
  readdir(path: string): Promise<string[]>;
  /**
   * `utimes(2)`: sets a file's access and modification times, ms since the epoch (a shared trace's
   * last use, docs/campaign.md "Shared traces"). No barrier: a lost update only ages the file.
   */
  utimes(path: string, atimeMs: number, mtimeMs: number): Promise<void>;
  /**
   * Directory barrier: open the directory `O_RDONLY|O_DIRECTORY`, `fsync` it, close it. Makes the
   * names created, renamed or removed in it durable.
   */
  syncDirectory(path: string): Promise<void>;
}

const openAsync = promisify(fs.open);
const closeAsync = promisify(fs.close);
const readAsync = promisify(fs.read);
const writeAsync = promisify(fs.write);
const fsyncAsync = promisify(fs.fsync);
const fstatAsync = promisify(fs.fstat);
const lstatAsync = promisify(fs.lstat);
const renameAsync = promisify(fs.rename);
const unlinkAsync = promisify(fs.unlink);
const mkdirAsync = promisify(fs.mkdir);
const readdirAsync = promisify(fs.readdir);
const utimesAsync = promisify(fs.utimes);

/**
 * First read of `readAll`: larger than a lease record, and small enough that `allocUnsafe` carves it
 * from Node's shared pool instead of allocating (and later collecting) a buffer per read.
 */
const FIRST_READ_BYTES = (Buffer.poolSize >>> 1) - 1;
const MAX_READ_BYTES = 1024 * 1024;

function typeOf(stats: fs.Stats): FsFileType {
  if (stats.isFile()) return 'file';
  if (stats.isDirectory()) return 'directory';
  if (stats.isSymbolicLink()) return 'symlink';
  if (stats.isFIFO()) return 'fifo';
  if (stats.isSocket()) return 'socket';
  if (stats.isCharacterDevice()) return 'character-device';
  if (stats.isBlockDevice()) return 'block-device';
  return 'unknown';
}

/** An `FsStat` of Node's `fs.Stats` (for synchronous readers of the real filesystem too). */
export function toStat(stats: fs.Stats): FsStat {
  return { type: typeOf(stats), isFile: stats.isFile(), isDirectory: stats.isDirectory(), isSymbolicLink: stats.isSymbolicLink(), size: stats.size, dev: stats.dev, ino: stats.ino, mtimeMs: stats.mtimeMs };
}

function errnoError(code: string, message: string): Error {
  return Object.assign(new Error(`${code}: ${message}`), { code });
}

/** The real filesystem, through Node's libuv thread pool. */
export class NodeFsLayer implements FsLayer {
  open(path: string, flags: number, mode = 0o644): Promise<number> {
    // libuv opens every fd with O_CLOEXEC already.
    return openAsync(path, flags, mode);
  }

  close(fd: number): Promise<void> {
    return closeAsync(fd);
  }

  async readAll(fd: number, maxBytes = Number.POSITIVE_INFINITY): Promise<Buffer> {
    // One read(2) for the usual small file: a regular file returns fewer bytes than asked only at
    // end of file, so a short read ends the loop without the extra zero-byte read. A file larger
    // than the buffer (or one that grew) keeps reading with doubled buffers until a short read —
    // or until one byte past `maxBytes`, so a huge (or endless) file never costs more than the
    // bound the caller accepts.
    const limit = maxBytes + 1;
    const chunks: Buffer[] = [];
    let position = 0;
    let size = Math.min(FIRST_READ_BYTES, limit);
    for (;;) {
      const chunk = Buffer.allocUnsafe(size);
      const { bytesRead } = await readAsync(fd, chunk, 0, chunk.length, position);
      chunks.push(chunk.subarray(0, bytesRead));
      position += bytesRead;
      if (bytesRead < chunk.length || position >= limit) break;
      size = Math.min(size * 2, MAX_READ_BYTES, limit - position);
    }
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  }

  async readAt(fd: number, buffer: Buffer, position: number): Promise<number> {
    return (await readAsync(fd, buffer, 0, buffer.length, position)).bytesRead;
  }

  async writeAll(fd: number, data: Uint8Array): Promise<void> {
    let offset = 0;
    while (offset < data.length) {
      const { bytesWritten } = await writeAsync(fd, data, offset, data.length - offset);
      offset += bytesWritten;
    }
  }

  fsync(fd: number): Promise<void> {
    return fsyncAsync(fd);
  }

  async syncfs(fd: number): Promise<void> {
    const native = loadNative();
    if (!native) throw errnoError('ENOSYS', 'syncfs needs the native addon, which is not built');
    native.syncfs(fd);
  }

  async fstat(fd: number): Promise<FsStat> {
    return toStat(await fstatAsync(fd));
  }

  async lstat(path: string): Promise<FsStat> {
    return toStat(await lstatAsync(path));
  }

  rename(from: string, to: string): Promise<void> {
    return renameAsync(from, to);
  }

  unlink(path: string): Promise<void> {
    return unlinkAsync(path);
  }

  async mkdir(path: string, mode = 0o755): Promise<void> {
    await mkdirAsync(path, { mode });
  }

  readdir(path: string): Promise<string[]> {
    return readdirAsync(path);
  }

  utimes(path: string, atimeMs: number, mtimeMs: number): Promise<void> {
    // Node takes seconds (fractions kept) for numbers.
    return utimesAsync(path, atimeMs / 1000, mtimeMs / 1000);
  }

  async syncDirectory(path: string): Promise<void> {
    const fd = await openAsync(path, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
    try {
      await fsyncAsync(fd);
    } finally {
      await closeAsync(fd);
    }
  }
}

/** One shared real layer; it holds no state. */
export const nodeFsLayer: FsLayer = new NodeFsLayer();

/** The errno name of a filesystem error, or undefined. */
export { codeOf as errnoCode } from '../errors.js';
