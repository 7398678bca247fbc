/**
 * AFL++'s own time series of one fuzzer instance, for the report's coverage chart: `plot_data`
 * (one comma-separated row per stats update, a `#` header naming the columns) and `fuzzer_stats`
 * (`key : value` lines; `start_time` turns AFL++ 4's `relative_time` into wall-clock time).
 * Both AFL++ 3's absolute `unix_time` and AFL++ 4's `relative_time` headers are read.
 */
import { PlotDataInvalidError } from '../errors.js';

export interface AflPlotPoint {
  /** Wall-clock time of the row, ms since the epoch. */
  readonly unixMs: number;
  /** `edges_found` (AFL++ 4), absent in versions that do not write it. */
  readonly edgesFound?: number;
  readonly corpusCount?: number;
  readonly savedCrashes?: number;
}

/** `fuzzer_stats` as a key → value map (values trimmed, unparsed). */
export function parseFuzzerStats(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    out.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  return out;
}

const number = (field: string): number => Number(field.trim().replace(/%$/, ''));
/** Latest time a `Date` can hold, ms since the epoch. */
const MAX_TIME_MS = 8.64e15;

/**
 * Parses a `plot_data` line by line, so a reader can stream a file of any length. `startMs` is the
 * instance's start (from `fuzzer_stats`) and is needed only for a `relative_time` header. A
 * malformed header or row, or a value that is not a finite non-negative number (a time a `Date`
 * can hold), fails closed with `ERR_PLOT_DATA_INVALID` naming the file, line and column; an
 * unterminated last line (being appended) is skipped.
 */
export class AflPlotDataLines {
  #columns: string[] | undefined;
  #time: 'relative_time' | 'unix_time' = 'unix_time';
  #at: { edges: number; corpus: number; crashes: number } = { edges: -1, corpus: -1, crashes: -1 };

  constructor(
    readonly file: string,
    readonly startMs: number | undefined,
  ) {}

  /** Width of the rows `lineInto` writes: unixMs, edgesFound, corpusCount, savedCrashes (NaN when absent). */
  static readonly WIDTH = 4;

  line(line: string, lineNumber: number, terminated: boolean): AflPlotPoint | undefined {
    const out = new Float64Array(AflPlotDataLines.WIDTH);
    return this.lineInto(line, lineNumber, terminated, out, 0) ? this.pointAt(out, 0) : undefined;
  }

  /**
   * `line` without a point object: the checked values go to `out[at…at + 3]` (see `WIDTH`). True
   * when the line was a row; false for the header, a comment, a blank and a skipped last line.
   */
  lineInto(line: string, lineNumber: number, terminated: boolean, out: Float64Array, at: number): boolean {
    const file = this.file;
    if (!terminated) return false;
    if (this.#columns === undefined) {
      if (!line.startsWith('#')) throw new PlotDataInvalidError(`${file} is not an AFL++ plot_data: it does not start with a # header`, { file, line: lineNumber });
      const columns = line.slice(1).split(',').map((c) => c.trim());
      const timeColumn = columns[0];
      if (timeColumn !== 'relative_time' && timeColumn !== 'unix_time') {
        throw new PlotDataInvalidError(`${file}: first column is ${JSON.stringify(timeColumn)}, not relative_time or unix_time`, { file, line: lineNumber });
      }
      if (timeColumn === 'relative_time' && this.startMs === undefined) {
        throw new PlotDataInvalidError(`${file} has relative times but its fuzzer_stats has no start_time`, { file, line: lineNumber });
      }
      const index = (name: string): number => columns.indexOf(name);
      this.#columns = columns;
      this.#time = timeColumn;
      this.#at = {
        edges: index('edges_found'),
        corpus: index('corpus_count') >= 0 ? index('corpus_count') : index('paths_total'),
        crashes: index('saved_crashes') >= 0 ? index('saved_crashes') : index('unique_crashes'),
      };
      return false;
    }
    const columns = this.#columns;
    if (line.trim() === '' || line.startsWith('#')) return false;
    const fields = line.split(',');
    if (fields.length < columns.length) {
      throw new PlotDataInvalidError(`${file} line ${lineNumber} has ${fields.length} fields, its header ${columns.length}`, { file, line: lineNumber });
    }
    const { edges, corpus, crashes } = this.#at;
    const value = (k: number): number => {
      if (k < 0) return Number.NaN;
      const v = number(fields[k]!);
      if (!Number.isFinite(v)) throw new PlotDataInvalidError(`${file} line ${lineNumber}: ${columns[k]} is not a number`, { file, line: lineNumber, field: columns[k] });
      if (v < 0) throw new PlotDataInvalidError(`${file} line ${lineNumber}: ${columns[k]} ${fields[k]!.trim()} is negative`, { file, line: lineNumber, field: columns[k] });
      return v;
    };
    const t = value(0);
    const unixMs = this.#time === 'unix_time' ? t * 1000 : this.startMs! + t * 1000;
    if (unixMs > MAX_TIME_MS) throw new PlotDataInvalidError(`${file} line ${lineNumber}: ${columns[0]} ${fields[0]!.trim()} is not a representable time`, { file, line: lineNumber, field: columns[0] });
    out[at] = unixMs;
    out[at + 1] = value(edges);
    out[at + 2] = value(corpus);
    out[at + 3] = value(crashes);
    return true;
  }

  /** The point `lineInto` wrote at `data[at…]`: the columns the header names. */
  pointAt(data: Float64Array, at: number): AflPlotPoint {
    const { edges, corpus, crashes } = this.#at;
    return {
      unixMs: data[at]!,
      ...(edges >= 0 ? { edgesFound: data[at + 1]! } : {}),
      ...(corpus >= 0 ? { corpusCount: data[at + 2]! } : {}),
      ...(crashes >= 0 ? { savedCrashes: data[at + 3]! } : {}),
    };
  }
}
