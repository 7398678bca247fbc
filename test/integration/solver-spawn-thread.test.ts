import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SolverPool } from '../../src/solver/solver-pool.js';
import { resolveSolverOptions } from '../../src/solver/solver-options.js';
import { PACKAGE_ROOT } from '../../src/util/paths.js';
import { isAlive, waitForExit, waitForFile } from '../helpers/processes.js';
import { SPAWN_METHODS } from '../helpers/spawn-methods.js';
import { nativeSpawnAvailable } from '../../src/solver/spawn-method.js';

const fixture = (name: string): string => path.join(PACKAGE_ROOT, 'test', 'fixtures', name);
const sh = (script: string) => ({ binary: '/bin/sh', argv: [fixture(script)] });
const text = (bytes: Uint8Array | undefined): string => Buffer.from(bytes ?? []).toString('utf8');

function envValue(bytes: Uint8Array | undefined, name: string): string | undefined {
  return text(bytes)
    .split('\n')
    .find((line) => line.startsWith(`${name}=`))
    ?.slice(name.length + 1);
}

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'symfence-spawn-thread-'));
});
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

const CASES = (['worker', 'main'] as const).flatMap((spawnThread) => SPAWN_METHODS.map((spawnMethod) => ({ spawnThread, spawnMethod })));

describe.each(CASES)('SolverPool with spawnThread $spawnThread, spawnMethod $spawnMethod', ({ spawnThread, spawnMethod }) => {
  let pool: SolverPool;
  let scratchParent: string;

  beforeAll(() => {
    scratchParent = mkdtempSync(path.join(tmp, `scratch-${spawnThread}-${spawnMethod}-`));
    pool = new SolverPool({ solver: { workers: 2, killGraceMs: 200, spawnThread, spawnMethod }, scratchParent });
  });
  afterAll(async () => {
    await pool.close();
  });

  it('runs the contract: input on stdin, a fresh empty output dir, outputs collected, run dir removed', async () => {
    const result = await pool.run({ input: { bytes: Buffer.from('hello') }, command: sh('echo-solver.sh') });
    expect(result.status).toBe('ok');
    expect(text(result.generated[0]?.bytes)).toBe('hello');
    expect(envValue(result.generated[1]?.bytes, 'OUTPUT_ENTRIES_AT_START')).toBe('0');
    expect(result.solverTimeUs).toBe(2500);
    const root = readdirSync(scratchParent).find((name) => name.startsWith('symfence-solver-'))!;
    for (const slot of readdirSync(path.join(scratchParent, root))) {
      expect(readdirSync(path.join(scratchParent, root, slot)).filter((n) => n.startsWith('run-'))).toEqual([]);
    }
  });

  it('kills a grandchild that the solver left behind when it exited cleanly', async () => {
    const pidFile = path.join(tmp, `orphan-${spawnThread}-${spawnMethod}.pids`);
    const result = await pool.run({ input: { bytes: Buffer.from('x') }, command: sh('orphaning-solver.sh'), env: { SYMFENCE_TEST_PIDFILE: pidFile } });
    expect(result.status).toBe('ok');
    const [leader, grandchild] = (await waitForFile(pidFile)).trim().split(' ').map(Number);
    expect(await waitForExit(leader!)).toBe(true);
    expect(await waitForExit(grandchild!)).toBe(true);
  });

  it('gives concurrent runs distinct private pruning maps', async () => {
    const maps = new Set<string>();
    for (let round = 0; round < 3 && maps.size < 2; round++) {
      const results = await Promise.all([0, 1].map(() => pool.run({ input: { bytes: Buffer.from('y') }, command: sh('echo-solver.sh') })));
      for (const r of results) maps.add(envValue(r.generated[1]?.bytes, 'SYMCC_AFL_COVERAGE_MAP') ?? '');
    }
    expect(maps.size).toBe(2);
  });

  it('on abort kills the process group and rejects with ERR_ABORTED, then keeps serving runs', async () => {
    const pidFile = path.join(tmp, `abort-${spawnThread}-${spawnMethod}.pids`);
    const controller = new AbortController();
    const running = pool.run(
      { input: { bytes: Buffer.from('x') }, command: sh('forking-solver.sh'), timeoutMs: 600_000, env: { SYMFENCE_TEST_PIDFILE: pidFile } },
      { signal: controller.signal },
    );
    const [leader, grandchild] = (await waitForFile(pidFile)).trim().split(' ').map(Number);
    expect(isAlive(leader!)).toBe(true);
    controller.abort();
    await expect(running).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    expect(await waitForExit(leader!)).toBe(true);
    expect(await waitForExit(grandchild!)).toBe(true);
    const after = await pool.run({ input: { bytes: Buffer.from('again') }, command: sh('echo-solver.sh') });
    expect(text(after.generated[0]?.bytes)).toBe('again');
  });

  it('on timeout kills the process group, grandchild included', async () => {
    const pidFile = path.join(tmp, `timeout-${spawnThread}-${spawnMethod}.pids`);
    const result = await pool.run({ input: { bytes: Buffer.from('x') }, command: sh('forking-solver.sh'), timeoutMs: 1000, env: { SYMFENCE_TEST_PIDFILE: pidFile } });
    expect(result.status).toBe('timeout');
    expect(result.error?.code).toBe('ERR_SOLVER_TIMEOUT');
    const [leader, grandchild] = (await waitForFile(pidFile)).trim().split(' ').map(Number);
    expect(await waitForExit(leader!)).toBe(true);
    expect(await waitForExit(grandchild!)).toBe(true);
  });
});

describe('SolverPool with spawnThread main: slots', () => {
  it('runs at most `workers` solvers at a time and queues the rest', async () => {
    const scratchParent = mkdtempSync(path.join(tmp, 'scratch-slots-'));
    const pool = new SolverPool({ solver: { workers: 1, killGraceMs: 100, spawnThread: 'main' }, scratchParent });
    try {
      const pidFile = path.join(tmp, 'slots.pids');
      const controller = new AbortController();
      const first = pool.run(
        { input: { bytes: Buffer.from('x') }, command: sh('forking-solver.sh'), timeoutMs: 600_000, env: { SYMFENCE_TEST_PIDFILE: pidFile } },
        { signal: controller.signal },
      );
      await waitForFile(pidFile);
      let secondDone = false;
      const second = pool.run({ input: { bytes: Buffer.from('queued') }, command: sh('echo-solver.sh') }).then((r) => {
        secondDone = true;
        return r;
      });
      // The only slot is busy with a solver that never exits on its own: the second run can only
      // start after the abort frees it.
      expect(secondDone).toBe(false);
      controller.abort();
      await expect(first).rejects.toMatchObject({ code: 'ERR_ABORTED' });
      expect(text((await second).generated[0]?.bytes)).toBe('queued');
      const root = readdirSync(scratchParent).find((name) => name.startsWith('symfence-solver-'))!;
      // One slot directory, beside the pool's shared trash (docs/solver.md).
      expect(readdirSync(path.join(scratchParent, root)).filter((name) => name !== 'trash')).toEqual(['slot-0']);
    } finally {
      await pool.close();
    }
    expect(readdirSync(scratchParent).filter((name) => name.startsWith('symfence-solver-'))).toEqual([]);
  });

  it('close() kills a running solver started on the main thread and removes the scratch directory', async () => {
    const scratchParent = mkdtempSync(path.join(tmp, 'scratch-close-'));
    const pool = new SolverPool({ solver: { workers: 2, killGraceMs: 100, spawnThread: 'main' }, scratchParent });
    const pidFile = path.join(tmp, 'close-main.pids');
    const running = pool.run({ input: { bytes: Buffer.from('x') }, command: sh('forking-solver.sh'), timeoutMs: 600_000, env: { SYMFENCE_TEST_PIDFILE: pidFile } });
    const [leader, grandchild] = (await waitForFile(pidFile)).trim().split(' ').map(Number);
    const rejected = expect(running).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    await pool.close();
    await rejected;
    expect(await waitForExit(leader!)).toBe(true);
    expect(await waitForExit(grandchild!)).toBe(true);
    expect(existsSync(scratchParent) && readdirSync(scratchParent).filter((name) => name.startsWith('symfence-solver-'))).toEqual([]);
  });
});

describe('solver option spawnMethod', () => {
  it('defaults to auto, which the pool turns into native exactly when the addon can spawn', async () => {
    expect(resolveSolverOptions({}).spawnMethod).toBe('auto');
    const scratchParent = mkdtempSync(path.join(tmp, 'scratch-method-'));
    const pool = new SolverPool({ solver: { workers: 1 }, scratchParent });
    try {
      expect(pool.spawnMethod).toBe(nativeSpawnAvailable() ? 'native' : 'child-process');
    } finally {
      await pool.close();
    }
  });

  it('refuses anything but auto, native or child-process, naming the option', () => {
    try {
      resolveSolverOptions({ spawnMethod: 'fork' as never });
      expect.unreachable('an unknown spawn method must be refused');
    } catch (error) {
      expect(error).toMatchObject({ code: 'ERR_INVALID_OPTION' });
      expect((error as { details?: { option?: string } }).details?.option).toContain('spawnMethod');
    }
  });
});

describe('solver option spawnThread', () => {
  it('defaults to auto and refuses anything but auto, worker or main, naming the option', () => {
    expect(resolveSolverOptions({}).spawnThread).toBe('auto');
    for (const value of ['auto', 'worker', 'main'] as const) expect(resolveSolverOptions({ spawnThread: value }).spawnThread).toBe(value);
    expect(() => resolveSolverOptions({ spawnThread: 'io' as never })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
    try {
      resolveSolverOptions({ spawnThread: 'io' as never });
    } catch (error) {
      expect((error as { details?: { option?: string } }).details?.option).toContain('spawnThread');
    }
  });
});
