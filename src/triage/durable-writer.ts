/**
 * The one durable operation queue publication needs: make a batch of files appear in a directory
 * under their final names, each complete and durable before its name exists, and every name
 * durable before the call resolves. AFL++ reads a peer's `id:` entries as soon as it sees them, so
 * a name must never point at a partial file, not even after a crash.
 *
 * `FsDirectWriter` does this in the coordinator's thread, through the injectable fs layer and the
 * shared durable-file steps (src/fs/durable-files.ts), one file at a time; the I/O thread
 * implements the same port when it owns every durable mutation.
 */
import path from 'node:path';
import { createTempFile } from '../fs/durable-files.js';
import { errnoCode, nodeFsLayer, type FsLayer } from '../fs/fs-layer.js';

export interface DurableFile {
  /** Final name inside the directory (must not start with `.`). */
  readonly name: string;
  readonly bytes: Uint8Array;
}

export interface DurableWriter {
  /** Creates `dir` (and parents) durably if missing. */
  ensureDir(dir: string): Promise<void>;
  /** Names currently in `dir`. */
  list(dir: string): Promise<string[]>;
  /**
   * Publishes `files` into `dir` in order. Contract: every file's content is durable before its
   * final name appears; the names appear in array order; the directory entry is durable before
   * the promise resolves. On failure nothing half-written carries a final name (staging files
   * are hidden and removed best-effort).
   */
  publish(dir: string, files: readonly DurableFile[]): Promise<void>;
}

/** Barrier hooks, injectable so tests can count fsyncs and inject failures. */
export interface BarrierOps {
  fsyncFile(handle: { sync(): Promise<void> }): Promise<void>;
  fsyncDir(dir: string): Promise<void>;
}

/** The real barriers, on the real filesystem. */
export const realBarriers: BarrierOps = {
  fsyncFile: (handle) => handle.sync(),
  fsyncDir: (dir) => nodeFsLayer.syncDirectory(dir),
};

let stagingSeq = 0;

export class FsDirectWriter implements DurableWriter {
  readonly #barriers: BarrierOps;
  readonly #fsLayer: FsLayer;

  /** `barriers` default: the barriers of `fsLayer` (default: the real filesystem). */
  constructor(barriers?: BarrierOps, fsLayer: FsLayer = nodeFsLayer) {
    this.#fsLayer = fsLayer;
    this.#barriers = barriers ?? { fsyncFile: (handle) => handle.sync(), fsyncDir: (dir) => fsLayer.syncDirectory(dir) };
  }

  async ensureDir(dir: string): Promise<void> {
    await makeDirectories(this.#fsLayer, path.resolve(dir));
    await this.#barriers.fsyncDir(path.dirname(dir));
  }

  async list(dir: string): Promise<string[]> {
    return this.#fsLayer.readdir(dir);
  }

  async publish(dir: string, files: readonly DurableFile[]): Promise<void> {
    if (files.length === 0) return;
    const fsLayer = this.#fsLayer;
    const staged: Array<{ staging: string; final: string }> = [];
    try {
      for (const file of files) {
        if (file.name.startsWith('.') || file.name.includes('/')) throw new Error(`invalid published name ${JSON.stringify(file.name)}`);
        // Hidden and never `id:`-prefixed: AFL's sync ignores it while it is incomplete.
        const staging = path.join(dir, `.symfence-publish-${process.pid}-${++stagingSeq}.tmp`);
        const fd = await createTempFile(fsLayer, staging, file.bytes);
        staged.push({ staging, final: path.join(dir, file.name) });
        try {
          await this.#barriers.fsyncFile({ sync: () => fsLayer.fsync(fd) });
        } finally {
          await fsLayer.close(fd);
        }
      }
      // Every content barrier is done before the first name appears.
      for (const { staging, final } of staged) await fsLayer.rename(staging, final);
      await this.#barriers.fsyncDir(dir);
    } catch (error) {
      await Promise.all(staged.map(({ staging }) => fsLayer.unlink(staging).catch(() => {}))); // cleanup after a failed publication; its error is rethrown below
      throw error;
    }
  }
}

/** `mkdir -p` through the fs layer. */
async function makeDirectories(fsLayer: FsLayer, dir: string): Promise<void> {
  try {
    await fsLayer.mkdir(dir);
  } catch (error) {
    const code = errnoCode(error);
    if (code === 'EEXIST') {
      if ((await fsLayer.lstat(dir)).isDirectory) return;
      throw error;
    }
    if (code !== 'ENOENT' || path.dirname(dir) === dir) throw error;
    await makeDirectories(fsLayer, path.dirname(dir));
    try {
      await fsLayer.mkdir(dir);
    } catch (again) {
      if (errnoCode(again) !== 'EEXIST') throw again;
    }
  }
}
