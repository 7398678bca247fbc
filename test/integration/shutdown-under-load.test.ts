/**
 * A shutdown during an output flood: an aborted run's directory is moved into the pool's trash
 * with one rename, so the run settles without unlinking the flood; close() removes the scratch
 * directory within its budget and the next pool's sweep removes the rest (docs/solver.md,
 * "Where a run's directory goes"). Handshakes only: the flooding solver publishes its pid once its
 * files exist.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultScratchParent, SolverPool } from '../../src/solver/solver-pool.js';
import { PACKAGE_ROOT } from '../../src/util/paths.js';
import { isAlive, waitForFile } from '../helpers/processes.js';

const FLOOD_FILES = 20_000;
const flooder = { binary: path.join(PACKAGE_ROOT, 'test', 'fixtures', 'flooding-solver.sh'), argv: [] };

let scratchParent: string;
beforeAll(() => {
  scratchParent = mkdtempSync(path.join(defaultScratchParent(), 'symfence-shutdown-'));
});
afterAll(() => {
  rmSync(scratchParent, { recursive: true, force: true });
});

/** The pools' scratch directories under the test's parent (open and closed). */
function scratchRoots(parent = scratchParent): string[] {
  return readdirSync(parent).filter((n) => n.startsWith('symfence-solver-'));
}

/** Entries below `dir` (files and directories, `dir` itself not counted). */
function countEntries(dir: string): number {
  return readdirSync(dir, { recursive: true }).length;
}

/** The flood files of the runs in `root`'s trash, per trashed run directory. */
function trashedFloods(root: string): number[] {
  const trash = path.join(root, 'trash');
  if (!existsSync(trash)) return [];
  return readdirSync(trash).map((run) => {
    const output = path.join(trash, run, 'output');
    return existsSync(output) ? readdirSync(output).length : 0;
  });
}

function floodTask(pidFile: string): Parameters<SolverPool['run']>[0] {
  return { input: { bytes: new Uint8Array([1]) }, command: flooder, env: { SYMFENCE_TEST_FILES: String(FLOOD_FILES), SYMFENCE_TEST_PIDFILE: pidFile } };
}

describe('shutdown during an output flood', () => {
  it('an aborted run settles with its flood moved into the trash, not unlinked', async () => {
    const parent = mkdtempSync(path.join(scratchParent, 'abort-'));
    const pidFile = path.join(parent, 'flood.pid');
    const pool = new SolverPool({ scratchParent: parent, solver: { workers: 1, timeoutMs: 120_000, killGraceMs: 100 } });
    const controller = new AbortController();
    try {
      const running = pool.run(floodTask(pidFile), { signal: controller.signal });
      const pid = Number((await waitForFile(pidFile, 60_000)).trim());
      controller.abort();
      await expect(running).rejects.toMatchObject({ code: 'ERR_ABORTED', details: { outputEntriesRead: 0 } });
      // Settled: the solver is gone, and every file of its flood is still there, in the trash.
      expect(isAlive(pid)).toBe(false);
      const [root] = scratchRoots(parent);
      expect(trashedFloods(path.join(parent, root!))).toEqual([FLOOD_FILES]);
      // Nothing is left at the slot's own path.
      for (const slot of readdirSync(path.join(parent, root!)).filter((n) => n.startsWith('slot-'))) {
        expect(readdirSync(path.join(parent, root!, slot)).filter((n) => n.startsWith('run-'))).toEqual([]);
      }
    } finally {
      await pool.close();
    }
  });

  it('close() during a flood aborts the run without waiting for its unlinks and removes no more than its entry budget', async () => {
    const parent = mkdtempSync(path.join(scratchParent, 'close-'));
    const pidFile = path.join(parent, 'flood.pid');
    const pool = new SolverPool({ scratchParent: parent, solver: { closeRemovalEntries: 0, closeRemovalMs: 600_000, workers: 1, timeoutMs: 120_000, killGraceMs: 100 } });
    const running = pool.run(floodTask(pidFile));
    const pid = Number((await waitForFile(pidFile, 60_000)).trim());
    const rejected = expect(running).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    await pool.close();
    await rejected;
    expect(isAlive(pid)).toBe(false);
    // A budget of zero entries: the whole flood is left, under the closed name.
    const roots = scratchRoots(parent);
    expect(roots).toHaveLength(1);
    expect(roots[0]!.endsWith('.closed')).toBe(true);
    expect(trashedFloods(path.join(parent, roots[0]!))).toEqual([FLOOD_FILES]);
  });

  it('close() removes exactly its entry budget and the next pool sweeps the rest', async () => {
    const parent = mkdtempSync(path.join(scratchParent, 'budget-'));
    const pidFile = path.join(parent, 'flood.pid');
    const BUDGET = 1_000;
    const pool = new SolverPool({ scratchParent: parent, solver: { closeRemovalEntries: BUDGET, closeRemovalMs: 600_000, workers: 1, timeoutMs: 120_000, killGraceMs: 100 } });
    const controller = new AbortController();
    const running = pool.run(floodTask(pidFile), { signal: controller.signal });
    await waitForFile(pidFile, 60_000);
    controller.abort();
    await expect(running).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    const [open] = scratchRoots(parent);
    const before = countEntries(path.join(parent, open!));
    expect(before).toBeGreaterThan(FLOOD_FILES);
    await pool.close();
    const [closed] = scratchRoots(parent);
    expect(closed).toBe(`${open}.closed`);
    expect(countEntries(path.join(parent, closed!))).toBe(before - BUDGET);

    // The next pool (same process, so its owner is alive) sweeps the closed directory at start.
    const next = new SolverPool({ scratchParent: parent, solver: { workers: 1 } });
    try {
      const roots = scratchRoots(parent);
      expect(roots).toHaveLength(1);
      expect(roots[0]!.endsWith('.closed')).toBe(false);
      await next.run({ input: { bytes: new Uint8Array([1]) }, command: flooder, env: { SYMFENCE_TEST_FILES: '10' } });
    } finally {
      await next.close();
    }
    // A small scratch directory fits the default budget: nothing is left at all.
    expect(scratchRoots(parent)).toEqual([]);
  });

  it('refuses a bad close-removal budget naming the option, before any scratch directory is made', () => {
    const parent = mkdtempSync(path.join(scratchParent, 'refused-'));
    expect(() => new SolverPool({ scratchParent: parent, solver: { closeRemovalEntries: -1 } })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', details: expect.objectContaining({ option: 'closeRemovalEntries' }) }),
    );
    expect(() => new SolverPool({ scratchParent: parent, solver: { closeRemovalMs: 'soon' } })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', details: expect.objectContaining({ option: 'closeRemovalMs' }) }),
    );
    expect(scratchRoots(parent)).toEqual([]);
  });
});
