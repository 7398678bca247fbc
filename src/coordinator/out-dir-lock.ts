/**
 * One live campaign per output directory: an exclusive `flock` on `<outDir>/.symfence.lock`, held
 * for the campaign's lifetime.
 *
 * Why: the output directory holds this coordinator's AFL queue (its id counter and de-duplication
 * live in the process), `stats.json` and `jobs.jsonl`, and a restarting coordinator replays its own
 * committing results at once. Two live processes on one directory — a restart while the old
 * process is still shutting down, or the same `--name` given twice — would hand out the same AFL
 * ids and publish the same findings twice. The kernel frees the lock when its holder dies, so a
 * crashed campaign never blocks the next one. The file is never deleted (deleting a lock file
 * lets two processes lock two different files); it names the last holder, for the error message.
 */
import { closeSync, ftruncateSync, openSync, readFileSync, writeSync, constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { OutDirBusyError } from '../errors.js';
import type { NativeBindings } from '../native/bindings.js';

export const OUT_DIR_LOCK_FILE = '.symfence.lock';

export class OutDirLock {
  readonly #fd: number;
  readonly #native: NativeBindings;
  #released = false;

  private constructor(fd: number, native: NativeBindings) {
    this.#fd = fd;
    this.#native = native;
  }

  /**
   * Locks `outDir` for `holder` (recorded in the lock file). Throws `ERR_OUT_DIR_BUSY`, naming the
   * holder, when another live campaign has it.
   */
  static acquire(outDir: string, holder: string, native: NativeBindings): OutDirLock {
    const file = path.join(outDir, OUT_DIR_LOCK_FILE);
    const fd = openSync(file, fsConstants.O_RDWR | fsConstants.O_CREAT | fsConstants.O_NOFOLLOW, 0o644);
    let locked = false;
    try {
      locked = native.tryLockExclusive(fd);
      if (!locked) {
        let current = '';
        try {
          current = readFileSync(file, 'utf8').trim();
        } catch {
          // the holder's name is only for the message
        }
        throw new OutDirBusyError(`output directory ${outDir} is in use by another live campaign${current ? ` (${current})` : ''}`, {
          outDir,
          holder: current || null,
        });
      }
      ftruncateSync(fd, 0);
      writeSync(fd, `${holder} pid ${process.pid}\n`, 0);
      return new OutDirLock(fd, native);
    } catch (error) {
      if (locked) native.unlock(fd);
      closeSync(fd);
      throw error;
    }
  }

  /** Idempotent. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    try {
      this.#native.unlock(this.#fd);
    } finally {
      closeSync(this.#fd);
    }
  }
}
