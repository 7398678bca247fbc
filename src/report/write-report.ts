/**
 * `symfence report`'s engine: collect the sources, build the charts, render each to SVG, and
 * write `report.html` plus one `<chart>.svg` per chart into the output directory. Each file is
 * written to a temp name and renamed, so a reader never sees a half-written report.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { CampaignStateError } from '../errors.js';
import { writeFileDurably } from '../fs/durable-files.js';
import { nodeFsLayer, type FsLayer } from '../fs/fs-layer.js';
import { timeAxisOf } from './chart-data.js';
import { chartDefinitions, vegaLiteSpec } from './chart-specs.js';
import { leaseHealth } from './lease-health.js';
import { collectReportSources } from './report-sources.js';
import { reportHtml, type RenderedChart } from './report-html.js';
import { renderSvg } from './render-svg.js';

export const REPORT_HTML_NAME = 'report.html';
/** Where the report goes when no output directory is given: inside the first path. */
export const DEFAULT_REPORT_DIR_NAME = 'symfence-report';

export interface WriteReportOptions {
  /** Output directory (default: `<first out-dir>/symfence-report`). Created if missing. */
  readonly outputDir?: string;
  /** Report time, ms since the epoch (default: now): the reference for "stale" and lease expiry. */
  readonly nowMs?: number;
  readonly fsLayer?: FsLayer;
}

export interface WrittenReport {
  readonly htmlPath: string;
  /** One per chart, in report order. */
  readonly svgPaths: readonly string[];
  readonly charts: readonly string[];
  readonly coordinators: readonly string[];
}

export async function writeReport(dirs: readonly string[], options: WriteReportOptions = {}): Promise<WrittenReport> {
  const nowMs = options.nowMs ?? Date.now();
  const sources = await collectReportSources(dirs, options.fsLayer ? { fsLayer: options.fsLayer } : {});
  const axis = timeAxisOf(sources);
  const charts = chartDefinitions(sources, axis);
  const rendered: RenderedChart[] = [];
  for (const chart of charts) rendered.push({ chart, svg: await renderSvg(vegaLiteSpec(chart, axis), `chart-${chart.id}`), file: `${chart.id}.svg` });
  const leases = await leaseHealth(
    sources.coordinators.map((c) => ({ leaseDir: c.stats.leaseDir ?? path.join(c.dir, 'leases'), label: c.label })),
    { nowMs, ...(options.fsLayer ? { fsLayer: options.fsLayer } : {}) },
  );
  const outputDir = path.resolve(options.outputDir ?? path.join(dirs[0]!, DEFAULT_REPORT_DIR_NAME));
  try {
    mkdirSync(outputDir, { recursive: true });
  } catch (error) {
    throw new CampaignStateError(`cannot create the report directory ${outputDir}: ${(error as Error).message}`, { dir: outputDir });
  }
  const fsLayer = options.fsLayer ?? nodeFsLayer;
  const svgPaths: string[] = [];
  for (const r of rendered) {
    const file = path.join(outputDir, r.file);
    await writeFileDurably(fsLayer, file, `<?xml version="1.0" encoding="UTF-8"?>\n${r.svg}\n`);
    svgPaths.push(file);
  }
  const htmlPath = path.join(outputDir, REPORT_HTML_NAME);
  // Last: the page names the charts, which are complete once it exists.
  await writeFileDurably(fsLayer, htmlPath, reportHtml(sources, rendered, leases, nowMs));
  return { htmlPath, svgPaths, charts: charts.map((c) => c.id), coordinators: sources.coordinators.map((c) => c.label) };
}
