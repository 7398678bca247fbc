// The order of a crash-safe commit with in-memory fakes: findings staged before beginCommit (which
// carries the manifest), published and completed in one fenced step, staged copies discarded only
// once done; a staging or beginCommit I/O failure keeps the result and retries the step after a
// pause on the clock, and a stop ends the retries (result dropped, work released); a stale result stages but
// never publishes and leaves its copies to the sweep; a result with nothing to publish completes its
// record in one fenced step.
import { describe, expect, it } from 'vitest';
import { Coordinator, type CoordinatorHooks } from '../../src/coordinator/coordinator.js';
import { jobWorkId } from '../../src/coordinator/work-identity.js';
import { createCounters } from '../../src/telemetry/counters.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { FakeReservations, FakeSolver, FakeSource, FakeWorkLeases, ManualClock, makeJob, sha } from '../helpers/coordinator-fakes.js';
import { MemoryResultCommits } from '../helpers/memory-result-commits.js';

const TTL_MS = 30_000;

function setup() {
  const log: string[] = [];
  const clock = new ManualClock();
  const workLeases = new FakeWorkLeases(TTL_MS);
  const manifests: unknown[] = [];
  const beginCommit = workLeases.beginCommit.bind(workLeases);
  workLeases.beginCommit = async (workId, token, now, manifest?) => {
    log.push('beginCommit');
    manifests.push(manifest);
    return beginCommit(workId, token, now, manifest);
  };
  const commits = new MemoryResultCommits(workLeases, { log });
  const solver = new FakeSolver();
  const source = new FakeSource();
  const counters = createCounters();
  /** Runs right after beginCommit, before the owner publishes (set by a test). */
  const hook: { afterBeginCommit: (workId: string) => Promise<void> | void } = { afterBeginCommit: () => {} };
  /** Each time a result is held for a retry (the handshake of the retry tests). */
  const held: Array<{ step: string; attempt: number }> = [];
  let heldWaiter: (() => void) | undefined;
  const hooks: CoordinatorHooks = {
    afterBeginCommit: ({ workId }) => hook.afterBeginCommit(workId),
    resultHeld: ({ step, attempt }) => {
      held.push({ step, attempt });
      heldWaiter?.();
    },
  };
  /** Resolves once `n` holds were announced. */
  const heldTimes = (n: number): Promise<void> =>
    new Promise((resolve) => {
      const check = (): void => {
        if (held.length >= n) resolve();
        else heldWaiter = check;
      };
      check();
    });
  const coordinator = new Coordinator(
    { coordinatorId: 'c1', workers: 1, workLeaseTtlMs: TTL_MS, maxPendingJobs: 8, recoverExpiredWork: false },
    { clock, logger: silentLogger(), counters, workLeases, reservations: new FakeReservations(), solver, source, commits, hooks },
  );
  return { log, clock, workLeases, manifests, commits, solver, source, counters, coordinator, hook, held, heldTimes };
}

const found = new TextEncoder().encode('new coverage');
const outcome = { status: 'ok' as const, elapsedMs: 1, generated: [{ bytes: found, sha256: sha(found), interesting: true }] };
const boring = new TextEncoder().encode('nothing new');
/** A result with nothing to publish: its only output is not interesting, and it is no trace. */
const nothingNew = { status: 'ok' as const, elapsedMs: 1, generated: [{ bytes: boring, sha256: sha(boring), interesting: false }] };

async function runOne(t: ReturnType<typeof setup>, before?: () => void, result: typeof outcome | typeof nothingNew = outcome): Promise<string> {
  const job = makeJob('a');
  t.source.queue.push({ job, owner: 1 });
  await t.coordinator.tick();
  await t.solver.started(1);
  before?.();
  t.solver.runs[0]!.resolve(result);
  await t.coordinator.settled();
  return jobWorkId(job);
}

/** Runs job `a` to its result (`outcome`) and waits for `reached` (the result held, or at a gate): its job. */
async function runUntil(t: ReturnType<typeof setup>, reached: () => Promise<void>): Promise<ReturnType<typeof makeJob>> {
  const job = makeJob('a');
  t.source.queue.push({ job, owner: 1 });
  await t.coordinator.tick();
  await t.solver.started(1);
  t.solver.runs[0]!.resolve(outcome);
  await reached();
  return job;
}

describe('crash-safe commit order', () => {
  it('stages, then beginCommit with the manifest, then one fenced publish + complete, then discards the staged copies', async () => {
    const t = setup();
    await runOne(t);
    expect(t.log).toEqual(['stage 1', 'beginCommit', 'publish 1', 'discard']);
    expect(t.manifests[0]).toMatchObject({ schema: 'symfence-commit/1', items: [{ kind: 'queue', sha256: sha(found) }] });
    expect(t.counters).toMatchObject({ interesting: 1, jobsOk: 1, stagingFailures: 0 });
  });

  it('completes the record of a result with nothing to publish in one fenced step: no beginCommit, publication or hook', async () => {
    const t = setup();
    const completes: string[] = [];
    const complete = t.workLeases.complete.bind(t.workLeases);
    t.workLeases.complete = async (workId, token, now) => {
      completes.push(workId);
      return complete(workId, token, now);
    };
    let hooked = false;
    t.hook.afterBeginCommit = () => {
      hooked = true;
    };
    const workId = await runOne(t, undefined, nothingNew);
    expect(completes).toEqual([workId]);
    expect(t.log).toEqual(['stage 0']); // nothing staged, nothing to publish or discard
    expect(hooked).toBe(false);
    expect(t.workLeases.records.get(workId)).toMatchObject({ status: 'done' });
    expect(t.workLeases.records.get(workId)!.commit).toBeUndefined();
    expect(t.counters).toMatchObject({ jobsOk: 1, interesting: 0, staleResults: 0 });
  });

  it('drops a result with nothing to publish as stale when its work fence is gone, leaving the record to its new holder', async () => {
    const t = setup();
    const workId = jobWorkId(makeJob('a'));
    await runOne(t, () => t.workLeases.steal(workId, t.clock.now()), nothingNew);
    expect(t.log).toEqual(['stage 0']); // nothing staged, nothing to publish or discard
    expect(t.workLeases.records.get(workId)).toMatchObject({ status: 'leased' });
    expect(t.workLeases.records.get(workId)!.token).toMatch(/^thief/);
    expect(t.counters).toMatchObject({ staleResults: 1, jobsOk: 0 });
  });

  it('keeps the result when staging fails, and stages it again after a pause that doubles per failure', async () => {
    const t = setup();
    t.commits.stageError = true;
    const job = await runUntil(t, () => t.heldTimes(1));
    expect(t.coordinator.heldResults).toBe(1);
    // Not due yet: a tick 999 ms later retries nothing.
    t.clock.advance(999);
    await t.coordinator.tick();
    expect(t.log).toEqual(['stage 1']);
    t.clock.advance(1);
    await t.coordinator.tick();
    await t.heldTimes(2); // failed again: held for 2 s now
    expect(t.held).toEqual([{ step: 'staging the result durably', attempt: 0 }, { step: 'staging the result durably', attempt: 1 }]);
    t.commits.stageError = false;
    t.clock.advance(1999);
    await t.coordinator.tick();
    expect(t.log).toEqual(['stage 1', 'stage 1']);
    t.clock.advance(1);
    await t.coordinator.tick();
    await t.coordinator.settled();
    expect(t.log).toEqual(['stage 1', 'stage 1', 'stage 1', 'beginCommit', 'publish 1', 'discard']);
    expect(t.workLeases.records.get(jobWorkId(job))?.status).toBe('done');
    expect(t.commits.entries.map((e) => e.sha256)).toEqual([sha(found)]);
    expect(t.counters).toMatchObject({ stagingFailures: 0, commitRetries: 2, jobsOk: 1, interesting: 1 });
    expect(t.coordinator.heldResults).toBe(0);
  });

  it('retries a beginCommit that failed on an I/O error with the same token and manifest, and publishes once', async () => {
    const t = setup();
    let failures = 1;
    const beginCommit = t.workLeases.beginCommit.bind(t.workLeases);
    t.workLeases.beginCommit = async (workId, token, now, manifest?) => {
      const accepted = await beginCommit(workId, token, now, manifest);
      // The write took effect, but its answer was lost: the retry must not take it for stale.
      if (failures-- > 0) throw Object.assign(new Error('injected lost answer'), { code: 'ERR_LEASE_IO' });
      return accepted;
    };
    await runUntil(t, () => t.heldTimes(1));
    t.clock.advance(1000);
    await t.coordinator.tick();
    await t.coordinator.settled();
    expect(t.log).toEqual(['stage 1', 'beginCommit', 'beginCommit', 'publish 1', 'discard']);
    expect(t.manifests[0]).toEqual(t.manifests[1]);
    expect(t.commits.entries).toHaveLength(1);
    expect(t.counters).toMatchObject({ staleResults: 0, commitRetries: 1, jobsOk: 1, interesting: 1 });
  });

  it('replays its own result whose publication failed at the next commit scan a second later, not a work TTL later', async () => {
    const t = setup();
    t.commits.publishError = true;
    const workId = await runOne(t);
    expect(t.workLeases.records.get(workId)?.status).toBe('committing');
    expect(t.counters).toMatchObject({ commitPublishFailures: 1, interesting: 0 });
    t.clock.advance(999);
    await t.coordinator.tick();
    expect(t.counters).toMatchObject({ commitReplayFailures: 0, commitsReplayed: 0 });
    t.clock.advance(1);
    await t.coordinator.tick(); // a second after the failure: replayed, and the publication fails again
    expect(t.counters).toMatchObject({ commitReplayFailures: 1, commitsReplayed: 0 });
    t.commits.publishError = false;
    t.clock.advance(1999); // failed again, so the next try is 2 s after that scan
    await t.coordinator.tick();
    expect(t.counters.commitsReplayed).toBe(0);
    t.clock.advance(1);
    await t.coordinator.tick();
    expect(t.workLeases.records.get(workId)?.status).toBe('done');
    expect(t.counters).toMatchObject({ commitsReplayed: 1, interesting: 1 });
    expect(t.commits.entries.map((e) => e.sha256)).toEqual([sha(found)]);
  });

  it('replays a publication that failed while a commit scan was running, a second after that scan', async () => {
    const t = setup();
    // The publication waits at a gate, and fails once let through.
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    let onPublishFailed!: () => void;
    const publishFailed = new Promise<void>((resolve) => (onPublishFailed = resolve));
    let onAtGate!: () => void;
    const atGate = new Promise<void>((resolve) => (onAtGate = resolve));
    let first = true;
    t.commits.beforePublish = async () => {
      if (!first) return;
      first = false;
      onAtGate();
      await gate;
      t.commits.publishError = true;
    };
    const publish = t.commits.publish.bind(t.commits);
    t.commits.publish = async (...args) => {
      try {
        return await publish(...args);
      } catch (error) {
        onPublishFailed();
        throw error;
      }
    };
    // The first scan of this life runs at the job's first tick, before the job.
    const workId = jobWorkId(await runUntil(t, () => atGate));
    // A regular scan reads the table while the job is publishing (skipped: it runs here); the
    // publication fails after that read, while the scan still runs.
    const scan = t.commits.scan.bind(t.commits);
    t.commits.scan = async () => {
      const read = await scan();
      openGate();
      await publishFailed;
      await new Promise<void>((resolve) => setImmediate(resolve)); // its catch tells the coordinator
      return read;
    };
    t.clock.advance(TTL_MS);
    await t.coordinator.tick();
    t.commits.scan = scan;
    await t.coordinator.settled();
    t.commits.publishError = false;
    expect(t.workLeases.records.get(workId)?.status).toBe('committing');
    expect(t.counters).toMatchObject({ commitPublishFailures: 1, commitsReplayed: 0 });
    t.clock.advance(1000);
    await t.coordinator.tick();
    expect(t.workLeases.records.get(workId)?.status).toBe('done');
    expect(t.counters).toMatchObject({ commitsReplayed: 1, interesting: 1 });
  });

  it('drops the result and releases the work when the coordinator stops while staging keeps failing', async () => {
    const t = setup();
    t.commits.stageError = true;
    const job = await runUntil(t, () => t.heldTimes(1));
    await t.coordinator.stop();
    expect(t.log).toEqual(['stage 1']);
    expect(t.workLeases.records.has(jobWorkId(job))).toBe(false); // abandoned: the work can run again
    expect(t.counters).toMatchObject({ stagingFailures: 1, commitRetries: 0, jobsOk: 0, interesting: 0 });
    expect(t.coordinator.heldResults).toBe(0);
  });

  it('does not count findings a replaying coordinator published first (already)', async () => {
    const t = setup();
    // Another coordinator sharing the lease directory replays the record between our beginCommit
    // and our publication, as recovery does: scan, load the staged copies, fenced publish.
    const replayer = t.commits.peer();
    t.hook.afterBeginCommit = async (workId) => {
      const record = (await replayer.scan()).committing.find((c) => c.workId === workId)!;
      const staged = await replayer.load(workId, record.commit);
      expect((await replayer.publish(workId, record.token, staged.manifest, staged.findings, t.clock.now())).outcome).toBe('completed');
    };
    await runOne(t);
    expect(t.log).toEqual(['stage 1', 'beginCommit', 'publish 1', 'discard']);
    expect(replayer.entries.map((e) => e.sha256)).toEqual([sha(found)]);
    expect(t.commits.entries).toEqual([]);
    expect(t.counters).toMatchObject({ interesting: 0, jobsOk: 1, commitPublishFailures: 0 });
  });

  for (const [what, result] of [
    ['a completion (nothing to publish)', nothingNew],
    ['a publication', outcome],
  ] as const) {
    it(`a heartbeat queued behind the job's own ending (${what}) finds no lost lease`, async () => {
      const t = setup();
      // The heartbeat takes its snapshot while the job still runs; its batch runs only after the
      // job's own completion or publication did (as a batch queued behind it on the I/O thread).
      let ended!: () => void;
      const endedFirst = new Promise<void>((resolve) => (ended = resolve));
      const heartbeatMany = t.workLeases.heartbeatMany.bind(t.workLeases);
      t.workLeases.heartbeatMany = async (fences, now) => {
        await endedFirst;
        return heartbeatMany(fences, now);
      };
      const complete = t.workLeases.complete.bind(t.workLeases);
      t.workLeases.complete = async (workId, token, now) => {
        const done = await complete(workId, token, now);
        ended();
        return done;
      };
      const publish = t.commits.publish.bind(t.commits);
      t.commits.publish = async (...args) => {
        const published = await publish(...args);
        ended();
        return published;
      };
      let heartbeat!: Promise<unknown>;
      await runOne(t, () => (heartbeat = t.coordinator.heartbeat()), result);
      expect(await heartbeat).toEqual({ workOk: 0, workFailed: 0, targetOk: 0, targetFailed: 0 });
      // The batch did carry the job's fence: it was renewed, and found gone by the job's own doing.
      expect(t.workLeases.calls.filter((c) => c.startsWith('heartbeatMany'))).toEqual(['heartbeatMany 1']);
      expect(t.counters).toMatchObject({ jobsOk: 1, leaseExpiries: 0, heartbeatsFailed: 0, staleResults: 0 });
    });
  }

  it('never publishes a stale result and leaves its staged copies to the sweep', async () => {
    const t = setup();
    const workId = jobWorkId(makeJob('a'));
    await runOne(t, () => t.workLeases.steal(workId, t.clock.now()));
    expect(t.log).toEqual(['stage 1', 'beginCommit']);
    expect(t.counters).toMatchObject({ staleResults: 1, interesting: 0 });
  });

  it('counts a refused fenced publication of its own committing record', async () => {
    const t = setup();
    // The table no longer shows our token on the committing record: the fenced step refuses it.
    t.hook.afterBeginCommit = (workId) => {
      t.workLeases.records.get(workId)!.token = 'other:1';
    };
    await runOne(t);
    expect(t.log).toEqual(['stage 1', 'beginCommit', 'publish 1']);
    expect(t.counters).toMatchObject({ commitPublishFailures: 1, interesting: 0 });
  });
});
