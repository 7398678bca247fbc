/**
 * The report's "Campaign coverage" section: per coordinator, how many of its published inputs each
 * AFL++ instance imported, what AFL++'s coverage added to the campaign map, the coverage
 * frontier's tiers and the full/directed yield split (stats.json `afl`, `frontier`, `yield`;
 * docs/campaign.md "AFL++ coverage and imports"). A coordinator whose file predates these
 * sections gets a dash.
 */
import type { ReportSources } from './report-sources.js';

type Escape = (text: string) => string;

export function campaignCoverageSection(sources: ReportSources, escape: Escape): string {
  const rows = sources.coordinators.map((c) => {
    const s = c.stats;
    const imports = s.afl === undefined ? '—' : Object.entries(s.afl.instances).map(([name, p]) => `${name}: ${p.imported} (queue ${p.queue}, +cov ${p.cov})`).join('; ') || 'no instance';
    const merged = s.afl === undefined ? '—' : String(s.afl.mergedEdges);
    const f = s.frontier;
    const tiers = f === undefined ? '—' : `${f.askedByTier[1]} / ${f.askedByTier[2]} / ${f.askedByTier[3]}`;
    const pairs = f === undefined ? '—' : `${f.takenPairs} taken, ${f.saturatedPairs} saturated`;
    const y = s.yield;
    const full = y === undefined ? '—' : `${y.full.edgesPerSolverSecond.toFixed(3)} (${y.full.newEdges} in ${(y.full.solverMs / 1000).toFixed(0)} s)`;
    const directed = y === undefined ? '—' : `${y.directed.edgesPerSolverSecond.toFixed(3)} (${y.directed.newEdges} in ${(y.directed.solverMs / 1000).toFixed(0)} s)`;
    const share = y === undefined ? '—' : `${(y.fullShare * 100).toFixed(0)}%`;
    return [c.label, imports, merged, pairs, tiers, full, directed, share];
  });
  const headers = ['coordinator', 'AFL++ imports of our inputs', 'edges from AFL++', '(site, direction) pairs', 'asked tier 1 / 2 / 3', 'full: new edges per run-s', 'directed: new edges per run-s', 'full share'];
  const head = headers.map((h) => `<th>${escape(h)}</th>`).join('');
  const body = rows.map((r) => `<tr>${r.map((cell) => `<td>${escape(cell)}</td>`).join('')}</tr>`).join('\n');
  return `<table class="coverage"><thead><tr>${head}</tr></thead><tbody>\n${body}\n</tbody></table>`;
}
