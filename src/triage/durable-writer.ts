/**
 * The one durable operation queue publication needs: make a batch of files appear in a directory
 * under their final names, each complete and durable before its name exists, and every name
 * durable before the call resolves. AFL++ reads a peer's `id:` entries as soon as it sees them, so
 * a name must never point at a partial file, not even after a crash.
 *
 * `FsDirectWriter` does this with plain fs calls in the coordinator's thread; the I/O thread
 * implements the same port when it owns every durable mutation.
 */
import { mkdir, open, readdir, rename, unlink } from 'node:fs/promises';
import path from 'node:path';

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

export const realBarriers: BarrierOps = {
  fsyncFile: (handle) => handle.sync(),
  async fsyncDir(dir) {
    const handle = await open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  },
};

let stagingSeq = 0;

export class FsDirectWriter implements DurableWriter {
  readonly #barriers: BarrierOps;

  constructor(barriers: BarrierOps = realBarriers) {
    this.#barriers = barriers;
  }

  async ensureDir(dir: string): Promise<void> {
    await mkdir(dir, { recursive: true });
    await this.#barriers.fsyncDir(path.dirname(dir));
  }

  async list(dir: string): Promise<string[]> {
    return readdir(dir);
  }

  async publish(dir: string, files: readonly DurableFile[]): Promise<void> {
    if (files.length === 0) return;
    const staged: Array<{ staging: string; final: string }> = [];
    try {
      for (const file of files) {
        if (file.name.startsWith('.') || file.name.includes('/')) throw new Error(`invalid published name ${JSON.stringify(file.name)}`);
        // Hidden and never `id:`-prefixed: AFL's sync ignores it while it is incomplete.
        const staging = path.join(dir, `.symfence-publish-${process.pid}-${++stagingSeq}.tmp`);
        staged.push({ staging, final: path.join(dir, file.name) });
        const handle = await open(staging, 'wx');
        try {
          await handle.writeFile(file.bytes);
          await this.#barriers.fsyncFile(handle);
        } finally {
          await handle.close();
        }
      }
      for (const { staging, final } of staged) await rename(staging, final);
      await this.#barriers.fsyncDir(dir);
    } catch (error) {
      await Promise.all(staged.map(({ staging }) => unlink(staging).catch(() => {})));
      throw error;
    }
  }
}
