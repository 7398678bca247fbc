// The solver pool frees a run's slot when its solver exits, before coverage triage: the next run
// on a one-slot pool starts and finishes while the first run's triage is held by a handshake.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SolverPool } from '../../src/solver/solver-pool.js';
import { PACKAGE_ROOT } from '../../src/util/paths.js';
import { SPAWN_METHODS } from '../helpers/spawn-methods.js';

const fixture = (name: string): string => path.join(PACKAGE_ROOT, 'test', 'fixtures', name);
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe.each(['worker', 'main'] as const)('slot release before triage (spawnThread %s)', (spawnThread) => {
  it('reports the slot free before triage, runs the next task meanwhile, then triages and claims coverage', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-slot-'));
    dirs.push(dir);
    const gate = path.join(dir, 'gate');
    const pool = new SolverPool({ solver: { workers: 1, spawnThread, spawnMethod: SPAWN_METHODS[0] }, scratchParent: dir });
    try {
      const order: string[] = [];
      const triage = { showmap: { binary: '/bin/sh', argv: [fixture('gated-showmap.sh'), gate] }, target: { binary: '/bin/true', argv: ['@@'] } };
      const command = { binary: '/bin/sh', argv: [fixture('echo-solver.sh'), '@@'] };
      let secondStarted: Promise<unknown> | undefined;
      const first = pool.run(
        { input: { bytes: new TextEncoder().encode('first') }, command, triage },
        {
          onSolverExit: () => {
            order.push('first: slot free');
            // The only slot is free: this run gets it while the first run is still in triage.
            secondStarted = pool.run({ input: { bytes: new TextEncoder().encode('second') }, command }).then((r) => {
              order.push(`second: ${r.status}`);
              writeFileSync(gate, ''); // now let the first run's triage finish
              return r;
            });
          },
        },
      );
      const result = await first;
      order.push('first: triaged');
      await secondStarted;
      expect(order).toEqual(['first: slot free', 'second: ok', 'first: triaged']);
      expect(result.status).toBe('ok');
      expect(result.generated.map((g) => g.showmap)).toEqual(['ok', 'ok']);
      expect(result.generated.filter((g) => (g.novelty?.newBits ?? 0) > 0)).toHaveLength(1); // one edge, claimed once
      expect(result.timing).toMatchObject({ spawnMs: expect.any(Number), solverMs: expect.any(Number), collectMs: expect.any(Number) });
      expect(result.timing!.triageMs).toBeGreaterThan(0);
    } finally {
      await pool.close();
    }
  });
  it('stops triage of a run aborted after its slot was freed, and rejects it as ERR_ABORTED', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-slot-'));
    dirs.push(dir);
    const gate = path.join(dir, 'gate');
    const pool = new SolverPool({ solver: { workers: 1, spawnThread, spawnMethod: SPAWN_METHODS[0] }, scratchParent: dir });
    try {
      const controller = new AbortController();
      const triage = { showmap: { binary: '/bin/sh', argv: [fixture('gated-showmap.sh'), gate] }, target: { binary: '/bin/true', argv: ['@@'] } };
      const run = pool.run(
        { input: { bytes: new TextEncoder().encode('x') }, command: { binary: '/bin/sh', argv: [fixture('echo-solver.sh'), '@@'] }, triage },
        {
          signal: controller.signal,
          onSolverExit: () => {
            controller.abort(); // the slot's abort cell is finished: only the signal can stop triage now
            writeFileSync(gate, '');
          },
        },
      );
      await expect(run).rejects.toMatchObject({ code: 'ERR_ABORTED' });
      expect(pool.bitmap.edgesCovered()).toBe(0); // no output was triaged into the shared map
    } finally {
      await pool.close();
    }
  });
});

describe('triage apart from the run scratch (triageParent)', () => {
  it('triages under its own pool-owned directory, sweeps dead owners there at start, and removes both directories at close', async () => {
    const runs = mkdtempSync(path.join(os.tmpdir(), 'symfence-runs-'));
    const triageParent = mkdtempSync(path.join(os.tmpdir(), 'symfence-triage-'));
    dirs.push(runs, triageParent);
    // A closed pool's leftover under the triage parent: swept by the next pool there.
    const leftover = path.join(triageParent, `symfence-solver-${process.pid}-1-abcdef.closed`);
    mkdirSync(path.join(leftover, 'triage-0'), { recursive: true });
    const gate = path.join(runs, 'gate');
    writeFileSync(gate, '');
    const pool = new SolverPool({ solver: { workers: 1, spawnMethod: SPAWN_METHODS[0] }, scratchParent: runs, triageParent });
    try {
      expect(existsSync(leftover)).toBe(false);
      const triage = { showmap: { binary: '/bin/sh', argv: [fixture('gated-showmap.sh'), gate] }, target: { binary: '/bin/true', argv: ['@@'] } };
      const result = await pool.run({ input: { bytes: new TextEncoder().encode('x') }, command: { binary: '/bin/sh', argv: [fixture('echo-solver.sh'), '@@'] }, triage });
      expect(result.generated.map((g) => g.showmap)).toEqual(['ok', 'ok']);
      const [triageRoot, ...others] = readdirSync(triageParent);
      expect(others).toEqual([]);
      expect(triageRoot).toMatch(/^symfence-solver-/);
      expect(readdirSync(path.join(triageParent, triageRoot!))).toEqual(['triage-0']);
      const [runRoot] = readdirSync(runs).filter((name) => name.startsWith('symfence-solver-'));
      expect(readdirSync(path.join(runs, runRoot!)).filter((name) => name.startsWith('triage-'))).toEqual([]);
    } finally {
      await pool.close();
    }
    expect(readdirSync(triageParent)).toEqual([]);
    expect(readdirSync(runs).filter((name) => name.startsWith('symfence-solver-'))).toEqual([]);
  });
});
