import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/scheduler/scheduler.js';
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
