import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LaneStateError } from '../../src/errors.js';
import { LaneStateKeeper } from '../../src/scheduler/lane-state-keeper.js';
import type { Scheduler } from '../../src/scheduler/scheduler.js';
import { silentLogger } from '../../src/telemetry/logger.js';

const dirs: string[] = [];
afterEach(() => {
  vi.useRealTimers();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function fakeScheduler(load: () => Promise<boolean> = async () => false) {
  const saves: number[] = [];
  const scheduler = {
    saveState: async (_file: string, now: number) => {
      saves.push(now);
    },
    loadState: load,
  } as unknown as Scheduler;
  return { scheduler, saves };
}

describe('lane state keeper', () => {
  it('saves on every interval and once more at close, then never again', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    let now = 0;
    const { scheduler, saves } = fakeScheduler();
    const keeper = new LaneStateKeeper({ scheduler, file: '/unused', intervalMs: 1000, now: () => now, logger: silentLogger() });
    keeper.start();
    now = 1000;
    await vi.advanceTimersByTimeAsync(1000);
    now = 2000;
    await vi.advanceTimersByTimeAsync(1000);
    now = 2500;
    await keeper.close();
    expect(saves).toEqual([1000, 2000, 2500]);
    vi.advanceTimersByTime(5000);
    await keeper.close();
    expect(saves).toEqual([1000, 2000, 2500]);
  });

  it('with interval 0 saves only at close', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const { scheduler, saves } = fakeScheduler();
    const keeper = new LaneStateKeeper({ scheduler, file: '/unused', intervalMs: 0, now: () => 7, logger: silentLogger() });
    keeper.start();
    vi.advanceTimersByTime(86_400_000);
    await keeper.close();
    expect(saves).toEqual([7]);
  });

  it('renames a state file the scheduler refuses to <file>.corrupt-<ms> and reports its code', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'symfence-keeper-'));
    dirs.push(dir);
    const file = path.join(dir, 'scheduler-state.json');
    writeFileSync(file, 'garbage');
    const { scheduler } = fakeScheduler(async () => {
      throw new LaneStateError('bad', { file });
    });
    const warnings: unknown[] = [];
    const logger = { ...silentLogger(), warn: (fields: unknown) => warnings.push(fields) } as never;
    const keeper = new LaneStateKeeper({ scheduler, file, intervalMs: 0, now: () => 1234, logger });
    expect(await keeper.load()).toEqual({ state: 'set-aside', movedTo: `${file}.corrupt-1234`, code: 'ERR_LANE_STATE' });
    expect(existsSync(file)).toBe(false);
    expect(readdirSync(dir)).toEqual(['scheduler-state.json.corrupt-1234']);
    expect(warnings).toEqual([expect.objectContaining({ file, code: 'ERR_LANE_STATE' })]);
  });

  it('removes, before loading, the temps of saves whose writer is gone, and keeps a live writer\'s and every other file', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'symfence-keeper-'));
    dirs.push(dir);
    const file = path.join(dir, 'scheduler-state.json');
    // Above the largest pid Linux hands out (2^22): no process has it.
    const gone = `.scheduler-state.json.${2 ** 22 + 17}.123456789.tmp`;
    const live = `.scheduler-state.json.${process.pid}.987654321.tmp`;
    const other = '.stats.json.4194321.1.tmp';
    for (const name of ['scheduler-state.json', gone, live, other]) writeFileSync(path.join(dir, name), '{}');
    const loads: string[] = [];
    const { scheduler } = fakeScheduler(async () => {
      loads.push(...readdirSync(dir).sort());
      return true;
    });
    const keeper = new LaneStateKeeper({ scheduler, file, intervalMs: 0, now: () => 1, logger: silentLogger() });
    expect(await keeper.load()).toEqual({ state: 'loaded' });
    expect(loads).toEqual([live, other, 'scheduler-state.json'].sort());
  });
});
