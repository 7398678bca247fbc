import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { SCHEDULER_STATE_FILE } from '../../src/scheduler/lane-state-keeper.js';
import type { SharedTargetClaims } from '../../src/scheduler/admission-ports.js';
import { IoSharedTargetClaims } from '../../src/io/io-adapters.js';
import { IoService } from '../../src/io/io-service.js';
import { IoTargetLeases } from '../../src/coordinator/adapters/io-lease-adapters.js';
import { LocalIoClient } from '../helpers/local-io-client.js';
import { openTarget } from '../helpers/lease-fixtures.js';
import { HintFile } from '../../src/scheduler/hints.js';
import { MapLocalReservations } from '../../src/scheduler/map-local-reservations.js';
import type { SymfenceError } from '../../src/errors.js';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import type { FsOperation } from '../../src/fs/fs-layer.js';
import { normalizeJob } from '../../src/scheduler/replay-job.js';
import { sha, tel } from '../unit/scheduler-fixtures.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'symfence-sched-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function fresh(options: object = {}): Scheduler {
  const s = new Scheduler({ local: new MapLocalReservations(), options: { cooldownMs: 30_000, ...options } });
  s.addSeed('seed', { bytes: 4, sha256: sha(1), path: '/q/seed' }, 0);
  return s;
}

describe('scheduler lane state on disk', () => {
  it.each<[FsOperation, 'before' | 'after']>([
    // (An open that reports failure after creating its file is left out: writeFileDurably never
    // unlinks a name it cannot know is its own, so that temp stays.)
    ['open', 'before'],
    ['write', 'before'],
    ['write', 'after'],
    ['fsync', 'before'],
    ['fsync', 'after'],
    ['rename', 'before'],
    ['rename', 'after'],
    ['syncDirectory', 'before'],
    ['syncDirectory', 'after'],
  ])('leaves lanes and ledger from one save whatever %s fails (%s it)', async (op, when) => {
    const file = path.join(dir, 'state', 'scheduler.json');
    const s = fresh({ lanes: 'fallback' });
    s.observe({ seed: 'seed', telemetry: tel({ open: [456, 789, 790, 791] }), reward: 0.6 }, 0);
    // An admitted job gives the lane a replay time and the ledger, after its run, a back-off.
    expect(await s.admit(1, 1)).toHaveLength(1);
    s.observe({ seed: 'seed', job: normalizeJob({ seed: 'seed', targetBranch: 456 }), telemetry: tel({ target: 456, reached: true, status: 'unsat' }), reward: 0 }, 2);
    s.observe({ seed: 'seed', job: normalizeJob({ seed: 'seed', targetBranch: 791 }), telemetry: tel({ target: 791, reached: true, status: 'unknown' }), reward: 0 }, 3);
    await s.saveState(file, 10);
    const first = await readFile(file, 'utf8');
    s.observe({ seed: 'seed', job: normalizeJob({ seed: 'seed', targetBranch: 789 }), telemetry: tel({ target: 789, reached: true, status: 'sat', open: [790] }), reward: 0.9 }, 20);
    const second = JSON.stringify(s.toJSON(30));

    const fsLayer = new FaultInjectingFsLayer();
    fsLayer.fail({ op, when, path: (p) => p.includes('scheduler') || p === path.dirname(file) });
    const saved = await s.saveState(file, 30, fsLayer).then(
      () => true,
      () => false,
    );
    expect(saved, 'the injected failure fails the save').toBe(false);
    // A failure before the rename keeps the first save whole; after it, the second is there whole.
    const onDisk = await readFile(file, 'utf8');
    const renamed = (op === 'rename' && when === 'after') || op === 'syncDirectory';
    expect(onDisk).toBe(renamed ? second : first);
    expect((await readdir(path.dirname(file))).filter((f) => f !== 'scheduler.json')).toEqual([]);

    // A restarted scheduler (a new clock) gets the lanes and the ledger of that one save.
    const after = fresh({ lanes: 'fallback' });
    expect(await after.loadState(file, 0)).toBe(true);
    const document = JSON.parse(onDisk) as { ledger: { pairs: [number, string, number, number][] } };
    expect(document.ledger.pairs.some((p) => p[2] > 0 && p[3] > 0)).toBe(true);
    expect(after.stats().targets).toMatchObject({
      settledPairs: document.ledger.pairs.filter((p) => p[2] === 0).length,
      retryingPairs: document.ledger.pairs.filter((p) => p[2] > 0).length,
    });
    // Ages and back-offs are relative: saved again at the clock it was loaded with, it is the same document.
    expect(JSON.stringify(after.toJSON(0))).toBe(onDisk);
  });

  it('survives a restart with a new monotonic clock, cooldowns included, and forgets leases', async () => {
    const file = path.join(dir, 'state', 'scheduler.json');
    const before = fresh({ lanes: 'prefix' });
    before.observe({ seed: 'seed', telemetry: tel({ open: [33, 34], trace: [[11, 22, 33, 44, 1, 0], [22, 23, 34, 45, 0, 0]] }), reward: 0.4 }, 1_000);
    const jobs = await before.admit(1, 50_000);
    expect(jobs).toHaveLength(1);
    await before.saveState(file, 60_000);
    expect((await readdir(path.dirname(file))).filter((f) => f.endsWith('.tmp'))).toEqual([]);

    // New process: its monotonic clock starts near zero.
    const after = fresh({ lanes: 'prefix' });
    expect(await after.loadState(file, 5_000)).toBe(true);
    expect(after.toJSON(5_000)).toEqual(before.toJSON(60_000));
    expect(after.stats().inflightTargets).toBe(0);
    const dispatched = jobs[0]!.job.targetBranch;
    const cooling = (await after.admit(4, 5_000)).flatMap((j) => j.group);
    expect(cooling).not.toContain(dispatched);
    // 10 s elapsed before the save + 25 s after the restart = the 30 s cooldown plus 5 s.
    const later = fresh({ lanes: 'prefix' });
    await later.loadState(file, 5_000);
    const prefix = later.lane('prefix')!;
    expect(prefix.node(dispatched)!.lastScheduledMs).toBe(5_000 - 10_000);
    const others = new Set([...(prefix.propose(4, 4, 0, new Set()).flatMap((p) => p.job.actions.map((a) => a.branch)))].filter((b) => b !== dispatched));
    expect(prefix.propose(4, 4, 24_999, others).map((p) => p.job.targetBranch)).toEqual([]);
    expect(prefix.propose(4, 4, 25_000, others).map((p) => p.job.targetBranch)).toEqual([dispatched]);
  });

  it('keeps which inputs the lanes learnt a whole run of, across a save, and loads a file written before it kept them', async () => {
    const file = path.join(dir, 'state', 'scheduler.json');
    const s = fresh({ lanes: 'frontier' });
    s.addSeed('killed', { bytes: 4, sha256: sha(2), path: '/q/killed' }, 0);
    s.addSeed('directed', { bytes: 4, sha256: sha(3), path: '/q/directed' }, 0);
    s.observe({ seed: 'seed', telemetry: tel({ open: [456] }), reward: 0 }, 0);
    s.observe({ seed: 'killed', telemetry: tel({ open: [457] }), reward: 0, killed: true }, 0);
    s.observe({ seed: 'directed', job: normalizeJob({ seed: 'directed', targetBranch: 458 }), telemetry: tel({ target: 458, reached: true, status: 'sat' }), reward: 1 }, 0);
    expect(['seed', 'killed', 'directed'].map((seed) => s.knowsInput(seed))).toEqual([true, false, false]);
    await s.saveState(file, 10);
    expect((JSON.parse(await readFile(file, 'utf8')) as { traced: unknown }).traced).toEqual(['seed']);

    const after = fresh({ lanes: 'frontier' });
    expect(after.knowsInput('seed')).toBe(false);
    await after.loadState(file, 0);
    expect(after.knowsInput('seed')).toBe(true);
    // A file without `traced` restores the lanes; no input's trace is known.
    const older = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
    delete older.traced;
    await writeFile(file, JSON.stringify(older));
    const fromOlder = fresh({ lanes: 'frontier' });
    await fromOlder.loadState(file, 0);
    expect(fromOlder.knowsInput('seed')).toBe(false);
    expect(fromOlder.lane('frontier')!.openOf('seed')).toEqual([456n]);
  });

  it('rejects a traced list that is not strings with ERR_LANE_STATE and restores nothing of the file', async () => {
    const file = path.join(dir, 'scheduler.json');
    const source = fresh({ lanes: 'frontier' });
    source.observe({ seed: 'seed', telemetry: tel({ open: [456] }), reward: 0 }, 0);
    await writeFile(file, JSON.stringify({ ...(source.toJSON(0) as object), traced: ['seed', 7] }));
    const s = fresh({ lanes: 'frontier' });
    await expect(s.loadState(file, 0)).rejects.toMatchObject({ code: 'ERR_LANE_STATE', details: { path: 'traced[1]' } });
    expect(s.knowsInput('seed')).toBe(false);
    expect(s.lane('frontier')!.openOf('seed')).toEqual([]);
  });

  it('reports a missing state file as "nothing loaded"', async () => {
    expect(await fresh().loadState(path.join(dir, 'none.json'), 0)).toBe(false);
  });

  it('rejects a corrupt state file with ERR_LANE_STATE and keeps the current state', async () => {
    const file = path.join(dir, 'scheduler.json');
    const s = fresh();
    s.observe({ seed: 'seed', telemetry: tel({ open: [33], trace: [[11, 22, 33, 44, 1, 0]] }), reward: 0.4 }, 0);
    const snapshot = s.toJSON(0) as { lanes: { cstg: { transitions: { attempts: unknown }[] } } };
    const good = JSON.stringify(s.toJSON(0));
    snapshot.lanes.cstg.transitions[0]!.attempts = -1;
    await writeFile(file, JSON.stringify(snapshot));
    let error: SymfenceError | undefined;
    try {
      await s.loadState(file, 0);
    } catch (e) {
      error = e as SymfenceError;
    }
    expect(error?.code).toBe('ERR_LANE_STATE');
    expect(JSON.stringify(s.toJSON(0))).toBe(good);
    await writeFile(file, '{"schema":');
    await expect(s.loadState(file, 0)).rejects.toMatchObject({ code: 'ERR_LANE_STATE' });
  });

  it('keeps the old file when the new state is over the byte budget', async () => {
    const file = path.join(dir, 'scheduler.json');
    await writeFile(file, 'old');
    const s = fresh({ maxStateBytes: 1024 * 1024 });
    // Long seed ids make every lane entry big, so a few hundred observations exceed 1 MiB.
    const seed = 'x'.repeat(4000);
    s.addSeed(seed, { bytes: 4, sha256: sha(2), path: '/q/long' }, 0);
    for (let i = 1; i <= 200; i += 1) s.observe({ seed, telemetry: tel({ open: [i + 100_000], trace: [[i, i + 50_000, i + 100_000, i, 1, 0]] }), reward: 0.1 }, i);
    await expect(s.saveState(file, 5000)).rejects.toMatchObject({ code: 'ERR_LANE_STATE' });
    expect(await readFile(file, 'utf8')).toBe('old');
    expect((await readdir(dir)).sort()).toEqual(['scheduler.json']);
  });

  it('loads a hint file from disk', async () => {
    const file = path.join(dir, 'hints.json');
    await writeFile(file, JSON.stringify([{ path: '/q/seed', strategy: 5 }]));
    const hints = await HintFile.load(file);
    expect(hints.hintFor({ seed: 'seed', sha256: sha(1), path: '/q/seed' })?.strategy).toBe(5);
    await writeFile(file, '[{');
    await expect(HintFile.load(file)).rejects.toMatchObject({ code: 'ERR_HINT_INVALID' });
  });
});

/** Every file-system step of a save over an existing state directory, in order (docs/scheduler.md "Lane state file"). */
const SAVE_STEPS: readonly FsOperation[] = ['mkdir', 'open', 'write', 'fsync', 'close', 'rename', 'syncDirectory'];
const ALL_OPS: readonly FsOperation[] = ['open', 'close', 'read', 'write', 'fsync', 'syncfs', 'fstat', 'lstat', 'rename', 'unlink', 'mkdir', 'readdir', 'syncDirectory'];

/**
 * A layer on which the process dies once `steps` operations have run: every later operation, the
 * save's own cleanup included, fails without taking effect, as nothing runs after a SIGKILL.
 */
function crashingAfter(steps: number): FaultInjectingFsLayer {
  const layer = new FaultInjectingFsLayer();
  layer.fail({ op: ALL_OPS, nth: steps + 1, times: Infinity });
  return layer;
}

/** The (input, branch) pairs a scheduler's ledger holds as settled, as `input:branch`. */
function settledPairs(s: Scheduler): string[] {
  const { ledger } = s.toJSON(0) as { ledger: { seeds: string[]; pairs: [number, string, number, number][] } };
  return ledger.pairs.filter((p) => p[2] === 0).map((p) => `${ledger.seeds[p[0]]}:${p[1]}`);
}

describe('lane state and shared answers after a crash at any step of a save', () => {
  const INPUT = sha(0xa11ce);
  const T0 = 1_000_000;

  /** A scheduler of one coordinator's life: the frontier lane over INPUT, claims through the shared table. */
  function lifeOf(shared: SharedTargetClaims): Scheduler {
    const s = new Scheduler({ local: new MapLocalReservations(), shared, options: { lanes: 'frontier', frontierTargets: 1, cooldownMs: 1000 } });
    s.addSeed(INPUT, { bytes: 4, sha256: INPUT, path: '/q/input' }, 0);
    return s;
  }

  it.each(['files', 'sqlite'])(
    'on the %s store, leaves one whole save on disk and a restored scheduler never asks again what the table records as answered',
    async (store) => {
      const table = await openTarget(path.join(dir, 'leases'), { store, leaseTtlMs: 60_000 });
      const service = await IoService.start({ coordinatorId: 'a', target: table, targetLeaseTtlMs: 60_000 }, T0);
      try {
        const client = new LocalIoClient(service);
        const claims = new IoSharedTargetClaims(client);
        const leases = new IoTargetLeases(client);

        // First life: a trace leaves two branches of INPUT open, and the lane state is saved.
        const first = lifeOf(claims);
        first.observe({ seed: INPUT, telemetry: tel({ open: [456, 789] }), reward: 0 }, T0);
        const base = path.join(dir, 'base', SCHEDULER_STATE_FILE);
        await first.saveState(base, T0);
        const previous = await readFile(base, 'utf8');
        // A directed run answers one of them; its release writes the answer into the table.
        const [job] = await first.admit(1, T0 + 10);
        expect(job?.group).toHaveLength(1);
        const answered = job!.group[0]!;
        const open = answered === 456n ? 789n : 456n;
        first.observe({ seed: INPUT, job: job!.job, telemetry: tel({ target: Number(answered), reached: true, status: 'sat' }), reward: 1 }, T0 + 20);
        first.release(job!);
        expect(await leases.releaseGroup(job!.group, job!.targetToken!, T0 + 20, { input: INPUT, settled: [answered] })).toBe(true);
        const next = JSON.stringify(first.toJSON(T0 + 30));
        expect(settledPairs(first)).toEqual([`${INPUT}:${answered}`]);

        // The next save, crashed after each of its steps in turn (the last count is the clean save).
        for (let steps = 0; steps <= SAVE_STEPS.length; steps += 1) {
          const file = path.join(dir, `crash-${steps}`, SCHEDULER_STATE_FILE);
          await mkdir(path.dirname(file));
          await writeFile(file, previous);
          const layer = crashingAfter(steps);
          const saved = await first.saveState(file, T0 + 30, layer).then(
            () => true,
            () => false,
          );
          expect(saved, `save after ${steps} steps`).toBe(steps === SAVE_STEPS.length);
          const ran = layer.calls.slice(0, steps);
          expect(ran.map((c) => c.op)).toEqual(SAVE_STEPS.slice(0, steps));
          if (steps === SAVE_STEPS.length) {
            // The durability order: temp content synced before its rename, the directory after it.
            const temp = ran[1]!.path;
            expect(path.dirname(temp)).toBe(path.dirname(file));
            expect(ran.slice(1, 5).every((c) => c.path === temp)).toBe(true);
            expect(ran.slice(5).map((c) => c.path)).toEqual([file, path.dirname(file)]);
          }

          // On disk: the previous save before the rename, the new one from it on, each whole.
          const renamed = steps > SAVE_STEPS.indexOf('rename');
          const onDisk = await readFile(file, 'utf8');
          expect(onDisk, `file after ${steps} steps`).toBe(renamed ? next : previous);
          // A crash between create and rename leaves its hidden temp (nothing ran to remove it).
          const others = (await readdir(path.dirname(file))).filter((f) => f !== SCHEDULER_STATE_FILE);
          const tempLeft = steps > SAVE_STEPS.indexOf('open') && !renamed;
          expect(others).toHaveLength(tempLeft ? 1 : 0);
          for (const name of others) expect(name).toMatch(/^\.scheduler-state\.json\..+\.tmp$/);

          // Second life (a new clock): lanes and ledger are the ones of that save, together.
          const restarted = lifeOf(claims);
          expect(await restarted.loadState(file, 0)).toBe(true);
          expect(JSON.stringify(restarted.toJSON(0))).toBe(onDisk);
          expect(settledPairs(restarted)).toEqual(renamed ? [`${INPUT}:${answered}`] : []);
          // A save older than the answer proposes the answered branch again: the table refuses the
          // claim `answered` and the ledger settles the pair. Only the open branch runs.
          const jobs = await restarted.admit(2, 0);
          expect(jobs.map((j) => j.group)).toEqual([[open]]);
          expect(restarted.admissionStats().sharedAnswered).toBe(renamed ? 0 : 1);
          expect(settledPairs(restarted)).toEqual([`${INPUT}:${answered}`]);
          restarted.release(jobs[0]!);
          expect(await leases.releaseGroup(jobs[0]!.group, jobs[0]!.targetToken!, 1)).toBe(true);
          // Later rounds never claim it again: the ledger drops it before the table is asked.
          for (const now of [60_000, 3_600_000]) {
            expect((await restarted.admit(2, now)).flatMap((j) => j.group)).not.toContain(answered);
            expect(restarted.admissionStats().sharedAnswered).toBe(renamed ? 0 : 1);
          }
        }
      } finally {
        await service.close();
      }
    },
  );
});
