import { describe, expect, it } from 'vitest';
import { PrefixDagLane } from '../../src/scheduler/lanes/prefix-dag-lane.js';
import { CstgLane } from '../../src/scheduler/lanes/cstg-lane.js';
import { EdgeDependenceLane, edgeId } from '../../src/scheduler/lanes/edge-dependence-lane.js';
import { ConcurrencyLane } from '../../src/scheduler/lanes/concurrency-lane.js';
import { FallbackReplayLane } from '../../src/scheduler/lanes/fallback-replay-lane.js';
import { TargetLedger } from '../../src/scheduler/target-ledger.js';
import { DEFAULT_SCORING } from '../../src/scheduler/scoring.js';
import { normalizeJob } from '../../src/scheduler/replay-job.js';
import { ConstraintSummaryCache } from '../../src/scheduler/lanes/constraint-summary-cache.js';
import { parseGuidance } from '../../src/scheduler/guidance-map.js';
import type { Lane, Proposal } from '../../src/scheduler/lanes/lane.js';
import type { SymfenceError } from '../../src/errors.js';
import { cstgSnapshot, prefixSnapshot, tel } from './scheduler-fixtures.js';

const NONE: ReadonlySet<bigint> = new Set();
const S = 1000; // ms per second: tests speak in seconds

function proposeAndCommit(lane: Lane, limit: number, now: number): readonly Proposal[] {
  const proposals = lane.propose(limit, limit, now, NONE).slice(0, limit);
  lane.commit(proposals, now);
  return proposals;
}

function expectNoSideEffects(lane: Lane, now: number, run: () => void): void {
  const before = JSON.stringify(lane.toJSON(now));
  run();
  expect(JSON.stringify(lane.toJSON(now))).toBe(before);
}

describe('Prefix DAG lane', () => {
  it('interleaves the high and low queues three to one when one job is requested', () => {
    const lane = new PrefixDagLane({ cooldownMs: 0 });
    lane.restore(
      prefixSnapshot([
        { id: 10, reward: 0.8, seeds: ['high'] },
        { id: 20, difficulty: 0.5, seeds: ['low'], site: 5 },
      ]),
      0,
    );
    const seeds = [0, 1, 2, 3].map((i) => proposeAndCommit(lane, 1, 100 * S + i)[0]!.job.seed);
    expect(seeds).toEqual(['high', 'high', 'high', 'low']);
  });

  it('reserves ceil(0.75·limit) slots for the high queue, at least one for the low queue, then back-fills', () => {
    const lane = new PrefixDagLane({ cooldownMs: 0 });
    const high = [1, 2, 3, 4, 5].map((i) => ({ id: i, site: i, reward: 0.5 + i / 100, seeds: [`h${i}`] }));
    const low = [6, 7, 8].map((i) => ({ id: i, site: i, difficulty: 0.3, seeds: [`l${i}`] }));
    lane.restore(prefixSnapshot([...high, ...low]), 0);
    const seeds = lane.propose(4, 8, 0, NONE).map((p) => p.job.seed);
    expect(seeds.slice(0, 4)).toEqual(['h5', 'h4', 'h3', 'l6']);
    expect(seeds).toHaveLength(8);
    expect(seeds.slice(4, 6)).toEqual(['h2', 'h1']);
  });

  it('prefers a node at a guided site', () => {
    const lane = new PrefixDagLane({ cooldownMs: 0, distances: new Map([[44n, 0]]) });
    lane.restore(prefixSnapshot([{ id: 33, site: 44, seeds: ['target'] }, { id: 55, site: 66, seeds: ['other'] }]), 0);
    expect(lane.propose(1, 1, 0, NONE)[0]!.job).toMatchObject({ seed: 'target', targetBranch: 33n });
  });

  it.each([-1, Number.NaN, Number.POSITIVE_INFINITY])('rejects a cooldown of %s with ERR_INVALID_OPTION', (cooldownMs) => {
    let error: SymfenceError | undefined;
    try {
      new PrefixDagLane({ cooldownMs });
    } catch (e) {
      error = e as SymfenceError;
    }
    expect(error?.code).toBe('ERR_INVALID_OPTION');
  });

  it('builds one S2F actionseed per seed: high nodes as solve/sample, low nodes as skip', () => {
    const lane = new PrefixDagLane({ cooldownMs: 0 });
    lane.restore(
      prefixSnapshot([
        { id: 10, reward: 0.8, site: 11, seeds: ['seed'] },
        { id: 20, site: 11, reward: 0.3, difficulty: 0.8, exactAttempts: 1, seeds: ['seed'] },
        { id: 30, site: 22, difficulty: 0.2, seeds: ['seed'] },
      ]),
      0,
    );
    const [proposal] = lane.propose(1, 1, 100 * S, NONE);
    expect(proposal!.job.seed).toBe('seed');
    expect(proposal!.job.targetBranch).toBe(10n);
    expect(proposal!.job.actions).toEqual([
      { branch: 10n, kind: 'solve' },
      { branch: 20n, kind: 'sample' },
      { branch: 30n, kind: 'skip' },
    ]);
  });

  it('counts attempts and cooldown only for non-skip actions of committed jobs', () => {
    const lane = new PrefixDagLane({ cooldownMs: 30 * S });
    lane.restore(
      prefixSnapshot([
        { id: 10, reward: 0.8, site: 11, seeds: ['seed'] },
        { id: 30, site: 22, difficulty: 0.2, seeds: ['seed'] },
      ]),
      0,
    );
    const proposals = lane.propose(1, 1, 100 * S, NONE);
    lane.commit(proposals, 100 * S);
    expect(lane.node(10n)!.attempts).toBe(1);
    expect(lane.node(10n)!.lastScheduledMs).toBe(100 * S);
    expect(lane.node(30n)!.attempts).toBe(0);
    expect(lane.node(30n)!.lastScheduledMs).toBeNull();
    expect(lane.queueEpoch).toBe(1);
    // Node 10 is cooling down; node 30 was only skipped and is still eligible.
    expect(lane.propose(1, 1, 110 * S, NONE).map((p) => p.job.targetBranch)).toEqual([30n]);
    expect(lane.propose(2, 2, 130 * S, NONE).map((p) => p.job.targetBranch)).toEqual([10n]);
  });

  it('proposes without side effects and returns a backlog deeper than limit', () => {
    const lane = new PrefixDagLane({ cooldownMs: 0 });
    lane.restore(prefixSnapshot([1, 2, 3].map((i) => ({ id: i, site: i, reward: 0.2 * i, seeds: [`s${i}`] }))), 0);
    expectNoSideEffects(lane, 100 * S, () => {
      expect(lane.propose(1, 1, 100 * S, NONE)).toHaveLength(1);
      expect(lane.propose(1, 3, 100 * S, NONE).map((p) => p.job.targetBranch)).toEqual([3n, 2n, 1n]);
      expect(lane.propose(0, 3, 100 * S, NONE)).toEqual([]);
    });
  });

  it('never proposes an excluded (in-flight) target', () => {
    const lane = new PrefixDagLane({ cooldownMs: 0 });
    lane.restore(prefixSnapshot([{ id: 1, seeds: ['a'] }, { id: 2, site: 2, seeds: ['b'] }]), 0);
    expect(lane.propose(2, 2, 0, new Set([1n])).map((p) => p.job.targetBranch)).toEqual([2n]);
  });

  it('schedules an open branch from the trace and retires it after a sat outcome', () => {
    const lane = new PrefixDagLane({ cooldownMs: S });
    lane.observe('seed', tel({ open: [33], trace: [[11, 22, 33, 44, 1, 0]] }), 0.4, 10 * S);
    expect(lane.node(22n)!.status).toBe('observed');
    expect(lane.node(33n)!.status).toBe('open');
    const [proposal] = lane.propose(1, 1, 100 * S, NONE);
    expect(proposal!.job).toMatchObject({ seed: 'seed', targetBranch: 33n });
    lane.observe('seed', tel({ target: 33, reached: true, status: 'sat', counters: { sat: 1, generated: 1 }, trace: [[11, 22, 33, 44, 1, 1]] }), 0.5, 101 * S, {
      job: proposal!.job,
    });
    expect(lane.node(33n)!.status).toBe('sat');
    expect(lane.constraints.allows(33n, 1000 * S)).toBe(false);
    expect(lane.propose(1, 1, 200 * S, NONE)).toEqual([]);
  });

  it('stays within its node budget', () => {
    const lane = new PrefixDagLane({ maxNodes: 128 });
    for (let i = 1; i <= 200; i += 1) lane.observe('s', tel({ open: [100_000 + i], trace: [[0, i, 100_000 + i, i, 1, 0]] }), 0, i);
    expect(lane.size()).toBeLessThanOrEqual(128);
  });

  it('round-trips its state through JSON with times as ages', () => {
    const lane = new PrefixDagLane({ cooldownMs: 0 });
    lane.observe('seed', tel({ target: 5, open: [33], trace: [[11, 22, 33, 44, 1, 0]] }), 0.4, 10 * S);
    lane.commit(lane.propose(1, 1, 20 * S, NONE), 20 * S);
    const copy = new PrefixDagLane({ cooldownMs: 0 });
    copy.restore(JSON.parse(JSON.stringify(lane.toJSON(50 * S))), 1_000 * S);
    expect(copy.toJSON(1_000 * S)).toEqual(lane.toJSON(50 * S));
    expect(copy.node(33n)!.lastScheduledMs).toBe(970 * S);
  });

  it('rejects a malformed snapshot with ERR_LANE_STATE and keeps its state', () => {
    const lane = new PrefixDagLane();
    lane.observe('seed', tel({ open: [33], trace: [[11, 22, 33, 44, 1, 0]] }), 0.4, 0);
    const before = JSON.stringify(lane.toJSON(0));
    const bad = prefixSnapshot([{ id: 1, seeds: ['x'] }]) as { nodes: { status: string }[] };
    bad.nodes[0]!.status = 'flipped';
    let error: SymfenceError | undefined;
    try {
      lane.restore(bad, 0);
    } catch (e) {
      error = e as SymfenceError;
    }
    expect(error?.code).toBe('ERR_LANE_STATE');
    expect(error?.details.path).toBe('nodes[0].status');
    expect(JSON.stringify(lane.toJSON(0))).toBe(before);
  });
});

describe('constraint summary cache', () => {
  it('never retries a target that was reached and proved unsat', () => {
    const cache = new ConstraintSummaryCache(128);
    cache.observe(tel({ target: 42, reached: true, status: 'unsat' }), 10 * S);
    expect(cache.allows(42n, 1_000_000 * S)).toBe(false);
  });

  it('retries a diverged target after a 5 s back-off', () => {
    const cache = new ConstraintSummaryCache(128);
    cache.observe(tel({ target: 42, reached: false, counters: { unsat: 9 } }), 10 * S);
    expect(cache.get(42n)!.status).toBe('diverged');
    expect(cache.allows(42n, 15 * S - 1)).toBe(false);
    expect(cache.allows(42n, 15 * S)).toBe(true);
  });

  it('is bounded and persists retry deadlines relative to the snapshot time', () => {
    const cache = new ConstraintSummaryCache(128);
    for (let t = 1; t <= 256; t += 1) cache.observe(tel({ target: t }), 100 * S);
    expect(cache.size).toBe(128);
    expect(cache.get(1n)).toBeUndefined();
    expect(cache.get(256n)).toBeDefined();
    const saved = cache.toJSON(102 * S) as unknown[][];
    expect(saved.find((row) => row[0] === '256')![3]).toBe(3 * S);
    const restored = new ConstraintSummaryCache(128);
    restored.restore(saved, 5000 * S);
    expect(restored.allows(256n, 5002 * S)).toBe(false);
    expect(restored.allows(256n, 5003 * S)).toBe(true);
  });
});

describe('CSTG lane', () => {
  it('records a divergence and emits a multi-action job led by the unattempted transition', () => {
    const lane = new CstgLane({ maxTransitions: 128, actionCap: 4, cooldownMs: S });
    lane.observe(
      'seed',
      tel({ target: 99, reached: false, trace: [[1, 2, 99, 10, 1, 0], [2, 3, 100, 20, 0, 0]], counters: { solverTimeUs: 5000 } }),
      0.2,
      10 * S,
      { elapsedMs: 500 },
    );
    expect(lane.transition(99n)).toMatchObject({ divergences: 1, status: 'diverged', attempts: 1 });
    const proposals = lane.propose(1, 1, 100 * S, NONE);
    expect(proposals).toHaveLength(1);
    expect(proposals[0]!.job.targetBranch).toBe(100n);
    expect(proposals[0]!.job.actions.length).toBeGreaterThanOrEqual(2);
    expect(proposals[0]!.job.actions.every((a) => a.kind === 'solve')).toBe(true);
    const copy = new CstgLane();
    copy.restore(lane.toJSON(100 * S), 100 * S);
    expect(copy.transition(99n)!.divergences).toBe(1);
  });

  it('samples a hard transition that was attempted and rarely diverges', () => {
    const lane = new CstgLane({ cooldownMs: 0 });
    lane.restore(cstgSnapshot([{ id: 5, attempts: 3, difficulty: 0.8, seeds: ['a'] }]), 0);
    expect(lane.propose(1, 1, 0, NONE)[0]!.job.actions).toEqual([{ branch: 5n, kind: 'sample' }]);
  });

  it('uses the explicit target outcome when the trace is truncated', () => {
    const lane = new CstgLane();
    lane.observe('seed', tel({ trace: [[1, 2, 99, 10, 1, 0]] }), 0, 10 * S);
    lane.observe('seed', tel({ target: 99, reached: true, status: 'sat' }), 0.8, 11 * S);
    expect(lane.transition(99n)).toMatchObject({ status: 'sat', arrivals: 1, divergences: 0 });
  });

  it('commits cooldown and the scheduled count but never attempts', () => {
    const lane = new CstgLane({ cooldownMs: 30 * S });
    lane.restore(cstgSnapshot([{ id: 77, seeds: ['a'] }]), 0);
    expectNoSideEffects(lane, 100 * S, () => lane.propose(1, 1, 100 * S, NONE));
    lane.commit(lane.propose(1, 1, 100 * S, NONE), 100 * S);
    expect(lane.transition(77n)).toMatchObject({ lastScheduledMs: 100 * S, attempts: 0 });
    expect(lane.scheduled).toBe(1);
    expect(lane.propose(1, 1, 129 * S, NONE)).toEqual([]);
    expect(lane.propose(1, 1, 130 * S, NONE)).toHaveLength(1);
  });
});

describe('edge-dependence lane', () => {
  it('mixes (site, taken) into distinct non-zero edge ids', () => {
    expect(edgeId(10n, 1)).not.toBe(edgeId(10n, 0));
    expect(edgeId(0n, 1)).not.toBe(0n);
  });

  it('schedules distinct context seeds first', () => {
    const lane = new EdgeDependenceLane({ cooldownMs: S });
    lane.observe('a', tel({ trace: [[1, 2, 3, 10, 1, 0], [2, 4, 5, 20, 0, 0]] }), 0, 10 * S);
    lane.observe('b', tel({ trace: [[1, 6, 7, 10, 0, 0], [6, 8, 9, 30, 1, 0]] }), 0, 20 * S);
    const jobs = lane.propose(2, 2, 100 * S, NONE).map((p) => p.job);
    expect(new Set(jobs.map((j) => j.seed))).toEqual(new Set(['a', 'b']));
    for (const j of jobs) expect(j.seed === 'a' ? [3n, 5n] : [7n, 9n]).toContain(j.targetBranch);
  });

  it('proposes each target on the seed whose trace showed it, so the run reaches it', () => {
    const live = new Set(['a', 'b']);
    const lane = new EdgeDependenceLane({ cooldownMs: 0, seedLive: (seed) => live.has(seed) });
    // One edge (site 10 taken), seen from two seeds with different recent histories: targets 3 and 7.
    lane.observe('a', tel({ trace: [[1, 2, 3, 10, 1, 0]] }), 0, 10 * S);
    lane.observe('b', tel({ trace: [[1, 6, 7, 10, 1, 0]] }), 0, 20 * S);
    expect(lane.row(edgeId(10n, 1))).toMatchObject({ targets: [3n, 7n], targetSeeds: ['a', 'b'] });
    const pairs = [];
    for (let round = 0; round < 4; round++) {
      const [p] = proposeAndCommit(lane, 1, (30 + round) * S);
      pairs.push(`${p!.job.seed}:${p!.job.targetBranch}`);
    }
    expect(pairs).toEqual(['a:3', 'b:7', 'a:3', 'b:7']);
    // A target whose seed is gone is not proposed on another seed.
    live.delete('a');
    expect(lane.propose(4, 4, 40 * S, NONE).map((p) => `${p.job.seed}:${p.job.targetBranch}`)).toEqual(['b:7']);
    // Seen again from another seed, the target follows it.
    lane.observe('b', tel({ trace: [[1, 6, 3, 10, 1, 0]] }), 0, 50 * S);
    expect(lane.row(edgeId(10n, 1))!.targetSeeds).toEqual(['b', 'b']);
  });

  it('restores a snapshot without per-target seeds without proposing those targets, and refuses a mismatched one', () => {
    const lane = new EdgeDependenceLane({ cooldownMs: 0 });
    lane.observe('a', tel({ trace: [[1, 2, 3, 10, 1, 0]] }), 0, 10 * S);
    const snapshot = lane.toJSON(20 * S) as { rows: Record<string, unknown>[] };
    const older = { ...snapshot, rows: snapshot.rows.map(({ targetSeeds: _seeds, ...row }) => row) };
    const restored = new EdgeDependenceLane({ cooldownMs: 0 });
    restored.restore(older, 20 * S);
    expect(restored.row(edgeId(10n, 1))).toMatchObject({ targets: [3n], targetSeeds: [''] });
    expect(restored.propose(1, 1, 30 * S, NONE)).toEqual([]);
    const mismatched = { ...snapshot, rows: snapshot.rows.map((row) => ({ ...row, targetSeeds: [] })) };
    let code: string | undefined;
    try {
      new EdgeDependenceLane().restore(mismatched, 20 * S);
    } catch (error) {
      code = (error as SymfenceError).code;
    }
    expect(code).toBe('ERR_LANE_STATE');
  });

  it('prefers the row nearest to a guided site', () => {
    const lane = new EdgeDependenceLane({ cooldownMs: S, distances: new Map([[44n, 0], [99n, 12]]) });
    lane.observe('far', tel({ trace: [[1, 900, 990, 99, 1, 0]] }), 0, 0);
    lane.observe('near', tel({ trace: [[1, 400, 440, 44, 1, 0]] }), 0, 0);
    expect(lane.propose(1, 1, 100 * S, NONE)[0]!.job).toMatchObject({ seed: 'near', targetBranch: 440n });
  });

  it('keeps the round-robin cursor when an existing target is observed again', () => {
    const lane = new EdgeDependenceLane({ cooldownMs: 0 });
    lane.observe('seed', tel({ trace: [[1, 2, 100, 77, 1, 0]] }), 0, 10 * S);
    lane.observe('seed', tel({ trace: [[1, 2, 200, 77, 1, 0]] }), 0, 20 * S);
    const row = lane.row(edgeId(77n, 1))!;
    expect(row.targets).toEqual([100n, 200n]);
    const first = lane.propose(1, 1, 30 * S, NONE);
    expect(first[0]!.job.targetBranch).toBe(100n);
    lane.commit(first, 30 * S);
    expect(lane.row(edgeId(77n, 1))!.cursor).toBe(1);
    lane.observe('seed', tel({ trace: [[1, 2, 100, 77, 1, 0]] }), 0, 40 * S);
    expect(lane.row(edgeId(77n, 1))).toMatchObject({ targets: [100n, 200n], cursor: 1 });
    expect(lane.propose(1, 1, 400 * S, NONE)[0]!.job.targetBranch).toBe(200n);
  });

  it('retires a target settled by a run whose trace is empty', () => {
    const lane = new EdgeDependenceLane({ cooldownMs: 0 });
    lane.observe('seed', tel({ trace: [[1, 2, 300, 77, 1, 0]] }), 0, 10 * S);
    expect(lane.propose(1, 1, 20 * S, NONE)[0]!.job.targetBranch).toBe(300n);
    lane.observe('seed', tel({ target: 300, reached: true, status: 'sat' }), 0.5, 21 * S);
    expect(lane.rows().some((r) => r.targets.includes(300n))).toBe(false);
  });

  it('skips a row whose every target is in flight and moves no state while proposing', () => {
    const lane = new EdgeDependenceLane({ cooldownMs: 0 });
    lane.observe('seed', tel({ trace: [[1, 2, 300, 77, 1, 0]] }), 0, 10 * S);
    expectNoSideEffects(lane, 20 * S, () => expect(lane.propose(1, 1, 20 * S, new Set([300n]))).toEqual([]));
  });
});

describe('concurrency-guidance lane', () => {
  it('replays the nearest frontier first', () => {
    const lane = new ConcurrencyLane({ cooldownMs: S, guidance: parseGuidance('44 0\n66 4\n') });
    lane.observe('far', tel({ trace: [[0, 20, 21, 66, 1, 0]] }), 0.5, 10 * S);
    lane.observe('near', tel({ trace: [[0, 30, 31, 44, 1, 0]] }), 0.1, 20 * S);
    const jobs = lane.propose(2, 2, 100 * S, NONE).map((p) => p.job);
    expect(jobs[0]).toMatchObject({ seed: 'near', targetBranch: 31n });
    expect(jobs[1]!.seed).toBe('far');
  });

  it('learns nothing without guidance', () => {
    const lane = new ConcurrencyLane();
    lane.observe('x', tel({ trace: [[0, 30, 31, 44, 1, 0]] }), 0.1, 0);
    expect(lane.size()).toBe(0);
  });
});

describe('fallback replay lane', () => {
  it('walks a seed\'s open branches; a record in its cooldown is proposed only after every cooled one', () => {
    const lane = new FallbackReplayLane({ cooldownMs: 30 * S });
    lane.observe('seed', tel({ open: [456, 789], counters: { queries: 2, sat: 1, generated: 1 } }), 0.6, 0);
    const first = lane.propose(1, 1, 100 * S, NONE);
    expect(first.map((p) => p.job.targetBranch)).toEqual([456n]);
    lane.commit(first, 100 * S);
    // Cooling down and alone: an idle slot still gets the record's next open branch.
    expect(lane.propose(1, 1, 110 * S, NONE).map((p) => p.job.targetBranch)).toEqual([789n]);
    // A cooled record goes first, however it scores.
    lane.observe('other', tel({ open: [321] }), 0.1, 110 * S);
    expect(lane.propose(2, 2, 110 * S, NONE).map((p) => [p.origin, p.job.targetBranch])).toEqual([
      ['other', 321n],
      ['seed', 789n],
    ]);
    lane.observe('seed', tel({ target: 456, reached: true, status: 'unknown', open: [789] }), 0.1, 120 * S);
    expect(lane.record('seed')).toMatchObject({ openBranches: [456n, 789n], cursor: 1 });
    expect(lane.propose(1, 1, 140 * S, NONE).map((p) => p.job.targetBranch)).toEqual([789n]);
  });

  it('orders cooling records by their last replay, oldest first', () => {
    const lane = new FallbackReplayLane({ cooldownMs: 30 * S });
    lane.observe('early', tel({ open: [1, 3] }), 0.1, 0);
    lane.observe('late', tel({ open: [2, 4] }), 0.9, 0);
    lane.commit(lane.propose(2, 2, 10 * S, NONE).filter((p) => p.origin === 'early'), 10 * S);
    lane.commit(lane.propose(2, 2, 12 * S, NONE).filter((p) => p.origin === 'late'), 12 * S);
    expect(lane.propose(2, 2, 20 * S, NONE).map((p) => [p.origin, p.job.targetBranch])).toEqual([
      ['early', 3n],
      ['late', 4n],
    ]);
  });

  it('asks a branch again only after the cooldown: while cooling, only branches it never asked on the record', () => {
    const lane = new FallbackReplayLane({ cooldownMs: 30 * S });
    lane.observe('seed', tel({ open: [5, 6] }), 0.6, 0);
    lane.commit(lane.propose(1, 1, 0, NONE), 0);
    lane.commit(lane.propose(1, 1, S, NONE), S);
    // Both asked, both still open (unknown): nothing until the record has cooled down.
    lane.observe('seed', tel({ target: 6, reached: true, status: 'unknown', open: [5, 6] }), 0.1, 2 * S);
    for (const t of [2, 10, 30]) expect(lane.propose(1, 1, t * S, NONE), `at ${t} s`).toEqual([]);
    expect(lane.propose(1, 1, 31 * S, NONE).map((p) => p.job.targetBranch)).toEqual([5n]);
  });

  it('skips branches the target ledger backs off or knows answered on any input', () => {
    const ledger = new TargetLedger({ retryBaseMs: 30 * S });
    const lane = new FallbackReplayLane({ cooldownMs: 0, targetsPerJob: 8, ledger });
    lane.observe('seed', tel({ open: [10, 11, 12, 13] }), 0.6, 0);
    ledger.record(normalizeJob({ seed: 'seed', targetBranch: 11 }), [11n], tel({ target: 11, reached: true, status: 'unknown' }), false, 0);
    ledger.noteAnswered('other', [12n]);
    const [job] = lane.propose(1, 1, S, NONE);
    expect([job!.job.targetBranch, ...job!.job.actions.map((a) => a.branch)]).toEqual([10n, 13n]);
    // Once the back-off is over, 11 is asked again.
    const [later] = lane.propose(1, 1, 31 * S, NONE);
    expect([later!.job.targetBranch, ...later!.job.actions.map((a) => a.branch)]).toEqual([10n, 11n, 13n]);
  });

  it('asks at most 64 branches per job, the size of a target group', () => {
    const lane = new FallbackReplayLane({ cooldownMs: 0, targetsPerJob: 500 });
    lane.observe('seed', tel({ open: Array.from({ length: 100 }, (_, i) => i + 1) }), 0.6, 0);
    expect(lane.propose(1, 1, S, NONE)[0]!.job.actions).toHaveLength(63);
  });

  it('waits out the cooldown of a record without open branches (an untargeted replay repeats a whole run)', () => {
    const lane = new FallbackReplayLane({ cooldownMs: 30 * S });
    lane.observe('seed', tel({ counters: { queries: 2, sat: 1, generated: 1 } }), 0.9, 0);
    const first = lane.propose(1, 1, 100 * S, NONE);
    expect(first.map((p) => p.job.targetBranch)).toEqual([0n]);
    lane.commit(first, 100 * S);
    expect(lane.propose(1, 1, 110 * S, NONE)).toEqual([]);
    expect(lane.propose(1, 1, 130 * S, NONE).map((p) => p.job.targetBranch)).toEqual([0n]);
  });

  it('asks up to targetsPerJob open branches in one job, none in flight, and moves the cursor past the last', () => {
    const lane = new FallbackReplayLane({ cooldownMs: 0, targetsPerJob: 3 });
    lane.observe('seed', tel({ open: [10, 11, 12, 13, 14] }), 0.6, 0);
    const [job] = lane.propose(1, 1, S, new Set([11n]));
    expect(job!.job.targetBranch).toBe(10n);
    expect(job!.job.actions).toEqual([
      { branch: 12n, kind: 'solve' },
      { branch: 13n, kind: 'solve' },
    ]);
    lane.commit([job!], S);
    expect(lane.record('seed')!.cursor).toBe(4);
    const [next] = lane.propose(1, 1, 2 * S, NONE);
    expect([next!.job.targetBranch, ...next!.job.actions.map((a) => a.branch)]).toEqual([14n, 10n, 11n]);
  });

  it('drops every group member the run answered sat or unsat, and keeps an unknown one', () => {
    const lane = new FallbackReplayLane({ targetsPerJob: 3 });
    lane.observe('seed', tel({ open: [10, 11, 12, 13] }), 0.6, 0);
    const answer = (branch: bigint, status: 'sat' | 'unsat' | 'unknown') => ({ branch, status, solverTimeUs: 0, cpuUs: 0, files: status === 'sat' ? 1 : 0 });
    lane.observe('seed', { ...tel({ target: 10, reached: true, status: 'sat' }), answers: [answer(10n, 'sat'), answer(11n, 'unsat'), answer(12n, 'unknown')] }, 0.6, S);
    expect(lane.record('seed')!.openBranches).toEqual([12n, 13n]);
  });

  it('drops a target once the solver settled it, reached or not', () => {
    const lane = new FallbackReplayLane();
    lane.observe('seed', tel({ open: [456, 789] }), 0.6, 0);
    lane.observe('seed', tel({ target: 456, reached: false, status: 'unsat' }), 0.6, 0);
    expect(lane.record('seed')!.openBranches).toEqual([789n]);
  });

  /**
   * What a round proposes, computed the plain way: every record scored and sorted (cooled by
   * score, then cooling by last replay), in the lane's record order — the order its state lists.
   */
  function referenceProposals(lane: FallbackReplayLane, limit: number, now: number, excluded: ReadonlySet<bigint>, cooldownMs: number, ledger?: TargetLedger): [string, bigint[]][] {
    const records = (lane.toJSON(now) as { records: { seed: string }[] }).records.map((x) => lane.record(x.seed)!);
    const score = (r: (typeof records)[number]) => DEFAULT_SCORING.fallback({ reward: r.reward, difficulty: r.difficulty, visits: r.visits, hasOpenBranches: r.openBranches.length > 0 });
    const ready = (r: (typeof records)[number]) => r.lastReplayMs === null || now - r.lastReplayMs >= cooldownMs;
    const candidates = records.filter((r) => (ready(r) || r.openBranches.length > 0) && score(r) > 0.05);
    const cooled = candidates.filter(ready).sort((a, b) => score(b) - score(a));
    const cooling = candidates.filter((r) => !ready(r)).sort((a, b) => a.lastReplayMs! - b.lastReplayMs! || score(b) - score(a));
    const out: [string, bigint[]][] = [];
    for (const [list, isReady] of [[cooled, true], [cooling, false]] as const) {
      for (const r of list) {
        if (out.length >= limit) return out;
        if (r.openBranches.length === 0) {
          if (isReady) out.push([r.seed, [0n]]);
          continue;
        }
        const picked: bigint[] = [];
        for (let i = 0; i < r.openBranches.length && picked.length < 2; i++) {
          const b = r.openBranches[(r.cursor + i) % r.openBranches.length]!;
          if (!excluded.has(b) && (isReady || !r.asked.has(b)) && !(ledger && (ledger.answered(b) || !ledger.allowed(r.seed, b, now)))) picked.push(b);
        }
        if (picked.length > 0) out.push([r.seed, picked]);
      }
    }
    return out;
  }

  it('proposes what scoring and sorting every record would, round after round, through observes, commits, evictions and a restore', () => {
    // mulberry32: a fixed sequence, so a failure names a step that replays.
    let state = 12345;
    const rand = (n: number): number => {
      state = (state + 0x6d2b79f5) | 0;
      let t = Math.imul(state ^ (state >>> 15), 1 | state);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) % n;
    };
    const cooldownMs = 20 * S;
    const ledger = new TargetLedger({ retryBaseMs: 30 * S });
    let lane = new FallbackReplayLane({ cooldownMs, targetsPerJob: 2, ledger, maxRecords: 150 });
    let now = 0;
    for (let step = 0; step < 600; step++) {
      now += rand(3) * S;
      const seed = `s${rand(400)}`;
      const open = Array.from({ length: rand(4) }, () => 1 + rand(40));
      const reward = [0, 0.02, 0.3, 0.3, 0.7, 1][rand(6)]!;
      lane.observe(seed, rand(5) === 0 ? null : tel({ open, target: rand(2) ? open[0] ?? 0 : 0, reached: true, status: (['sat', 'unsat', 'unknown'] as const)[rand(3)]! }), reward, now);
      if (rand(7) === 0) ledger.noteAnswered('elsewhere', [BigInt(1 + rand(40))]);
      const excluded = new Set(Array.from({ length: rand(3) }, () => BigInt(1 + rand(40))));
      const limit = 1 + rand(6);
      const proposals = lane.propose(limit, limit, now, excluded);
      expect(proposals.map((p) => [p.origin, [p.job.targetBranch, ...p.job.actions.map((a) => a.branch)]]), `step ${step}`).toEqual(referenceProposals(lane, limit, now, excluded, cooldownMs, ledger));
      if (rand(2) === 0) lane.commit(proposals.slice(0, rand(proposals.length + 1)), now);
      if (step === 300) {
        const restored = new FallbackReplayLane({ cooldownMs, targetsPerJob: 2, ledger, maxRecords: 150 });
        restored.restore(lane.toJSON(now), now);
        lane = restored;
      }
    }
    expect(lane.size()).toBe(150);
  });

  it('walks its records best first and stops once the round is full: a round looks at a handful of 20,000 records', () => {
    let looked = 0;
    const lane = new FallbackReplayLane({ cooldownMs: 0, seedLive: () => (looked++, true) });
    for (let i = 0; i < 20_000; i++) lane.observe(`seed-${i}`, tel({ open: [i + 1] }), (i % 100) / 100, 0);
    looked = 0;
    const proposals = lane.propose(4, 4, S, NONE);
    expect(proposals.map((p) => p.origin)).toEqual(['seed-99', 'seed-199', 'seed-299', 'seed-399']);
    expect(looked).toBe(4);
  });
});

describe('guidance files', () => {
  it('accepts text and JSON forms and keeps the minimum of duplicates', () => {
    expect(parseGuidance('0x10 3.5\n20:0\n# comment\n30,2\n16 1')).toEqual(new Map([[16n, 1], [20n, 0], [30n, 2]]));
    expect(parseGuidance('{"distances": {"16": 2, "0x20": 7}}')).toEqual(new Map([[16n, 2], [32n, 7]]));
    expect(parseGuidance('[[1, 4], {"site": "2", "distance": 3}]')).toEqual(new Map([[1n, 4], [2n, 3]]));
  });

  it.each([['bad row'], ['0 1'], ['5 -1'], ['{"5": "far"}']])('rejects %j with ERR_GUIDANCE_INVALID', (text) => {
    let error: SymfenceError | undefined;
    try {
      parseGuidance(text);
    } catch (e) {
      error = e as SymfenceError;
    }
    expect(error?.code).toBe('ERR_GUIDANCE_INVALID');
  });
});
