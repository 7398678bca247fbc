/**
 * Keeps a campaign's lane state on disk: loads `<outDir>/scheduler-state.json` at start (a
 * restarted campaign does not learn what its lanes already know a second time), saves it every
 * `intervalMs` and once more at close. Writes are atomic and durable (lane-state-file.ts).
 *
 * A state file that cannot be used (not JSON, wrong schema, a lane that refuses its part) is
 * never fatal: it is logged (warn, with its path and error code) and renamed to
 * `<file>.corrupt-<ms>` so the next save does not destroy the evidence, and the campaign starts
 * with empty lanes. A failed save is logged and the previous file is kept.
 */
import { rename } from 'node:fs/promises';
import type { Logger } from '../telemetry/logger.js';
import type { Scheduler } from './scheduler.js';
import { sweepStateTemps } from './lane-state-file.js';

export const SCHEDULER_STATE_FILE = 'scheduler-state.json';

interface LaneStateKeeperInit {
  readonly scheduler: Scheduler;
  readonly file: string;
  /** 0 = save only at close. */
  readonly intervalMs: number;
  readonly now: () => number;
  readonly logger: Logger;
}

type LoadOutcome = { readonly state: 'loaded' | 'absent' } | { readonly state: 'set-aside'; readonly movedTo: string | null; readonly code: string };

export class LaneStateKeeper {
  readonly #init: LaneStateKeeperInit;
  #timer: NodeJS.Timeout | undefined;
  /** The save in progress: a periodic save and the final one never write concurrently. */
  #saving: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(init: LaneStateKeeperInit) {
    this.#init = init;
  }

  get file(): string {
    return this.#init.file;
  }

  /**
   * Loads the state file if there is one, after removing the temps of saves killed before their
   * rename (`sweepStateTemps`). Never throws: an unusable file is set aside.
   */
  async load(): Promise<LoadOutcome> {
    const { scheduler, file, logger } = this.#init;
    try {
      const swept = await sweepStateTemps(file);
      if (swept.length > 0) logger.info({ file, swept }, 'removed the temps of lane-state saves killed before their rename');
    } catch (error) {
      logger.warn({ file, err: error }, 'could not look for leftover lane-state temps; they stay');
    }
    try {
      return { state: (await scheduler.loadState(file, this.#init.now())) ? 'loaded' : 'absent' };
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      const codeText = typeof code === 'string' ? code : 'ERR_LANE_STATE';
      const movedTo = `${file}.corrupt-${this.#init.now()}`;
      try {
        await rename(file, movedTo);
        logger.warn({ file, code: codeText, err: error, movedTo }, 'scheduler lane state unusable; set aside, lanes start empty');
        return { state: 'set-aside', movedTo, code: codeText };
      } catch (renameError) {
        logger.warn({ file, code: codeText, err: error, renameError: (renameError as NodeJS.ErrnoException).code }, 'scheduler lane state unusable and could not be set aside; lanes start empty');
        return { state: 'set-aside', movedTo: null, code: codeText };
      }
    }
  }

  /** Starts the periodic saves (none when `intervalMs` is 0). */
  start(): void {
    if (this.#init.intervalMs <= 0 || this.#timer !== undefined || this.#closed) return;
    this.#timer = setInterval(() => void this.save(), this.#init.intervalMs);
    this.#timer.unref();
  }

  /** Saves now (after any save in progress). Never throws: a failure is logged, the old file kept. */
  save(): Promise<void> {
    this.#saving = this.#saving.then(async () => {
      const { scheduler, file, logger } = this.#init;
      try {
        await scheduler.saveState(file, this.#init.now());
      } catch (error) {
        logger.warn({ file, code: (error as { code?: unknown }).code, err: error }, 'scheduler lane state not saved; previous state file kept');
      }
    });
    return this.#saving;
  }

  /** Stops the periodic saves and writes the final state. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return this.#saving;
    this.#closed = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.save();
  }
}
