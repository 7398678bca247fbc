import { describe, expect, it } from 'vitest';
import { MAX_POINTS_PER_LINE, thin, timeAxisOf, utilisationLines } from '../../src/report/chart-data.js';
import type { ReportSources } from '../../src/report/report-sources.js';
import { createCounters } from '../../src/telemetry/counters.js';
import { makeSnapshot } from '../../src/telemetry/stats-file.js';
import type { PlotRow } from '../../src/telemetry/plot-data.js';

function sources(startedMs: number, updatedMs: number, plot: PlotRow[], aflStartMs?: number): ReportSources {
  const stats = makeSnapshot({ coordinator: 'c', name: 'n', state: 'stopped', startedMs, updatedMs, statsIntervalMs: 1000, workers: 2, counters: createCounters() });
  return { coordinators: [{ dir: '/x', label: 'n', stats, plot }], afl: aflStartMs === undefined ? [] : [{ dir: '/y', label: 'main', points: [{ unixMs: aflStartMs }] }] };
}

describe('report chart data', () => {
  it('puts every source on one axis from the earliest start, in a unit fitting the span', () => {
    expect(timeAxisOf(sources(10_000, 70_000, []))).toMatchObject({ originMs: 10_000, unit: 's' });
    expect(timeAxisOf(sources(10_000, 10_000 + 2 * 3_600_000, []))).toMatchObject({ unit: 'min' });
    expect(timeAxisOf(sources(10_000, 10_000 + 30 * 3_600_000, [], 5_000))).toMatchObject({ originMs: 5_000, unit: 'h' });
  });

  it('thins a long series to evenly spaced rows, keeping the first and the last', () => {
    const rows = Array.from({ length: 10_000 }, (_, i) => i);
    const thinned = thin(rows);
    expect(thinned).toHaveLength(MAX_POINTS_PER_LINE);
    expect(thinned[0]).toBe(0);
    expect(thinned.at(-1)).toBe(9_999);
    expect(thin([1, 2, 3])).toEqual([1, 2, 3]);
  });

  it("computes each interval's utilisation from the busy-time difference over workers × interval", () => {
    const plot: PlotRow[] = [
      { unix_ms: 0, fill_ratio: 0, solver_busy_ms: 0, solver_utilisation: 0 },
      { unix_ms: 1_000, fill_ratio: 1, solver_busy_ms: 1_000, solver_utilisation: 0.5 },
      { unix_ms: 2_000, fill_ratio: 1, solver_busy_ms: 3_000, solver_utilisation: 0.75 },
    ];
    const lines = utilisationLines(sources(0, 2_000, plot), { originMs: 0, unit: 's', msPerUnit: 1000 });
    expect(lines.filter((p) => p.measure === 'per interval').map((p) => [p.t, p.value])).toEqual([
      [1, 50],
      [2, 100],
    ]);
    expect(lines.filter((p) => p.measure === 'average since start').map((p) => p.value)).toEqual([0, 50, 75]);
    // A file written before the busy-time column: the fill ratio alone.
    const old = utilisationLines(sources(0, 1_000, [{ unix_ms: 0, fill_ratio: 0.5 }]), { originMs: 0, unit: 's', msPerUnit: 1000 });
    expect(old.map((p) => p.measure)).toEqual(['fill ratio at the sample']);
  });
});
