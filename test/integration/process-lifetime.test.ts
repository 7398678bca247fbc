import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnShimPath, SPAWN_SHIM_PATH } from '../../src/native/bindings.js';
import { processStartTime } from '../../src/solver/scratch-sweep.js';
import { SolverPool } from '../../src/solver/solver-pool.js';
import { builtFile, PACKAGE_ROOT } from '../../src/util/paths.js';
import { isAlive, waitForExit, waitForFile } from '../helpers/processes.js';
import { SPAWN_METHODS } from '../helpers/spawn-methods.js';

const fixture = (name: string): string => path.join(PACKAGE_ROOT, 'test', 'fixtures', name);
const supervised = spawnShimPath() !== null;

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'symfence-lifetime-'));
});
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

const pidsIn = (text: string): number[] => text.trim().split(/\s+/).map(Number);
const parentOf = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
};

/** Kills whatever a failed test left running, so one failure does not leak processes into the next. */
function reapLeftovers(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already: the expected case
    }
  }
}

describe.skipIf(!supervised)('run lifetime under the spawn shim', () => {
  describe.each(SPAWN_METHODS)('spawnMethod %s', (spawnMethod) => {
    it('leaves no process after the run settles, not even a grandchild that left the group with setsid', async () => {
      const pidFile = path.join(tmp, `settled-${spawnMethod}.pids`);
      const pool = new SolverPool({ scratchParent: tmp, solver: { workers: 1, spawnMethod } });
      try {
        const result = await pool.run({ input: { bytes: new Uint8Array([1]) }, command: { binary: fixture('escaping-solver.sh'), argv: [] }, env: { SYMFENCE_TEST_PIDFILE: pidFile } });
        expect(result.status).toBe('ok');
        const pids = pidsIn(readFileSync(pidFile, 'utf8'));
        expect(pids).toHaveLength(3);
        try {
          // The shim killed and reaped them before it exited, so this holds the moment run() settles.
          expect(pids.filter(isAlive)).toEqual([]);
        } finally {
          reapLeftovers(pids);
        }
      } finally {
        await pool.close();
      }
    });

    it('gives the solver a CPU-time limit of its timeout plus kill grace, rounded up to seconds', async () => {
      const pidFile = path.join(tmp, `limits-${spawnMethod}.pids`);
      const pool = new SolverPool({ scratchParent: tmp, solver: { workers: 1, spawnMethod } });
      const controller = new AbortController();
      try {
        const running = pool.run(
          {
            input: { bytes: new Uint8Array([1]) },
            command: { binary: fixture('escaping-solver.sh'), argv: [] },
            env: { SYMFENCE_TEST_PIDFILE: pidFile, SYMFENCE_TEST_WAIT: '1' },
            timeoutMs: 20_500,
            killGraceMs: 1_000,
          },
          { signal: controller.signal },
        );
        const [leader] = pidsIn(await waitForFile(pidFile));
        const limits = readFileSync(`/proc/${leader}/limits`, 'utf8');
        expect(limits).toMatch(/^Max cpu time\s+22\s+23\s+seconds/m);
        controller.abort();
        await expect(running).rejects.toMatchObject({ code: 'ERR_ABORTED' });
      } finally {
        await pool.close();
      }
    });

    it('kills the solver, its grandchildren and its setsid grandchild within seconds when its coordinator is SIGKILLed; the next pool sweeps the dead scratch directory', async () => {
      const parent = path.join(tmp, `coordinator-${spawnMethod}`);
      mkdirSync(parent);
      const pidFile = path.join(parent, 'solver.pids');
      const coordinator = spawn(process.execPath, [builtFile('test/fixtures/pool-coordinator.js'), parent, fixture('escaping-solver.sh')], {
        env: { ...process.env, SYMFENCE_TEST_SPAWN_METHOD: spawnMethod, SYMFENCE_TEST_PIDFILE: pidFile },
        stdio: 'ignore',
      });
      const exited = once(coordinator, 'exit');
      const pids = pidsIn(await waitForFile(pidFile));
      const [, scratchDir] = (await waitForFile(path.join(parent, 'coordinator.pid'))).trim().split(' ');
      const shim = parentOf(pids[0]!);
      expect(parentOf(shim)).toBe(coordinator.pid);
      const everything = [shim, ...pids];
      try {
        coordinator.kill('SIGKILL');
        await exited;
        // The timer that would have ended the run died with the coordinator; the shim notices
        // (parent-death signal) and kills everything. Bounded poll: the deadline only turns a
        // regression into a failure instead of a hang.
        for (const pid of everything) expect(await waitForExit(pid, 10_000)).toBe(true);
      } finally {
        reapLeftovers(everything);
      }
      expect(existsSync(scratchDir!)).toBe(true);
      const next = new SolverPool({ scratchParent: parent, solver: { workers: 1 } });
      try {
        expect(existsSync(scratchDir!)).toBe(false);
      } finally {
        await next.close();
      }
    });
  });
});

describe.skipIf(!supervised)('the spawn shim on its own', () => {
  it('lets RLIMIT_CPU kill a CPU-spinning program even when no timer is left to do it', async () => {
    // Spawned as its own supervisor would be, with a 1 s CPU budget and nobody watching the clock.
    const child = spawn(SPAWN_SHIM_PATH, [String(process.pid), '1', '/bin/sh', 'sh', '-c', 'while :; do :; done'], { stdio: 'ignore' });
    const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
    expect({ code, signal }).toEqual({ code: null, signal: 'SIGXCPU' });
  });
});

describe('scratch directories of dead coordinators', () => {
  it('are swept when a pool starts; those of a live owner (this process) are kept', async () => {
    const parent = path.join(tmp, 'sweep');
    mkdirSync(parent);
    // A pid that is certainly dead: a child that has exited and been reaped.
    const dead = spawn('/bin/true');
    await once(dead, 'exit');
    const deadDir = path.join(parent, `symfence-solver-${dead.pid}-1-abcdef`);
    const recycledDir = path.join(parent, `symfence-solver-${process.pid}-1-abcdef`);
    const liveDir = path.join(parent, `symfence-solver-${process.pid}-${processStartTime(process.pid)}-abcdef`);
    const unrelated = path.join(parent, 'symfence-solver-untagged');
    for (const dir of [deadDir, recycledDir, liveDir, unrelated]) mkdirSync(path.join(dir, 'slot-1'), { recursive: true });
    const pool = new SolverPool({ scratchParent: parent, solver: { workers: 1 } });
    try {
      expect(existsSync(deadDir)).toBe(false);
      // Our pid, but another start time: the pid was recycled, the owner is dead.
      expect(existsSync(recycledDir)).toBe(false);
      expect(existsSync(liveDir)).toBe(true);
      expect(existsSync(unrelated)).toBe(true);
    } finally {
      await pool.close();
    }
  });
});
