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

/**
 * Parses a `plot_data`. `startMs` is the instance's start (from `fuzzer_stats`) and is needed only
 * for a `relative_time` header. A malformed header or row fails closed with `ERR_PLOT_DATA_INVALID`
 * naming the file and line; an unterminated last line (being appended) is skipped.
 */
export function parseAflPlotData(file: string, text: string, startMs: number | undefined): AflPlotPoint[] {
  const lines = text.split('\n');
  lines.pop();
  if (lines.length === 0) return [];
  const first = lines[0]!;
  if (!first.startsWith('#')) throw new PlotDataInvalidError(`${file} is not an AFL++ plot_data: it does not start with a # header`, { file, line: 1 });
  const columns = first.slice(1).split(',').map((c) => c.trim());
  const timeColumn = columns[0];
  if (timeColumn !== 'relative_time' && timeColumn !== 'unix_time') {
    throw new PlotDataInvalidError(`${file}: first column is ${JSON.stringify(timeColumn)}, not relative_time or unix_time`, { file, line: 1 });
  }
  if (timeColumn === 'relative_time' && startMs === undefined) {
    throw new PlotDataInvalidError(`${file} has relative times but its fuzzer_stats has no start_time`, { file, line: 1 });
  }
  const at = (name: string): number => columns.indexOf(name);
  const edges = at('edges_found');
  const corpus = at('corpus_count') >= 0 ? at('corpus_count') : at('paths_total');
  const crashes = at('saved_crashes') >= 0 ? at('saved_crashes') : at('unique_crashes');
  const points: AflPlotPoint[] = [];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '' || line.startsWith('#')) continue;
    const fields = line.split(',');
    if (fields.length < columns.length) {
      throw new PlotDataInvalidError(`${file} line ${i + 1} has ${fields.length} fields, its header ${columns.length}`, { file, line: i + 1 });
    }
    const values = fields.map(number);
    const bad = [0, edges, corpus, crashes].find((k) => k >= 0 && !Number.isFinite(values[k]!));
    if (bad !== undefined) throw new PlotDataInvalidError(`${file} line ${i + 1}: ${columns[bad]} is not a number`, { file, line: i + 1 });
    const t = values[0]!;
    points.push({
      unixMs: timeColumn === 'unix_time' ? t * 1000 : startMs! + t * 1000,
      ...(edges >= 0 ? { edgesFound: values[edges]! } : {}),
      ...(corpus >= 0 ? { corpusCount: values[corpus]! } : {}),
      ...(crashes >= 0 ? { savedCrashes: values[crashes]! } : {}),
    });
  }
  return points;
}
