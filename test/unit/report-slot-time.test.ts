import { describe, expect, it } from 'vitest';
import { slotTimeShares } from '../../src/report/chart-data.js';
import { chartDefinitions, vegaLiteSpec } from '../../src/report/chart-specs.js';
import type { ReportSources } from '../../src/report/report-sources.js';
import { createCounters, formatSlotTime } from '../../src/telemetry/counters.js';
import type { PlotRow } from '../../src/telemetry/plot-data.js';
import { makeSnapshot } from '../../src/telemetry/stats-file.js';

const AXIS = { originMs: 0, unit: 's', msPerUnit: 1000 } as const;

function sources(plot: PlotRow[]): ReportSources {
  const stats = makeSnapshot({ coordinator: 'c', name: 'n', state: 'stopped', startedMs: 0, updatedMs: 2_000, statsIntervalMs: 1000, workers: 2, counters: createCounters() });
  return { coordinators: [{ dir: '/x', label: 'n', stats, plot }], afl: [] };
}

describe('where slot time goes', () => {
  it('splits each interval of workers × time into solver, spawn, collection, gap and the rest, stacking to 100%', () => {
    const plot: PlotRow[] = [
      { unix_ms: 0, solver_process_ms: 0, slot_spawn_ms: 0, slot_collect_ms: 0, slot_gap_ms: 0 },
      // 2 workers × 1 s = 2000 slot-ms: 1600 solver, 100 spawn, 40 collection, 60 between runs.
      { unix_ms: 1_000, solver_process_ms: 1_600, slot_spawn_ms: 100, slot_collect_ms: 40, slot_gap_ms: 60 },
      // A second with the solver alone for half the slot time.
      { unix_ms: 2_000, solver_process_ms: 2_600, slot_spawn_ms: 100, slot_collect_ms: 40, slot_gap_ms: 60 },
    ];
    const points = slotTimeShares(sources(plot).coordinators[0]!, AXIS);
    const at = (t: number) => Object.fromEntries(points.filter((p) => p.t === t).map((p) => [p.measure, p.value]));
    expect(at(1)).toEqual({ 'solver process': 80, spawn: 5, 'output collection': 2, 'between runs': 3, 'other (no work, unmeasured)': 10 });
    expect(at(2)).toEqual({ 'solver process': 50, spawn: 0, 'output collection': 0, 'between runs': 0, 'other (no work, unmeasured)': 50 });
  });

  it('draws nothing for a series written before the slot-time columns, and a stacked area chart otherwise', () => {
    expect(slotTimeShares(sources([{ unix_ms: 0 }, { unix_ms: 1_000 }]).coordinators[0]!, AXIS)).toEqual([]);
    const withColumns = sources([
      { unix_ms: 0, solver_process_ms: 0, slot_spawn_ms: 0, slot_collect_ms: 0, slot_gap_ms: 0 },
      { unix_ms: 1_000, solver_process_ms: 1_000, slot_spawn_ms: 0, slot_collect_ms: 0, slot_gap_ms: 0 },
    ]);
    const chart = chartDefinitions(withColumns, AXIS).find((c) => c.id === 'slot-time');
    expect(chart?.stacked?.[0]).toBe('solver process');
    const spec = vegaLiteSpec(chart!, AXIS) as { mark: { type: string }; encoding: { y: { stack: string } } };
    expect(spec.mark.type).toBe('area');
    expect(spec.encoding.y.stack).toBe('zero');
  });

  it('summarises the slot time of a whole campaign as shares', () => {
    const c = { ...createCounters(), solverProcessMs: 900, slotSpawnMs: 20, slotCollectMs: 10, slotGapMs: 30, triageMs: 4_000 };
    expect(formatSlotTime(c, 1, 1_000)).toBe('slot time: solver 90.0%, spawn 2.0%, collect 1.0%, between runs 3.0%, other 4.0%; triage 4.0 s off the slots');
  });
});
