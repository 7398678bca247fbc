/**
 * `plot_data.csv`: one row per stats interval, for plotting a campaign over time (the same idea
 * as AFL++'s `plot_data`). Appended with one write per row; the header is written when the file is
 * created, so a resumed campaign keeps appending to the same series.
 */
import { closeSync, existsSync, fstatSync, openSync, readSync, renameSync, writeSync } from 'node:fs';
import { jobsCompleted, type CampaignCounters } from './counters.js';

export const PLOT_COLUMNS = [
  'unix_ms',
  'elapsed_s',
  'jobs_started',
  'jobs_completed',
  'interesting',
  'crashes',
  'hangs',
  'stale_results',
  'conflicts',
  'lease_steals',
  'edges_covered',
  'fill_ratio',
  'jobs_trace',
  'jobs_targeted',
  'queries_solved',
  'targets_reached',
] as const;

export function plotRow(nowMs: number, startedMs: number, c: Readonly<CampaignCounters>): string {
  const values = [
    nowMs,
    ((nowMs - startedMs) / 1000).toFixed(3),
    c.jobsStarted,
    jobsCompleted(c),
    c.interesting,
    c.crashes,
    c.hangs,
    c.staleResults,
    c.conflicts,
    c.leaseSteals,
    c.edgesCovered,
    c.fillRatio.toFixed(3),
    c.jobsTrace,
    c.jobsTargeted,
    c.queriesSolved,
    c.targetsReached,
  ];
  return values.join(',') + '\n';
}

export class PlotDataFile {
  #fd: number | undefined;

  constructor(readonly path: string) {
    // A series written with other columns (an older version) is moved aside, not appended to:
    // rows must match the header a plotting tool reads.
    if (existsSync(path) && readHeader(path) !== PLOT_COLUMNS.join(',')) renameSync(path, `${path}.${Date.now()}.old`);
    this.#fd = openSync(path, 'a');
    if (fstatSync(this.#fd).size === 0) writeSync(this.#fd, PLOT_COLUMNS.join(',') + '\n');
  }

  append(nowMs: number, startedMs: number, counters: Readonly<CampaignCounters>): void {
    if (this.#fd !== undefined) writeSync(this.#fd, plotRow(nowMs, startedMs, counters));
  }

  /** Idempotent. */
  close(): void {
    if (this.#fd === undefined) return;
    closeSync(this.#fd);
    this.#fd = undefined;
  }
}

/** The first line of an existing series (at most 4 KiB read), '' for an empty file. */
function readHeader(file: string): string {
  const fd = openSync(file, 'r');
  try {
    const buffer = Buffer.alloc(4096);
    const n = readSync(fd, buffer, 0, buffer.length, 0);
    const text = buffer.toString('utf8', 0, n);
    const end = text.indexOf('\n');
    return end < 0 ? (n === 0 ? PLOT_COLUMNS.join(',') : text) : text.slice(0, end);
  } finally {
    closeSync(fd);
  }
}
