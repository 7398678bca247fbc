/**
 * The steps of a durable file write, shared by every writer that must never let a name point at
 * partial content — lease records (src/lease/files/durability-batch.ts), the AFL-visible queue and
 * staged findings (src/io/file-publication.ts), and single files (`writeFileDurably`: the
 * scheduler's lane state, the campaign report):
 *
 *   1. temp         create a fresh hidden temp exclusively next to the final name, write the bytes
 *   2. file barrier make the temps' content durable (one fsync per file, or one syncfs)
 *   3. rename       move each temp to its final name (the caller's order and undo rules)
 *   4. dir barrier  make the new names durable (one per touched directory)
 *
 * Content is durable before its name exists (2 before 3), and a name is durable before the caller
 * reports success (4 before answering). Batching callers run each step over many files at once,
 * so the steps are separate functions; `replaceFileDurably` runs 1–3 for a single file and
 * `writeFileDurably` all four. Everything goes through the injectable `FsLayer`, so fault injection
 * can fail any step and look at the bytes left on disk (docs/io-thread.md "Barrier pass").
 *
 * `writeFileAtomic` is steps 1 and 3 without barriers, for status files rewritten every few
 * seconds (stats.json): a reader sees the old or the new content, never a partial one, but the
 * file is not claimed durable. It runs on libuv's pool, never on the caller's thread: on ext4 a
 * rename over an existing file flushes the new file's data first (`auto_da_alloc`), tens of ms
 * while the I/O thread's barriers load the disk. `writeFileAtomicSync` is the same for test hooks.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { FsLayer } from './fs-layer.js';

/** How temp-file content is made durable before publication. */
export type FileBarrierStrategy = 'fsync' | 'syncfs';

/** Exclusive create, never through a symlink: a temp name is ours alone. */
const TEMP_FLAGS = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW;

/** UTF-16 code units of a text encoded per write (at most 3 MiB of UTF-8 at a time). */
const TEXT_CHUNK_UNITS = 1 << 20;

/** What a single-file write takes: bytes, or a text written as UTF-8. */
type FileContent = Uint8Array | string;

/**
 * Writes `content` at the descriptor's offset. A text is encoded a chunk at a time, so a large
 * one (the campaign report) is never held a second time as one whole buffer; a chunk never ends
 * between the two halves of a surrogate pair.
 */
async function writeContent(fsLayer: FsLayer, fd: number, content: FileContent): Promise<void> {
  if (typeof content !== 'string') return fsLayer.writeAll(fd, content);
  for (let start = 0; start < content.length; ) {
    let end = Math.min(content.length, start + TEXT_CHUNK_UNITS);
    const last = content.charCodeAt(end - 1);
    if (end < content.length && last >= 0xd800 && last <= 0xdbff) end -= 1;
    await fsLayer.writeAll(fd, Buffer.from(content.slice(start, end), 'utf8'));
    start = end;
  }
}

/**
 * Step 1: creates `temp` exclusively and writes all of `content`; resolves to the open descriptor
 * (the caller closes it after the file barrier). If the write fails the temp is closed and
 * unlinked here (it is ours); if the open fails nothing was created, and the name is left alone
 * (an `EEXIST` name belongs to someone else).
 */
export async function createTempFile(fsLayer: FsLayer, temp: string, content: FileContent, mode = 0o644): Promise<number> {
  const fd = await fsLayer.open(temp, TEMP_FLAGS, mode);
  try {
    await writeContent(fsLayer, fd, content);
    return fd;
  } catch (error) {
    await fsLayer.close(fd).catch(() => undefined); // cleanup after a failed write; its error is rethrown below
    await fsLayer.unlink(temp).catch(() => undefined); // cleanup after a failed write; its error is rethrown below (a temp left is swept later)
    throw error;
  }
}

/** What a file barrier pass did: barriers issued, and the first failure (null = all durable). */
interface FileBarrierPass {
  readonly barriers: number;
  readonly failure: { readonly reason: unknown } | null;
}

/**
 * Step 2: one barrier pass over every descriptor — one `syncfs` for the filesystem, or one
 * `fsync` per file issued in parallel (all are awaited before a failure is reported, so no
 * barrier is still running when the caller starts undoing). Never rejects.
 */
export async function barrierFiles(fsLayer: FsLayer, strategy: FileBarrierStrategy, fds: readonly number[]): Promise<FileBarrierPass> {
  if (fds.length === 0) return { barriers: 0, failure: null };
  if (strategy === 'syncfs') {
    try {
      await fsLayer.syncfs(fds[0]!);
      return { barriers: 1, failure: null };
    } catch (reason) {
      return { barriers: 1, failure: { reason } };
    }
  }
  const results = await Promise.allSettled(fds.map((fd) => fsLayer.fsync(fd)));
  const failed = results.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined;
  return { barriers: fds.length, failure: failed ? { reason: failed.reason } : null };
}

/** Closes every descriptor in parallel; resolves with each close's outcome, in order. */
export function closeFiles(fsLayer: FsLayer, fds: readonly number[]): Promise<PromiseSettledResult<void>[]> {
  return Promise.allSettled(fds.map((fd) => fsLayer.close(fd)));
}

/** Step 4: one barrier per directory, in parallel; resolves with each outcome, in order. */
export function barrierDirectories(fsLayer: FsLayer, dirs: readonly string[]): Promise<PromiseSettledResult<void>[]> {
  return Promise.allSettled(dirs.map((dir) => fsLayer.syncDirectory(dir)));
}

/**
 * Steps 1–3 for one file: `content` reaches `final` only after they are durable in `temp`, and an
 * existing `final` is replaced atomically. On failure the temp is closed and removed and `final`
 * is untouched (unless the rename itself failed after taking effect). The directory barrier is
 * the caller's: it usually covers several files.
 */
export async function replaceFileDurably(fsLayer: FsLayer, temp: string, final: string, content: FileContent, mode = 0o644): Promise<void> {
  const fd = await createTempFile(fsLayer, temp, content, mode);
  let open = true;
  try {
    await fsLayer.fsync(fd);
    open = false;
    await fsLayer.close(fd);
    await fsLayer.rename(temp, final);
  } catch (error) {
    if (open) await fsLayer.close(fd).catch(() => undefined); // cleanup after a failed replace; its error is rethrown below
    await fsLayer.unlink(temp).catch(() => undefined); // cleanup after a failed replace; its error is rethrown below (a temp left is swept later)
    throw error;
  }
}

/** A hidden temp name beside `file`, unique to this process and call. */
function tempNameFor(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${process.hrtime.bigint()}.tmp`);
}

/**
 * Steps 1–4 for one file: `content` (bytes, or a text as UTF-8) replaces `file` atomically and
 * durably (its directory must exist). On failure `file` keeps its old content (`replaceFileDurably`).
 */
export async function writeFileDurably(fsLayer: FsLayer, file: string, content: FileContent, mode = 0o644): Promise<void> {
  await replaceFileDurably(fsLayer, tempNameFor(file), file, content, mode);
  // The rename is durable only once the directory entry is: without this a crash could bring
  // back the old content (or none) after the write was reported done.
  await fsLayer.syncDirectory(path.dirname(file));
}

/** Steps 1 and 3 without barriers (file comment): atomic, not durable, off the caller's thread. */
export async function writeFileAtomic(file: string, content: string | Uint8Array): Promise<void> {
  const temp = tempNameFor(file);
  try {
    await fs.promises.writeFile(temp, content, { flag: 'wx' });
    await fs.promises.rename(temp, file);
  } catch (error) {
    await fs.promises.unlink(temp).catch(() => undefined); // nothing was created, or it is gone already; the write's own error is rethrown below
    throw error;
  }
}

/** `writeFileAtomic`, synchronously (test hooks that must be on disk before they return). */
export function writeFileAtomicSync(file: string, content: string | Uint8Array): void {
  const temp = tempNameFor(file);
  try {
    fs.writeFileSync(temp, content, { flag: 'wx' });
    fs.renameSync(temp, file);
  } catch (error) {
    try {
      fs.unlinkSync(temp);
    } catch {
      // Nothing was created (or it is gone already); the write's own error is rethrown below.
    }
    throw error;
  }
}

