/**
 * The report's series, in the long form Vega-Lite plots (one point per row: time, value, measure,
 * coordinator). Every coordinator's and AFL++ instance's samples share one time axis: time since
 * the earliest start among them, in a unit chosen from the span (s, min or h).
 */
import type { PlotColumn, PlotRow } from '../telemetry/plot-data.js';
import type { ReportSources } from './report-sources.js';

export interface ChartPoint {
  /** Time since the report's origin, in `TimeAxis.unit`. */
  readonly t: number;
  readonly value: number;
  /** What the line measures (`ok`, `conflicts`, `symfence map` …): the colour of the line. */
  readonly measure: string;
  /** The coordinator or AFL++ instance it belongs to: the dash of the line, when there are several. */
  readonly source: string;
}

export interface TimeAxis {
  readonly originMs: number;
  readonly unit: 's' | 'min' | 'h';
  readonly msPerUnit: number;
}

/** Most points drawn per line: a week-long series is thinned to evenly spaced rows, last kept. */
export const MAX_POINTS_PER_LINE = 750;
/**
 * Most points of one chart, all its lines together (`thinChart`): what the renderer holds per chart
 * is bounded by this, not by the number of sources × measures (docs/report.md "Large files").
 * More than one point per pixel column of the 640-pixel-wide chart; each point costs the renderer
 * (vega's scenegraph) memory: 1500 points per chart peaked ~12 MB higher over the report's 8 charts.
 */
const MAX_POINTS_PER_CHART = 750;

export function timeAxisOf(sources: ReportSources): TimeAxis {
  const starts = [...sources.coordinators.map((c) => c.stats.startedMs), ...sources.afl.flatMap((a) => (a.points.length > 0 ? [a.points[0]!.unixMs] : []))];
  const ends = [...sources.coordinators.map((c) => c.stats.updatedMs), ...sources.afl.flatMap((a) => (a.points.length > 0 ? [a.points[a.points.length - 1]!.unixMs] : []))];
  const originMs = Math.min(...starts);
  const spanMs = Math.max(0, Math.max(...ends) - originMs);
  if (spanMs <= 3 * 60_000) return { originMs, unit: 's', msPerUnit: 1000 };
  if (spanMs <= 3 * 3_600_000) return { originMs, unit: 'min', msPerUnit: 60_000 };
  return { originMs, unit: 'h', msPerUnit: 3_600_000 };
}

export function thin<T>(rows: readonly T[], max: number = MAX_POINTS_PER_LINE): readonly T[] {
  if (rows.length <= max) return rows;
  const out: T[] = [];
  const step = (rows.length - 1) / (max - 1);
  for (let i = 0; i < max; i++) out.push(rows[Math.round(i * step)]!);
  return out;
}

/**
 * Thins each line of a chart (points of one measure and source, in order) to an equal share of
 * `max`, at least two points each (first and last kept by `thin`).
 */
export function thinChart(points: readonly ChartPoint[], max: number = MAX_POINTS_PER_CHART): ChartPoint[] {
  if (points.length <= max) return [...points];
  const lines = new Map<string, ChartPoint[]>();
  for (const p of points) {
    const key = `${p.measure}\u0000${p.source}`;
    let line = lines.get(key);
    if (line === undefined) lines.set(key, (line = []));
    line.push(p);
  }
  const share = Math.max(2, Math.floor(max / lines.size));
  return [...lines.values()].flatMap((line) => [...thin(line, share)]);
}

const round = (x: number, digits: number): number => Number(x.toFixed(digits));

function at(axis: TimeAxis, unixMs: number): number {
  return round((unixMs - axis.originMs) / axis.msPerUnit, 4);
}

/** Lines of the given plot columns for every coordinator; a column its file lacks gives no line. */
export function counterLines(sources: ReportSources, axis: TimeAxis, columns: readonly (readonly [PlotColumn, string])[]): ChartPoint[] {
  const out: ChartPoint[] = [];
  for (const c of sources.coordinators) {
    const rows = thin(c.plot);
    for (const [column, measure] of columns) {
      for (const row of rows) {
        const value = row[column];
        const unixMs = row.unix_ms;
        if (value === undefined || unixMs === undefined) continue;
        out.push({ t: at(axis, unixMs), value, measure, source: c.label });
      }
    }
  }
  return out;
}

/** symfence's edge count per coordinator, and AFL++'s `edges_found` per instance. */
export function coverageLines(sources: ReportSources, axis: TimeAxis): ChartPoint[] {
  const out = counterLines(sources, axis, [['edges_covered', 'symfence map']]);
  for (const a of sources.afl) {
    for (const p of thin(a.points)) if (p.edgesFound !== undefined) out.push({ t: at(axis, p.unixMs), value: p.edgesFound, measure: 'AFL++ edges_found', source: `AFL++ ${a.label}` });
  }
  return out;
}

/**
 * Solver utilisation in percent: per sampling interval (busy time added over workers × interval),
 * the average since the start, and the instant fill ratio at each sample. Files written before the
 * busy-time column exist give the fill ratio only.
 */
export function utilisationLines(sources: ReportSources, axis: TimeAxis): ChartPoint[] {
  const out: ChartPoint[] = [];
  for (const c of sources.coordinators) {
    const rows = thin(c.plot);
    const workers = Math.max(1, c.stats.workers);
    let previous: PlotRow | undefined;
    for (const row of rows) {
      const unixMs = row.unix_ms;
      if (unixMs === undefined) continue;
      const t = at(axis, unixMs);
      if (row.fill_ratio !== undefined) out.push({ t, value: round(row.fill_ratio * 100, 2), measure: 'fill ratio at the sample', source: c.label });
      if (row.solver_utilisation !== undefined) out.push({ t, value: round(row.solver_utilisation * 100, 2), measure: 'average since start', source: c.label });
      const busy = row.solver_busy_ms;
      const before = previous?.solver_busy_ms;
      const beforeMs = previous?.unix_ms;
      if (busy !== undefined && before !== undefined && beforeMs !== undefined && unixMs > beforeMs) {
        const interval = Math.min(100, Math.max(0, ((busy - before) / (workers * (unixMs - beforeMs))) * 100));
        out.push({ t, value: round(interval, 2), measure: 'per interval', source: c.label });
      }
      previous = row;
    }
  }
  return out;
}

/** The slot-time shares in stack order (bottom first): plot column, or the remainder, and its name. */
export const SLOT_TIME_SHARES: readonly (readonly [PlotColumn | 'other', string])[] = [
  ['solver_process_ms', 'solver process'],
  ['slot_spawn_ms', 'spawn'],
  ['slot_collect_ms', 'output collection'],
  ['slot_gap_ms', 'between runs'],
  ['other', 'other (no work, unmeasured)'],
];

/**
 * Where one coordinator's slot time went, per sampling interval, in percent of `workers × interval`
 * (docs/campaign.md "Where slot time goes"): the shares of `SLOT_TIME_SHARES`, stacked to 100.
 * Files written before the slot-time columns existed give no points.
 */
export function slotTimeShares(source: ReportSources['coordinators'][number], axis: TimeAxis): ChartPoint[] {
  const out: ChartPoint[] = [];
  const workers = Math.max(1, source.stats.workers);
  let previous: PlotRow | undefined;
  for (const row of thin(source.plot)) {
    const unixMs = row.unix_ms;
    if (unixMs === undefined || row.solver_process_ms === undefined) continue;
    if (previous !== undefined && previous.unix_ms !== undefined && unixMs > previous.unix_ms) {
      const slotMs = workers * (unixMs - previous.unix_ms);
      const t = at(axis, unixMs);
      let measured = 0;
      for (const [column, measure] of SLOT_TIME_SHARES) {
        let share: number;
        if (column === 'other') share = Math.max(0, 100 - measured);
        else {
          const delta = Math.max(0, (row[column] ?? 0) - (previous[column] ?? 0));
          share = Math.min(100 - measured, (delta / slotMs) * 100);
          measured += share;
        }
        out.push({ t, value: round(share, 2), measure, source: source.label });
      }
    }
    previous = row;
  }
  return out;
}
