// A DurableWriter in the calling thread, for the queue publisher's tests: the same contract as the
// I/O thread's publication (src/io/file-publication.ts), one file at a time, through the
// injectable fs layer and the shared durable-file steps (src/fs/durable-files.ts).
import path from 'node:path';
import { createTempFile } from '../../src/fs/durable-files.js';
import { errnoCode, nodeFsLayer, type FsLayer } from '../../src/fs/fs-layer.js';
import type { DurableFile, DurableWriter } from '../../src/triage/durable-writer.js';

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
