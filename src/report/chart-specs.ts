/**
 * The report's charts as Vega-Lite specs: which series each chart draws (docs/report.md "Charts"),
 * its axis titles with units, and its legend. Data is inlined in the spec, so compiling and
 * rendering needs no loader and no network.
 */
import type { TopLevelSpec } from 'vega-lite';
import { counterLines, coverageLines, SLOT_TIME_SHARES, slotTimeShares, thinChart, timeAxisOf, utilisationLines, type ChartPoint, type TimeAxis } from './chart-data.js';
import type { ReportSources } from './report-sources.js';

export interface ChartDefinition {
  /** Stable id: the SVG's file name (`<id>.svg`) and the HTML figure's `data-chart`. */
  readonly id: string;
  readonly title: string;
  /** One sentence under the chart saying what it shows. */
  readonly caption: string;
  readonly yTitle: string;
  readonly points: readonly ChartPoint[];
  /** Cumulative counters change in steps between samples; rates and levels are drawn straight. */
  readonly step: boolean;
  /** The y scale's fixed domain, when it has one (percentages). */
  readonly yDomain?: readonly [number, number];
  /** Stacked areas (shares of a whole, in `measure` order) instead of lines. */
  readonly stacked?: readonly string[];
}

/** Every chart the sources have data for, in report order. A chart without a single point is left out. */
export function chartDefinitions(sources: ReportSources, axis: TimeAxis = timeAxisOf(sources)): ChartDefinition[] {
  const charts: ChartDefinition[] = [
    {
      id: 'coverage',
      title: 'Edges covered over time',
      caption: "Non-zero entries of symfence's global coverage map, beside AFL++'s own edges_found for each AFL++ instance found.",
      yTitle: 'edges (map entries)',
      points: coverageLines(sources, axis),
      step: true,
    },
    {
      id: 'jobs',
      title: 'Jobs over time by status',
      caption: 'Solver jobs started, and those finished by solver status (committed results), plus aborted and rolled-back runs.',
      yTitle: 'jobs (cumulative)',
      points: counterLines(sources, axis, [
        ['jobs_started', 'started'],
        ['jobs_ok', 'ok'],
        ['jobs_timeout', 'timeout'],
        ['jobs_crash', 'crash'],
        ['jobs_error', 'error'],
        ['jobs_aborted', 'aborted'],
      ]),
      step: true,
    },
    {
      id: 'findings',
      title: 'Findings over time',
      caption: "Inputs published to symfence's queue for AFL++ (they added coverage), crashes and hangs.",
      yTitle: 'findings (cumulative)',
      points: counterLines(sources, axis, [
        ['interesting', 'queue (new coverage)'],
        ['crashes', 'crashes'],
        ['hangs', 'hangs'],
      ]),
      step: true,
    },
    {
      id: 'utilisation',
      title: 'Solver utilisation over time',
      caption: 'Busy solver slot time over workers × time: per sampling interval, averaged since the start, and the instant fill ratio at each sample.',
      yTitle: 'utilisation (%)',
      points: utilisationLines(sources, axis),
      step: false,
      yDomain: [0, 100],
    },
    {
      id: 'admission',
      title: 'Admissions, conflicts, back-fills and dispatch rollbacks',
      caption: 'Jobs the scheduler admitted, claims refused because another holder had the target or the work, slots back-filled after a refusal, and dispatches rolled back before the solver started.',
      yTitle: 'events (cumulative)',
      points: counterLines(sources, axis, [
        ['admissions', 'admissions'],
        ['conflicts', 'conflicts'],
        ['back_fills', 'back-fills'],
        ['dispatch_rollbacks', 'dispatch rollbacks'],
      ]),
      step: true,
    },
    {
      id: 'job-kinds',
      title: 'Targeted vs untargeted jobs',
      caption: 'Committed jobs by kind: directed at a target group, untargeted full solving runs, and trace-only first runs.',
      yTitle: 'jobs (cumulative)',
      points: counterLines(sources, axis, [
        ['jobs_targeted', 'targeted'],
        ['jobs_full', 'untargeted (full)'],
        ['jobs_trace', 'trace only'],
      ]),
      step: true,
    },
    {
      id: 'coordinators',
      title: 'Completed jobs per coordinator',
      caption: 'One line per symfence coordinator: how the work of a multi-coordinator campaign is shared.',
      yTitle: 'jobs completed (cumulative)',
      points: counterLines(sources, axis, [['jobs_completed', 'jobs completed']]).map((p) => ({ ...p, measure: p.source })),
      step: true,
    },
  ];
  sources.coordinators.forEach((source, index) => {
    charts.push({
      id: index === 0 ? 'slot-time' : `slot-time-${index + 1}`,
      title: sources.coordinators.length > 1 ? `Where slot time goes: ${source.label}` : 'Where slot time goes',
      caption:
        'Per sampling interval, the share of workers × time that solver processes ran, that starting them and collecting their outputs took, that slots sat idle between one run and the next, and the rest (no work waiting, runs not measured). Coverage triage runs off the slots.',
      yTitle: 'slot time (%)',
      points: slotTimeShares(source, axis),
      step: true,
      yDomain: [0, 100],
      stacked: SLOT_TIME_SHARES.map(([, measure]) => measure),
    });
  });
  // Every chart within one point budget, however many coordinators and measures it draws.
  return charts.filter((c) => c.points.length > 0).map((c) => ({ ...c, points: thinChart(c.points) }));
}

const UNIT_TITLE: Readonly<Record<TimeAxis['unit'], string>> = { s: 'seconds', min: 'minutes', h: 'hours' };

/** What every chart spec shares: schema, title and frame. */
function chartFrame(chart: ChartDefinition) {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: chart.title, anchor: 'start', fontSize: 15 },
    width: 640,
    height: 240,
    background: 'white',
    padding: 8,
  } as const;
}

/**
 * The Vega-Lite spec of one chart. Colour is the measure; when the points come from more than one
 * source (coordinators, AFL++ instances) the dash pattern tells the sources apart, with its own
 * legend. Few samples get point marks too, so a two-sample series is still visible.
 */
export function vegaLiteSpec(chart: ChartDefinition, axis: TimeAxis): TopLevelSpec {
  if (chart.stacked) return stackedSpec(chart, chart.stacked, axis);
  const sources = new Set(chart.points.map((p) => p.source));
  const perLine = new Map<string, number>();
  for (const p of chart.points) perLine.set(`${p.measure}\u0000${p.source}`, (perLine.get(`${p.measure}\u0000${p.source}`) ?? 0) + 1);
  const fewPoints = Math.max(...perLine.values()) <= 60;
  const dashed = sources.size > 1 && chart.id !== 'coordinators';
  return {
    ...chartFrame(chart),
    data: { values: chart.points.map((p) => ({ ...p })) },
    mark: { type: 'line', interpolate: chart.step ? 'step-after' : 'linear', strokeWidth: 2, ...(fewPoints ? { point: { size: 30, filled: true } } : {}) },
    encoding: {
      x: { field: 't', type: 'quantitative', title: `time since campaign start (${UNIT_TITLE[axis.unit]})`, scale: { zero: true, nice: true } },
      y: { field: 'value', type: 'quantitative', title: chart.yTitle, ...(chart.yDomain ? { scale: { domain: [...chart.yDomain] } } : { scale: { zero: true } }) },
      color: { field: 'measure', type: 'nominal', title: chart.id === 'coordinators' ? 'coordinator' : 'series', legend: { orient: 'right', labelLimit: 260 } },
      ...(dashed ? { strokeDash: { field: 'source', type: 'nominal', title: 'source', legend: { orient: 'right', labelLimit: 260, symbolType: 'stroke', symbolStrokeColor: '#333', symbolStrokeWidth: 2, symbolSize: 500 } } } : {}),
      detail: { field: 'source', type: 'nominal' },
      order: { field: 't', type: 'quantitative' },
    },
    config: { font: 'sans-serif', axis: { labelFontSize: 11, titleFontSize: 12 }, legend: { labelFontSize: 11, titleFontSize: 12 } },
  };
}

/** A stacked-area chart: one band per measure, bottom to top in `order`, summing to the whole. */
function stackedSpec(chart: ChartDefinition, order: readonly string[], axis: TimeAxis): TopLevelSpec {
  const rank = new Map(order.map((m, i) => [m, i]));
  return {
    ...chartFrame(chart),
    data: { values: chart.points.map((p) => ({ ...p, rank: rank.get(p.measure) ?? order.length })) },
    mark: { type: 'area', interpolate: 'step-before' },
    encoding: {
      x: { field: 't', type: 'quantitative', title: `time since campaign start (${UNIT_TITLE[axis.unit]})`, scale: { zero: true, nice: true } },
      y: { field: 'value', type: 'quantitative', title: chart.yTitle, stack: 'zero', ...(chart.yDomain ? { scale: { domain: [...chart.yDomain] } } : {}) },
      color: { field: 'measure', type: 'nominal', title: 'slot time', sort: [...order], legend: { orient: 'right', labelLimit: 260 } },
      order: { field: 'rank', type: 'quantitative' },
    },
    config: { font: 'sans-serif', axis: { labelFontSize: 11, titleFontSize: 12 }, legend: { labelFontSize: 11, titleFontSize: 12 } },
  };
}
