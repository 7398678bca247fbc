import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { CoverageFrontier, siteDirectionKey } from '../../src/scheduler/coverage-frontier.js';
import { FrontierLane } from '../../src/scheduler/lanes/frontier-lane.js';
import { MapLocalReservations } from '../../src/scheduler/map-local-reservations.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { SCHEDULER_OPTIONS } from '../../src/scheduler/scheduler-options.js';
import { optionsFromEnv, optionsFromFlags } from '../../src/config/schema.js';
import type { BranchTraceEntry, Telemetry } from '../../src/scheduler/telemetry.js';
import { sha, tel, type TraceRow } from './scheduler-fixtures.js';

const NONE: ReadonlySet<bigint> = new Set();

/** A path as (site, taken) steps; opposite ids are unique per (input tag, step) so contexts differ. */
function rows(tag: number, steps: readonly (readonly [number, 0 | 1])[]): TraceRow[] {
  return steps.map(([site, taken], i) => [i === 0 ? 0 : tag * 1000 + i - 1, tag * 1000 + i, tag * 100_000 + i + 1, site, taken, 0]);
}

function traceTel(tag: number, steps: readonly (readonly [number, 0 | 1])[]): Telemetry {
  const trace = rows(tag, steps);
  return tel({ trace, open: trace.map((r) => r[2]) });
}

describe('coverage frontier', () => {
  it('tiers a question 1 when nobody took its (site, direction), 2 for a new hit bucket, 3 otherwise', () => {
    const frontier = new CoverageFrontier();
    // Site 7 taken once, site 8 not-taken twice.
    const t = traceTel(1, [[7, 1], [8, 0], [8, 0]]).branchTrace;
    frontier.learn(t);
    const q = frontier.questionsOf(t);
    // Flipping site 7 (to not-taken): nobody took (7, 0) → tier 1.
    expect(frontier.tierOf(q.get(t[0]!.opposite)!)).toBe(1);
    // Flipping one site-8 row takes (8, 1) once: also never taken → tier 1.
    expect(frontier.tierOf(q.get(t[1]!.opposite)!)).toBe(1);
    // Another input took (7, 0) once: flipping 7 there adds a first hit → bucket 1 known → tier 3.
    frontier.learn(traceTel(2, [[7, 0]]).branchTrace);
    expect(frontier.tierOf({ key: siteDirectionKey(7n, 0), pathHits: 0 })).toBe(3);
    // A path that already takes (7, 0) once would take it twice: bucket 2 is new → tier 2.
    expect(frontier.tierOf({ key: siteDirectionKey(7n, 0), pathHits: 1 })).toBe(2);
    // Site 0 has no key: context only.
    expect(frontier.tierOf({ key: undefined, pathHits: 0 })).toBe(3);
    expect(frontier.stats()).toMatchObject({ takenPairs: 3, traces: 2, gainingTraces: 2 });
  });

  it('saturates a pair asked k times without a gain, and a gain on it makes it wanted again', () => {
    const frontier = new CoverageFrontier({ saturationAsks: 2 });
    const key = siteDirectionKey(5n, 1);
    frontier.noteAsked(key);
    expect(frontier.tierOf({ key, pathHits: 0 })).toBe(1);
    frontier.noteAsked(key);
    expect(frontier.tierOf({ key, pathHits: 0 })).toBe(3);
    expect(frontier.stats().saturatedPairs).toBe(1);
    // Someone finally took it once: the count restarts, and a second hit is a new bucket (tier 2).
    frontier.learn(traceTel(1, [[5, 1]]).branchTrace);
    expect(frontier.tierOf({ key, pathHits: 1 })).toBe(2);
    expect(frontier.stats().saturatedPairs).toBe(0);
  });

  it('wantedBranchesFor names the opposite ids whose (site, direction) is wanted, never a site-0 row or a covered pair', () => {
    const frontier = new CoverageFrontier();
    frontier.learn(traceTel(9, [[3, 0]]).branchTrace); // (3, 0) covered elsewhere
    const trace = tel({
      trace: [
        [0, 11, 21, 3, 1, 0], // flip → (3, 0): covered, first hit on this path → not wanted
        [11, 12, 22, 4, 1, 0], // flip → (4, 0): untaken → wanted
        [12, 13, 23, 0, 1, 0], // site 0 → never wanted
      ],
      open: [21, 22, 23],
    }).branchTrace;
    frontier.learn(trace);
    expect(frontier.wantedBranchesFor(trace)).toEqual([22n]);
    expect(frontier.wantedBranchesFor(trace, 1)).toEqual([22n]);
  });

  it('learning never makes a question more wanted, whatever traces arrive in whatever order (property)', () => {
    const step = fc.tuple(fc.integer({ min: 0, max: 6 }), fc.constantFrom<0 | 1>(0, 1));
    const path = fc.array(step, { minLength: 1, maxLength: 40 });
    fc.assert(
      fc.property(fc.array(path, { minLength: 1, maxLength: 8 }), path, (paths, probe) => {
        const frontier = new CoverageFrontier();
        const probeTrace = traceTel(99, probe).branchTrace;
        const questions = [...frontier.questionsOf(probeTrace).values()];
        let tiers = questions.map((q) => frontier.tierOf(q));
        for (const [i, p] of paths.entries()) {
          frontier.learn(traceTel(i + 1, p).branchTrace);
          const next = questions.map((q) => frontier.tierOf(q));
          next.forEach((t, j) => expect(t).toBeGreaterThanOrEqual(tiers[j]!));
          tiers = next;
        }
        // Same traces in reverse: same coverage.
        const reversed = new CoverageFrontier();
        [...paths].reverse().forEach((p, i) => reversed.learn(traceTel(50 + i, p).branchTrace));
        const { takenPairs, buckets } = frontier.stats();
        expect(reversed.stats()).toMatchObject({ takenPairs, buckets });
      }),
      { seed: 2323, numRuns: 200 },
    );
  });

  it('round-trips through toJSON and refuses a corrupt snapshot without changing its state', () => {
    const frontier = new CoverageFrontier({ saturationAsks: 3 });
    frontier.learn(traceTel(1, [[1, 1], [2, 0], [2, 0], [2, 0]]).branchTrace);
    frontier.noteAsked(siteDirectionKey(9n, 1));
    const copy = new CoverageFrontier({ saturationAsks: 3 });
    copy.restore(JSON.parse(JSON.stringify(frontier.toJSON())));
    expect(copy.toJSON()).toEqual(frontier.toJSON());
    const before = JSON.stringify(copy.toJSON());
    expect(() => copy.restore({ schema: 1, keys: [['12', 256, 0]] })).toThrow(expect.objectContaining({ code: 'ERR_LANE_STATE' }));
    expect(() => copy.restore({ schema: 1, keys: [['-1', 1, 0]] })).toThrow(expect.objectContaining({ code: 'ERR_LANE_STATE' }));
    expect(JSON.stringify(copy.toJSON())).toBe(before);
  });
});

describe('frontier lane ordered by the coverage frontier', () => {
  it('asks every tier-1 question of the campaign before the older input’s context-only ones', () => {
    const frontier = new CoverageFrontier();
    const lane = new FrontierLane({ frontier });
    // The old input's branches flip to pairs the campaign already has (site 1 both ways).
    const old = traceTel(1, [[1, 1], [1, 0]]);
    // The new input reaches site 2, whose not-taken side nobody has seen.
    const young = traceTel(2, [[1, 1], [2, 1]]);
    for (const t of [old, young]) frontier.learn(t.branchTrace);
    lane.observe('old', old, 0, 0);
    lane.observe('young', young, 0, 0);
    const order = lane.propose(8, 8, 0, NONE).map((p) => [p.job.seed, p.job.targetBranch]);
    expect(order[0]).toEqual(['young', young.branchTrace[1]!.opposite]);
    expect(order).toHaveLength(4);
    // Age order keeps the older rule: the old input first.
    const byAge = new FrontierLane({ frontier, order: 'age' });
    byAge.observe('old', old, 0, 0);
    byAge.observe('young', young, 0, 0);
    expect(byAge.propose(8, 8, 0, NONE)[0]!.job.seed).toBe('old');
  });

  it('gives a first run the campaign’s tier-1 questions before the context-only ones of its own input', () => {
    const frontier = new CoverageFrontier();
    const lane = new FrontierLane({ frontier });
    // 'own' flips only pairs the campaign has (site 1 both ways); 'other' reaches site 2, whose
    // not-taken side nobody has seen.
    const own = traceTel(1, [[1, 1], [1, 0]]);
    const other = traceTel(2, [[1, 1], [2, 1]]);
    for (const t of [own, other]) frontier.learn(t.branchTrace);
    lane.observe('own', own, 0, 0);
    lane.observe('other', other, 0, 0);
    const tier1 = other.branchTrace[1]!.opposite;
    const wanted = lane.wantedFor('own', 8);
    expect(wanted[0]).toBe(tier1);
    expect(new Set(wanted)).toEqual(new Set([...own.branchTrace, ...other.branchTrace].map((r) => r.opposite)));
    // Within the last tier the input's own open branches come before the other input's.
    expect(wanted.slice(1, 3)).toEqual(own.branchTrace.map((r) => r.opposite));
    expect(lane.wantedFor('own', 1)).toEqual([tier1]);
  });

  it('asks one (site, direction) once per round across inputs; the other inputs’ copies wait in the last tier', () => {
    const frontier = new CoverageFrontier();
    const lane = new FrontierLane({ frontier });
    const a = traceTel(1, [[4, 1]]);
    const b = traceTel(2, [[4, 1], [6, 1]]);
    for (const t of [a, b]) frontier.learn(t.branchTrace);
    lane.observe('a', a, 0, 0);
    lane.observe('b', b, 0, 0);
    const order = lane.propose(8, 8, 0, NONE).map((p) => p.job.targetBranch);
    // (4,0) once (on the input with more wanted questions per second: b), (6,0), then a's copy of (4,0).
    expect(order).toEqual([b.branchTrace[0]!.opposite, b.branchTrace[1]!.opposite, a.branchTrace[0]!.opposite]);
  });

  it('prefers, among equally wanted inputs, the one whose directed runs measured cheaper', () => {
    const frontier = new CoverageFrontier();
    const lane = new FrontierLane({ frontier });
    const slow = traceTel(1, [[10, 1], [11, 1], [12, 1]]);
    const fast = traceTel(2, [[20, 1], [21, 1], [22, 1]]);
    lane.observe('slow', slow, 0, 0);
    lane.observe('fast', fast, 0, 0);
    const job = (seed: string, target: bigint) => ({ seed, targetBranch: target, actions: [] });
    // One directed run each (left its target open): 4 s on slow, 0.5 s on fast.
    lane.observe('slow', tel({ trace: rows(1, [[10, 1]]), open: [] }), 0, 0, { job: job('slow', slow.branchTrace[0]!.opposite), elapsedMs: 4000 });
    lane.observe('fast', tel({ trace: rows(2, [[20, 1]]), open: [] }), 0, 0, { job: job('fast', fast.branchTrace[0]!.opposite), elapsedMs: 500 });
    expect(lane.propose(1, 1, 0, NONE)[0]!.job.seed).toBe('fast');
  });

  it('counts an ask at commit and drops a saturated pair to the last tier', () => {
    const frontier = new CoverageFrontier({ saturationAsks: 1 });
    const lane = new FrontierLane({ frontier });
    const a = traceTel(1, [[4, 1], [5, 1]]);
    const b = traceTel(2, [[4, 1]]);
    lane.observe('a', a, 0, 0);
    lane.observe('b', b, 0, 0);
    const first = lane.propose(1, 1, 0, NONE);
    lane.commit(first, 0);
    expect(lane.askedByTier()).toEqual({ 1: 1, 2: 0, 3: 0 });
    const asked = first[0]!.job.targetBranch;
    const key = [...frontier.questionsOf(asked === a.branchTrace[0]!.opposite ? a.branchTrace : b.branchTrace).values()].find((q) => q.branch === asked)!.key!;
    expect(frontier.tierOf({ key, pathHits: 0 })).toBe(3);
  });

  it('restores its records, questions and costs from a snapshot, and refuses a corrupt question row', () => {
    const frontier = new CoverageFrontier();
    const lane = new FrontierLane({ frontier });
    lane.observe('s', traceTel(1, [[4, 1], [5, 0]]), 0, 0);
    const snapshot = JSON.parse(JSON.stringify(lane.toJSON(0)));
    const copy = new FrontierLane();
    copy.restore(snapshot, 0);
    expect(copy.propose(8, 8, 0, NONE).map((p) => p.job.targetBranch)).toEqual(lane.propose(8, 8, 0, NONE).map((p) => p.job.targetBranch));
    snapshot.records[0].questions[0][1] = 'x';
    expect(() => new FrontierLane().restore(snapshot, 0)).toThrow(expect.objectContaining({ code: 'ERR_LANE_STATE' }));
  });
});

/**
 * A small deterministic program: `sites` comparison sites on one path; an input is a bit vector,
 * and bit i decides site i's direction. Several inputs share most of their path (same bits), so
 * their open branches repeat the same (site, direction) questions under different context ids.
 */
function program(sites: number) {
  const run = (tag: number, bits: readonly (0 | 1)[]): Telemetry => traceTel(tag, bits.map((b, i) => [i + 1, b] as const));
  return { sites, run };
}

describe('scheduler: value order against age order on the same campaign', () => {
  it('covers every (site, direction) of a program with fewer directed runs than age order', async () => {
    const { sites, run } = program(12);
    const seeds: (0 | 1)[][] = [];
    // 4 inputs that between them take both directions of the first 4 sites, and all take the same
    // direction of the other 8: the first 4 questions of every input ask what the campaign has.
    for (let i = 0; i < 4; i++) {
      const a = (i & 1) as 0 | 1;
      const b = ((i >> 1) & 1) as 0 | 1;
      seeds.push([a, b, (1 - a) as 0 | 1, (1 - b) as 0 | 1, ...(Array(8).fill(1) as 1[])]);
    }
    const askedUntilCovered = async (order: 'value' | 'age'): Promise<number> => {
      const scheduler = new Scheduler({ local: new MapLocalReservations(), options: { lanes: 'frontier', frontierOrder: order, frontierTargets: 1, cooldownMs: 0 } });
      const covered = new Set<string>();
      const learn = (bits: readonly (0 | 1)[]) => bits.forEach((b, i) => covered.add(`${i}:${b}`));
      let tag = 0;
      const inputs = new Map<string, { tag: number; bits: (0 | 1)[] }>();
      const addInput = (bits: (0 | 1)[], now: number): void => {
        const id = sha(++tag);
        inputs.set(id, { tag, bits });
        scheduler.addSeed(id, { bytes: 2, sha256: id, path: `/q/${id}` }, now);
        scheduler.observe({ seed: id, telemetry: run(tag, bits), reward: 0 }, now);
        learn(bits);
      };
      for (const bits of seeds) addInput(bits, 0);
      let runs = 0;
      for (let round = 1; round < 200 && covered.size < 2 * sites; round++) {
        const admitted = await scheduler.admit(1, round);
        if (admitted.length === 0) break;
        for (const a of admitted) {
          runs += 1;
          const input = inputs.get(a.job.seed)!;
          const trace = run(input.tag, input.bits).branchTrace;
          const row = trace.findIndex((r) => r.opposite === a.job.targetBranch);
          // The solver flips the target's site: the new input takes the other direction there.
          const flipped = input.bits.map((b, i) => (i === row ? ((1 - b) as 0 | 1) : b));
          const rowsOf = trace.map((r) => [Number(r.parent), Number(r.actual), Number(r.opposite), Number(r.site), r.taken, 0] as TraceRow);
          scheduler.observe({ seed: a.job.seed, telemetry: tel({ target: Number(a.job.targetBranch), reached: true, status: 'sat', trace: rowsOf, open: [] }), reward: 1, job: a.job }, round);
          scheduler.release(a);
          if (flipped.some((b, i) => !covered.has(`${i}:${b}`))) addInput(flipped, round);
        }
      }
      expect(covered.size).toBe(2 * sites);
      return runs;
    };
    const value = await askedUntilCovered('value');
    const age = await askedUntilCovered('age');
    // One run per pair nobody had (8), against 4 wasted runs first in age order.
    expect(value).toBe(8);
    expect(age).toBe(12);
  });

  it('learns the frontier from every observed trace and reports it in stats', () => {
    const scheduler = new Scheduler({ local: new MapLocalReservations(), options: { lanes: 'frontier' } });
    scheduler.addSeed(sha(1), { bytes: 1, sha256: sha(1), path: '/q/1' }, 0);
    const t = traceTel(1, [[3, 1], [4, 0]]);
    scheduler.observe({ seed: sha(1), telemetry: t, reward: 0 }, 0);
    expect(scheduler.stats().frontier).toMatchObject({ takenPairs: 2, traces: 1, askedByTier: { 1: 0, 2: 0, 3: 0 } });
    expect(scheduler.wantedBranchesFor(t.branchTrace as BranchTraceEntry[])).toEqual(t.branchTrace.map((r) => r.opposite));
  });
});

describe('frontier options', () => {
  it('take a flag, a SYMFENCE_ variable and an embedding name, and name the option and value when invalid', () => {
    expect(SCHEDULER_OPTIONS.resolve(optionsFromEnv(SCHEDULER_OPTIONS, { SYMFENCE_FRONTIER_SATURATION: '7', SYMFENCE_FRONTIER_ORDER: 'age' }))).toMatchObject({ frontierSaturation: 7, frontierOrder: 'age' });
    expect(SCHEDULER_OPTIONS.resolve(optionsFromFlags(SCHEDULER_OPTIONS, { frontierSaturation: '9', frontierOrder: 'value' }))).toMatchObject({ frontierSaturation: 9, frontierOrder: 'value' });
    expect(SCHEDULER_OPTIONS.resolve({ frontierSaturation: 2 }).frontierSaturation).toBe(2);
    expect(SCHEDULER_OPTIONS.resolve({}).frontierSaturation).toBe(4);
    let error: { code?: string; message?: string } = {};
    try {
      SCHEDULER_OPTIONS.resolve({ frontierSaturation: 0 });
    } catch (e) {
      error = e as typeof error;
    }
    expect(error.code).toBe('ERR_INVALID_OPTION');
    expect(error.message).toContain('frontierSaturation');
    expect(() => SCHEDULER_OPTIONS.resolve({ frontierOrder: 'newest' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
  });
});
