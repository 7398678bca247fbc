/**
 * The one way symfence reads its own small state files (lease records, lease-table.json, staged
 * findings, scheduler state): open without blocking, check what the path names, check its size,
 * then read at most that bound.
 *
 * Why each step (docs/lease-format.md "Reading a record"):
 * - `O_NONBLOCK`: open(2) of a FIFO would wait for a writer forever (holding a record lock and a
 *   libuv pool thread); a unix socket fails open with `ENXIO` — both are answered here, not thrown.
 * - `O_NOFOLLOW` (unless the caller allows symlinks): a symlink planted at the path is refused.
 * - `fstat` before reading: only a regular file is read. A device that reads like /dev/zero, a
 *   directory, a FIFO or a socket is `refused` with a reason and never read.
 * - the size bound before reading, and again while reading: a 3 GB (sparse) file costs one fstat,
 *   not 3 GB of memory, and a file that grows after the fstat still stops at `maxBytes + 1`.
 *
 * Everything goes through the injectable `FsLayer`, so fault tests see (and can fail) each step.
 * Errors other than "absent" and "not a readable regular file" reject with the errno error
 * unchanged: callers wrap them in their own coded error.
 */
import fs from 'node:fs';
import { errnoCode, toStat, type FsFileType, type FsLayer, type FsStat } from './fs-layer.js';

interface BoundedReadOptions {
  /** Largest accepted file, bytes. A larger file is `refused` without being read. */
  readonly maxBytes: number;
  /** Follow a symlink at the final path component. Default false (a symlink is `refused`). */
  readonly followSymlinks?: boolean;
}

/** Why a path was not read. */
type RefusedKind = Exclude<FsFileType, 'file'> | 'oversized';

type BoundedRead =
  | { readonly state: 'absent' }
  | { readonly state: 'read'; readonly bytes: Buffer; readonly stat: FsStat }
  | { readonly state: 'refused'; readonly kind: RefusedKind; readonly reason: string };

const NAMES: Readonly<Record<Exclude<FsFileType, 'file'>, string>> = {
  directory: 'a directory',
  symlink: 'a symlink',
  fifo: 'a FIFO',
  socket: 'a socket',
  'character-device': 'a character device',
  'block-device': 'a block device',
  unknown: 'not a regular file',
};

function refusedType(type: Exclude<FsFileType, 'file'>): BoundedRead {
  return { state: 'refused', kind: type, reason: `path is ${NAMES[type]}, not a regular file` };
}

function oversized(size: number, maxBytes: number): BoundedRead {
  return { state: 'refused', kind: 'oversized', reason: `file is ${size > maxBytes + 1 ? `${size} bytes` : 'larger than the bound'}, over the ${maxBytes}-byte bound` };
}

/**
 * What a failed open means: absent, refused (a symlink under O_NOFOLLOW, a socket), or an error.
 * open(2) of a unix socket fails with ENXIO; of a FIFO without a writer under O_WRONLY too (never
 * here: we open read-only). Either way the path is not a file we read.
 */
function openFailure(error: unknown, options: BoundedReadOptions): BoundedRead {
  const code = errnoCode(error);
  if (code === 'ENOENT') return { state: 'absent' };
  if (code === 'ELOOP' && !options.followSymlinks) return refusedType('symlink');
  if (code === 'ENXIO') return refusedType('socket');
  throw error;
}

/**
 * Reads the regular file at `filePath` if it is at most `maxBytes` long. Resolves `absent` for a
 * missing file, `refused` (with a reason) for anything that is not a regular file within the
 * bound, `read` otherwise. Rejects with the errno error for other failures (EIO, EACCES …).
 */
export async function readBoundedFile(fsLayer: FsLayer, filePath: string, options: BoundedReadOptions): Promise<BoundedRead> {
  const { maxBytes } = options;
  const flags = fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY | (options.followSymlinks ? 0 : fs.constants.O_NOFOLLOW);
  let fd: number;
  try {
    fd = await fsLayer.open(filePath, flags);
  } catch (error) {
    return openFailure(error, options);
  }
  try {
    const stat = await fsLayer.fstat(fd);
    if (stat.type !== 'file') return refusedType(stat.type);
    if (stat.size > maxBytes) return oversized(stat.size, maxBytes);
    const bytes = await fsLayer.readAll(fd, maxBytes);
    if (bytes.length > maxBytes) return oversized(bytes.length, maxBytes);
    return { state: 'read', bytes, stat };
  } finally {
    await fsLayer.close(fd).catch(() => undefined); // the read already succeeded or failed; a close error loses no data
  }
}

/**
 * `readBoundedFile` for synchronous callers (the public `readStatsFile`, `status`): the same steps
 * and answers, on Node's fs directly rather than an injectable layer.
 */
export function readBoundedFileSync(filePath: string, options: BoundedReadOptions): BoundedRead {
  const { maxBytes } = options;
  const flags = fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY | (options.followSymlinks ? 0 : fs.constants.O_NOFOLLOW);
  let fd: number;
  try {
    fd = fs.openSync(filePath, flags);
  } catch (error) {
    return openFailure(error, options);
  }
  try {
    const stat = toStat(fs.fstatSync(fd));
    if (stat.type !== 'file') return refusedType(stat.type);
    if (stat.size > maxBytes) return oversized(stat.size, maxBytes);
    // Read to EOF in chunks, stopping at maxBytes + 1: a file growing after the fstat still stops there.
    const chunks: Buffer[] = [];
    let length = 0;
    while (length <= maxBytes) {
      const chunk = Buffer.alloc(Math.min(maxBytes + 1 - length, 1 << 20));
      const n = fs.readSync(fd, chunk, 0, chunk.length, length);
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
      length += n;
    }
    if (length > maxBytes) return oversized(length, maxBytes);
    return { state: 'read', bytes: Buffer.concat(chunks, length), stat };
  } finally {
    fs.closeSync(fd);
  }
}

/** What `forEachLine` found at the path: like `BoundedRead`, without the bytes. */
type BoundedLines =
  | { readonly state: 'absent' }
  | { readonly state: 'read'; readonly lines: number; readonly bytes: number }
  | { readonly state: 'refused'; readonly kind: RefusedKind | 'long-line'; readonly reason: string };

interface LineReadOptions extends BoundedReadOptions {
  /** Longest line, bytes without its `\n`; a longer one refuses the file (`kind: 'long-line'`). */
  readonly maxLineBytes: number;
}

/** Bytes read per `readAt` while streaming lines. */
const LINE_CHUNK_BYTES = 1 << 20;

/**
 * Streams the lines of a regular file of at most `maxBytes` to `onLine`, in order, one 1 MiB
 * `readAt` at a time: memory is one chunk plus one line, whatever the file's size. The same open,
 * type and size checks as `readBoundedFile`, through the same `FsLayer`. `onLine(text, lineNumber,
 * terminated)`: the last line is passed with `terminated: false` when the file does not end with
 * `\n` (a row being appended right now), and never when it ends with one. Each line is decoded as
 * UTF-8 on its own. Errors other than absent/refused reject with the errno error, as `readBoundedFile`.
 */
export async function forEachLine(
  fsLayer: FsLayer,
  filePath: string,
  options: LineReadOptions,
  onLine: (text: string, lineNumber: number, terminated: boolean) => void,
): Promise<BoundedLines> {
  return forEachLineBytes(fsLayer, filePath, options, (bytes, start, end, lineNumber, terminated) => onLine(bytes.toString('utf8', start, end), lineNumber, terminated));
}

/**
 * `forEachLine` without decoding: `onLine` gets the line as `bytes[start, end)` (valid only during
 * the call), so a parser of a huge file can read its fields without a string per line.
 */
export async function forEachLineBytes(
  fsLayer: FsLayer,
  filePath: string,
  options: LineReadOptions,
  onLine: (bytes: Buffer, start: number, end: number, lineNumber: number, terminated: boolean) => void,
): Promise<BoundedLines> {
  const { maxBytes, maxLineBytes } = options;
  const flags = fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY | (options.followSymlinks ? 0 : fs.constants.O_NOFOLLOW);
  let fd: number;
  try {
    fd = await fsLayer.open(filePath, flags);
  } catch (error) {
    return openFailure(error, options) as BoundedLines;
  }
  try {
    const stat = await fsLayer.fstat(fd);
    if (stat.type !== 'file') return refusedType(stat.type) as BoundedLines;
    if (stat.size > maxBytes) return oversized(stat.size, maxBytes) as BoundedLines;
    const chunk = Buffer.alloc(LINE_CHUNK_BYTES);
    // The start of a line that spans chunks (at most maxLineBytes).
    let carry: Buffer = Buffer.alloc(0);
    let offset = 0;
    let lines = 0;
    const longLine = (): BoundedLines => ({ state: 'refused', kind: 'long-line', reason: `line ${lines + 1} is longer than ${maxLineBytes} bytes` });
    for (;;) {
      const n = await fsLayer.readAt(fd, chunk.subarray(0, Math.min(chunk.length, maxBytes + 1 - offset)), offset);
      if (n === 0) break;
      offset += n;
      // A file that grew past the bound after the fstat still stops here.
      if (offset > maxBytes) return oversized(offset, maxBytes) as BoundedLines;
      let start = 0;
      for (let nl = chunk.indexOf(10, 0); nl >= 0 && nl < n; nl = chunk.indexOf(10, start)) {
        if (carry.length + nl - start > maxLineBytes) return longLine();
        if (carry.length > 0) {
          const joined = Buffer.concat([carry, chunk.subarray(start, nl)]);
          carry = Buffer.alloc(0);
          onLine(joined, 0, joined.length, ++lines, true);
        } else onLine(chunk, start, nl, ++lines, true);
        start = nl + 1;
      }
      if (start < n) {
        if (carry.length + n - start > maxLineBytes) return longLine();
        carry = Buffer.concat([carry, chunk.subarray(start, n)]);
      }
    }
    if (carry.length > 0) onLine(carry, 0, carry.length, ++lines, false);
    return { state: 'read', lines, bytes: offset };
  } finally {
    await fsLayer.close(fd).catch(() => undefined); // a read-only descriptor: the lines were already read or their error thrown; a close error loses nothing
  }
}
