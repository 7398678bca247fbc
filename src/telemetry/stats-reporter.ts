/**
 * Turns the live counters into the campaign's files on a period: `stats.json` (atomic replace),
 * one `plot_data.csv` row, and the TTY progress line. `sample()` is pure I/O on the current
 * counters; the caller owns the timer, so tests call it directly with an injected clock.
 *
 * `stats.json` is written off the main thread (a rename over the old file can stall for tens of
 * ms while the disk is busy, docs/campaign.md "Where slot time goes"), one write at a time: a
 * sample taken while the previous one is still being written replaces any sample waiting behind
 * it, so the file always ends on the newest snapshot and a slow disk never queues up writes.
 * `flushed()` resolves once the newest snapshot is on disk; `close()` writes the last one and
 * waits for it.
 */
import path from 'node:path';
import type { Clock } from '../core/clock.js';
import type { CampaignCounters } from './counters.js';
import { PlotDataFile } from './plot-data.js';
import { formatProgressLine, type ProgressLine } from './progress-line.js';
import { makeSnapshot, STATS_FILE_NAME, writeStatsAtomic, type StatsSnapshot } from './stats-file.js';

interface StatsReporterOptions {
  readonly dir: string;
  readonly coordinatorId: string;
  readonly name: string;
  readonly workers: number;
  readonly statsIntervalMs: number;
  readonly startedMs: number;
  /** Written into stats.json so readers (`symfence report`) find the lease tables. */
  readonly leaseDir?: string;
  /** Sections beside the counters (AFL++ peers, coverage frontier), read at every sample. */
  readonly sections?: () => Pick<StatsSnapshot, 'afl' | 'frontier' | 'yield'>;
  /** Told of a `stats.json` write that failed while running (the next sample tries again). */
  readonly onWriteError?: (error: unknown) => void;
}

export class StatsReporter {
  readonly #options: StatsReporterOptions;
  readonly #clock: Clock;
  readonly #counters: CampaignCounters;
  readonly #plot: PlotDataFile;
  readonly #progress: ProgressLine | undefined;
  #closed = false;
  /** The write under way, if any, and the newest snapshot waiting behind it. */
  #writing: Promise<void> | undefined;
  #waiting: StatsSnapshot | undefined;
  #lastError: unknown;

  constructor(options: StatsReporterOptions, clock: Clock, counters: CampaignCounters, progress?: ProgressLine) {
    this.#options = options;
    this.#clock = clock;
    this.#counters = counters;
    this.#plot = new PlotDataFile(path.join(options.dir, 'plot_data.csv'));
    this.#progress = progress;
  }

  get statsPath(): string {
    return path.join(this.#options.dir, STATS_FILE_NAME);
  }

  /** Writes one snapshot; returns it. */
  sample(state: 'running' | 'stopped' = 'running'): StatsSnapshot {
    const now = this.#clock.now();
    const o = this.#options;
    const snapshot = makeSnapshot({
      coordinator: o.coordinatorId,
      name: o.name,
      state,
      startedMs: o.startedMs,
      updatedMs: now,
      statsIntervalMs: o.statsIntervalMs,
      workers: o.workers,
      counters: this.#counters,
      ...(o.leaseDir !== undefined ? { leaseDir: o.leaseDir } : {}),
      ...(o.sections ? o.sections() : {}),
    });
    if (this.#closed) return snapshot;
    this.#write(snapshot);
    this.#plot.append(now, o.startedMs, this.#counters, o.workers);
    this.#progress?.update(formatProgressLine(now - o.startedMs, this.#counters, o.workers));
    return snapshot;
  }

  /** Resolves once every snapshot sampled so far is on disk (or its write failed). */
  flushed(): Promise<void> {
    return this.#writing ?? Promise.resolve();
  }

  /**
   * Final `stopped` snapshot, written and waited for; then closes the files. Idempotent. Rejects
   * when that last write failed (the files are closed all the same).
   */
  async close(): Promise<StatsSnapshot> {
    if (this.#closed) {
      await this.flushed();
      return this.sample('stopped');
    }
    const snapshot = this.sample('stopped');
    this.#lastError = undefined;
    await this.flushed();
    this.#closed = true;
    this.#plot.close();
    this.#progress?.finish();
    if (this.#lastError !== undefined) throw this.#lastError;
    return snapshot;
  }

  #write(snapshot: StatsSnapshot): void {
    this.#waiting = snapshot;
    this.#writing ??= this.#drain();
  }

  async #drain(): Promise<void> {
    try {
      for (let next = this.#waiting; next !== undefined; next = this.#waiting) {
        this.#waiting = undefined;
        try {
          await writeStatsAtomic(this.statsPath, next);
          this.#lastError = undefined;
        } catch (error) {
          this.#lastError = error;
          // The final snapshot's failure is close()'s to report, not the running sampler's.
          if (next.state !== 'stopped') this.#options.onWriteError?.(error);
        }
      }
    } finally {
      this.#writing = undefined;
    }
  }
}
