/**
 * Solver threads shared by slots (docs/solver.md "Solver threads"): the pool starts
 * ceil(workers / slotsPerThread) threads, and the slots one thread serves run their processes side
 * by side, each with its own directory and pruning map, one process per slot at a time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SolverPool } from '../../src/solver/solver-pool.js';
import { PACKAGE_ROOT } from '../../src/util/paths.js';

const rendezvous = { binary: '/bin/sh', argv: [path.join(PACKAGE_ROOT, 'test', 'fixtures', 'rendezvous-solver.sh')] };
const text = (bytes: Uint8Array | undefined): string => Buffer.from(bytes ?? []).toString('utf8');

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'symfence-solver-threads-'));
});
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

describe('solver threads', () => {
  it.each([
    { workers: 3, slotsPerThread: 2, threads: 2 },
    { workers: 3, slotsPerThread: 1, threads: 3 },
    { workers: 2, slotsPerThread: 4, threads: 1 },
    { workers: 8, slotsPerThread: 4, threads: 2 },
  ])('$workers slots, $slotsPerThread per thread: $threads threads', async ({ workers, slotsPerThread, threads }) => {
    const pool = new SolverPool({ solver: { workers, slotsPerThread, spawnThread: 'worker' }, scratchParent: tmp });
    try {
      expect(pool.spawnThread).toBe('worker');
      expect(pool.threads).toBe(threads);
    } finally {
      await pool.close();
    }
  });

  it('starts no thread with spawnThread main', async () => {
    const pool = new SolverPool({ solver: { workers: 3, spawnThread: 'main' }, scratchParent: tmp });
    try {
      expect(pool.spawnThread).toBe('main');
      expect(pool.threads).toBe(0);
    } finally {
      await pool.close();
    }
  });

  it.each([
    { workers: 1, spawnThread: 'main', threads: 0 },
    { workers: 2, spawnThread: 'main', threads: 0 },
    { workers: 3, spawnThread: 'worker', threads: 1 },
    { workers: 9, spawnThread: 'worker', threads: 3 },
  ])('spawnThread auto (the default) with $workers workers serves them on the $spawnThread thread: $threads solver threads', async ({ workers, spawnThread, threads }) => {
    const pool = new SolverPool({ solver: { workers }, scratchParent: tmp });
    try {
      expect(pool.options.spawnThread).toBe('auto');
      expect(pool.spawnThread).toBe(spawnThread);
      expect(pool.threads).toBe(threads);
    } finally {
      await pool.close();
    }
  });

  it('refuses a slotsPerThread that is not a positive integer, naming it', () => {
    for (const value of [0, 1.5, -1, 'two']) {
      expect(() => new SolverPool({ solver: { slotsPerThread: value as number }, scratchParent: tmp })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_OPTION', details: expect.objectContaining({ option: 'slotsPerThread' }) }),
      );
    }
  });

  // Each run waits for the other to have started: served one after the other, the first would wait
  // out its bound alone.
  it.each([{ spawnThread: 'worker' as const }, { spawnThread: 'main' as const }])(
    'two slots of one thread ($spawnThread) run their solvers at the same time, each with its own pruning map',
    async ({ spawnThread }) => {
      const dir = mkdtempSync(path.join(tmp, `meet-${spawnThread}-`));
      const pool = new SolverPool({ solver: { workers: 2, slotsPerThread: 2, spawnThread }, scratchParent: tmp });
      try {
        const run = (slot: number, me: string, other: string) =>
          pool.run({ input: { bytes: new Uint8Array([slot]) }, command: rendezvous, env: { SYMFENCE_TEST_DIR: dir, SYMFENCE_TEST_ME: me, SYMFENCE_TEST_OTHER: other } }, { slot });
        const [a, b] = await Promise.all([run(0, 'a', 'b'), run(1, 'b', 'a')]);
        expect([a.status, b.status]).toEqual(['ok', 'ok']);
        expect([text(a.generated[0]?.bytes), text(b.generated[0]?.bytes)]).toEqual(['met\n', 'met\n']);
        const maps = [text(a.generated[1]?.bytes), text(b.generated[1]?.bytes)];
        expect(maps[0]).toMatch(/\/slot-0\/pruning-map$/);
        expect(maps[1]).toMatch(/\/slot-1\/pruning-map$/);
      } finally {
        await pool.close();
      }
    },
  );

  it.each([{ spawnThread: 'worker' as const }, { spawnThread: 'main' as const }])('runs one process per slot at a time when its thread ($spawnThread) serves another slot too', async ({ spawnThread }) => {
    const dir = mkdtempSync(path.join(tmp, `one-per-slot-${spawnThread}-`));
    const pool = new SolverPool({ solver: { workers: 2, slotsPerThread: 2, spawnThread }, scratchParent: tmp });
    try {
      // Both runs are in slot 0: the second starts only after the first exits, so the first waits
      // out its (short) bound alone and the second finds the first's mark at once. Run side by
      // side, the first would find the second's.
      const run = (me: string, other: string) =>
        pool.run(
          { input: { bytes: new Uint8Array([1]) }, command: rendezvous, env: { SYMFENCE_TEST_DIR: dir, SYMFENCE_TEST_ME: me, SYMFENCE_TEST_OTHER: other, SYMFENCE_TEST_WAIT_STEPS: '50' } },
          { slot: 0 },
        );
      const [first, second] = await Promise.all([run('first', 'second'), run('second', 'first')]);
      expect(text(first.generated[0]?.bytes)).toBe('alone\n');
      expect(text(second.generated[0]?.bytes)).toBe('met\n');
    } finally {
      await pool.close();
    }
  });
});
