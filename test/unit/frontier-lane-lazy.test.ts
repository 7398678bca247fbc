import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { CoverageFrontier, type FrontierQuestion } from '../../src/scheduler/coverage-frontier.js';
import { FrontierLane, TIER_WEIGHTS } from '../../src/scheduler/lanes/frontier-lane.js';
import type { Proposal } from '../../src/scheduler/lanes/lane.js';
import { targetGroup } from '../../src/scheduler/replay-job.js';
import type { Telemetry } from '../../src/scheduler/telemetry.js';
import { tel, type TraceRow } from './scheduler-fixtures.js';

/** A path as (site, taken) steps; opposite ids unique per (input tag, step). */
function traceTel(tag: number, steps: readonly (readonly [number, 0 | 1])[]): Telemetry {
  const trace: TraceRow[] = steps.map(([site, taken], i) => [i === 0 ? 0 : tag * 1000 + i - 1, tag * 1000 + i, tag * 100_000 + i + 1, site, taken, 0]);
  return tel({ trace, open: trace.map((r) => r[2]) });
}

interface Snap {
  records: { seed: string; open: string[]; questions: [string, string | null, number][]; traceRows: number; costMs: number | null }[];
  runMs: number | null;
  traceRows: number | null;
}

/**
 * The value order by a full scan of every record (the rule of docs/scheduler.md "Coverage
 * frontier"), from the lane's own snapshot: the oracle the lazy ranking must equal.
 */
function fullScan(lane: FrontierLane, frontier: CoverageFrontier, limit: number, excluded: ReadonlySet<bigint>): [string, bigint][] {
  const snap = lane.toJSON(0) as Snap;
  const expectedSeconds = (r: Snap['records'][number]): number => {
    if (r.costMs !== null) return Math.max(0.01, r.costMs / 1000);
    const base = snap.runMs ?? 1000;
    const scale = snap.traceRows === null ? 1 : Math.min(4, Math.max(0.25, (r.traceRows + 1) / (snap.traceRows + 1)));
    return Math.max(0.01, (base * scale) / 1000);
  };
  type C = { branch: bigint; question: FrontierQuestion | undefined };
  const ranked = snap.records
    .map((r, order) => {
      const questions = new Map(r.questions.map(([b, k, h]) => [BigInt(b), { branch: BigInt(b), key: k === null ? undefined : BigInt(k), pathHits: h }]));
      const tiers: [C[], C[], C[]] = [[], [], []];
      for (const raw of r.open) {
        const branch = BigInt(raw);
        if (excluded.has(branch)) continue;
        const question = questions.get(branch);
        tiers[(question === undefined ? 3 : frontier.tierOf(question)) - 1]!.push({ branch, question });
      }
      const weighted = TIER_WEIGHTS[1] * tiers[0].length + TIER_WEIGHTS[2] * tiers[1].length + TIER_WEIGHTS[3] * tiers[2].length;
      return { seed: r.seed, tiers, value: weighted / expectedSeconds(r), order };
    })
    .filter((e) => e.tiers[0].length + e.tiers[1].length + e.tiers[2].length > 0)
    .sort((a, b) => b.value - a.value || a.order - b.order);
  const out: [string, bigint][] = [];
  const taken = new Set<bigint>();
  const keys = new Set<bigint>();
  for (let t = 0; t < 3; t += 1) {
    for (const e of ranked) {
      for (const c of e.tiers[t]!) {
        if (out.length >= limit) return out;
        if (taken.has(c.branch)) continue;
        if (t < 2 && c.question?.key !== undefined) {
          if (keys.has(c.question.key)) {
            e.tiers[2]!.push(c);
            continue;
          }
          keys.add(c.question.key);
        }
        out.push([e.seed, c.branch]);
        taken.add(c.branch);
      }
    }
  }
  return out;
}

const pairs = (proposals: readonly Proposal[]): [string, bigint][] => proposals.map((p) => [p.job.seed, p.job.targetBranch]);

type Step =
  | { kind: 'input'; sites: [number, 0 | 1][] }
  | { kind: 'learn'; sites: [number, 0 | 1][] }
  | { kind: 'propose'; limit: number; commit: number; exclude: number }
  | { kind: 'directed'; input: number; elapsedMs: number };

const site = fc.tuple(fc.integer({ min: 1, max: 5 }), fc.constantFrom<0 | 1>(0, 1));
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('input' as const), sites: fc.array(site, { minLength: 1, maxLength: 8 }) }),
  fc.record({ kind: fc.constant('learn' as const), sites: fc.array(site, { minLength: 1, maxLength: 6 }) }),
  fc.record({ kind: fc.constant('propose' as const), limit: fc.integer({ min: 1, max: 12 }), commit: fc.integer({ min: 0, max: 3 }), exclude: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant('directed' as const), input: fc.integer({ min: 0, max: 20 }), elapsedMs: fc.integer({ min: 1, max: 5000 }) }),
);

describe('frontier lane: lazy value ranking', () => {
  it('proposes exactly what a full scan of every record ranks, as the campaign learns, asks, saturates and revives', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 60 }), fc.integer({ min: 1, max: 3 }), (steps, saturationAsks) => {
        const frontier = new CoverageFrontier({ saturationAsks });
        const lane = new FrontierLane({ frontier });
        const inputs: { seed: string; tel: Telemetry }[] = [];
        let tag = 0;
        for (const s of steps) {
          if (s.kind === 'input') {
            const t = traceTel(++tag, s.sites);
            frontier.learn(t.branchTrace);
            lane.observe(`in-${tag}`, t, 0, 0);
            inputs.push({ seed: `in-${tag}`, tel: t });
          } else if (s.kind === 'learn') {
            frontier.learn(traceTel(++tag, s.sites).branchTrace);
          } else if (s.kind === 'directed') {
            const input = inputs[s.input % Math.max(1, inputs.length)];
            if (input === undefined) continue;
            const target = input.tel.branchTrace[0]!.opposite;
            lane.observe(input.seed, tel({ target: Number(target), open: [] }), 0, 0, { job: { seed: input.seed, targetBranch: target, actions: [] }, elapsedMs: s.elapsedMs });
          } else {
            // Some open branches are in flight (excluded), as the admission passes them.
            const all = inputs.flatMap((i) => i.tel.branchTrace.map((r) => r.opposite));
            const excluded = new Set(all.filter((_, i) => (i * 7 + s.exclude) % 5 === 0));
            const got = lane.propose(s.limit, s.limit, 0, excluded);
            expect(pairs(got)).toEqual(fullScan(lane, frontier, s.limit, excluded));
            lane.commit(got.slice(0, s.commit), 0);
          }
        }
        const final = lane.propose(64, 64, 0, new Set());
        expect(pairs(final)).toEqual(fullScan(lane, frontier, 64, new Set()));
      }),
      { numRuns: 300 },
    );
  });

  it('scans only the records it needs: one tier-1 question among 2048 inputs of context-only ones', () => {
    const frontier = new CoverageFrontier();
    const lane = new FrontierLane({ frontier });
    // 2048 inputs over the same 32 (site, taken) steps, both directions already taken: tier 3 only.
    const steps: [number, 0 | 1][] = Array.from({ length: 32 }, (_, i) => [i + 1, 1]);
    frontier.learn(traceTel(999_999, steps.map(([s]) => [s, 0] as [number, 0 | 1])).branchTrace);
    for (let i = 1; i <= 2048; i++) {
      const t = traceTel(i, steps);
      frontier.learn(t.branchTrace);
      lane.observe(`in-${i}`, t, 0, 0);
    }
    // One late input reaches site 500, whose other direction nobody has taken.
    const rare = traceTel(5000, [[500, 1]]);
    frontier.learn(rare.branchTrace);
    lane.observe('rare', rare, 0, 0);
    lane.propose(1, 1, 0, new Set()); // bounds are computed once
    const expected = fullScan(lane, frontier, 4, new Set());
    let tierLookups = 0;
    const tierOf = frontier.tierOf.bind(frontier);
    frontier.tierOf = (q) => ((tierLookups += 1), tierOf(q));
    const got = lane.propose(4, 4, 0, new Set());
    expect(got[0]!.job.seed).toBe('rare');
    expect(pairs(got)).toEqual(expected);
    // A full scan looks at 2048 × 32 questions; the lazy ranking at the few records it emits from
    // and the 64 whose bounds it refreshes in rotation (32 questions each), not at every one.
    expect(tierLookups).toBeLessThan(70 * 32);
  });

  it('ranks a revived question again: a saturated (site, direction) that gains a new bucket is wanted at once', () => {
    const frontier = new CoverageFrontier({ saturationAsks: 1 });
    const lane = new FrontierLane({ frontier });
    // 300 context-only inputs first, so the rotating bound refresh does not reach the later ones.
    frontier.learn(traceTel(999_999, [[9, 0]]).branchTrace);
    for (let i = 1; i <= 300; i++) {
      const t = traceTel(i, [[9, 1]]);
      frontier.learn(t.branchTrace);
      lane.observe(`filler-${i}`, t, 0, 0);
    }
    // a and b each take (5, 1) then (5, 0): flipping either row would take a pair a second time, a
    // bucket nobody has: tier 2.
    const a = traceTel(1001, [[5, 1], [5, 0]]);
    const b = traceTel(1002, [[5, 1], [5, 0]]);
    for (const [seed, t] of [['a', a], ['b', b]] as const) {
      frontier.learn(t.branchTrace);
      lane.observe(seed, t, 0, 0);
    }
    const [aToZero, aToOne] = a.branchTrace.map((r) => r.opposite);
    const [bToZero, bToOne] = b.branchTrace.map((r) => r.opposite);
    // Ask a's (5, 0) question: with saturationAsks 1 the pair is saturated, b's copy drops to tier 3.
    const first = lane.propose(1, 1, 0, new Set());
    expect(pairs(first)).toEqual([['a', aToZero]]);
    lane.commit(first, 0);
    // b's (5, 1) question goes out too; b keeps only its saturated (5, 0) question.
    const second = lane.propose(1, 1, 0, new Set([aToOne!]));
    expect(pairs(second)).toEqual([['b', bToOne]]);
    lane.commit(second, 0);
    // Someone takes (5, 0) three times: a new bucket, the pair is revived and b's question is tier 2 again.
    frontier.learn(traceTel(2000, [[5, 0], [5, 0], [5, 0]]).branchTrace);
    expect(frontier.revivals).toBeGreaterThan(0);
    const third = lane.propose(1, 1, 0, new Set([aToOne!]));
    expect(pairs(third)).toEqual(fullScan(lane, frontier, 1, new Set([aToOne!])));
    expect(pairs(third)).toEqual([['b', bToZero]]);
  });
});
