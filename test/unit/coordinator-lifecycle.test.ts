import { describe, expect, it } from 'vitest';
import { Coordinator, type CoordinatorHooks, type CoordinatorOptions } from '../../src/coordinator/coordinator.js';
import type { AdmittedWork, CoordinatorJob, PublishedEntry } from '../../src/coordinator/ports.js';
import { SeedWorkSource } from '../../src/coordinator/seed-work-source.js';
import { jobWorkId, workPayloadOf } from '../../src/coordinator/work-identity.js';
import { createCounters } from '../../src/telemetry/counters.js';
import type { JobLogEntry } from '../../src/telemetry/job-log.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import {
  FakeReservations,
  FakeSolver,
  FakeSource,
  FakeTargetLeases,
  FakeWorkLeases,
  ManualClock,
  makeJob,
  sha,
  unsatTelemetry,
} from '../helpers/coordinator-fakes.js';
import { MemoryResultCommits } from '../helpers/memory-result-commits.js';

const TTL_MS = 30_000;
const OWNER = 1;

/** `givingBack`: the source takes work back (`WorkSource.giveBack`), recorded in `givenBack`. */
function setup(overrides: Partial<CoordinatorOptions> = {}, shared = true, hooks?: CoordinatorHooks, givingBack = false) {
  const clock = new ManualClock();
  const workLeases = new FakeWorkLeases(TTL_MS);
  const targetLeases = new FakeTargetLeases(TTL_MS);
  const reservations = new FakeReservations();
  const solver = new FakeSolver();
  const source = new FakeSource();
  const givenBack: AdmittedWork[] = [];
  if (givingBack) Object.assign(source, { giveBack: (work: AdmittedWork) => givenBack.push(work) });
  const commits = new MemoryResultCommits(workLeases);
  const counters = createCounters();
  const jobs: JobLogEntry[] = [];
  const lost: string[] = [];
  const findings: PublishedEntry[] = [];
  const coordinator = new Coordinator(
    { coordinatorId: 'c1', workers: 1, workLeaseTtlMs: TTL_MS, targetLeaseTtlMs: TTL_MS, maxPendingJobs: 64, recoverExpiredWork: false, ...overrides },
    {
      clock,
      logger: silentLogger(),
      counters,
      workLeases,
      ...(shared ? { targetLeases } : {}),
      reservations,
      solver,
      source,
      commits,
      jobLog: { append: (e) => jobs.push(e), close: () => {} },
      events: { leaseLost: (info) => lost.push(`${info.lease}:${info.workId}`), finding: (e) => findings.push(e) },
      ...(hooks ? { hooks } : {}),
    },
  );

  /** What the scheduler's admission does before handing a job over: local reserve, shared claim. */
  async function admit(job: CoordinatorJob): Promise<AdmittedWork> {
    expect(reservations.tryReserveGroup(job.group, OWNER)).toBe(true);
    if (!shared || job.group.length === 0) return { job, owner: OWNER };
    const claim = await targetLeases.claimGroup(job.group, {}, clock.now());
    if (!claim.ok) throw new Error('test setup: admission claim refused');
    return { job, owner: OWNER, targetToken: claim.token };
  }

  return { clock, workLeases, targetLeases, reservations, solver, source, givenBack, commits, counters, jobs, lost, findings, coordinator, admit };
}

const ok = (generated: Array<{ text: string; interesting: boolean; terminal?: 'crash' | 'timeout' }> = []) => ({
  status: 'ok' as const,
  elapsedMs: 5,
  generated: generated.map((g) => ({ bytes: new TextEncoder().encode(g.text), sha256: g.text, interesting: g.interesting, ...(g.terminal ? { terminal: g.terminal } : {}) })),
});

describe('dispatch: pending → active', () => {
  it('re-validates the pending target token with a heartbeat and runs the job holding both leases', async () => {
    const t = setup();
    const job = makeJob('a', 77n, [88n]);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    expect(t.solver.runs).toHaveLength(1);
    expect(t.targetLeases.calls).toEqual(['claim 77,88', 'heartbeat 77,88']);
    expect(t.workLeases.held()).toEqual([jobWorkId(job)]);
    expect(t.counters.jobsStarted).toBe(1);
  });

  it('re-claims the group when the pending token was lost but nobody else holds the targets', async () => {
    const t = setup();
    t.source.queue.push(await t.admit(makeJob('a', 77n)));
    t.clock.advance(TTL_MS); // the pending token expired while queued…
    t.targetLeases.heartbeatScript = ['lost']; // …and the table refuses to renew it
    await t.coordinator.tick();
    expect(t.targetLeases.calls).toEqual(['claim 77', 'heartbeat 77', 'claim 77']);
    // The re-claim names the job's input, so a pair answered elsewhere meanwhile is refused.
    expect(t.targetLeases.claimInputs.at(-1)).toBe(t.solver.runs[0]!.task.job.inputSha256);
    expect(t.solver.runs).toHaveLength(1);
  });

  it('re-claims asking what the admission asked: any input for a lane that asks once, and the campaign\'s back-off', async () => {
    const t = setup();
    const backoff = { baseMs: 30_000, maxAttempts: 3 };
    t.source.ask = (job) => ({ input: job.inputSha256, anyInput: true, backoff });
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    t.clock.advance(TTL_MS);
    t.targetLeases.heartbeatScript = ['lost'];
    await t.coordinator.tick();
    expect(t.targetLeases.calls).toEqual(['claim 77', 'heartbeat 77', 'claim 77']);
    expect(t.targetLeases.claimAsks.at(-1)).toEqual({ input: job.inputSha256, anyInput: true, backoff });
  });

  it('rolls the whole dispatch back when the re-claim conflicts, leaving nothing held', async () => {
    const t = setup();
    const job = makeJob('a', 77n, [88n]);
    t.source.queue.push(await t.admit(job));
    t.targetLeases.takeOver([77n], t.clock.now()); // another coordinator after our token expired
    await t.coordinator.tick();
    expect(t.solver.runs).toHaveLength(0);
    expect(t.reservations.held.size).toBe(0);
    expect(t.workLeases.calls).toEqual([]);
    expect(t.counters).toMatchObject({ conflicts: 1, dispatchRollbacks: 1, jobsStarted: 0 });
    // The group was never re-acquired, so there is nothing to release; the expired remainder of the
    // old token (88) is left to its TTL like any lost lease.
    expect(t.targetLeases.records.get(77n)?.token).toMatch(/^other:/);
  });

  it('rolls back the target group and the local reservation when the exact-work claim conflicts', async () => {
    const t = setup();
    const job = makeJob('a', 77n, [88n]);
    t.source.queue.push(await t.admit(job));
    t.workLeases.claimFailure = 'conflict';
    await t.coordinator.tick();
    expect(t.solver.runs).toHaveLength(0);
    expect(t.targetLeases.records.size).toBe(0);
    expect(t.reservations.held.size).toBe(0);
    expect(t.counters).toMatchObject({ conflicts: 1, dispatchRollbacks: 1, releaseFailures: 0 });
  });

  it('rolls back when the exact-work claim throws an I/O error, without counting a conflict', async () => {
    const t = setup();
    t.source.queue.push(await t.admit(makeJob('a', 77n)));
    t.workLeases.claimFailure = 'error';
    await t.coordinator.tick();
    expect(t.solver.runs).toHaveLength(0);
    expect(t.targetLeases.records.size).toBe(0);
    expect(t.reservations.held.size).toBe(0);
    expect(t.counters).toMatchObject({ conflicts: 0, dispatchRollbacks: 1 });
  });

  it('rolls back when the pending token\'s renewal throws, and keeps dispatching the next pending job', async () => {
    const t = setup();
    t.source.queue.push(await t.admit(makeJob('a', 77n)), await t.admit(makeJob('b', 99n)));
    t.targetLeases.heartbeatScript = ['error'];
    t.targetLeases.claimError = true;
    // With a job taken ahead for the slot, the next pending job fills the slot in the same round.
    await t.coordinator.tick();
    expect(t.solver.runs.map((r) => r.task.job.targetBranch)).toEqual([99n]);
    expect(t.counters).toMatchObject({ dispatchRollbacks: 1, jobsStarted: 1 });
    expect([...t.reservations.held.keys()]).toEqual([99n]);
  });
});

describe('result → stage → beginCommit → publish + complete → release', () => {
  it('releases the target group once the result is durable, then publishes its findings and completes the work', async () => {
    const t = setup();
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    const order: string[] = [];
    t.commits.beforePublish = (findings) => {
      order.push(`publish ${findings.map((f) => f.kind).join('+')} targetsHeld=${t.targetLeases.records.size} status=${t.workLeases.records.get(jobWorkId(job))?.status}`);
    };
    await t.coordinator.tick();
    t.solver.runs[0]!.resolve(ok([{ text: 'new', interesting: true }, { text: 'old', interesting: false }, { text: 'boom', interesting: false, terminal: 'crash' }]));
    await t.coordinator.settled();

    // The release (with the answers) comes between beginCommit and the publication: a record
    // still committing may lack its answers in the table, and its replay writes them.
    expect(order).toEqual(['publish queue+crashes targetsHeld=0 status=committing']);
    // Publication and completion are one fenced step under the record (publishCommitted).
    expect(t.workLeases.calls.slice(-2)).toEqual([`beginCommit ${jobWorkId(job).slice(0, 8)}`, `publishCommitted ${jobWorkId(job).slice(0, 8)}`]);
    expect(t.workLeases.records.get(jobWorkId(job))?.status).toBe('done');
    expect(t.targetLeases.calls.at(-1)).toBe('release 77');
    expect(t.targetLeases.records.size).toBe(0);
    expect(t.reservations.held.size).toBe(0);
    expect(t.counters).toMatchObject({ jobsOk: 1, generated: 3, interesting: 1, crashes: 1, staleResults: 0 });
    expect(t.findings.map((f) => f.kind)).toEqual(['queue', 'crashes']);
    // A run without telemetry answered nothing: its one member is left open, as its release says.
    expect(t.jobs).toEqual([
      { workId: jobWorkId(job), targets: ['77'], coordinator: 'c1', startMs: t.clock.ms, endMs: t.clock.ms, status: 'ok', generated: 3, interesting: 1, input: job.inputSha256, kind: 'targeted', settled: [], open: ['77'] },
    ]);
    expect(t.counters).toMatchObject({ jobsTargeted: 1, jobsTrace: 0, jobsFull: 0 });
    expect(t.source.observed).toHaveLength(1);
  });

  it('drops a stale result after the work lease was stolen: nothing published, everything released', async () => {
    const t = setup();
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.clock.advance(TTL_MS + 1);
    t.workLeases.steal(jobWorkId(job), t.clock.now());
    t.solver.runs[0]!.resolve(ok([{ text: 'new', interesting: true }]));
    await t.coordinator.settled();

    expect(t.commits.entries).toEqual([]);
    expect(t.counters).toMatchObject({ staleResults: 1, jobsOk: 0, interesting: 0 });
    expect(t.jobs.map((j) => j.status)).toEqual(['stale']);
    expect(t.workLeases.records.get(jobWorkId(job))?.token).toMatch(/^thief:/); // the thief's record is untouched
    expect(t.workLeases.records.get(jobWorkId(job))?.status).toBe('leased');
    expect(t.targetLeases.records.size).toBe(0);
    expect(t.reservations.held.size).toBe(0);
    expect(t.source.observed).toEqual([]);
  });

  it('never lets a target token authorise a result: a still-valid target lease does not save a stale work fence', async () => {
    const t = setup();
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.workLeases.steal(jobWorkId(job), t.clock.now());
    expect(t.targetLeases.records.get(77n)).toBeDefined();
    t.solver.runs[0]!.resolve(ok([{ text: 'new', interesting: true }]));
    await t.coordinator.settled();
    expect(t.counters.staleResults).toBe(1);
    expect(t.commits.entries).toEqual([]);
  });

  it('retries a target release carrying answers that failed on an I/O error, the group renewed meanwhile, until the store answers', async () => {
    const held: Array<{ step: string; attempt: number }> = [];
    let onHeld!: () => void;
    let heldNow = new Promise<void>((resolve) => (onHeld = resolve));
    const t = setup({}, true, {
      resultHeld: (info) => {
        held.push({ step: info.step, attempt: info.attempt });
        onHeld();
      },
    });
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.targetLeases.releaseError = true;
    t.solver.runs[0]!.resolve(ok());
    await heldNow;
    heldNow = new Promise<void>((resolve) => (onHeld = resolve));
    // The result counts already; what its run answered waits for the release.
    expect(t.workLeases.records.get(jobWorkId(job))?.status).toBe('done');
    expect(t.coordinator.heldResults).toBe(1);
    await t.coordinator.heartbeat();
    expect(t.targetLeases.calls.at(-1)).toBe('heartbeat 77');
    t.clock.advance(1000);
    await t.coordinator.tick();
    await heldNow;
    expect(held).toEqual([
      { step: 'releasing the target group with its answers', attempt: 0 },
      { step: 'releasing the target group with its answers', attempt: 1 },
    ]);
    t.targetLeases.releaseError = false;
    t.clock.advance(2000);
    await t.coordinator.tick();
    await t.coordinator.settled();
    expect(t.targetLeases.calls.filter((c) => c === 'release 77')).toHaveLength(3);
    expect(t.targetLeases.records.has(77n)).toBe(false);
    expect(t.counters).toMatchObject({ jobsOk: 1, releaseFailures: 0, commitRetries: 2 });
    expect(t.coordinator.heldResults).toBe(0);
    expect(t.reservations.held.size).toBe(0);
  });

  it('counts a target release refused after commit (the group taken over) and leaves it to the TTL', async () => {
    const t = setup();
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.targetLeases.takeOver([77n], t.clock.now());
    t.solver.runs[0]!.resolve(ok());
    await t.coordinator.settled();
    expect(t.counters).toMatchObject({ jobsOk: 1, releaseFailures: 1, commitRetries: 0 });
    expect(t.targetLeases.records.has(77n)).toBe(true);
    expect(t.reservations.held.size).toBe(0); // the local reservation is released regardless
  });

  it('keeps what a run settled in its commit manifest, releases it before the publication, and writes it without the lease when the release is refused', async () => {
    const t = setup();
    const job = makeJob('a', 77n);
    const admitted = await t.admit(job);
    t.source.queue.push(admitted);
    const order: string[] = [];
    t.commits.beforePublish = () => {
      order.push(`publish targetCalls=${t.targetLeases.calls.filter((c) => c.startsWith('release') || c.startsWith('record')).join('+')}`);
    };
    await t.coordinator.tick();
    t.targetLeases.takeOver([77n], t.clock.now());
    // The run answered its target unsat and generated nothing: no finding to publish, but an answer.
    t.solver.runs[0]!.resolve({ ...ok(), telemetry: unsatTelemetry(77n) });
    await t.coordinator.settled();
    // The answer goes through beginCommit (its manifest keeps it, so a replay writes it) …
    const record = t.workLeases.records.get(jobWorkId(job))!;
    expect(record.status).toBe('done');
    expect(t.workLeases.calls.slice(-2)).toEqual([`beginCommit ${jobWorkId(job).slice(0, 8)}`, `publishCommitted ${jobWorkId(job).slice(0, 8)}`]);
    expect(record.commit).toMatchObject({ items: [], answers: { input: job.inputSha256, token: admitted.targetToken, worker: OWNER, settled: ['77'] } });
    // … and is released with the group before the publication; refused (the group taken over), it
    // is written without the lease, under the token that asked.
    expect(order).toEqual(['publish targetCalls=release 77+record 77']);
    expect(t.targetLeases.recorded).toEqual([{ answers: { input: job.inputSha256, settled: [77n] }, writer: { owner: 'c1', token: admitted.targetToken, worker: OWNER }, now: t.clock.now() }]);
    expect(t.counters).toMatchObject({ jobsOk: 1, releaseFailures: 1, answersRecorded: 1 });
    expect(t.jobs.map((j) => [j.status, j.settled])).toEqual([['ok', ['77']]]);
  });

  it('leaves a result committing when neither its release nor the write without the lease could share what it settled', async () => {
    let onHeld!: () => void;
    const heldNow = new Promise<void>((resolve) => (onHeld = resolve));
    const t = setup({}, true, { resultHeld: () => onHeld() });
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.targetLeases.releaseError = true;
    t.targetLeases.recordError = true;
    t.solver.runs[0]!.resolve({ ...ok([{ text: 'new', interesting: true }]), telemetry: unsatTelemetry(77n) });
    await heldNow; // the release is being retried
    await t.coordinator.stop();
    // Published now, the record would be done with its answer in no table: its replay shares it first.
    const record = t.workLeases.records.get(jobWorkId(job))!;
    expect(record.status).toBe('committing');
    expect(record.commit).toMatchObject({ answers: { settled: ['77'] } });
    expect(t.targetLeases.recorded).toEqual([]);
    expect(t.commits.entries).toEqual([]);
    expect(t.counters).toMatchObject({ commitPublishFailures: 1, answersRecorded: 0 });
  });

  it('keeps the answers of a coordinator whose id makes a long token', async () => {
    const owner = 'pod-'.padEnd(4000, 'x');
    const t = setup({ coordinatorId: owner });
    const job = makeJob('a', 77n);
    const admitted = { job, owner: OWNER, targetToken: `${owner}:1:12345:1700000000000:0123456789abcdef` };
    expect(t.reservations.tryReserveGroup(job.group, OWNER)).toBe(true);
    t.targetLeases.records.set(77n, { token: admitted.targetToken, updatedMs: t.clock.now() });
    t.source.queue.push(admitted);
    await t.coordinator.tick();
    t.solver.runs[0]!.resolve({ ...ok(), telemetry: unsatTelemetry(77n) });
    await t.coordinator.settled();
    expect(t.counters).toMatchObject({ stagingFailures: 0, jobsOk: 1 });
    expect(t.workLeases.records.get(jobWorkId(job))?.commit).toMatchObject({ answers: { token: admitted.targetToken } });
  });

  it('writes a release\'s open questions without the lease only when no attempt of it may have been applied', async () => {
    // The first release is applied but its answer lost (an I/O error); the retry is refused as stale.
    class AppliedThenFailed extends FakeTargetLeases {
      first = true;
      override async releaseGroup(group: readonly bigint[], token: string): Promise<boolean> {
        const released = await super.releaseGroup(group, token);
        if (this.first && released) {
          this.first = false;
          throw Object.assign(new Error('reply lost after the release was applied'), { code: 'ERR_LEASE_IO' });
        }
        return released;
      }
    }
    let onHeld!: () => void;
    const heldNow = new Promise<void>((resolve) => (onHeld = resolve));
    const t = setup({}, true, { resultHeld: () => onHeld() });
    const fake = Object.setPrototypeOf(t.targetLeases, AppliedThenFailed.prototype) as AppliedThenFailed;
    fake.first = true;
    const job = makeJob('a', 77n, [78n]); // 77 answered, 78 left open
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.solver.runs[0]!.resolve({ ...ok(), telemetry: unsatTelemetry(77n) });
    await heldNow;
    t.clock.advance(60_000);
    await t.coordinator.tick();
    await t.coordinator.settled();
    expect(fake.calls.filter((c) => c.startsWith('release') || c.startsWith('record'))).toEqual(['release 77,78', 'release 77,78', 'record 77']);
    expect(fake.recorded.map((r) => r.answers)).toEqual([{ input: job.inputSha256, settled: [77n] }]);
    expect(t.workLeases.records.get(jobWorkId(job))?.status).toBe('done');
  });

  it('completes a run that settled nothing in one step, its open questions released after', async () => {
    const t = setup();
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.solver.runs[0]!.resolve(ok());
    await t.coordinator.settled();
    expect(t.workLeases.calls.at(-1)).toBe(`complete ${jobWorkId(job).slice(0, 8)}`);
    expect(t.workLeases.records.get(jobWorkId(job))!.commit).toBeUndefined();
    expect(t.targetLeases.calls.at(-1)).toBe('release 77');
    expect(t.targetLeases.recorded).toEqual([]);
  });

  it('gives up a release that keeps failing when the coordinator stops, and counts it', async () => {
    let onHeld!: () => void;
    const heldNow = new Promise<void>((resolve) => (onHeld = resolve));
    const t = setup({}, true, { resultHeld: () => onHeld() });
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.targetLeases.releaseError = true;
    t.solver.runs[0]!.resolve(ok());
    await heldNow;
    await t.coordinator.stop();
    expect(t.counters).toMatchObject({ jobsOk: 1, releaseFailures: 1 });
    expect(t.workLeases.records.get(jobWorkId(job))?.status).toBe('done');
    expect(t.coordinator.heldResults).toBe(0);
  });

  it('copies a crashing parent to crashes/ and a timed-out parent to hangs/', async () => {
    const t = setup({ workers: 2 });
    t.source.queue.push(await t.admit(makeJob('c', 1n)), await t.admit(makeJob('h', 2n)));
    await t.coordinator.tick();
    t.solver.runs[0]!.resolve({ status: 'crash', generated: [], elapsedMs: 1 });
    t.solver.runs[1]!.resolve({ status: 'timeout', generated: [], elapsedMs: 1 });
    await t.coordinator.settled();
    expect(t.commits.entries.map((e) => e.kind).sort()).toEqual(['crashes', 'hangs']);
    expect(t.counters).toMatchObject({ jobsCrash: 1, jobsTimeout: 1, crashes: 1, hangs: 1 });
  });

  it('runs untargeted jobs in single-coordinator mode with only the exact-work lease', async () => {
    const t = setup({}, false);
    const job = makeJob('seed');
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.solver.runs[0]!.resolve(ok([{ text: 'x', interesting: true }]));
    await t.coordinator.settled();
    expect(t.targetLeases.calls).toEqual([]);
    expect(t.workLeases.records.get(jobWorkId(job))?.status).toBe('done');
    expect(t.jobs[0]).toMatchObject({ targets: [], status: 'ok', interesting: 1 });
  });

  it('does not run the same exact work twice once it is done', async () => {
    const t = setup();
    const job = makeJob('seed');
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.solver.runs[0]!.resolve(ok());
    await t.coordinator.settled();
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    expect(t.solver.runs).toHaveLength(1);
    expect(t.counters.dispatchRollbacks).toBe(1);
  });
});

describe('solver slots', () => {
  /** Holds every beginCommit until `open()`; `reached(n)` resolves once n commits are waiting. */
  function gateCommits(t: ReturnType<typeof setup>) {
    const waiting: Array<() => void> = [];
    const arrivals: Array<() => void> = [];
    const arrive = (): Promise<void> =>
      new Promise<void>((resolve) => {
        waiting.push(resolve);
        for (const notify of arrivals.splice(0)) notify();
      });
    // A commit's first durable step: beginCommit, or the completion of a result with nothing to publish.
    const begin = t.workLeases.beginCommit.bind(t.workLeases);
    t.workLeases.beginCommit = async (workId, token, now, manifest) => {
      await arrive();
      return begin(workId, token, now, manifest);
    };
    const complete = t.workLeases.complete.bind(t.workLeases);
    t.workLeases.complete = async (workId, token, now) => {
      await arrive();
      return complete(workId, token, now);
    };
    return {
      async reached(n: number): Promise<void> {
        while (waiting.length < n) await new Promise<void>((resolve) => arrivals.push(resolve));
      },
      open(): void {
        for (const release of waiting.splice(0)) release();
      },
    };
  }

  it('dispatches the next job into a slot as soon as the solver run ends, while the result still commits', async () => {
    const t = setup({ workers: 1 });
    const gate = gateCommits(t);
    const a = makeJob('a', 1n);
    const b = makeJob('b', 2n);
    t.source.queue.push(await t.admit(a), await t.admit(b));
    await t.coordinator.tick();
    expect(t.solver.runs).toHaveLength(1);
    expect(t.coordinator.readyWorkIds()).toEqual([jobWorkId(b)]); // b claimed ahead for the slot
    t.solver.runs[0]!.resolve(ok([{ text: 'new', interesting: true }]));
    await gate.reached(1);
    // b started when a's solver ended, without a scheduling round, while a still commits.
    expect(t.coordinator.runningCount).toBe(1);
    expect(t.solver.runs.map((r) => r.task.job.inputPath)).toEqual([a.inputPath, b.inputPath]);
    await t.coordinator.tick();
    expect(t.coordinator.activeCount).toBe(2); // a commits, b runs
    expect(t.counters.fillRatio).toBe(1);
    gate.open();
    t.solver.runs[1]!.resolve(ok());
    await gate.reached(1);
    gate.open();
    await t.coordinator.settled();
    expect(t.workLeases.held()).toEqual([]);
    expect(t.jobs.map((j) => j.status)).toEqual(['ok', 'ok']);
  });

  it('keeps renewing the work record of a job that is still publishing, not its released group, and aborts nothing at shutdown for it', async () => {
    const t = setup({ workers: 1 });
    let publishing!: () => void;
    const reached = new Promise<void>((resolve) => (publishing = resolve));
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    t.commits.beforePublish = async () => {
      publishing();
      await gate;
    };
    t.source.queue.push(await t.admit(makeJob('a', 5n)));
    await t.coordinator.tick();
    t.solver.runs[0]!.resolve(ok([{ text: 'new', interesting: true }]));
    await reached; // committed and released, publication in progress
    const report = await t.coordinator.heartbeat();
    expect(report).toMatchObject({ targetOk: 0, targetFailed: 0, workOk: 1 });
    expect(t.targetLeases.calls.at(-1)).toBe('release 5');
    const stopping = t.coordinator.stop();
    open();
    expect((await stopping).abortedRuns).toBe(0);
    expect(t.jobs.map((j) => j.status)).toEqual(['ok']);
  });

  it('counts only running solvers as aborted at shutdown: a job whose solver ended goes on to commit', async () => {
    const t = setup({ workers: 1 });
    const gate = gateCommits(t);
    t.source.queue.push(await t.admit(makeJob('a', 1n)));
    await t.coordinator.tick();
    t.solver.runs[0]!.resolve(ok([{ text: 'new', interesting: true }]));
    await gate.reached(1); // solver done, result waiting in beginCommit (phase still active)
    const stopping = t.coordinator.stop();
    await new Promise<void>((resolve) => setImmediate(resolve)); // stop() has aborted what it aborts
    gate.open();
    expect((await stopping).abortedRuns).toBe(0);
    expect(t.jobs.map((j) => j.status)).toEqual(['ok']);
    expect(t.commits.entries).toHaveLength(1);
  });

  it('stops dispatching when twice as many jobs are still committing as there are workers (back-pressure)', async () => {
    const t = setup({ workers: 1 });
    const gate = gateCommits(t);
    for (const name of ['a', 'b', 'c', 'd']) t.source.queue.push(await t.admit(makeJob(name, BigInt(name.charCodeAt(0)))));
    await t.coordinator.tick();
    for (let i = 0; i < 2; i++) {
      t.solver.runs[i]!.resolve(ok());
      await gate.reached(i + 1);
      await t.coordinator.tick();
    }
    t.solver.runs[2]!.resolve(ok());
    await gate.reached(3);
    await t.coordinator.tick();
    // a, b and c wait in their commits: the slot is free but the commit path is saturated.
    expect(t.solver.runs).toHaveLength(3);
    expect(t.coordinator.runningCount).toBe(0);
    expect(t.coordinator.readyCount).toBe(1); // d waits claimed
    gate.open();
    // d starts as soon as a commit finishes, without a scheduling round.
    await t.solver.started(4);
    expect(t.solver.runs).toHaveLength(4);
    t.solver.runs[3]!.resolve(ok());
    await gate.reached(1);
    gate.open();
    await t.coordinator.settled();
    expect(t.jobs.map((j) => j.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
  });
});

describe('heartbeats', () => {
  it('renews every lease, isolates each failure and attempts all of them', async () => {
    const t = setup({ workers: 2 });
    const a = makeJob('a', 11n);
    const b = makeJob('b');
    t.source.queue.push(await t.admit(a), await t.admit(b));
    await t.coordinator.tick();
    await t.coordinator.enqueue([await t.admit(makeJob('p1', 21n)), await t.admit(makeJob('p2', 22n))]);
    t.workLeases.steal(jobWorkId(b), t.clock.now()); // b's fence is lost
    t.targetLeases.heartbeatScript = ['error', 'lost', undefined]; // active 11, pending 21, pending 22
    const callsBefore = t.targetLeases.calls.length;

    const report = await t.coordinator.heartbeat();
    expect(report).toEqual({ workOk: 1, workFailed: 1, targetOk: 1, targetFailed: 2 });
    expect(t.workLeases.calls.filter((c) => c.startsWith('heartbeatMany'))).toEqual(['heartbeatMany 2']);
    expect(t.targetLeases.calls.slice(callsBefore)).toEqual(['heartbeat 11', 'heartbeat 21', 'heartbeat 22']);
    expect(t.lost).toEqual([`work:${jobWorkId(b)}`]);

    expect(t.solver.runs[1]!.signal.aborted).toBe(true);
    expect(t.solver.runs[0]!.signal.aborted).toBe(false); // an I/O error is not a loss
    expect(t.counters).toMatchObject({ leaseExpiries: 1, heartbeatsOk: 2, heartbeatsFailed: 3 });
    t.solver.runs[0]!.resolve(ok());
    await t.coordinator.settled();
    expect(t.jobs.map((j) => j.status).sort()).toEqual(['aborted', 'ok']);
  });

  it('counts every fence as failed when the batched work renewal throws, and aborts nothing', async () => {
    const t = setup({ workers: 2 });
    t.source.queue.push(await t.admit(makeJob('a')), await t.admit(makeJob('b')));
    await t.coordinator.tick();
    t.workLeases.heartbeatError = true;
    expect(await t.coordinator.heartbeat()).toEqual({ workOk: 0, workFailed: 2, targetOk: 0, targetFailed: 0 });
    expect(t.solver.runs.every((r) => !r.signal.aborted)).toBe(true);
  });

  it('aborts the run whose target group was taken over, and rolls its dispatch back', async () => {
    const t = setup();
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.targetLeases.takeOver([77n], t.clock.now());
    await t.coordinator.heartbeat();
    await t.coordinator.settled();
    expect(t.lost).toEqual([`target:${jobWorkId(job)}`]);
    expect(t.jobs.map((j) => j.status)).toEqual(['aborted']);
    expect(t.workLeases.held()).toEqual([]); // abandoned
    expect(t.targetLeases.records.get(77n)?.token).toMatch(/^other:/); // the new owner's record survives
    expect(t.reservations.held.size).toBe(0);
  });

  it('heartbeats from tick() once the period has elapsed', async () => {
    const t = setup();
    t.source.queue.push(await t.admit(makeJob('a', 5n)));
    await t.coordinator.tick();
    const renewals = () => t.targetLeases.calls.filter((c) => c.startsWith('heartbeat')).length;
    const before = renewals();
    t.clock.advance(t.coordinator.heartbeatIntervalMs - 1);
    await t.coordinator.tick();
    expect(renewals()).toBe(before);
    t.clock.advance(1);
    await t.coordinator.tick();
    expect(renewals()).toBe(before + 1);
  });
});

describe('queue safety valve', () => {
  it('releases the tokens and reservations of dropped pending jobs at once', async () => {
    const t = setup({ workers: 1, maxPendingJobs: 1 });
    t.source.overdeliver = true;
    t.source.queue.push(await t.admit(makeJob('a', 1n)), await t.admit(makeJob('b', 2n)), await t.admit(makeJob('c', 3n)));
    await t.coordinator.tick();
    expect(t.counters.safetyValveDrops).toBe(2);
    expect([...t.targetLeases.records.keys()]).toEqual([1n]);
    expect([...t.reservations.held.keys()]).toEqual([1n]);
    expect(t.solver.runs.map((r) => r.task.job.targetBranch)).toEqual([1n]);
  });
});

describe('shutdown', () => {
  it('aborts running jobs and releases every pending and active lease, once', async () => {
    const t = setup({ workers: 2 });
    t.source.overdeliver = true;
    t.source.queue.push(
      await t.admit(makeJob('a', 1n)),
      await t.admit(makeJob('b', 2n, [3n])),
      await t.admit(makeJob('c', 4n)),
      await t.admit(makeJob('d')),
    );
    await t.coordinator.tick();
    expect(t.solver.runs).toHaveLength(2);
    expect(t.coordinator.pendingCount + t.coordinator.readyCount).toBe(2);

    const first = t.coordinator.stop();
    const second = t.coordinator.stop();
    expect(second).toBe(first);
    expect(await first).toEqual({ abortedRuns: 2, releasedPending: 2, releaseFailures: 0 });
    expect(t.workLeases.held()).toEqual([]);
    expect(t.targetLeases.records.size).toBe(0);
    expect(t.reservations.held.size).toBe(0);
    expect(t.jobs.map((j) => j.status)).toEqual(['aborted', 'aborted']);
    await t.coordinator.tick(); // stopped: dispatches nothing
    expect(t.solver.runs).toHaveLength(2);
  });

  it('gives the jobs that never ran back to their source, so their lanes keep the questions for the next life', async () => {
    const { source, givenBack, solver, counters, coordinator, admit } = setup({}, true, undefined, true);
    const jobs = [makeJob('a', 1n), makeJob('b', 2n), makeJob('c', 3n)];
    for (const job of jobs) source.queue.push(await admit(job));
    source.overdeliver = true;
    await coordinator.tick();
    expect(solver.runs).toHaveLength(1);
    expect(coordinator.pendingCount + coordinator.readyCount).toBe(2);
    expect(await coordinator.stop()).toMatchObject({ abortedRuns: 1, releasedPending: 2 });
    // The run aborted by the stop answered nothing either: it goes back too.
    expect(givenBack.map((w) => w.job.inputPath).sort()).toEqual(jobs.map((j) => j.inputPath));
    expect(counters.workGivenBack).toBe(0);
  });

  it('lets a committing job finish instead of rolling it back', async () => {
    const t = setup();
    const job = makeJob('a', 1n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    let releasePublish!: () => void;
    let publishing!: () => void;
    const publishStarted = new Promise<void>((r) => (publishing = r));
    t.commits.beforePublish = async () => {
      publishing();
      await new Promise<void>((r) => (releasePublish = r));
    };
    t.solver.runs[0]!.resolve(ok([{ text: 'n', interesting: true }]));
    await publishStarted;
    const stopped = t.coordinator.stop();
    releasePublish();
    expect(await stopped).toMatchObject({ abortedRuns: 0 });
    expect(t.workLeases.records.get(jobWorkId(job))?.status).toBe('done');
    expect(t.commits.entries).toHaveLength(1);
    expect(t.targetLeases.records.size).toBe(0);
  });
});

describe('takeover of expired work', () => {
  it('scans for expired work at most once per heartbeat period', async () => {
    const t = setup({ recoverExpiredWork: true });
    let scans = 0;
    const scan = t.workLeases.recoverExpired.bind(t.workLeases);
    t.workLeases.recoverExpired = async (limit, now) => (scans++, scan(limit, now));
    await t.coordinator.tick();
    await t.coordinator.tick();
    expect(scans).toBe(1);
    t.clock.advance(t.coordinator.heartbeatIntervalMs);
    await t.coordinator.tick();
    expect(scans).toBe(2);
  });

  it('runs another coordinator’s expired work with a new fence and counts a steal', async () => {
    const t = setup({ recoverExpiredWork: true });
    const job = makeJob('orphan', 9n);
    const workId = jobWorkId(job);
    t.workLeases.records.set(workId, { status: 'leased', token: 'dead:1', updatedMs: t.clock.now(), payload: workPayloadOf(job) });
    await t.coordinator.tick();
    expect(t.solver.runs).toHaveLength(0); // not expired yet
    t.clock.advance(TTL_MS);
    await t.coordinator.tick();
    expect(t.solver.runs.map((r) => r.task.workId)).toEqual([workId]);
    expect(t.workLeases.records.get(workId)?.token).not.toBe('dead:1');
    expect(t.counters.leaseSteals).toBe(1);
    t.solver.runs[0]!.resolve(ok());
    await t.coordinator.settled();
    expect(t.workLeases.records.get(workId)?.status).toBe('done');
  });

  it('leaves taken-over work it did not finish to expire, to be taken over again, and gives it to no source', async () => {
    const t = setup({ recoverExpiredWork: true }, true, undefined, true);
    const job = makeJob('orphan', 9n);
    const workId = jobWorkId(job);
    t.workLeases.records.set(workId, { status: 'leased', token: 'dead:1', updatedMs: t.clock.now(), payload: workPayloadOf(job) });
    t.clock.advance(TTL_MS);
    await t.coordinator.tick();
    expect(t.solver.runs.map((r) => r.task.workId)).toEqual([workId]);
    await t.coordinator.stop();
    expect(t.givenBack).toEqual([]);
    const left = t.workLeases.records.get(workId);
    expect(left?.status).toBe('leased');
    t.clock.advance(TTL_MS);
    expect((await t.workLeases.recoverExpired(10, t.clock.now())).map((r) => r.workId)).toEqual([workId]);
  });
});

describe('taken-over work left to expire', () => {
  it('abandons taken-over work whose result can never commit, so that no takeover runs it again and again', async () => {
    const t = setup({ recoverExpiredWork: true }, true, undefined, true);
    const job = makeJob('orphan', 9n);
    const workId = jobWorkId(job);
    t.workLeases.records.set(workId, { status: 'leased', token: 'dead:1', updatedMs: t.clock.now(), payload: workPayloadOf(job) });
    t.commits.stage = async () => {
      throw Object.assign(new Error('finding over the size cap'), { code: 'ERR_STAGED_FINDING_TOO_LARGE' });
    };
    for (let round = 0; round < 3; round++) {
      t.clock.advance(TTL_MS);
      await t.coordinator.tick();
      if (round === 0) {
        t.solver.runs[0]!.resolve(ok([{ text: 'huge', interesting: true }]));
        await t.coordinator.settled();
      }
    }
    expect(t.counters.stagingFailures).toBe(1);
    expect(t.solver.runs).toHaveLength(1);
    expect(t.workLeases.records.has(workId)).toBe(false);
    expect(t.givenBack).toEqual([]);
  });

  /** One slot busy (running `x`) and a taken-over job prefetched, with a prefetch depth of 1. */
  async function takenOverPrefetched() {
    const t = setup({ recoverExpiredWork: true, prefetchDepth: 1 }, true, undefined, true);
    t.source.queue.push(await t.admit(makeJob('x', 1n)));
    await t.coordinator.tick();
    const orphan = makeJob('orphan', 9n);
    const workId = jobWorkId(orphan);
    t.workLeases.records.set(workId, { status: 'leased', token: 'dead:1', updatedMs: t.clock.now() - TTL_MS, payload: workPayloadOf(orphan) });
    t.clock.advance(t.coordinator.heartbeatIntervalMs);
    await t.coordinator.tick();
    expect(t.coordinator.readyWorkIds()).toEqual([workId]);
    /** Enqueues `job` with `priority` and runs a round. */
    const better = async (job: CoordinatorJob, priority: number): Promise<void> => {
      await t.coordinator.enqueue([{ ...(await t.admit(job)), priority }]);
      await t.coordinator.tick();
    };
    return { t, orphan, workId, better };
  }

  it('dispatches a better job ahead of a taken-over prefetched job, as of any other', async () => {
    const { t, workId, better } = await takenOverPrefetched();
    const b = makeJob('b', 2n);
    await better(b, 1);
    expect(t.coordinator.readyWorkIds()).toEqual([jobWorkId(b), workId]);
  });

  it('makes the worst prefetched job that is not taken-over work give way, and gives taken-over work to no source at stop', async () => {
    const { t, orphan, workId, better } = await takenOverPrefetched();
    const y = makeJob('y', 4n);
    await better(y, 1);
    expect(t.coordinator.readyWorkIds()).toEqual([jobWorkId(y), workId]); // twice the depth
    const b = makeJob('b', 2n);
    await better(b, 2);
    // y, from the middle of the list, gave way: the taken-over job keeps its place and its lease.
    expect(t.coordinator.readyWorkIds()).toEqual([jobWorkId(b), workId]);
    expect(t.counters.prefetchRollbacks).toBe(1);
    expect(t.workLeases.records.get(workId)?.status).toBe('leased');
    await t.coordinator.stop();
    expect(t.givenBack.map((w) => w.job.inputPath)).not.toContain(orphan.inputPath);
  });

  it('runs taken-over work when its turn comes, never refused by its own record', async () => {
    const { t, workId, better } = await takenOverPrefetched();
    await better(makeJob('b', 2n), 1);
    await better(makeJob('c', 3n), 1);
    const conflictsBefore = t.counters.conflicts;
    for (let round = 0; round < 6; round++) {
      for (const run of t.solver.runs) run.resolve(ok());
      await new Promise((resolve) => setImmediate(resolve));
      await t.coordinator.tick();
    }
    expect(t.counters.conflicts - conflictsBefore).toBe(0);
    expect(t.solver.runs.map((r) => r.task.workId)).toContain(workId);
  });

  it('takes no work from the source once a stop began during the takeover scan', async () => {
    const t = setup({ recoverExpiredWork: true }, true, undefined, true);
    t.source.queue.push(await t.admit(makeJob('a', 77n)));
    let scanned!: () => void;
    let asked!: () => void;
    const scanning = new Promise<void>((resolve) => (asked = resolve));
    t.workLeases.recoverExpired = async () => {
      asked();
      await new Promise<void>((resolve) => (scanned = resolve));
      return [];
    };
    let takes = 0;
    const take = t.source.take.bind(t.source);
    t.source.take = async (limit: number, now: number) => {
      takes++;
      return take(limit, now);
    };
    const round = t.coordinator.tick();
    await scanning;
    const stopped = t.coordinator.stop();
    scanned();
    await round;
    await stopped;
    expect(takes).toBe(0);
  });
});

describe('set-up failures: abandoned, never done', () => {
  const spawnFailure = { status: 'error' as const, generated: [], elapsedMs: 0, error: 'cannot start solver ./s: ENOENT', errorCode: 'ERR_SOLVER_SPAWN' };

  it('abandons the work of a job whose solver could not start, releases everything, and publishes nothing', async () => {
    const t = setup();
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.solver.runs[0]!.resolve(spawnFailure);
    await t.coordinator.settled();
    expect(t.workLeases.records.has(jobWorkId(job))).toBe(false);
    expect(t.workLeases.calls.at(-1)).toBe(`abandon ${jobWorkId(job).slice(0, 8)}`);
    expect(t.targetLeases.records.size).toBe(0);
    expect(t.reservations.held.size).toBe(0);
    expect(t.commits.entries).toEqual([]);
    expect(t.counters).toMatchObject({ jobsAbandoned: 1, jobsError: 0, jobsOk: 0 });
    expect(t.jobs.map((j) => j.status)).toEqual(['abandoned']);
    expect(t.source.observed).toEqual([]);
    expect(t.coordinator.fatalError).toBeUndefined();
  });

  it('marks a job that failed for its own reason done as before (an exit-255 error is not a set-up failure)', async () => {
    const t = setup();
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.solver.runs[0]!.resolve({ status: 'error', generated: [], elapsedMs: 1, error: 'runtime refused', errorCode: 'ERR_SOLVER_EXIT' });
    await t.coordinator.settled();
    expect(t.workLeases.records.get(jobWorkId(job))?.status).toBe('done');
    expect(t.counters).toMatchObject({ jobsAbandoned: 0, jobsError: 1 });
  });

  it('stops with ERR_SETUP_FAILURES after maxSetupFailures in a row; a result of the input\'s own resets the count', async () => {
    const t = setup({ maxSetupFailures: 2 });
    const jobs = ['a', 'b', 'c', 'd'].map((name, i) => makeJob(name, BigInt(100 + i)));
    for (const job of jobs) t.source.queue.push(await t.admit(job));
    const finish = async (index: number, outcome: Parameters<(typeof t.solver.runs)[number]['resolve']>[0]) => {
      await t.coordinator.tick();
      await t.solver.started(index + 1);
      t.solver.runs[index]!.resolve(outcome);
      // The next job starts as this one ends (prefetched), so wait for this job's line, not for quiet.
      while (t.jobs.length <= index) await new Promise((r) => setImmediate(r));
    };
    await finish(0, spawnFailure);
    await finish(1, ok());
    await finish(2, { ...spawnFailure, errorCode: 'ERR_SHOWMAP_SETUP' });
    expect(t.coordinator.stopping).toBe(false);
    await finish(3, spawnFailure);
    expect(t.coordinator.fatalError).toMatchObject({ code: 'ERR_SETUP_FAILURES', details: { failures: 2, lastCode: 'ERR_SOLVER_SPAWN' } });
    expect(t.coordinator.stopping).toBe(true);
    expect(t.counters).toMatchObject({ jobsAbandoned: 3, jobsOk: 1 });
    expect(jobs.map((job) => t.workLeases.records.get(jobWorkId(job))?.status)).toEqual([undefined, 'done', undefined, undefined]);
  });
});

describe('solver busy time', () => {
  it('integrates busy slot time, counting a run in progress at each accrual and a settled run once', async () => {
    const t = setup({ workers: 2 });
    t.source.queue.push(await t.admit(makeJob('a', 77n)), await t.admit(makeJob('b', 78n)));
    await t.coordinator.tick();
    await t.solver.started(2);
    t.clock.advance(1_000);
    t.coordinator.accrueSolverBusy();
    expect(t.counters.solverBusyMs).toBe(2_000); // two slots busy for 1 s, both still running
    t.clock.advance(500);
    t.solver.runs[0]!.resolve(ok());
    // The slot is freed (and its time accrued) when the run's promise settles: wait for that.
    while (t.coordinator.runningCount > 1) await new Promise((r) => setImmediate(r));
    t.clock.advance(2_000);
    t.coordinator.accrueSolverBusy();
    // a: 1.5 s then settled (not counted after); b: 3.5 s and still running.
    expect(t.counters.solverBusyMs).toBe(1_500 + 3_500);
    t.coordinator.accrueSolverBusy();
    expect(t.counters.solverBusyMs).toBe(5_000); // no time passed, nothing added
    t.solver.runs[1]!.resolve(ok());
    await t.coordinator.settled();
    expect(t.counters.solverBusyMs).toBe(5_000);
  });
});

describe('when the lease store fails', () => {
  /** A coordinator on the production work source (no scheduler), one slot, no prefetching. */
  function withSeeds(names: string[]) {
    const clock = new ManualClock();
    const workLeases = new FakeWorkLeases(TTL_MS);
    const solver = new FakeSolver();
    const source = new SeedWorkSource({ initialSeeds: names.map((n) => ({ path: `/seeds/${n}`, sha256: sha(n), depth: 0, origin: 'seed' as const })) });
    const counters = createCounters();
    const coordinator = new Coordinator(
      { coordinatorId: 'c1', workers: 1, workLeaseTtlMs: TTL_MS, maxPendingJobs: 64, recoverExpiredWork: false, prefetchJobs: false },
      { clock, logger: silentLogger(), counters, workLeases, reservations: new FakeReservations(), solver, source, commits: new MemoryResultCommits(workLeases) },
    );
    return { clock, workLeases, solver, source, counters, coordinator };
  }

  it('gives an input back when its work claim fails on an I/O error, and runs it once the store answers', async () => {
    const t = withSeeds(['a']);
    t.workLeases.claimFailure = 'error';
    await t.coordinator.tick();
    expect(t.solver.runs).toHaveLength(0);
    expect(t.counters).toMatchObject({ dispatchRollbacks: 1, workGivenBack: 1, conflicts: 0 });
    expect(t.source.backlog).toBe(1);
    t.workLeases.claimFailure = undefined;
    await t.coordinator.tick(); // offered again only after its delay
    expect(t.solver.runs).toHaveLength(0);
    t.clock.advance(1000);
    await t.coordinator.tick();
    expect(t.solver.runs.map((r) => r.task.job.inputPath)).toEqual(['/seeds/a']);
    t.solver.runs[0]!.resolve(ok());
    await t.coordinator.settled();
    expect(t.counters).toMatchObject({ jobsOk: 1, workGivenBack: 1 });
    expect(t.source.backlog).toBe(0);
  });

  it('drops an input whose claim fails with an error a retry would meet again, as a refused one', async () => {
    const t = withSeeds(['a']);
    t.workLeases.claim = async () => {
      throw Object.assign(new Error('the work record is corrupt'), { code: 'ERR_LEASE_CORRUPT' });
    };
    await t.coordinator.tick();
    expect(t.counters).toMatchObject({ dispatchRollbacks: 1, workGivenBack: 0 });
    expect(t.source.backlog).toBe(0);
  });

  it('gives a directed job back with its pending token when the token\'s renewal fails on I/O: a re-claim would only meet that token', async () => {
    const { targetLeases, reservations, source, givenBack, counters, coordinator, admit } = setup({}, true, undefined, true);
    const job = makeJob('a', 77n);
    source.queue.push(await admit(job));
    // The store fails the renewal (a write) but would answer a claim (reads): refused by our own token.
    targetLeases.heartbeatScript = ['error'];
    await coordinator.tick();
    expect(targetLeases.calls).toEqual(['claim 77', 'heartbeat 77', 'release 77']);
    expect(givenBack.map((w) => w.job)).toEqual([job]);
    expect(counters).toMatchObject({ dispatchRollbacks: 1, workGivenBack: 1, conflicts: 0, releaseFailures: 0 });
    expect(targetLeases.records.size).toBe(0);
    expect(reservations.held.size).toBe(0);
  });

  it('gives a refused claim nothing back: another holder runs that work', async () => {
    const t = withSeeds(['a']);
    t.workLeases.claimFailure = 'conflict';
    await t.coordinator.tick();
    expect(t.counters).toMatchObject({ dispatchRollbacks: 1, conflicts: 1, workGivenBack: 0 });
    expect(t.source.backlog).toBe(0);
  });
});

describe('work that never answered its question goes back to its source', () => {
  it('waits at stop for work being taken, then releases it and gives it back', async () => {
    const t = setup({}, true, undefined, true);
    const job = makeJob('a', 77n);
    const work = await t.admit(job);
    let deliver!: (works: AdmittedWork[]) => void;
    let asked!: () => void;
    const taking = new Promise<void>((resolve) => (asked = resolve));
    t.source.take = () => {
      asked();
      return new Promise<readonly AdmittedWork[]>((resolve) => (deliver = resolve));
    };
    const round = t.coordinator.tick();
    await taking;
    const stopped = t.coordinator.stop();
    // The admission's claims answer after the stop began, and after everything else the stop does
    // without waiting had run (every pending microtask).
    await new Promise((resolve) => setImmediate(resolve));
    deliver([work]);
    await round;
    expect(await stopped).toMatchObject({ releasedPending: 1 });
    expect(t.coordinator.pendingCount).toBe(0);
    expect(t.givenBack.map((w) => w.job)).toEqual([job]);
    expect(t.targetLeases.records.size).toBe(0);
    expect(t.reservations.held.size).toBe(0);
    expect(t.solver.runs).toHaveLength(0);
  });

  it('gives back the pending jobs the safety valve drops', async () => {
    const t = setup({ workers: 1, maxPendingJobs: 1 }, true, undefined, true);
    t.source.overdeliver = true;
    t.source.queue.push(await t.admit(makeJob('a', 1n)), await t.admit(makeJob('b', 2n)), await t.admit(makeJob('c', 3n)));
    await t.coordinator.tick();
    expect(t.counters.safetyValveDrops).toBe(2);
    expect(t.givenBack.map((w) => w.job.targetBranch)).toEqual([2n, 3n]);
  });

  it('gives back a job whose re-claim met a member held elsewhere, but not one whose exact work is held elsewhere', async () => {
    const t = setup({}, true, undefined, true);
    const job = makeJob('a', 77n, [88n]);
    t.source.queue.push(await t.admit(job));
    t.targetLeases.takeOver([77n], t.clock.now());
    await t.coordinator.tick();
    expect(t.counters).toMatchObject({ conflicts: 1, dispatchRollbacks: 1, workGivenBack: 0 });
    expect(t.givenBack.map((w) => w.job)).toEqual([job]);

    const u = setup({}, true, undefined, true);
    u.source.queue.push(await u.admit(makeJob('b', 5n)));
    u.workLeases.claimFailure = 'conflict';
    await u.coordinator.tick();
    expect(u.counters).toMatchObject({ conflicts: 1, dispatchRollbacks: 1 });
    expect(u.givenBack).toEqual([]);
  });

  it('gives back a prefetched job whose target group was lost, but not one whose work fence was taken over', async () => {
    const t = setup({ workers: 1 }, true, undefined, true);
    const [a, b, c] = [makeJob('a', 1n), makeJob('b', 2n), makeJob('c', 3n)];
    t.source.overdeliver = true;
    t.source.queue.push(await t.admit(a), await t.admit(b), await t.admit(c));
    await t.coordinator.tick();
    expect(t.solver.runs.map((r) => r.task.job.inputPath)).toEqual([a.inputPath]);
    expect(t.coordinator.readyCount).toBe(2);
    t.targetLeases.takeOver([2n], t.clock.now());
    t.workLeases.steal(jobWorkId(c), t.clock.now());
    await t.coordinator.heartbeat();
    await t.coordinator.tick();
    expect(t.counters.prefetchRollbacks).toBe(2);
    expect(t.solver.runs).toHaveLength(1);
    expect(t.givenBack.map((w) => w.job.inputPath)).toEqual([b.inputPath]);
  });

  it('gives back a run aborted because its target group was taken over, but not a stale result', async () => {
    const t = setup({}, true, undefined, true);
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.targetLeases.takeOver([77n], t.clock.now());
    await t.coordinator.heartbeat();
    await t.coordinator.settled();
    expect(t.jobs.map((j) => j.status)).toEqual(['aborted']);
    expect(t.givenBack.map((w) => w.job)).toEqual([job]);

    const u = setup({}, true, undefined, true);
    const other = makeJob('b', 5n);
    u.source.queue.push(await u.admit(other));
    await u.coordinator.tick();
    u.clock.advance(TTL_MS + 1);
    u.workLeases.steal(jobWorkId(other), u.clock.now());
    u.solver.runs[0]!.resolve(ok([{ text: 'new', interesting: true }]));
    await u.coordinator.settled();
    expect(u.jobs.map((j) => j.status)).toEqual(['stale']);
    expect(u.givenBack).toEqual([]);
  });

  it('gives back a run whose set-up failed', async () => {
    const t = setup({}, true, undefined, true);
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    t.solver.runs[0]!.resolve({ status: 'error', generated: [], elapsedMs: 0, error: 'cannot start solver ./s: ENOENT', errorCode: 'ERR_SOLVER_SPAWN' });
    await t.coordinator.settled();
    expect(t.jobs.map((j) => j.status)).toEqual(['abandoned']);
    expect(t.givenBack.map((w) => w.job)).toEqual([job]);
  });

  it('gives back a result dropped while its staging waited on the store at stop, but not one dropped for an error a retry meets again', async () => {
    let onHeld!: () => void;
    const held = new Promise<void>((resolve) => (onHeld = resolve));
    const t = setup({}, true, { resultHeld: () => onHeld() }, true);
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await t.coordinator.tick();
    await t.solver.started(1);
    t.commits.stageError = true;
    t.solver.runs[0]!.resolve(ok([{ text: 'found', interesting: true }]));
    await held;
    await t.coordinator.stop();
    expect(t.counters.stagingFailures).toBe(1);
    expect(t.givenBack.map((w) => w.job)).toEqual([job]);

    const u = setup({}, true, undefined, true);
    u.source.queue.push(await u.admit(makeJob('b', 5n)));
    await u.coordinator.tick();
    u.commits.stage = async () => {
      throw Object.assign(new Error('finding over the size cap'), { code: 'ERR_FINDING_TOO_LARGE' });
    };
    u.solver.runs[0]!.resolve(ok([{ text: 'found', interesting: true }]));
    await u.coordinator.settled();
    expect(u.counters.stagingFailures).toBe(1);
    expect(u.givenBack).toEqual([]);
  });
});

describe('a result kept while the store fails', () => {
  it('commits once staging works again, though a heartbeat found its target group taken meanwhile: only the work fence decides', async () => {
    let onHeld!: () => void;
    const held = new Promise<void>((resolve) => (onHeld = resolve));
    const t = setup({}, true, { resultHeld: () => onHeld() });
    const { clock, workLeases, targetLeases, solver, commits, counters, coordinator } = t;
    const job = makeJob('a', 77n);
    t.source.queue.push(await t.admit(job));
    await coordinator.tick();
    await solver.started(1);
    commits.stageError = true;
    solver.runs[0]!.resolve(ok([{ text: 'found', interesting: true }]));
    await held;
    targetLeases.heartbeatScript = ['lost'];
    await coordinator.heartbeat();
    expect(counters.leaseExpiries).toBe(1);
    commits.stageError = false;
    clock.advance(1000);
    await coordinator.tick();
    await coordinator.settled();
    expect(workLeases.records.get(jobWorkId(job))?.status).toBe('done');
    expect(commits.entries).toHaveLength(1);
    expect(counters).toMatchObject({ jobsOk: 1, commitRetries: 1, stagingFailures: 0, interesting: 1 });
  });

  it('keeps renewing the work fence of a result held after its target group was lost, so no takeover ends it while it waits', async () => {
    let onHeld!: () => void;
    const held = new Promise<void>((resolve) => (onHeld = resolve));
    const t = setup({}, true, { resultHeld: () => onHeld() });
    const { clock, workLeases, targetLeases, solver, commits, counters, coordinator } = t;
    const job = makeJob('a', 77n);
    const workId = jobWorkId(job);
    t.source.queue.push(await t.admit(job));
    await coordinator.tick();
    await solver.started(1);
    commits.stageError = true;
    solver.runs[0]!.resolve(ok([{ text: 'found', interesting: true }]));
    await held;
    targetLeases.takeOver([77n], clock.now());
    await coordinator.heartbeat();
    expect(counters.leaseExpiries).toBe(1);
    // The outage lasts longer than a work TTL; the coordinator renews its leases all the while.
    for (let i = 0; i < 4; i += 1) {
      clock.advance(TTL_MS / 2);
      await coordinator.heartbeat();
    }
    expect(workLeases.records.get(workId)?.updatedMs).toBe(clock.now());
    expect((await workLeases.recoverExpired(10, clock.now())).map((r) => r.workId)).not.toContain(workId);
    commits.stageError = false;
    clock.advance(1000);
    await coordinator.tick();
    await coordinator.settled();
    expect(workLeases.records.get(workId)?.status).toBe('done');
    expect(commits.entries).toHaveLength(1);
    expect(counters).toMatchObject({ jobsOk: 1, staleResults: 0, interesting: 1 });
  });
});
