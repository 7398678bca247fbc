/**
 * The report page: one self-contained HTML file — inline CSS, the charts as inline SVG, no
 * script, no external reference of any kind — so it opens from disk, from a mail attachment or a
 * CI artifact without a network. Every string from the campaign's files is HTML-escaped.
 */
import { formatDuration } from '../config/schema.js';
import { jobsCompleted } from '../telemetry/counters.js';
import type { ChartDefinition } from './chart-specs.js';
import type { LeaseHealthRow } from './lease-health.js';
import type { ReportSources } from './report-sources.js';
import { campaignCoverageSection } from './campaign-coverage-section.js';

export interface RenderedChart {
  readonly chart: ChartDefinition;
  readonly svg: string;
  /** The standalone SVG's file name beside the HTML. */
  readonly file: string;
}

const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => ESCAPES[ch]!);
}

const pct = (x: number): string => `${(x * 100).toFixed(0)}%`;
const iso = (ms: number): string => new Date(ms).toISOString().replace('.000Z', 'Z');

function liveness(state: 'running' | 'stopped', updatedMs: number, intervalMs: number, nowMs: number): string {
  if (state === 'stopped') return 'finished';
  return nowMs - updatedMs > 3 * Math.max(intervalMs, 1000) ? 'stale' : 'alive';
}

function table(headers: readonly string[], rows: readonly (readonly (string | number)[])[], className: string): string {
  const head = headers.map((h) => `<th>${escapeHtml(h)}</th>`).join('');
  const body = rows.map((r) => `<tr>${r.map((cell) => `<td>${escapeHtml(String(cell))}</td>`).join('')}</tr>`).join('\n');
  return `<table class="${className}"><thead><tr>${head}</tr></thead><tbody>\n${body}\n</tbody></table>`;
}

function coordinatorTable(sources: ReportSources, nowMs: number): string {
  const rows = sources.coordinators.map((c) => {
    const s = c.stats;
    const k = s.counters;
    return [
      c.label,
      s.coordinator,
      liveness(s.state, s.updatedMs, s.statsIntervalMs, nowMs),
      formatDuration(Math.max(0, Math.round((s.updatedMs - s.startedMs) / 1000)) * 1000),
      iso(s.updatedMs),
      s.workers,
      `${jobsCompleted(k)} / ${k.jobsStarted}`,
      `${k.interesting} / ${k.crashes} / ${k.hangs}`,
      k.edgesCovered,
      pct(s.solverUtilisation),
      pct(k.fillRatio),
    ];
  });
  return table(['coordinator', 'id', 'state', 'elapsed', 'last update', 'workers', 'jobs done / started', 'queue / crashes / hangs', 'edges', 'solver utilisation (avg)', 'fill now'], rows, 'coordinators');
}

function leaseTable(rows: readonly LeaseHealthRow[]): string {
  if (rows.length === 0) return '<p>No lease directory.</p>';
  const cells = rows.map((r) =>
    r.problem !== undefined
      ? [r.leaseDir, r.usedBy.join(', '), '—', '—', '—', '—', '—', '—', r.problem]
      : [r.table ?? r.leaseDir, r.usedBy.join(', '), r.kind ?? '', r.held ?? 0, r.expired ?? 0, r.committing ?? 0, r.done ?? 0, r.corrupt ?? 0, (r.corrupt ?? 0) > 0 ? 'corrupt records block their ids: see `symfence leases check`' : 'ok'],
  );
  return table(['lease table', 'used by', 'kind', 'held', 'expired', 'committing', 'done', 'corrupt', 'health'], cells, 'leases');
}

const STYLE = `
body { font-family: sans-serif; margin: 24px auto; max-width: 1100px; color: #222; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
p.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
figure.chart { margin: 18px 0 28px; }
figure.chart figcaption { color: #444; font-size: 13px; max-width: 820px; }
figure.chart svg { max-width: 100%; height: auto; }
a { color: #1a5fb4; }
`;

/** The whole page. `generatedMs` is when the report was made (shown, and the reference for "stale"). */
export function reportHtml(sources: ReportSources, charts: readonly RenderedChart[], leases: readonly LeaseHealthRow[], generatedMs: number): string {
  const names = sources.coordinators.map((c) => c.label);
  const title = `symfence report: ${names.join(', ')}`;
  const figures = charts
    .map(
      (r) =>
        `<figure class="chart" id="chart-${r.chart.id}" data-chart="${r.chart.id}">\n${r.svg}\n<figcaption>${escapeHtml(r.chart.caption)} (<a href="${escapeHtml(r.file)}">${escapeHtml(r.file)}</a>)</figcaption>\n</figure>`,
    )
    .join('\n');
  const afl = sources.afl.length === 0 ? 'none found' : sources.afl.map((a) => `${a.label} (${a.plotRows} plot rows)`).join(', ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>${escapeHtml(title)}</h1>
<p class="meta">Generated ${escapeHtml(iso(generatedMs))} from ${sources.coordinators.length} coordinator(s); AFL++ instances: ${escapeHtml(afl)}.</p>
<h2>Coordinators</h2>
${coordinatorTable(sources, generatedMs)}
<h2>Campaign coverage</h2>
<p class="meta">Imports: distinct inputs of ours each AFL++ instance kept (<code>sync:</code> entries). Tiers: frontier questions dispatched by coverage tier. Yield decides each input's first run.</p>
${campaignCoverageSection(sources, escapeHtml)}
<h2>Charts</h2>
${figures}
<h2>Lease tables</h2>
<p class="meta">Held = leased and not expired. Counted lock-free at report time, as <code>symfence leases</code> does.</p>
${leaseTable(leases)}
</body>
</html>
`;
}
