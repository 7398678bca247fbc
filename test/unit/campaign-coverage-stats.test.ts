import { describe, expect, it } from 'vitest';
import { createCounters } from '../../src/telemetry/counters.js';
import { makeSnapshot, parseStatsFile } from '../../src/telemetry/stats-file.js';
import { formatCampaignStatus } from '../../src/telemetry/campaign-status.js';
import { campaignCoverageSection } from '../../src/report/campaign-coverage-section.js';
import { escapeHtml } from '../../src/report/report-html.js';

const sections = {
  afl: { instances: { main: { imported: 3, queue: 120, cov: 40, edges: 900 }, s1: { imported: 1, queue: 80, cov: 20, edges: 850 } }, imported: 4, mergedEdges: 910 },
  frontier: { takenPairs: 500, buckets: 700, saturatedPairs: 12, traces: 60, gainingTraces: 30, askedByTier: { 1: 40, 2: 9, 3: 100 } },
  yield: {
    full: { newEdges: 20, solverMs: 60_000, runs: 10, edgesPerSolverSecond: 0.3 },
    directed: { newEdges: 90, solverMs: 90_000, runs: 200, edgesPerSolverSecond: 0.9 },
    fullShare: 0.25,
  },
};

function snapshotText(extra: Record<string, unknown>): string {
  const snap = makeSnapshot({ coordinator: 'c', name: 'symfence', state: 'running', startedMs: 0, updatedMs: 60_000, statsIntervalMs: 5000, workers: 1, counters: createCounters() });
  return JSON.stringify({ ...snap, ...extra });
}

describe('AFL++ imports, frontier and yield in stats.json, status and the report', () => {
  it('reads the sections back and shows per-instance imports, tiers and both yields', () => {
    const stats = parseStatsFile('stats.json', snapshotText(sections));
    expect(stats.afl?.instances.main?.imported).toBe(3);
    const text = formatCampaignStatus({ path: 'stats.json', liveness: 'running', stats });
    expect(text).toContain('afl++      imported 4 of our inputs: main imported 3 (queue 120, +cov 40, edges 900); s1 imported 1');
    expect(text).toContain('asked tier 1 40, tier 2 9, tier 3 100');
    expect(text).toContain('full 0.300 new edges/run-s (20 in 60.0 s), directed 0.900 (90 in 90.0 s); full share now 25%');
    const html = campaignCoverageSection({ coordinators: [{ label: 'symfence', stats } as never], afl: [] }, escapeHtml);
    expect(html).toContain('main: 3 (queue 120, +cov 40); s1: 1 (queue 80, +cov 20)');
    expect(html).toContain('<td>40 / 9 / 100</td>');
  });

  it('drops a malformed section instead of refusing the file or showing garbage', () => {
    const stats = parseStatsFile('stats.json', snapshotText({ afl: { instances: { main: { imported: '<b>' } }, imported: 1, mergedEdges: 0 }, frontier: [], yield: { fullShare: 7 } }));
    expect(stats.afl).toBeUndefined();
    expect(stats.frontier).toBeUndefined();
    expect(stats.yield).toBeUndefined();
    expect(formatCampaignStatus({ path: 'stats.json', liveness: 'running', stats })).not.toContain('afl++');
    expect(campaignCoverageSection({ coordinators: [{ label: 'x', stats } as never], afl: [] }, escapeHtml)).toContain('<td>—</td>');
  });
});
