import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nativeSupervision } from '../../src/native/bindings.js';
import { runInProcessGroup, type GroupRunOptions } from '../../src/solver/process-group.js';
import { nativeSpawnAvailable } from '../../src/solver/spawn-method.js';
import { PACKAGE_ROOT } from '../../src/util/paths.js';
import { isAlive, waitForExit, waitForFile } from '../helpers/processes.js';

// The native path's long-lived run supervisors (docs/native.md, *Run supervisor*). The orphan,
// kill and coordinator-death guarantees themselves are the process-lifetime and process-group
// tests, which run through the same path; these check what is particular to a supervisor that
// outlives its runs.

const fixture = (name: string): string => path.join(PACKAGE_ROOT, 'test', 'fixtures', name);
const served = nativeSpawnAvailable() && nativeSupervision() === 'supervisor';

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'symfence-run-supervisor-'));
});
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

function run(binary: string, argv: string[], extra: Partial<GroupRunOptions> = {}) {
  return runInProcessGroup({
    binary,
    argv,
    stdin: null,
    timeoutMs: 60_000,
    killGraceMs: 100,
    stderrCapBytes: 64 * 1024,
    spawnMethod: 'native',
    ...extra,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...extra.env },
  });
}

const statOf = (pid: number) => {
  const line = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = line.slice(line.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(fields[1]) };
};
const cmdline = (pid: number): string[] => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
const pidsIn = (text: string): number[] => text.trim().split(/\s+/).map(Number);

/** The pid of the process that started the program (its supervisor), as the program saw it. */
async function supervisorOfARun(): Promise<number> {
  const outcome = await run('/bin/sh', ['-c', 'echo $PPID >&2']);
  expect(outcome.code).toBe(0);
  return Number(outcome.stderr.tail.trim());
}

function reapLeftovers(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already: the expected case
    }
  }
}

describe.skipIf(!served)('run supervisors (native spawning)', () => {
  it('starts one supervisor, our child in its own session, and reuses it for the next run', async () => {
    const first = await supervisorOfARun();
    const second = await supervisorOfARun();
    expect(second).toBe(first);
    expect(statOf(first).ppid).toBe(process.pid);
    expect(cmdline(first).slice(1, 2)).toEqual(['--serve']);
  });

  it('passes an environment larger than one socket packet whole (through a memfd)', async () => {
    const big = 'v'.repeat(100_000);
    const outcome = await run('/bin/sh', ['-c', 'printf %s "$BIG" | wc -c >&2; printf %s "$SMALL" >&2'], { env: { BIG: big, BIG2: big, SMALL: 'end' } });
    expect(outcome.code).toBe(0);
    expect(outcome.stderr.tail.trim()).toBe('100000\nend');
  });

  it('reports the program’s CPU time and peak memory with its exit', async () => {
    const outcome = await run('/bin/sh', ['-c', 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 4']);
    expect(outcome.code).toBe(4);
    expect(outcome.usage).not.toBeNull();
    expect(outcome.usage!.userMs + outcome.usage!.systemMs).toBeGreaterThan(0);
    expect(outcome.usage!.maxRssKb).toBeGreaterThan(0);
  });

  it('replaces a supervisor that was killed between runs', async () => {
    const old = await supervisorOfARun();
    process.kill(old, 'SIGKILL');
    expect(await waitForExit(old, 10_000)).toBe(true);
    const fresh = await supervisorOfARun();
    expect(fresh).not.toBe(old);
    expect(isAlive(fresh)).toBe(true);
  });

  it('ends the run as SIGKILLed, and the program with it, when its supervisor is SIGKILLed mid-run', async () => {
    const pidFile = path.join(tmp, 'supervisor-killed.pid');
    const running = run('/bin/sh', ['-c', `echo $$ $PPID > ${pidFile}.tmp; mv ${pidFile}.tmp ${pidFile}; while :; do sleep 1; done`]);
    const [program, supervisor] = pidsIn(await waitForFile(pidFile));
    try {
      process.kill(supervisor!, 'SIGKILL');
      const outcome = await running;
      expect(outcome).toMatchObject({ code: null, signal: 'SIGKILL', timedOut: false, cancelled: false, spawnError: null });
      // Parent-death signal: the program does not outlive its supervisor.
      expect(await waitForExit(program!, 10_000)).toBe(true);
    } finally {
      reapLeftovers([program!, supervisor!]);
    }
  });

  it('keeps concurrent runs apart: what one run leaves behind dies with it, the other run is untouched', async () => {
    const strayFile = path.join(tmp, 'apart-strays.pids');
    const waitingFile = path.join(tmp, 'apart-waiting.pid');
    const controller = new AbortController();
    const cancelled = new Promise<boolean>((resolve) => controller.signal.addEventListener('abort', () => resolve(true)));
    const waiting = run('/bin/sh', ['-c', `echo $$ > ${waitingFile}.tmp; mv ${waitingFile}.tmp ${waitingFile}; while :; do sleep 1; done`], { cancelled });
    const waitingPid = pidsIn(await waitForFile(waitingFile))[0]!;
    let strays: number[] = [];
    try {
      const escaping = await run(fixture('escaping-solver.sh'), [], { env: { SYMFENCE_TEST_PIDFILE: strayFile } });
      expect(escaping.code).toBe(0);
      strays = pidsIn(readFileSync(strayFile, 'utf8'));
      expect(strays).toHaveLength(3);
      // The escaping run's own supervisor killed its setsid grandchild before reporting the exit.
      expect(strays.filter(isAlive)).toEqual([]);
      expect(isAlive(waitingPid)).toBe(true);
    } finally {
      controller.abort();
      const outcome = await waiting;
      reapLeftovers([...strays, waitingPid]);
      expect(outcome.cancelled).toBe(true);
    }
  });

  it('still starts a supervising shim per run when SYMFENCE_SPAWN_SHIM=per-run', async () => {
    const saved = process.env['SYMFENCE_SPAWN_SHIM'];
    process.env['SYMFENCE_SPAWN_SHIM'] = 'per-run';
    try {
      const outcome = await run('/bin/sh', ['-c', 'tr "\\0" " " < /proc/$PPID/cmdline >&2']);
      expect(outcome.code).toBe(0);
      const shimArgs = outcome.stderr.tail.trim().split(' ');
      expect(shimArgs[1]).toBe(String(process.pid));
      expect(shimArgs).not.toContain('--serve');
      expect(outcome.usage).toBeNull();
    } finally {
      if (saved === undefined) delete process.env['SYMFENCE_SPAWN_SHIM'];
      else process.env['SYMFENCE_SPAWN_SHIM'] = saved;
    }
  });
});

describe.skipIf(!served)('the solver pool under run supervisors', () => {
  it('reports the solver process’s CPU time in the run timing', async () => {
    const { SolverPool } = await import('../../src/solver/solver-pool.js');
    const pool = new SolverPool({ scratchParent: tmp, solver: { workers: 1 } });
    try {
      const result = await pool.run({ input: { bytes: new Uint8Array([1]) }, command: { binary: '/bin/sh', argv: ['-c', 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done'] } });
      expect(result.status).toBe('ok');
      expect(result.timing?.solverCpuMs).toBeGreaterThan(0);
    } finally {
      await pool.close();
    }
  });
});
