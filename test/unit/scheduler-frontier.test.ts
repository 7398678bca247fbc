import { describe, expect, it } from 'vitest';
import { FrontierLane } from '../../src/scheduler/lanes/frontier-lane.js';
import { TargetLedger, answeredBy, outcomesOf } from '../../src/scheduler/target-ledger.js';
import { parseTelemetry } from '../../src/scheduler/telemetry.js';
import { MapLocalReservations } from '../../src/scheduler/map-local-reservations.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { targetGroup, type ReplayJob } from '../../src/scheduler/replay-job.js';
import { sha, tel, telemetryJson, type TraceRow } from './scheduler-fixtures.js';

const NONE: ReadonlySet<bigint> = new Set();

/** A trace-only run's telemetry: every row unsolved, every opposite open. */
function traceOf(opposites: number[]): ReturnType<typeof tel> {
  const trace: TraceRow[] = opposites.map((o, i) => [i === 0 ? 0 : 1000 + i - 1, 1000 + i, o, 10 + i, 1, 0]);
  return tel({ trace, open: opposites });
}

/** A directed run at `targets`: each answered (solved, not left open) unless listed in `open`. */
function directedOf(opposites: number[], targets: readonly bigint[], open: number[] = []): ReturnType<typeof tel> {
  const wanted = new Set(targets.map(Number));
  const trace: TraceRow[] = opposites.map((o, i) => [i === 0 ? 0 : 1000 + i - 1, 1000 + i, o, 10 + i, 1, wanted.has(o) ? 1 : 0]);
  const first = Number(targets[0] ?? 0n);
  const status = open.includes(first) ? 'unknown' : 'sat';
  return tel({ target: first, reached: true, status, trace, open: [...opposites.filter((o) => !wanted.has(o)), ...open] });
}

describe('target ledger', () => {
  it('never allows a pair again once a run answered it, and drops proposals aimed at it', () => {
    const ledger = new TargetLedger();
    const job: ReplayJob = { seed: 's', targetBranch: 7n, actions: [] };
    ledger.record(job, [7n], directedOf([7, 8], [7n]), false, 0);
    expect(ledger.allowed('s', 7n, 1e12)).toBe(false);
    expect(ledger.answered(7n)).toBe(true);
    expect(ledger.filter(job, 1e12)).toBeUndefined();
    expect(ledger.stats()).toMatchObject({ settledPairs: 1, answeredBranches: 1, droppedProposals: 1 });
  });

  it('backs off an open pair exponentially and gives it up after the attempt limit', () => {
    const ledger = new TargetLedger({ maxAttempts: 3, retryBaseMs: 1000 });
    const job: ReplayJob = { seed: 's', targetBranch: 9n, actions: [] };
    ledger.record(job, [9n], directedOf([9], [9n], [9]), false, 0);
    expect(ledger.allowed('s', 9n, 999)).toBe(false);
    expect(ledger.allowed('s', 9n, 1000)).toBe(true);
    ledger.record(job, [9n], null, true, 1000);
    expect(ledger.allowed('s', 9n, 2999)).toBe(false);
    expect(ledger.allowed('s', 9n, 3000)).toBe(true);
    ledger.record(job, [9n], null, true, 3000);
    expect(ledger.allowed('s', 9n, 1e12)).toBe(false);
    expect(ledger.answered(9n)).toBe(false);
    expect(ledger.stats().givenUp).toBe(1);
  });

  it('strips settled actions from a multi-action job and keeps its skip actions', () => {
    const ledger = new TargetLedger();
    ledger.noteAnswered('s', [5n]);
    const job: ReplayJob = { seed: 's', targetBranch: 4n, actions: [{ branch: 5n, kind: 'solve' }, { branch: 6n, kind: 'sample' }, { branch: 3n, kind: 'skip' }] };
    const kept = ledger.filter(job, 0)!;
    expect(kept.actions).toEqual([{ branch: 6n, kind: 'sample' }, { branch: 3n, kind: 'skip' }]);
    expect(targetGroup(kept)).toEqual([4n, 6n]);
  });

  it('reads answered branches from interesting rows that were not left open, and the primary target from its status', () => {
    const t = tel({
      target: 30,
      reached: true,
      status: 'unsat',
      trace: [
        [0, 1, 20, 1, 1, 1],
        [1, 2, 21, 2, 0, 1],
        [2, 3, 30, 3, 1, 1],
      ],
      open: [21],
    });
    const outcomes = outcomesOf(t, [20n, 21n, 30n, 40n]);
    expect(outcomes.get(20n)).toBe('answered');
    expect(outcomes.get(21n)).toBeUndefined();
    expect(outcomes.get(30n)).toBe('answered');
    expect(outcomes.get(40n)).toBeUndefined();
  });

  it('promotes the first open action when the primary target is settled, and strips actions still backing off', () => {
    const ledger = new TargetLedger({ retryBaseMs: 1000 });
    ledger.noteAnswered('s', [4n]);
    ledger.record({ seed: 's', targetBranch: 5n, actions: [] }, [5n], null, true, 0); // 5 backs off until 1000
    const job: ReplayJob = { seed: 's', targetBranch: 4n, actions: [{ branch: 5n, kind: 'solve' }, { branch: 6n, kind: 'solve' }, { branch: 7n, kind: 'sample' }] };
    const kept = ledger.filter(job, 500)!;
    expect(kept.targetBranch).toBe(6n);
    expect(targetGroup(kept)).toEqual([6n, 7n]);
    expect(ledger.filter({ seed: 's', targetBranch: 4n, actions: [{ branch: 5n, kind: 'solve' }] }, 500)).toBeUndefined();
  });

  it('on preload telemetry, counts as answered only branches a generated input was attributed to (and a directed unsat primary)', () => {
    const rows: TraceRow[] = [
      [0, 1, 20, 1, 1, 1],
      [1, 2, 21, 2, 1, 1],
    ];
    const preload = { mode: 'untargeted', events: 2, symbolicEvents: 2, solved: 2, skipped: 0, traceDropped: 0, openDropped: 0, earlyExit: false };
    const untargeted = parseTelemetry({ ...telemetryJson({ trace: rows }), preload, generatedBy: [['000000', '20', '1']] });
    expect(answeredBy(untargeted)).toEqual([20n]);
    const directed = parseTelemetry({ ...telemetryJson({ target: 21, reached: true, status: 'unsat', trace: rows }), preload: { ...preload, mode: 'directed' }, generatedBy: [] });
    expect(outcomesOf(directed, [21n]).get(21n)).toBe('answered');
  });

  it('charges no attempt for a group branch a run never reached because it ended early', () => {
    const ledger = new TargetLedger({ maxAttempts: 1 });
    const preload = { mode: 'directed', events: 1, symbolicEvents: 1, solved: 1, skipped: 0, traceDropped: 0, openDropped: 0, earlyExit: true };
    const t = parseTelemetry({ ...telemetryJson({ target: 30, reached: true, status: 'sat', trace: [[0, 1, 30, 1, 1, 1]] }), preload, generatedBy: [['000000', '30', '1']] });
    const job: ReplayJob = { seed: 's', targetBranch: 30n, actions: [{ branch: 31n, kind: 'solve' }] };
    ledger.record(job, [30n, 31n], t, false, 0);
    expect(ledger.isSettled('s', 30n)).toBe(true);
    expect(ledger.allowed('s', 31n, 0)).toBe(true);
    expect(ledger.stats().givenUp).toBe(0);
  });

  it('forgets the oldest pairs beyond its bound', () => {
    const ledger = new TargetLedger({ maxPairs: 1024 });
    for (let i = 1; i <= 1500; i++) ledger.noteAnswered(`s${i}`, [BigInt(i)]);
    expect(ledger.stats().settledPairs).toBe(1024);
    expect(ledger.isSettled('s1', 1n)).toBe(false);
    expect(ledger.isSettled('s1500', 1500n)).toBe(true);
  });
});

describe('frontier lane', () => {
  it('proposes one directed job per open branch of a trace run, skipping in-flight and answered branches', () => {
    const ledger = new TargetLedger();
    ledger.noteAnswered('other', [12n]);
    const lane = new FrontierLane({ ledger });
    lane.observe('s', traceOf([11, 12, 13, 14]), 0, 0);
    const jobs = lane.propose(8, 8, 0, new Set([13n])).map((p) => p.job);
    expect(jobs.map((j) => j.targetBranch)).toEqual([11n, 14n]);
    expect(jobs.every((j) => j.actions.length === 0 && j.seed === 's')).toBe(true);
  });

  it('groups up to targetsPerJob branches into one job, the first as primary target', () => {
    const lane = new FrontierLane({ targetsPerJob: 3 });
    lane.observe('s', traceOf([1, 2, 3, 4]), 0, 0);
    const jobs = lane.propose(4, 4, 0, NONE).map((p) => p.job);
    expect(jobs.map((j) => targetGroup(j))).toEqual([[1n, 2n, 3n], [4n]]);
    expect(jobs[0]!.actions.map((a) => a.kind)).toEqual(['solve', 'solve']);
  });

  it('asks a branch open on two inputs only once per round, on the older input', () => {
    const lane = new FrontierLane();
    lane.observe('old', traceOf([5, 6]), 0, 0);
    lane.observe('new', traceOf([6, 7]), 0, 0);
    const jobs = lane.propose(8, 8, 0, NONE).map((p) => [p.job.seed, p.job.targetBranch]);
    expect(jobs).toEqual([
      ['old', 5n],
      ['old', 6n],
      ['new', 7n],
    ]);
  });

  it('changes nothing when proposing, and takes dispatched branches off the record only at commit', () => {
    const lane = new FrontierLane();
    lane.observe('s', traceOf([1, 2]), 0, 0);
    const before = JSON.stringify(lane.toJSON(0));
    const proposals = lane.propose(1, 1, 0, NONE);
    expect(JSON.stringify(lane.toJSON(0))).toBe(before);
    lane.commit(proposals.slice(0, 1), 0);
    expect(lane.openOf('s')).toEqual([2n]);
  });

  it('reopens only the branches its commit took from the record', () => {
    const lane = new FrontierLane();
    lane.observe('s', traceOf([1, 2]), 0, 0);
    // A job naming a branch the record never held (9) besides one it did (1).
    const job: ReplayJob = { seed: 's', targetBranch: 1n, actions: [{ branch: 9n, kind: 'solve' }] };
    lane.commit([{ lane: 'frontier', origin: 's', job }], 0);
    expect(lane.openOf('s')).toEqual([2n]);
    lane.reopen(job, 0);
    expect(lane.openOf('s')).toEqual([1n, 2n]);
    expect(lane.askedByTier()).toEqual({ 1: 0, 2: 0, 3: 0 });
  });

  it('puts back a branch its directed run left open, and restores its state from a snapshot', () => {
    const lane = new FrontierLane();
    lane.observe('s', traceOf([1, 2]), 0, 0);
    const [first] = lane.propose(1, 1, 0, NONE);
    lane.commit([first!], 0);
    lane.observe('s', directedOf([1, 2], [1n], [1]), 0, 0, { job: first!.job });
    expect(lane.openOf('s')).toEqual([2n, 1n]);
    const copy = new FrontierLane();
    copy.restore(lane.toJSON(0), 0);
    expect(copy.openOf('s')).toEqual([2n, 1n]);
  });
});

describe('scheduler with the frontier lane', () => {
  it('takes back a dispatched job that never ran, as it was: branches, question tiers, asks', async () => {
    const scheduler = new Scheduler({ local: new MapLocalReservations(), options: { cooldownMs: 1000 } });
    const seed = sha(1);
    scheduler.addSeed(seed, { bytes: 8, sha256: seed, path: `/q/${seed}` }, 0);
    scheduler.observe({ seed, telemetry: traceOf([101, 102, 103]), reward: 0 }, 0);
    const lane = scheduler.lane('frontier')!;
    /** The pairs taken, and the asks counted against any pair. */
    const coverage = (): unknown => {
      const keys = (lane.frontier.toJSON() as { keys: Array<[string, number, number]> }).keys;
      return { taken: keys.filter(([, buckets]) => buckets !== 0).map(([key, buckets]) => [key, buckets]), asks: keys.reduce((sum, [, , asks]) => sum + asks, 0) };
    };
    const before = coverage();
    expect(before).toMatchObject({ asks: 0 });
    // Ten dispatches in a row that never run (the lease store failed each time): each is taken
    // back, so none counts as an ask and no question saturates.
    let group: readonly bigint[] = [];
    for (let attempt = 0; attempt < 10; attempt++) {
      const [admitted] = await scheduler.admit(1, 1000 * (attempt + 1));
      expect(admitted).toBeDefined();
      group = admitted!.group;
      expect(lane.openOf(seed)).toEqual([]);
      expect(lane.askedByTier()).toEqual({ 1: 3, 2: 0, 3: 0 });
      scheduler.release(admitted!);
      scheduler.reopen('frontier', admitted!.job, 1000 * (attempt + 1));
      expect(lane.openOf(seed)).toEqual([101n, 102n, 103n]);
      expect(lane.askedByTier()).toEqual({ 1: 0, 2: 0, 3: 0 });
      expect(coverage()).toEqual(before);
    }
    expect(group).toEqual([101n, 102n, 103n]);
    // Unknown lanes and seeds are ignored.
    scheduler.reopen('nowhere', { seed, targetBranch: 101n, actions: [] }, 20_000);
    scheduler.reopen('frontier', { seed: sha(2), targetBranch: 101n, actions: [] }, 20_000);
    expect(lane.openOf(sha(2))).toEqual([]);
  });

  it('does not take back a branch answered meanwhile', async () => {
    const scheduler = new Scheduler({ local: new MapLocalReservations(), options: { cooldownMs: 1000 } });
    const [a, b] = [sha(1), sha(2)];
    for (const seed of [a, b]) scheduler.addSeed(seed, { bytes: 8, sha256: seed, path: `/q/${seed}` }, 0);
    scheduler.observe({ seed: a, telemetry: traceOf([101, 102]), reward: 0 }, 0);
    const [admitted] = await scheduler.admit(1, 1000);
    scheduler.release(admitted!);
    // Another input's directed run answers 101 before the failed job is given back.
    scheduler.observe({ seed: b, telemetry: directedOf([101], [101n]), reward: 1, job: { seed: b, targetBranch: 101n, actions: [] } }, 1500);
    scheduler.reopen('frontier', admitted!.job, 2000);
    expect(scheduler.lane('frontier')!.openOf(a)).toEqual([102n]);
  });

  it('never admits an answered (input, branch) pair twice, however long it runs, when every target comes back sat', async () => {
    const scheduler = new Scheduler({ local: new MapLocalReservations(), options: { cooldownMs: 1000 } });
    const seeds = [1, 2, 3].map((n) => sha(n));
    const opposites = [101, 102, 103, 104, 105, 106];
    for (const seed of seeds) scheduler.addSeed(seed, { bytes: 8, sha256: seed, path: `/q/${seed}` }, 0);
    // Each input's trace run: the same branches (shared prefix), so only the first input asks them.
    for (const seed of seeds) scheduler.observe({ seed, telemetry: traceOf(opposites), reward: 0 }, 0);
    const admittedPairs: string[] = [];
    let now = 0;
    for (let round = 0; round < 200; round++) {
      now += 17_000;
      const admitted = await scheduler.admit(4, now);
      for (const a of admitted) {
        for (const target of a.group) admittedPairs.push(`${a.job.seed}/${target}`);
        // A solver that answers sat for every target it is given.
        scheduler.observe({ seed: a.job.seed, telemetry: directedOf(opposites, a.group), reward: 1, job: a.job }, now);
        scheduler.release(a);
      }
    }
    expect(admittedPairs.length).toBeGreaterThan(opposites.length);
    expect(new Set(admittedPairs).size).toBe(admittedPairs.length);
  });

  it('with the frontier lane alone, asks each branch once in the whole campaign: answered on one input, not again on another', async () => {
    const scheduler = new Scheduler({ local: new MapLocalReservations(), options: { cooldownMs: 1000, lanes: 'frontier' } });
    const seeds = [1, 2, 3].map((n) => sha(n));
    const opposites = [101, 102, 103, 104];
    for (const seed of seeds) scheduler.addSeed(seed, { bytes: 8, sha256: seed, path: `/q/${seed}` }, 0);
    for (const seed of seeds) scheduler.observe({ seed, telemetry: traceOf(opposites), reward: 0 }, 0);
    const asked: bigint[] = [];
    for (let now = 0; now < 100_000; now += 5000) {
      for (const a of await scheduler.admit(2, now)) {
        asked.push(...a.group);
        scheduler.observe({ seed: a.job.seed, telemetry: directedOf(opposites, a.group), reward: 1, job: a.job }, now);
        scheduler.release(a);
      }
    }
    expect([...asked].sort()).toEqual(opposites.map(BigInt));
  });

  it('retries a branch left unknown after the back-off, and stops after the attempt limit', async () => {
    const scheduler = new Scheduler({ local: new MapLocalReservations(), options: { cooldownMs: 1000, targetAttempts: 2, lanes: 'frontier' } });
    const seed = sha(9);
    scheduler.addSeed(seed, { bytes: 8, sha256: seed, path: '/q/9' }, 0);
    scheduler.observe({ seed, telemetry: traceOf([77]), reward: 0 }, 0);
    const runs: number[] = [];
    for (let now = 0; now <= 20_000; now += 250) {
      for (const a of await scheduler.admit(1, now)) {
        runs.push(now);
        scheduler.observe({ seed, telemetry: directedOf([77], a.group, [77]), reward: 0, job: a.job }, now);
        scheduler.release(a);
      }
    }
    expect(runs).toEqual([0, 1000]);
    expect(scheduler.stats().targets.givenUp).toBe(1);
  });
});
