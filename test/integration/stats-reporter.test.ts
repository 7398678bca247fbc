// The stats reporter writes stats.json off the main thread, one write at a time, always ending on
// the newest snapshot; close() writes the `stopped` snapshot and waits for it.
import fs, { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createCounters } from '../../src/telemetry/counters.js';
import { readStatsFile } from '../../src/telemetry/stats-file.js';
import { StatsReporter } from '../../src/telemetry/stats-reporter.js';

const dirs: string[] = [];
afterEach(() => {
  vi.restoreAllMocks();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function reporterIn(dir: string, clock: { nowMs: number }, onWriteError?: (error: unknown) => void): StatsReporter {
  return new StatsReporter(
    { dir, coordinatorId: 'c1', name: 'solo', workers: 2, statsIntervalMs: 1000, startedMs: 0, ...(onWriteError ? { onWriteError } : {}) },
    { now: () => clock.nowMs },
    createCounters(),
  );
}

describe('StatsReporter', () => {
  it('coalesces samples taken while a write is under way and ends on the newest', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-stats-'));
    dirs.push(dir);
    const renames = vi.spyOn(fs.promises, 'rename');
    const clock = { nowMs: 1000 };
    const reporter = reporterIn(dir, clock);
    for (let i = 0; i < 50; i++) {
      clock.nowMs += 1000;
      expect(reporter.sample().updatedMs).toBe(clock.nowMs);
    }
    await reporter.flushed();
    // The first sample's write, then only the newest of the 49 taken behind it.
    expect(renames).toHaveBeenCalledTimes(2);
    expect(readStatsFile(path.join(dir, 'stats.json'))).toMatchObject({ state: 'running', updatedMs: 51_000 });
    clock.nowMs += 1000;
    const last = await reporter.close();
    expect(last.state).toBe('stopped');
    expect(readStatsFile(path.join(dir, 'stats.json'))).toMatchObject({ state: 'stopped', updatedMs: 52_000 });
    expect(readdirSync(dir).sort()).toEqual(['plot_data.csv', 'stats.json']);
  });

  it('reports a failed write while running, tries again at the next sample, and rejects close() when the last write fails', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-stats-'));
    dirs.push(dir);
    const errors: unknown[] = [];
    const clock = { nowMs: 1000 };
    const reporter = reporterIn(dir, clock, (error) => errors.push(error));
    const rename = fs.promises.rename;
    let failing = true;
    vi.spyOn(fs.promises, 'rename').mockImplementation(async (from, to) => {
      if (failing) throw Object.assign(new Error('disk full'), { code: 'ENOSPC' });
      return rename(from, to);
    });
    reporter.sample();
    await reporter.flushed();
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: 'ENOSPC' });
    expect(readdirSync(dir)).toEqual(['plot_data.csv']); // the temp was removed, no stats.json
    failing = false;
    clock.nowMs = 2000;
    reporter.sample();
    await reporter.flushed();
    expect(readStatsFile(path.join(dir, 'stats.json'))).toMatchObject({ updatedMs: 2000 });
    failing = true;
    await expect(reporter.close()).rejects.toMatchObject({ code: 'ENOSPC' });
    expect(errors).toHaveLength(1); // the last snapshot's failure is close()'s, not the sampler's
    expect(readStatsFile(path.join(dir, 'stats.json'))).toMatchObject({ state: 'running', updatedMs: 2000 });
  });
});
