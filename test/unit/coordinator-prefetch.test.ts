// The pipelined slot: jobs per slot dispatched ahead (claimed, not started), started the moment
// the slot's solver exits; its rollbacks (stop, lost lease, a better job); triage and commit of a
// run after its slot was freed; and the per-run time breakdown in jobs.jsonl, on an injected clock.
import { describe, expect, it } from 'vitest';
import { Coordinator, type CoordinatorOptions } from '../../src/coordinator/coordinator.js';
import type { AdmittedWork, CoordinatorJob, SolverOutcome, SolverPort, SolverPortTask, SolverRunOptions, SolverRunTiming } from '../../src/coordinator/ports.js';
import { jobWorkId } from '../../src/coordinator/work-identity.js';
import { createCounters } from '../../src/telemetry/counters.js';
import type { JobLogEntry } from '../../src/telemetry/job-log.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { FakeReservations, FakeSource, FakeTargetLeases, FakeWorkLeases, ManualClock, makeJob } from '../helpers/coordinator-fakes.js';
import { MemoryResultCommits } from '../helpers/memory-result-commits.js';

const TTL_MS = 30_000;
const OWNER = 1;

interface Run {
  readonly task: SolverPortTask;
  readonly options: SolverRunOptions;
  /** The solver process exited: the slot is free (what the pool reports before triage). */
  exit(): void;
  /** Triage done: the run's outcome. */
  resolve(outcome: SolverOutcome): void;
}

/** A solver whose process exit and result are two separate steps the test drives. */
class TwoStepSolver implements SolverPort {
  readonly runs: Run[] = [];
  run(task: SolverPortTask, options: SolverRunOptions): Promise<SolverOutcome> {
    return new Promise((resolve) => {
      let exited = false;
      const exit = (): void => {
        if (exited) return;
        exited = true;
        options.onSolverExit?.();
      };
      options.signal.addEventListener('abort', () => resolve({ status: 'aborted', generated: [], elapsedMs: 0 }), { once: true });
      this.runs.push({ task, options, exit, resolve });
    });
  }
}

/** The same two steps, on a port that stages runs in the slot it is given (as `SolverPool` does). */
class StagingSolver extends TwoStepSolver {
  readonly stagesRuns = true;
}

const timing: SolverRunTiming = { spawnMs: 2, solverMs: 40, collectMs: 1, triageMs: 7, solverCpuMs: 30 };
const ok = (text?: string): SolverOutcome => ({
  status: 'ok',
  elapsedMs: 43,
  timing,
  generated: text === undefined ? [] : [{ bytes: new TextEncoder().encode(text), sha256: text, interesting: true }],
});

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !condition(); i++) await new Promise((r) => setImmediate(r));
  expect(condition()).toBe(true);
}

function setup(overrides: Partial<CoordinatorOptions> = {}, solver: TwoStepSolver = new TwoStepSolver()) {
  const clock = new ManualClock();
  const workLeases = new FakeWorkLeases(TTL_MS);
  const targetLeases = new FakeTargetLeases(TTL_MS);
  const reservations = new FakeReservations();
  const source = new FakeSource();
  const commits = new MemoryResultCommits(workLeases);
  const counters = createCounters();
  const jobs: JobLogEntry[] = [];
  const coordinator = new Coordinator(
    { coordinatorId: 'c1', workers: 1, workLeaseTtlMs: TTL_MS, targetLeaseTtlMs: TTL_MS, maxPendingJobs: 64, recoverExpiredWork: false, ...overrides },
    { clock, logger: silentLogger(), counters, workLeases, targetLeases, reservations, solver, source, commits, jobLog: { append: (e) => jobs.push(e), close: () => {} } },
  );
  async function admit(job: CoordinatorJob, priority?: number): Promise<AdmittedWork> {
    expect(reservations.tryReserveGroup(job.group, OWNER)).toBe(true);
    const claim = job.group.length > 0 ? await targetLeases.claimGroup(job.group, {}, clock.now()) : undefined;
    if (claim && !claim.ok) throw new Error('test setup: admission claim refused');
    return { job, owner: OWNER, ...(claim?.ok ? { targetToken: claim.token } : {}), ...(priority !== undefined ? { priority } : {}) };
  }
  return { clock, workLeases, targetLeases, reservations, solver, source, commits, counters, jobs, coordinator, admit };
}

describe('prefetching jobs per slot', () => {
  it('claims the next job ahead and starts it in the turn the solver exits, before the first run is triaged or committed', async () => {
    const t = setup();
    const a = makeJob('a', 1n);
    const b = makeJob('b', 2n);
    t.source.queue.push(await t.admit(a), await t.admit(b));
    await t.coordinator.tick();
    expect(t.solver.runs).toHaveLength(1);
    expect(t.coordinator.readyWorkIds()).toEqual([jobWorkId(b)]);
    // b holds its exact-work lease already, not started.
    expect(t.workLeases.records.get(jobWorkId(b))?.status).toBe('leased');
    expect(t.counters.jobsStarted).toBe(1);

    t.solver.runs[0]!.exit();
    // Synchronously: no tick, no promise turn.
    expect(t.solver.runs.map((r) => r.task.workId)).toEqual([jobWorkId(a), jobWorkId(b)]);
    expect(t.coordinator.runningCount).toBe(1);
    expect(t.counters.jobsStarted).toBe(2);
    expect(t.jobs).toEqual([]); // a is still being triaged: nothing committed yet
  });

  it('triages and commits a run after its slot was freed: the result publishes through the fenced protocol while the next run goes on', async () => {
    const t = setup();
    const a = makeJob('a', 1n);
    const b = makeJob('b', 2n);
    t.source.queue.push(await t.admit(a), await t.admit(b));
    await t.coordinator.tick();
    t.solver.runs[0]!.exit(); // slot freed; b runs
    expect(t.coordinator.runningCount).toBe(1);
    expect(t.coordinator.activeCount).toBe(2);
    expect(t.workLeases.records.get(jobWorkId(a))?.status).toBe('leased'); // not committed before its result

    t.solver.runs[0]!.resolve(ok('found-by-a')); // a's triage finished later
    await until(() => t.jobs.length === 1);
    expect(t.workLeases.records.get(jobWorkId(a))?.status).toBe('done');
    expect(t.commits.entries.map((e) => e.kind)).toEqual(['queue']);
    expect(t.jobs[0]).toMatchObject({ workId: jobWorkId(a), status: 'ok', interesting: 1 });
    expect(t.targetLeases.records.has(1n)).toBe(false); // a's group released after publication
    // b is untouched by a's commit: still running with its leases.
    expect(t.coordinator.runningCount).toBe(1);
    expect(t.workLeases.records.get(jobWorkId(b))?.status).toBe('leased');
    expect(t.targetLeases.records.has(2n)).toBe(true);

    t.solver.runs[1]!.exit();
    t.solver.runs[1]!.resolve(ok());
    await t.coordinator.settled();
    expect(t.jobs.map((j) => j.status)).toEqual(['ok', 'ok']);
    expect(t.workLeases.held()).toEqual([]);
  });

  it('rolls a prefetched job back completely at stop: work lease abandoned, target group and reservation released, no jobs.jsonl line', async () => {
    const t = setup();
    const a = makeJob('a', 1n);
    const b = makeJob('b', 2n, [3n]);
    t.source.queue.push(await t.admit(a), await t.admit(b));
    await t.coordinator.tick();
    expect(t.coordinator.readyCount).toBe(1);

    const report = await t.coordinator.stop();
    expect(report).toEqual({ abortedRuns: 1, releasedPending: 1, releaseFailures: 0 });
    expect(t.workLeases.records.has(jobWorkId(b))).toBe(false);
    expect(t.workLeases.calls).toContain(`abandon ${jobWorkId(b).slice(0, 8)}`);
    expect(t.targetLeases.records.size).toBe(0);
    expect(t.reservations.held.size).toBe(0);
    expect(t.coordinator.readyCount).toBe(0);
    expect(t.jobs.map((j) => j.workId)).toEqual([jobWorkId(a)]); // only the aborted run
    expect(t.counters).toMatchObject({ prefetchRollbacks: 1, jobsStarted: 1 });
    expect(t.solver.runs).toHaveLength(1);
  });

  it('does not start a prefetched job while stopping, even when a solver exits during the stop', async () => {
    const t = setup();
    t.source.queue.push(await t.admit(makeJob('a', 1n)), await t.admit(makeJob('b', 2n)));
    await t.coordinator.tick();
    const stopped = t.coordinator.stop();
    t.solver.runs[0]!.exit();
    t.solver.runs[0]!.resolve(ok()); // a's solver had ended: its result still commits
    await stopped;
    expect(t.solver.runs).toHaveLength(1);
    expect(t.workLeases.held()).toEqual([]);
    expect(t.reservations.held.size).toBe(0);
  });

  it('rolls back a prefetched job whose work lease a heartbeat found stolen, and never starts it', async () => {
    const t = setup();
    const a = makeJob('a', 1n);
    const b = makeJob('b', 2n);
    t.source.queue.push(await t.admit(a), await t.admit(b));
    await t.coordinator.tick();
    t.workLeases.steal(jobWorkId(b), t.clock.now());
    const report = await t.coordinator.heartbeat();
    expect(report.workFailed).toBe(1);
    expect(t.coordinator.readyCount).toBe(1); // marked lost; given back at the next round

    await t.coordinator.tick();
    expect(t.coordinator.readyCount).toBe(0);
    expect(t.workLeases.records.get(jobWorkId(b))?.token).toMatch(/^thief:/); // the thief's record is untouched
    expect(t.targetLeases.records.has(2n)).toBe(false);
    expect(t.reservations.held.has(2n)).toBe(false);
    expect(t.counters).toMatchObject({ prefetchRollbacks: 1, leaseExpiries: 1 });

    t.solver.runs[0]!.exit();
    expect(t.solver.runs).toHaveLength(1); // b was never started
  });

  it('rolls back a prefetched job that lost its lease when its slot frees before the next round', async () => {
    const t = setup();
    const b = makeJob('b', 2n);
    t.source.queue.push(await t.admit(makeJob('a', 1n)), await t.admit(b));
    await t.coordinator.tick();
    t.targetLeases.takeOver([2n], t.clock.now());
    await t.coordinator.heartbeat();
    t.solver.runs[0]!.exit(); // the slot frees before any tick could drop b
    expect(t.solver.runs).toHaveLength(1);
    await until(() => t.counters.prefetchRollbacks === 1);
    expect(t.workLeases.records.has(jobWorkId(b))).toBe(false);
    expect(t.reservations.held.has(2n)).toBe(false);
  });

  it('dispatches a better job ahead of a prefetched one without giving anything back, and only past twice the depth makes the worst give way', async () => {
    const t = setup({ prefetchDepth: 1 }); // one place ahead per slot: the list tops up to 1, a better job may take it to 2
    const a = makeJob('a', 1n);
    const b = makeJob('b', 2n);
    const better = makeJob('better', 5n);
    const best = makeJob('best', 6n);
    t.source.queue.push(await t.admit(a), await t.admit(b));
    await t.coordinator.tick();
    expect(t.coordinator.readyWorkIds()).toEqual([jobWorkId(b)]);
    const bToken = t.targetLeases.records.get(2n)!.token;
    const claimsBefore = t.workLeases.calls.filter((c) => c.startsWith('claim')).length;

    // A better job goes ahead of b: one claim (its own), b keeps its work lease.
    await t.coordinator.enqueue([await t.admit(better, 10)]);
    await t.coordinator.tick();
    expect(t.coordinator.readyWorkIds()).toEqual([jobWorkId(better), jobWorkId(b)]);
    expect(t.workLeases.records.get(jobWorkId(b))?.status).toBe('leased');
    expect(t.workLeases.calls.filter((c) => c.startsWith('claim')).length).toBe(claimsBefore + 1);
    expect(t.workLeases.calls.filter((c) => c.startsWith('abandon'))).toEqual([]);
    expect(t.counters.prefetchRollbacks).toBe(0);

    // At twice the depth, a still better job makes the worst (b) give way: its work lease is
    // abandoned, its group and reservation kept as for any pending job, and it runs after them;
    // the better job then goes ahead of `better`, the list being under twice the depth again.
    await t.coordinator.enqueue([await t.admit(best, 20)]);
    await t.coordinator.tick();
    expect(t.coordinator.readyWorkIds()).toEqual([jobWorkId(best), jobWorkId(better)]);
    expect(t.coordinator.pendingCount).toBe(1);
    expect(t.workLeases.records.has(jobWorkId(b))).toBe(false);
    expect(t.targetLeases.records.get(2n)?.token).toBe(bToken);
    expect(t.reservations.held.has(2n)).toBe(true);
    expect(t.counters.prefetchRollbacks).toBe(1);

    const order = [a, best, better, b].map(jobWorkId);
    for (let i = 0; i < order.length; i++) {
      await until(() => t.solver.runs.length === i + 1);
      t.solver.runs[i]!.exit();
      t.solver.runs[i]!.resolve(ok());
      await until(() => t.jobs.length === i + 1);
      await t.coordinator.tick();
    }
    await t.coordinator.settled();
    expect(t.solver.runs.map((r) => r.task.workId)).toEqual(order);
    expect(t.jobs.map((j) => j.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
    expect(t.workLeases.held()).toEqual([]);
    expect(t.reservations.held.size).toBe(0);
    expect(t.targetLeases.records.size).toBe(0);
  });

  it('keeps prefetchDepth jobs per slot claimed ahead, starts them in order as the slot frees, and rolls every one back at stop', async () => {
    const t = setup({ prefetchDepth: 3 });
    const jobs = ['a', 'b', 'c', 'd', 'e', 'f'].map((name, i) => makeJob(name, BigInt(i + 1)));
    for (const job of jobs) t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    // One running, three claimed ahead (the depth), the rest not taken from the source yet.
    expect(t.solver.runs.map((r) => r.task.workId)).toEqual([jobWorkId(jobs[0]!)]);
    expect(t.coordinator.readyWorkIds()).toEqual(jobs.slice(1, 4).map(jobWorkId));
    for (const job of jobs.slice(1, 4)) expect(t.workLeases.records.get(jobWorkId(job))?.status).toBe('leased');
    expect(t.source.queue).toHaveLength(2);
    // Each exit starts the next prefetched job in the same turn, even with no round in between.
    t.solver.runs[0]!.exit();
    t.solver.runs[1]!.exit();
    expect(t.solver.runs.map((r) => r.task.workId)).toEqual(jobs.slice(0, 3).map(jobWorkId));
    expect(t.coordinator.readyWorkIds()).toEqual([jobWorkId(jobs[3]!)]);
    t.solver.runs[0]!.resolve(ok());
    t.solver.runs[1]!.resolve(ok());
    await until(() => t.jobs.length === 2);
    await t.coordinator.tick(); // tops the depth up again
    expect(t.coordinator.readyWorkIds()).toEqual(jobs.slice(3, 6).map(jobWorkId));

    const report = await t.coordinator.stop();
    expect(report).toEqual({ abortedRuns: 1, releasedPending: 3, releaseFailures: 0 });
    for (const job of jobs.slice(3)) expect(t.workLeases.records.has(jobWorkId(job))).toBe(false);
    expect(t.counters.prefetchRollbacks).toBe(3);
    expect(t.solver.runs).toHaveLength(3);
  });

  it('with prefetchJobs false claims nothing ahead', async () => {
    const t = setup({ prefetchJobs: false });
    t.source.queue.push(await t.admit(makeJob('a', 1n)), await t.admit(makeJob('b', 2n)));
    await t.coordinator.tick();
    expect(t.coordinator.readyCount).toBe(0);
    expect(t.workLeases.records.size).toBe(1);
  });
});

describe('staging the next job in a busy slot (a port with stagesRuns)', () => {
  it('hands the best prefetched job to the busy slot at once; it counts as running only from that slot\'s solver exit, and the next is staged behind it', async () => {
    const t = setup({ workers: 2 }, new StagingSolver());
    const jobs = ['a', 'b', 'c', 'd', 'e'].map((name, i) => makeJob(name, BigInt(i + 1)));
    for (const job of jobs) t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    // a and b run in slots 0 and 1; c and d are staged behind them, e stays prefetched.
    expect(t.solver.runs.map((r) => [r.task.workId, r.options.slot])).toEqual(jobs.slice(0, 4).map((j, i) => [jobWorkId(j), i % 2]));
    expect(t.coordinator.runningCount).toBe(2);
    expect(t.coordinator.readyWorkIds()).toEqual([jobWorkId(jobs[4]!)]);
    expect(t.workLeases.records.get(jobWorkId(jobs[2]!))?.status).toBe('leased');

    t.solver.runs[1]!.exit(); // b's solver exits: d (staged in slot 1) is running now, e is staged behind it
    expect(t.coordinator.runningCount).toBe(2);
    expect(t.solver.runs.map((r) => r.options.slot)).toEqual([0, 1, 0, 1, 1]);
    expect(t.solver.runs[4]!.task.workId).toBe(jobWorkId(jobs[4]!));
    expect(t.coordinator.readyCount).toBe(0);
    for (const run of t.solver.runs) {
      run.exit();
      run.resolve(ok());
    }
    await t.coordinator.settled();
    expect(t.jobs.map((j) => j.status)).toEqual(['ok', 'ok', 'ok', 'ok', 'ok']);
    expect(t.workLeases.held()).toEqual([]);
  });

  it('aborts a staged job at stop and rolls it back through the commit path: leases and reservation released, nothing committed', async () => {
    const t = setup({}, new StagingSolver());
    const a = makeJob('a', 1n);
    const b = makeJob('b', 2n, [3n]);
    t.source.queue.push(await t.admit(a), await t.admit(b));
    await t.coordinator.tick();
    expect(t.solver.runs.map((r) => r.options.slot)).toEqual([0, 0]); // b staged behind a
    expect(t.coordinator.readyCount).toBe(0);

    const report = await t.coordinator.stop();
    expect(report).toEqual({ abortedRuns: 2, releasedPending: 0, releaseFailures: 0 });
    expect(t.solver.runs.every((r) => r.options.signal.aborted)).toBe(true);
    expect(t.workLeases.records.has(jobWorkId(b))).toBe(false);
    expect(t.workLeases.calls).toContain(`abandon ${jobWorkId(b).slice(0, 8)}`);
    expect(t.targetLeases.records.size).toBe(0);
    expect(t.reservations.held.size).toBe(0);
    expect(t.jobs.map((j) => j.status)).toEqual(['aborted', 'aborted']);
    expect(t.commits.entries).toEqual([]);
  });

  it('aborts a staged job whose lease a heartbeat found stolen; the slot\'s next exit finds no successor and the next prefetched job starts there', async () => {
    const t = setup({}, new StagingSolver());
    const a = makeJob('a', 1n);
    const b = makeJob('b', 2n);
    const c = makeJob('c', 4n);
    t.source.queue.push(await t.admit(a), await t.admit(b), await t.admit(c));
    await t.coordinator.tick();
    expect(t.solver.runs.map((r) => r.task.workId)).toEqual([jobWorkId(a), jobWorkId(b)]);
    t.workLeases.steal(jobWorkId(b), t.clock.now());
    await t.coordinator.heartbeat();
    expect(t.solver.runs[1]!.options.signal.aborted).toBe(true); // the port drops it before its solver starts
    await until(() => t.jobs.length === 1);
    expect(t.jobs[0]).toMatchObject({ workId: jobWorkId(b), status: 'aborted' });

    t.solver.runs[0]!.exit(); // a exits: no staged successor any more, so c takes the free slot
    expect(t.solver.runs.map((r) => r.task.workId)).toEqual([jobWorkId(a), jobWorkId(b), jobWorkId(c)]);
    expect(t.coordinator.runningCount).toBe(1);
    t.solver.runs[0]!.resolve(ok());
    t.solver.runs[2]!.exit();
    t.solver.runs[2]!.resolve(ok());
    await t.coordinator.settled();
    expect(t.workLeases.records.get(jobWorkId(b))?.token).toMatch(/^thief:/);
    expect(t.jobs.map((j) => j.status)).toEqual(['aborted', 'ok', 'ok']);
  });

  it('writes the slot\'s own idle measure as gapMs when the solver reports one', async () => {
    const t = setup({}, new StagingSolver());
    t.source.queue.push(await t.admit(makeJob('a', 1n)), await t.admit(makeJob('b', 2n)));
    await t.coordinator.tick();
    t.clock.advance(40);
    t.solver.runs[0]!.exit();
    t.solver.runs[0]!.resolve(ok());
    t.solver.runs[1]!.exit();
    t.solver.runs[1]!.resolve({ ...ok(), timing: { ...timing, idleMs: 0.75 } });
    await t.coordinator.settled();
    expect(t.jobs[1]).toMatchObject({ slot: 0, gapMs: 0.75, spawnMs: 2 });
    expect(t.counters.slotGapMs).toBe(0); // idle no longer than the spawn itself
  });
});

describe('time breakdown in jobs.jsonl', () => {
  it('writes queue, claim, prefetch, spawn, solver, collect, triage and commit times, and the gap since the slot\'s previous run', async () => {
    const t = setup();
    // Each exact-work claim takes 3 ms, each commit 4 ms (these results have nothing to publish:
    // their records are completed in one step), on the injected clock.
    const claim = t.workLeases.claim.bind(t.workLeases);
    t.workLeases.claim = async (...args) => {
      t.clock.advance(3);
      return claim(...args);
    };
    const complete = t.workLeases.complete.bind(t.workLeases);
    t.workLeases.complete = async (...args) => {
      t.clock.advance(4);
      return complete(...args);
    };
    const a = makeJob('a', 1n);
    const b = makeJob('b', 2n);
    t.source.queue.push(await t.admit(a), await t.admit(b));
    const t0 = t.clock.now();
    await t.coordinator.tick(); // a: claimed 0..3 and started at 3; b: claimed 3..6, prefetched
    t.clock.advance(44); // a's solver runs until 50
    t.solver.runs[0]!.exit(); // b starts at 50
    t.clock.advance(10); // a's triage
    t.solver.runs[0]!.resolve(ok());
    await until(() => t.jobs.length === 1);
    t.solver.runs[1]!.exit();
    t.solver.runs[1]!.resolve(ok());
    await until(() => t.jobs.length === 2);

    const [first, second] = t.jobs;
    expect(first).toMatchObject({ workId: jobWorkId(a), slot: 0, startMs: t0 + 3, queuedMs: 0, claimMs: 3, prefetchedMs: 0, spawnMs: 2, solverMs: 40, collectMs: 1, triageMs: 7, commitMs: 4, solverCpuMs: 30 });
    expect(first!.gapMs).toBeUndefined(); // the slot's first run
    // b: queued from admission at t0 until its claim began at t0 + 3, waited claimed from t0 + 6 to
    // t0 + 50; the slot was without a solver from a's exit (t0 + 50) to b's start plus b's spawn.
    expect(second).toMatchObject({ workId: jobWorkId(b), slot: 0, startMs: t0 + 50, queuedMs: 3, claimMs: 3, prefetchedMs: 44, spawnMs: 2, gapMs: 2 });
    expect(t.counters).toMatchObject({ solverProcessMs: 80, slotSpawnMs: 4, slotCollectMs: 2, triageMs: 14, slotGapMs: 0 });
    // The work source is told each run's machine time: slot (2 + 40 + 1) plus triage (7).
    expect(t.source.observed.map((o) => o.runMs)).toEqual([50, 50]);
  });

  it('writes no breakdown for a run whose solver did not measure its timing', async () => {
    const t = setup();
    t.source.queue.push(await t.admit(makeJob('a', 1n)));
    await t.coordinator.tick();
    t.solver.runs[0]!.exit();
    t.solver.runs[0]!.resolve({ status: 'ok', elapsedMs: 9, generated: [] });
    await t.coordinator.settled();
    expect(t.jobs[0]).not.toHaveProperty('solverMs');
    expect(t.jobs[0]).not.toHaveProperty('gapMs');
    expect(t.counters.solverProcessMs).toBe(9);
    expect(t.source.observed[0]!.runMs).toBe(9);
  });
});
