// Staged runs (docs/solver.md "Staged runs"): a run given to a busy slot is prepared there at once
// and its solver starts only when the slot's running process exits — one process per slot, in
// order; an abort while staged means its solver never starts. Handshakes, no sleeps: the running
// solver waits for a gate file the test writes; the staged run's prepared input is watched for.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SolverPool } from '../../src/solver/solver-pool.js';
import { PACKAGE_ROOT } from '../../src/util/paths.js';
import { waitFor } from '../helpers/cli-process.js';
import { SPAWN_METHODS } from '../helpers/spawn-methods.js';

const SOLVER = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'staging-solver.sh');
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function logLines(log: string): string[] {
  return existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').filter((l) => l !== '') : [];
}

/** True once some run directory under `root` holds an input copy with `text` (the run was prepared). */
function prepared(root: string, text: string): boolean {
  return (readdirSync(root, { recursive: true }) as string[]).some((p) => {
    if (path.basename(p) !== 'input') return false;
    try {
      return readFileSync(path.join(root, p), 'utf8') === text;
    } catch {
      return false; // a run directory removed meanwhile
    }
  });
}

describe.each(['worker', 'main'] as const)('staged runs (spawnThread %s)', (spawnThread) => {
  function setup() {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-staged-'));
    dirs.push(dir);
    const log = path.join(dir, 'log');
    const gate = path.join(dir, 'gate');
    const pool = new SolverPool({ solver: { workers: 2, spawnThread, spawnMethod: SPAWN_METHODS[0] }, scratchParent: dir });
    const task = (name: string, held: boolean) => ({
      input: { bytes: new TextEncoder().encode(`input-${name}`) },
      // `@@`: file mode, so the prepared run directory shows an `input` copy.
      command: { binary: '/bin/sh', argv: [SOLVER, log, name, held ? gate : '', '@@'] },
    });
    return { dir, log, gate, pool, task };
  }

  it('prepares a run given to a busy slot at once and starts its solver when the slot\'s process exits, one process per slot', async () => {
    const t = setup();
    try {
      const a = t.pool.run(t.task('a', true), { slot: 1 });
      await waitFor(() => (logLines(t.log).includes('start a') ? true : undefined), 30_000, 'run a to start');
      const b = t.pool.run(t.task('b', false), { slot: 1 });
      // b's directory and input exist while a still runs; b's solver has not started.
      await waitFor(() => (prepared(t.dir, 'input-b') ? true : undefined), 30_000, 'run b to be prepared');
      expect(logLines(t.log)).toEqual(['start a']);
      writeFileSync(t.gate, '');
      const [ra, rb] = await Promise.all([a, b]);
      expect(logLines(t.log)).toEqual(['start a', 'end a', 'start b', 'end b']);
      expect([ra.status, rb.status]).toEqual(['ok', 'ok']);
      // The slot's own measure of its idle time: b has one (a's exit came before it), a, the slot's first run, none.
      expect(ra.timing?.idleMs).toBeUndefined();
      expect(rb.timing?.idleMs).toEqual(expect.any(Number));
    } finally {
      await t.pool.close();
    }
  });

  it('leaves another slot free: a run given to it starts while the busy slot\'s process still runs', async () => {
    const t = setup();
    try {
      const a = t.pool.run(t.task('a', true), { slot: 0 });
      await waitFor(() => (logLines(t.log).includes('start a') ? true : undefined), 30_000, 'run a to start');
      const c = await t.pool.run(t.task('c', false), { slot: 1 });
      expect(c.status).toBe('ok');
      expect(logLines(t.log)).toEqual(['start a', 'start c', 'end c']);
      writeFileSync(t.gate, '');
      expect((await a).status).toBe('ok');
    } finally {
      await t.pool.close();
    }
  });

  it('never starts a staged run that is aborted while it waits; the slot\'s next run starts after the running one', async () => {
    const t = setup();
    try {
      const a = t.pool.run(t.task('a', true), { slot: 0 });
      await waitFor(() => (logLines(t.log).includes('start a') ? true : undefined), 30_000, 'run a to start');
      const controller = new AbortController();
      const b = t.pool.run(t.task('b', false), { slot: 0, signal: controller.signal });
      await waitFor(() => (prepared(t.dir, 'input-b') ? true : undefined), 30_000, 'run b to be prepared');
      controller.abort();
      await expect(b).rejects.toMatchObject({ code: 'ERR_ABORTED' });
      const c = t.pool.run(t.task('c', false), { slot: 0 });
      writeFileSync(t.gate, '');
      expect((await a).status).toBe('ok');
      expect((await c).status).toBe('ok');
      expect(logLines(t.log)).toEqual(['start a', 'end a', 'start c', 'end c']);
      expect(t.pool.counters.aborted).toBe(1);
    } finally {
      await t.pool.close();
    }
  });

  it('refuses a slot outside the pool with ERR_INVALID_OPTION naming the option', async () => {
    const t = setup();
    try {
      await expect(t.pool.run(t.task('x', false), { slot: 2 })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION', message: expect.stringContaining('runOptions.slot') });
      expect(logLines(t.log)).toEqual([]);
    } finally {
      await t.pool.close();
    }
  });
});
