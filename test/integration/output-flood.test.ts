import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultScratchParent, SolverPool } from '../../src/solver/solver-pool.js';
import { SLICE_ENTRIES, threadTrash } from '../../src/solver/trash-removal.js';
import { PACKAGE_ROOT } from '../../src/util/paths.js';
import { waitForFile } from '../helpers/processes.js';

const FLOOD_FILES = 200_000;
const CAP = 1_000;
const flooder = { binary: path.join(PACKAGE_ROOT, 'test', 'fixtures', 'flooding-solver.sh'), argv: [] };

let scratchParent: string;
beforeAll(() => {
  // tmpfs when available: 200k empty files are written in about a second there.
  scratchParent = mkdtempSync(path.join(defaultScratchParent(), 'symfence-flood-'));
});
afterAll(() => {
  rmSync(scratchParent, { recursive: true, force: true });
});

/** Run directories left in a pool's scratch tree: at a slot's path (worker-*\/run-*) or in its trash. */
function runDirsLeft(): string[] {
  const left: string[] = [];
  for (const root of readdirSync(scratchParent).filter((n) => n.startsWith('symfence-solver-'))) {
    for (const slot of readdirSync(path.join(scratchParent, root)).filter((n) => n.startsWith('slot-'))) {
      left.push(...readdirSync(path.join(scratchParent, root, slot)).filter((n) => n.startsWith('run-')));
    }
    if (existsSync(path.join(scratchParent, root, 'trash'))) left.push(...readdirSync(path.join(scratchParent, root, 'trash')).map((n) => `trash/${n}`));
  }
  return left;
}

/** Turns of the event loop (setImmediate) until `done` settles. */
async function loopTurnsUntil(done: Promise<void>): Promise<number> {
  let settled = false;
  void done.then(() => (settled = true));
  let turns = 0;
  while (!settled) {
    await new Promise<void>((resolve) => setImmediate(resolve));
    turns += 1;
  }
  return turns;
}

describe('a solver that floods its output directory', () => {
  it.each([{ spawnThread: 'worker' as const }, { spawnThread: 'main' as const }])(
    'is refused at the count cap after reading at most cap + 1 entries, with memory bounded, and its run directory removed ($spawnThread)',
    async ({ spawnThread }) => {
    const pool = new SolverPool({ scratchParent, solver: { workers: 1, maxOutputFiles: CAP, timeoutMs: 120_000, spawnThread } });
    try {
      // Warm-up: the worker thread, its heap and the spawn path are up before the baseline.
      await pool.run({ input: { bytes: new Uint8Array([1]) }, command: flooder, env: { SYMFENCE_TEST_FILES: '10' } });
      const peakBeforeKb = process.resourceUsage().maxRSS;
      const result = await pool.run({ input: { bytes: new Uint8Array([1]) }, command: flooder, env: { SYMFENCE_TEST_FILES: String(FLOOD_FILES) } });
      // Growth of the process's peak RSS over the flood run (ru_maxrss, KiB).
      const peakGrowthKb = process.resourceUsage().maxRSS - peakBeforeKb;
      expect(result.status).toBe('error');
      expect(result.error?.code).toBe('ERR_SOLVER_OUTPUT_BUDGET');
      expect(result.error?.details).toMatchObject({ resource: 'files', limit: CAP, observed: CAP + 1, entriesRead: CAP + 1 });
      expect(result.outputEntriesRead).toBe(CAP + 1);
      // A regression guard: listing, refusal and removal hold a bounded amount, whatever the flood.
      expect(peakGrowthKb).toBeLessThan(32 * 1024);
      if (spawnThread === 'main') {
        // The flood is removed in slices on this thread's event loop, which serves everything else
        // between them: the result came back after the first slice, and the loop turned many
        // times before the trash was empty.
        expect(threadTrash.pending).toBe(1);
        expect(await loopTurnsUntil(threadTrash.idle())).toBeGreaterThanOrEqual(Math.floor(FLOOD_FILES / SLICE_ENTRIES) - 1);
        expect(runDirsLeft()).toEqual([]);
      } else {
        // The slices run on the solver thread, which tells no one when they end: bounded polling.
        await expect.poll(runDirsLeft, { timeout: 60_000, interval: 50 }).toEqual([]);
      }
    } finally {
      await pool.close();
    }
  },
  );

  it('is not collected at all once the run is aborted: no entry is read, the run directory is moved into the trash and close() removes it', async () => {
    const pidFile = path.join(scratchParent, 'flood-abort.pid');
    const pool = new SolverPool({ scratchParent, solver: { workers: 1, maxOutputFiles: CAP, timeoutMs: 120_000, killGraceMs: 100 } });
    const controller = new AbortController();
    try {
      const running = pool.run(
        { input: { bytes: new Uint8Array([1]) }, command: flooder, env: { SYMFENCE_TEST_FILES: String(FLOOD_FILES), SYMFENCE_TEST_PIDFILE: pidFile } },
        { signal: controller.signal },
      );
      // The flood is complete once the solver published its pid.
      await waitForFile(pidFile, 60_000);
      controller.abort();
      await expect(running).rejects.toMatchObject({ code: 'ERR_ABORTED', details: { outputEntriesRead: 0 } });
      // Settling did not wait for the flood's unlinks: the whole run directory sits in the trash.
      expect(runDirsLeft()).toEqual([expect.stringMatching(/^trash\/slot-\d+-run-\d+-\d+-\d+$/)]);
    } finally {
      await pool.close();
    }
    // Within close()'s default budget of 20,000 entries the rest of the flood is left for the next pool.
    const next = new SolverPool({ scratchParent, solver: { workers: 1 } });
    expect(runDirsLeft()).toEqual([]);
    await next.close();
    expect(readdirSync(scratchParent).filter((n) => n.startsWith('symfence-solver-'))).toEqual([]);
  });
});
