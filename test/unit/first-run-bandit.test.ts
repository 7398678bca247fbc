import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FirstRunBandit, MAX_FULL_SHARE, MIN_FULL_SHARE } from '../../src/coordinator/first-run-bandit.js';
import { SeedWorkSource } from '../../src/coordinator/seed-work-source.js';
import type { TargetScheduler } from '../../src/coordinator/ports.js';

describe('first-run bandit', () => {
  it('splits evenly before anything is measured, then shifts toward the strategy with more new edges per solver-second', () => {
    const bandit = new FirstRunBandit();
    expect(bandit.fullShare()).toBe(0.5);
    const firstTen = Array.from({ length: 10 }, () => bandit.choose());
    expect(firstTen.filter((c) => c === 'full')).toHaveLength(5);
    // Directed: 40 edges in 20 s; full: 5 edges in 50 s.
    for (let i = 0; i < 10; i++) {
      bandit.observe('directed', 4, 2000);
      bandit.observe('full', 0.5, 5000);
    }
    const share = bandit.fullShare();
    expect(share).toBeLessThan(0.2);
    expect(share).toBeGreaterThanOrEqual(MIN_FULL_SHARE);
    const f = bandit.figures();
    expect(f.directed).toMatchObject({ newEdges: 40, solverMs: 20_000, runs: 10 });
    expect(f.directed.edgesPerSolverSecond).toBeGreaterThan(f.full.edgesPerSolverSecond);
  });

  it('keeps exploring: the share stays within its bounds and every strategy keeps a tenth of the inputs, whatever is observed (property)', () => {
    const obs = fc.record({ full: fc.boolean(), edges: fc.integer({ min: 0, max: 10_000 }), ms: fc.integer({ min: 0, max: 600_000 }) });
    fc.assert(
      fc.property(fc.array(obs, { maxLength: 300 }), (observations) => {
        const bandit = new FirstRunBandit();
        for (const o of observations) bandit.observe(o.full ? 'full' : 'directed', o.edges, o.ms);
        const share = bandit.fullShare();
        expect(share).toBeGreaterThanOrEqual(MIN_FULL_SHARE);
        expect(share).toBeLessThanOrEqual(MAX_FULL_SHARE);
        const choices = Array.from({ length: 100 }, () => bandit.choose());
        const full = choices.filter((c) => c === 'full').length;
        expect(full).toBeGreaterThanOrEqual(9);
        expect(full).toBeLessThanOrEqual(91);
      }),
      { seed: 23, numRuns: 200 },
    );
  });

  it('ignores a malformed observation', () => {
    const bandit = new FirstRunBandit();
    bandit.observe('full', Number.NaN, 10);
    bandit.observe('full', 3, -1);
    expect(bandit.figures().full.runs).toBe(0);
  });
});

describe('work source with first runs chosen by yield', () => {
  const scheduler: TargetScheduler = { addSeed: () => {}, observe: () => {}, admit: async () => [] } as unknown as TargetScheduler;
  const seed = (n: number) => ({ path: `/q/${n}`, sha256: n.toString(16).padStart(64, '0'), depth: 0, origin: 'seed' as const });

  it('traces most inputs once directed runs measured the better yield, and an explicit first run overrides it', async () => {
    const source = new SeedWorkSource({ scheduler, firstRun: 'auto', initialSeeds: Array.from({ length: 40 }, (_, i) => seed(i)), schedulerShare: 0 });
    const job = (mode: 'trace' | undefined, group: bigint[]) => ({ inputPath: '/q/x', inputSha256: 'x'.repeat(64), targetBranch: group[0] ?? 0n, actions: [], group, origin: 'seed' as const, depth: 0, ...(mode ? { mode } : {}) });
    for (let i = 0; i < 20; i++) {
      source.observe({ job: job(undefined, [7n]), workId: 'w', status: 'ok', findings: [], newEdges: 5, solverMs: 1000 }, i);
      source.observe({ job: job(undefined, []), workId: 'w', status: 'ok', findings: [], newEdges: 0, solverMs: 10_000 }, i);
    }
    const taken = await source.take(20, 100);
    const traced = taken.filter((w) => w.job.mode === 'trace').length;
    expect(traced).toBeGreaterThanOrEqual(17);
    expect(traced).toBeLessThan(20);
    expect(source.yieldFigures().directed.newEdges).toBe(100);
    const fixed = new SeedWorkSource({ scheduler, firstRun: 'full', initialSeeds: [seed(1), seed(2)], schedulerShare: 0 });
    expect((await fixed.take(2, 0)).every((w) => w.job.mode === undefined)).toBe(true);
  });

  it('charges a run its machine time (slot and triage), not only its solving time, when both are known', () => {
    const source = new SeedWorkSource({ scheduler, firstRun: 'auto', initialSeeds: [], schedulerShare: 0 });
    const job = (group: bigint[]) => ({ inputPath: '/q/x', inputSha256: 'x'.repeat(64), targetBranch: group[0] ?? 0n, actions: [], group, origin: 'seed' as const, depth: 0 });
    // A directed run that solved for 50 ms but held its slot (and triage) for 2 s.
    source.observe({ job: job([7n]), workId: 'w', status: 'ok', findings: [], newEdges: 4, solverMs: 50, runMs: 2000 }, 0);
    // Older feedback without a machine time falls back to the solving time.
    source.observe({ job: job([]), workId: 'w', status: 'ok', findings: [], newEdges: 1, solverMs: 300 }, 0);
    const figures = source.yieldFigures();
    expect(figures.directed.solverMs).toBe(2000);
    expect(figures.full.solverMs).toBe(300);
  });
});
