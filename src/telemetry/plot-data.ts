/**
 * `plot_data.csv`: one row per stats interval, for plotting a campaign over time (the same idea
 * as AFL++'s `plot_data`). Appended with one write per row; the header is written when the file is
 * created, so a resumed campaign keeps appending to the same series. Columns are only ever added
 * at the end, so a reader that reads by position or by header name keeps working; `parsePlotData`
 * reads by name and accepts the shorter headers of earlier versions.
 */
import { closeSync, existsSync, fstatSync, openSync, readSync, renameSync, writeSync } from 'node:fs';
import { PlotDataInvalidError } from '../errors.js';
import { jobsCompleted, solverUtilisation, type CampaignCounters } from './counters.js';

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
  // Added later (appended so positional readers keep working); absent in older files.
  'solver_busy_ms',
  'solver_utilisation',
  'admissions',
  'back_fills',
  'dispatch_rollbacks',
  'jobs_full',
  'jobs_ok',
  'jobs_timeout',
  'jobs_crash',
  'jobs_error',
  'jobs_aborted',
  'generated',
  'solver_process_ms',
  'slot_spawn_ms',
  'slot_collect_ms',
  'slot_gap_ms',
  'triage_ms',
] as const;

export type PlotColumn = (typeof PLOT_COLUMNS)[number];

/** The first header of the series: files written before the later columns have exactly these. */
export const FIRST_PLOT_COLUMNS: readonly PlotColumn[] = PLOT_COLUMNS.slice(0, PLOT_COLUMNS.indexOf('targets_reached') + 1);

/** One row; `workers` turns the busy time into the average utilisation since `startedMs`. */
export function plotRow(nowMs: number, startedMs: number, c: Readonly<CampaignCounters>, workers: number): string {
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
    Math.round(c.solverBusyMs),
    solverUtilisation(c.solverBusyMs, workers, nowMs - startedMs).toFixed(4),
    c.admissions,
    c.backFills,
    c.dispatchRollbacks,
    c.jobsFull,
    c.jobsOk,
    c.jobsTimeout,
    c.jobsCrash,
    c.jobsError,
    c.jobsAborted,
    c.generated,
    Math.round(c.solverProcessMs),
    Math.round(c.slotSpawnMs),
    Math.round(c.slotCollectMs),
    Math.round(c.slotGapMs),
    Math.round(c.triageMs),
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

  append(nowMs: number, startedMs: number, counters: Readonly<CampaignCounters>, workers: number): void {
    if (this.#fd !== undefined) writeSync(this.#fd, plotRow(nowMs, startedMs, counters, workers));
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

/** One parsed row: every column the file's header names, as a number. */
export type PlotRow = Readonly<Partial<Record<PlotColumn, number>>>;

/**
 * Parses a `plot_data.csv` of this or an earlier version. The header must start with the first
 * version's columns and name only known ones (a longer header is a newer writer's: the unknown
 * tail is ignored). A row with a field count other than the header's, or a field that is not a
 * finite number, fails closed with `ERR_PLOT_DATA_INVALID` naming the file and line — except an
 * unterminated last line, which is a row being appended right now (or cut by a crash) and is
 * skipped.
 */
export function parsePlotData(file: string, text: string): PlotRow[] {
  const lines = text.split('\n');
  // The last element is '' when the file ends with a newline, else an unterminated row: skipped.
  lines.pop();
  if (lines.length === 0) return [];
  const header = lines[0]!.split(',');
  if (!FIRST_PLOT_COLUMNS.every((name, i) => header[i] === name)) {
    throw new PlotDataInvalidError(`${file} is not a symfence plot_data.csv: its header does not start with ${FIRST_PLOT_COLUMNS.slice(0, 3).join(',')}…`, { file, line: 1 });
  }
  const known = new Set<string>(PLOT_COLUMNS);
  const rows: PlotRow[] = [];
  for (let i = 1; i < lines.length; i++) {
    const fields = lines[i]!.split(',');
    if (fields.length !== header.length) {
      throw new PlotDataInvalidError(`${file} line ${i + 1} has ${fields.length} fields, its header ${header.length}`, { file, line: i + 1 });
    }
    const row: Partial<Record<PlotColumn, number>> = {};
    for (let k = 0; k < header.length; k++) {
      const value = Number(fields[k]);
      if (fields[k]!.trim() === '' || !Number.isFinite(value)) {
        throw new PlotDataInvalidError(`${file} line ${i + 1}: ${header[k]} is not a number`, { file, line: i + 1 });
      }
      if (known.has(header[k]!)) row[header[k] as PlotColumn] = value;
    }
    rows.push(row);
  }
  return rows;
}
