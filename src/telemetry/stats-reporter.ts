/**
 * Turns the live counters into the campaign's files on a period: `stats.json` (atomic replace),
 * one `plot_data.csv` row, and the TTY progress line. `sample()` is pure I/O on the current
 * counters; the caller owns the timer, so tests call it directly with an injected clock.
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
}

export class StatsReporter {
  readonly #options: StatsReporterOptions;
  readonly #clock: Clock;
  readonly #counters: CampaignCounters;
  readonly #plot: PlotDataFile;
  readonly #progress: ProgressLine | undefined;
  #closed = false;

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
    writeStatsAtomic(this.statsPath, snapshot);
    this.#plot.append(now, o.startedMs, this.#counters, o.workers);
    this.#progress?.update(formatProgressLine(now - o.startedMs, this.#counters, o.workers));
    return snapshot;
  }

  /** Final `stopped` snapshot, then closes the files. Idempotent. */
  close(): StatsSnapshot {
    const snapshot = this.sample('stopped');
    if (!this.#closed) {
      this.#closed = true;
      this.#plot.close();
      this.#progress?.finish();
    }
    return snapshot;
  }
}
