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
 * Columns whose value is a ratio in [0, 1]; `unix_ms` must be a time a `Date` can hold; every
 * other column but `elapsed_s` is a count or a duration: finite and never negative.
 */
const RATIO_COLUMNS: ReadonlySet<string> = new Set(['fill_ratio', 'solver_utilisation']);
const MAX_TIME_MS = 8.64e15;

/**
 * Parses a `plot_data.csv` of this or an earlier version, line by line (`PlotDataLines`), so a
 * reader can stream a file of any length. The header must start with the first version's columns
 * (a longer header is a newer writer's: unknown columns are ignored). A row with a field count
 * other than the header's, or a field that is not a finite number in its range (non-negative; a
 * ratio in [0, 1]; `unix_ms` a representable time), fails closed with `ERR_PLOT_DATA_INVALID`
 * naming the file, the line and the column — except an unterminated last line, which is a row
 * being appended right now (or cut by a crash) and is skipped.
 */
export class PlotDataLines {
  #header: string[] | undefined;
  /** Per header field: its index in `PLOT_COLUMNS`, or -1 for a column this version does not know. */
  #slots: Int32Array = new Int32Array(0);
  /** Indexes in `PLOT_COLUMNS` of the known columns the header names, in header order. */
  #present: number[] = [];
  #scratch: Float64Array = new Float64Array(PLOT_COLUMNS.length);

  constructor(readonly file: string) {}

  /** Width of the rows `lineInto` writes: one number per `PLOT_COLUMNS` entry. */
  static readonly WIDTH = PLOT_COLUMNS.length;

  /**
   * `line` over the bytes `bytes[start, end)`: the fields are read in place, without a string or
   * an array per line (a 256 MiB file is millions of rows), with exactly `Number`'s results.
   */
  lineBytes(bytes: Buffer, start: number, end: number, lineNumber: number, terminated: boolean): PlotRow | undefined {
    return this.lineInto(bytes, start, end, lineNumber, terminated, this.#scratch, 0) ? this.rowAt(this.#scratch, 0) : undefined;
  }

  /**
   * `lineBytes` without a row object: the row's checked values go to `out[at + i]` for
   * `PLOT_COLUMNS[i]` (a column the header lacks is left untouched: `rowAt` reads only the header's
   * columns). True when the line was a row; false for
   * the header and a skipped last line (`out` may then have been written). Nothing is allocated
   * for a well-formed row.
   */
  lineInto(bytes: Buffer, start: number, end: number, lineNumber: number, terminated: boolean, out: Float64Array, at: number): boolean {
    if (!terminated) return false;
    const header = this.#header;
    if (header === undefined) {
      this.line(bytes.toString('utf8', start, end), lineNumber, terminated);
      return false;
    }
    const slots = this.#slots;
    let k = 0;
    let fieldStart = start;
    for (let i = start; i <= end; i++) {
      if (i < end && bytes[i] !== 0x2c) continue;
      if (k >= header.length) break;
      const value = parseDecimal(bytes, fieldStart, i);
      this.#check(header[k]!, slots[k]!, value, bytes, fieldStart, i, lineNumber);
      if (slots[k]! >= 0) out[at + slots[k]!] = value;
      k++;
      fieldStart = i + 1;
    }
    if (k !== header.length || fieldStart <= end) {
      // A different field count: the text path names it exactly.
      this.line(bytes.toString('utf8', start, end), lineNumber, terminated);
    }
    return true;
  }

  /** The row `lineInto` wrote at `data[at…]`, with the columns the header names. */
  rowAt(data: Float64Array, at: number): PlotRow {
    const row: Partial<Record<PlotColumn, number>> = {};
    for (const i of this.#present) row[PLOT_COLUMNS[i]!] = data[at + i]!;
    return row;
  }

  /** The row of line `lineNumber` (1 = the header), or undefined for the header and a skipped last line. */
  line(text: string, lineNumber: number, terminated: boolean): PlotRow | undefined {
    const file = this.file;
    if (!terminated) return undefined;
    if (this.#header === undefined) {
      const header = text.split(',');
      if (!FIRST_PLOT_COLUMNS.every((name, i) => header[i] === name)) {
        throw new PlotDataInvalidError(`${file} is not a symfence plot_data.csv: its header does not start with ${FIRST_PLOT_COLUMNS.slice(0, 3).join(',')}…`, { file, line: lineNumber });
      }
      this.#header = header;
      this.#slots = Int32Array.from(header, (name) => (PLOT_COLUMNS as readonly string[]).indexOf(name));
      this.#present = [...this.#slots].filter((i) => i >= 0);
      return undefined;
    }
    const header = this.#header;
    const fields = text.split(',');
    if (fields.length !== header.length) {
      throw new PlotDataInvalidError(`${file} line ${lineNumber} has ${fields.length} fields, its header ${header.length}`, { file, line: lineNumber });
    }
    const row: Partial<Record<PlotColumn, number>> = {};
    for (let k = 0; k < header.length; k++) {
      const field = fields[k]!;
      const value = field.trim() === '' ? Number.NaN : Number(field);
      this.#check(header[k]!, this.#slots[k]!, value, field, 0, field.length, lineNumber);
      if (this.#slots[k]! >= 0) row[header[k] as PlotColumn] = value;
    }
    return row;
  }

  /**
   * Checks one field's value (`NaN` = not a number; its text is `source[start, end)`, decoded only
   * for the error). `slot` < 0: a column this version does not know, checked only for being a number.
   */
  #check(column: string, slot: number, value: number, source: Buffer | string, start: number, end: number, lineNumber: number): void {
    const file = this.file;
    if (!Number.isFinite(value)) throw new PlotDataInvalidError(`${file} line ${lineNumber}: ${column} is not a number`, { file, line: lineNumber, field: column });
    if (slot < 0) return;
    const max = RATIO_COLUMNS.has(column) ? 1 : column === 'unix_ms' ? MAX_TIME_MS : Number.MAX_VALUE;
    // elapsed_s is a difference of wall-clock times: a clock stepped back may make it negative.
    if ((value < 0 && column !== 'elapsed_s') || value > max) {
      const text = typeof source === 'string' ? source.slice(start, end) : source.toString('latin1', start, end);
      throw new PlotDataInvalidError(`${file} line ${lineNumber}: ${column} ${text} is outside [0, ${max === Number.MAX_VALUE ? '∞)' : `${max}]`}`, { file, line: lineNumber, field: column });
    }
  }
}

/**
 * The number in `bytes[start, end)`, exactly as `Number(text)` reads it; `NaN` for an empty field.
 * Fast path: `-?digits(.digits)?` with at most 15 significant digits — an integer below 2^53
 * divided by an exact power of ten is one correctly rounded operation, the same double `Number`
 * gives. Anything else (exponents, more digits, spaces) goes through `Number` on the text.
 */
function parseDecimal(bytes: Buffer, start: number, end: number): number {
  if (start >= end) return Number.NaN;
  let at = start;
  const negative = bytes[at] === 0x2d;
  if (negative) at++;
  let digits = 0;
  let mantissa = 0;
  let scale = 0;
  let sawPoint = false;
  for (; at < end; at++) {
    const c = bytes[at]!;
    if (c >= 0x30 && c <= 0x39) {
      mantissa = mantissa * 10 + (c - 0x30);
      if (mantissa > 0) digits++;
      if (sawPoint) scale++;
    } else if (c === 0x2e && !sawPoint) sawPoint = true;
    else return Number(bytes.toString('latin1', start, end));
  }
  if (digits > 15 || (negative ? end - start < 2 : false) || (sawPoint && scale === 0)) return Number(bytes.toString('latin1', start, end));
  const value = scale === 0 ? mantissa : mantissa / POWERS_OF_TEN[scale]!;
  return negative ? -value : value;
}

const POWERS_OF_TEN: readonly number[] = Array.from({ length: 23 }, (_, i) => 10 ** i);
