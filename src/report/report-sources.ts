/**
 * What a report is drawn from: every symfence coordinator found at the given paths (a
 * coordinator's out-dir holding `stats.json`, or an AFL output directory whose subdirectories hold
 * them), each with its `plot_data.csv`, and the AFL++ instances of those AFL output directories
 * (subdirectories with a `fuzzer_stats`), each with its `plot_data`.
 *
 * Fail closed: a stats file, plot file or AFL file that exists but cannot be parsed stops the report
 * with a coded error naming the file (`ERR_CAMPAIGN_STATE`, `ERR_PLOT_DATA_INVALID`) — a report
 * silently missing a coordinator would mislead. A file that is absent only means fewer series. Every
 * file is read through the bounded reader, so a huge or special file costs one fstat; plot files
 * are streamed line by line into decimated rows (decimated-rows.ts), so a 256 MiB file costs
 * a bounded number of rows, not its size.
 */
import { readdirSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { CampaignStateError, PlotDataInvalidError } from '../errors.js';
import { forEachLineBytes, readBoundedFile } from '../fs/bounded-read.js';
import { nodeFsLayer, type FsLayer } from '../fs/fs-layer.js';
import { findStatsFiles } from '../telemetry/campaign-status.js';
import { PlotDataLines, type PlotRow } from '../telemetry/plot-data.js';
import { MAX_STATS_FILE_BYTES, STATS_FILE_NAME, parseStatsFile, type StatsSnapshot } from '../telemetry/stats-file.js';
import { AflPlotDataLines, parseFuzzerStats, type AflPlotPoint } from './afl-plot-data.js';
import { MAX_POINTS_PER_LINE } from './chart-data.js';
import { DecimatedRows } from './decimated-rows.js';

/** Largest `plot_data.csv` / AFL `plot_data` read: about a year of rows at the default interval. */
export const MAX_PLOT_FILE_BYTES = 256 << 20;
/** Longest line of a plot file: a row is about 200 bytes; a longer line is not a row. */
const MAX_PLOT_LINE_BYTES = 64 * 1024;

interface CoordinatorSource {
  /** The coordinator's out-dir. */
  readonly dir: string;
  /** Its name in charts and tables: the campaign name, with the coordinator id when names repeat. */
  readonly label: string;
  readonly stats: StatsSnapshot;
  /** The plot rows, decimated to at most `2 × MAX_POINTS_PER_LINE + 1` evenly spaced ones, the last kept. */
  readonly plot: readonly PlotRow[];
  /** Rows the file holds (before decimation). */
  readonly plotRows: number;
}

interface AflInstanceSource {
  readonly dir: string;
  /** The instance's directory name (`main`, `secondary1` …). */
  readonly label: string;
  /** Decimated like `CoordinatorSource.plot`. */
  readonly points: readonly AflPlotPoint[];
  /** Rows the file holds (before decimation). */
  readonly plotRows: number;
}

export interface ReportSources {
  readonly coordinators: readonly CoordinatorSource[];
  readonly afl: readonly AflInstanceSource[];
}

/** A file's text, `undefined` when absent; `onInvalid` builds the error for a refused or unreadable one. */
async function readText(fsLayer: FsLayer, file: string, maxBytes: number, onInvalid: (reason: string) => Error): Promise<string | undefined> {
  let read;
  try {
    read = await readBoundedFile(fsLayer, file, { maxBytes });
  } catch (error) {
    throw onInvalid((error as Error).message);
  }
  if (read.state === 'absent') return undefined;
  if (read.state === 'refused') throw onInvalid(read.reason);
  return read.bytes.toString('utf8');
}

/** A plot file's parser as `streamPlot` drives it: rows written straight into a `DecimatedRows`. */
interface RowParser<T> {
  /** Writes the row of a line to `out[at…]`; false when the line is not a row (header, skipped). */
  into(bytes: Buffer, start: number, end: number, line: number, terminated: boolean, out: Float64Array, at: number): boolean;
  /** The row written at `data[at…]`. */
  rowAt(data: Float64Array, at: number): T;
}

/**
 * Streams a plot file through `parser` into decimated rows: memory is bounded by the rows kept
 * and one line, not by the file (up to `MAX_PLOT_FILE_BYTES`), and a row costs no allocation (see
 * decimated-rows.ts for why that matters to RSS). Absent: no rows.
 */
async function streamPlot<T>(fsLayer: FsLayer, file: string, width: number, parser: RowParser<T>): Promise<{ rows: T[]; count: number }> {
  const series = new DecimatedRows(MAX_POINTS_PER_LINE, width);
  let read;
  try {
    read = await forEachLineBytes(fsLayer, file, { maxBytes: MAX_PLOT_FILE_BYTES, maxLineBytes: MAX_PLOT_LINE_BYTES }, (bytes, start, end, line, terminated) => {
      if (parser.into(bytes, start, end, line, terminated, series.data, series.nextOffset())) series.commit();
    });
  } catch (error) {
    if (error instanceof PlotDataInvalidError) throw error;
    throw plotError(file)((error as Error).message);
  }
  if (read.state === 'refused') throw plotError(file)(read.reason);
  return { rows: series.offsets().map((at) => parser.rowAt(series.data, at)), count: series.count };
}

const plotError = (file: string) => (reason: string) => new PlotDataInvalidError(`cannot read ${file}: ${reason}`, { file });
const statsError = (file: string) => (reason: string) => new CampaignStateError(`cannot read campaign stats ${file}: ${reason}`, { file });

async function readCoordinator(fsLayer: FsLayer, statsFile: string): Promise<Omit<CoordinatorSource, 'label'>> {
  const text = await readText(fsLayer, statsFile, MAX_STATS_FILE_BYTES, statsError(statsFile));
  if (text === undefined) throw statsError(statsFile)('no such file');
  const stats = parseStatsFile(statsFile, text);
  const dir = path.dirname(statsFile);
  const plotFile = path.join(dir, 'plot_data.csv');
  const parser = new PlotDataLines(plotFile);
  const plot = await streamPlot(fsLayer, plotFile, PlotDataLines.WIDTH, {
    into: (bytes, start, end, line, terminated, out, at) => parser.lineInto(bytes, start, end, line, terminated, out, at),
    rowAt: (data, at) => parser.rowAt(data, at),
  });
  return { dir, stats, plot: plot.rows, plotRows: plot.count };
}

/** AFL++ instances directly under `dir` (an AFL output directory): subdirectories with a `fuzzer_stats`. */
async function readAflInstances(fsLayer: FsLayer, dir: string): Promise<AflInstanceSource[]> {
  const out: AflInstanceSource[] = [];
  for (const name of readdirSync(dir).sort()) {
    const instance = path.join(dir, name);
    const statsFile = path.join(instance, 'fuzzer_stats');
    const statsText = await readText(fsLayer, statsFile, MAX_STATS_FILE_BYTES, plotError(statsFile));
    if (statsText === undefined) continue;
    const startS = Number(parseFuzzerStats(statsText).get('start_time'));
    const plotFile = path.join(instance, 'plot_data');
    const parser = new AflPlotDataLines(plotFile, Number.isFinite(startS) && startS > 0 ? startS * 1000 : undefined);
    const plot = await streamPlot(fsLayer, plotFile, AflPlotDataLines.WIDTH, {
      into: (bytes, start, end, line, terminated, out, at) => parser.lineInto(bytes.toString('utf8', start, end), line, terminated, out, at),
      rowAt: (data, at) => parser.pointAt(data, at),
    });
    out.push({ dir: instance, label: name, points: plot.rows, plotRows: plot.count });
  }
  return out;
}

function canonical(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return path.resolve(p);
  }
}

/**
 * Every coordinator and AFL++ instance at `dirs`, each once even when two paths reach it. Throws
 * `ERR_CAMPAIGN_STATE` for a path that is not a directory or holds no symfence coordinator.
 */
export async function collectReportSources(dirs: readonly string[], options: { readonly fsLayer?: FsLayer } = {}): Promise<ReportSources> {
  const fsLayer = options.fsLayer ?? nodeFsLayer;
  if (dirs.length === 0) throw new CampaignStateError('no output directory given', {});
  const statsFiles = new Map<string, string>();
  const aflDirs = new Map<string, string>();
  for (const dir of dirs) {
    const found = findStatsFiles(dir);
    for (const file of found) statsFiles.set(canonical(file), file);
    // An AFL output directory (its coordinators are in subdirectories): its AFL++ instances too.
    if (!(found.length === 1 && found[0] === path.join(dir, STATS_FILE_NAME))) aflDirs.set(canonical(dir), dir);
  }
  const read: Omit<CoordinatorSource, 'label'>[] = [];
  for (const file of statsFiles.values()) read.push(await readCoordinator(fsLayer, file));
  const nameCount = new Map<string, number>();
  for (const c of read) nameCount.set(c.stats.name, (nameCount.get(c.stats.name) ?? 0) + 1);
  const coordinators = read.map((c) => ({ ...c, label: (nameCount.get(c.stats.name) ?? 0) > 1 ? `${c.stats.name} (${c.stats.coordinator})` : c.stats.name }));
  const afl: AflInstanceSource[] = [];
  for (const dir of aflDirs.values()) if (statSync(dir).isDirectory()) afl.push(...(await readAflInstances(fsLayer, dir)));
  return { coordinators, afl };
}
