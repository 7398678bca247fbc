import { spawn } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdtempSync, openSync, closeSync, readdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runInProcessGroup, type GroupRunOptions } from '../../src/solver/process-group.js';
import { nativeSpawnAvailable, type SpawnMethod } from '../../src/solver/spawn-method.js';
import { builtFile, PACKAGE_ROOT } from '../../src/util/paths.js';
import { isAlive, waitForExit, waitForFile } from '../helpers/processes.js';
import { spawnShimPath } from '../../src/native/bindings.js';
import { SPAWN_METHODS } from '../helpers/spawn-methods.js';

const fixture = (name: string): string => path.join(PACKAGE_ROOT, 'test', 'fixtures', name);

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'symfence-process-group-'));
});
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

function run(spawnMethod: SpawnMethod, binary: string, argv: string[], extra: Partial<GroupRunOptions> = {}) {
  return runInProcessGroup({
    binary,
    argv,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    stdin: null,
    timeoutMs: 60_000,
    killGraceMs: 100,
    stderrCapBytes: 1024 * 1024,
    spawnMethod,
    ...extra,
  });
}

const sh = (spawnMethod: SpawnMethod, script: string, extra: Partial<GroupRunOptions> = {}) => run(spawnMethod, '/bin/sh', ['-c', script], extra);

/** `SigBlk`/`SigIgn` of a program started by the runner, as bit masks. */
function signalMasks(status: string): { blocked: bigint; ignored: bigint } {
  const field = (name: string) => BigInt(`0x${/^(\w+):\s*([0-9a-f]+)$/m.exec(status.split('\n').find((l) => l.startsWith(`${name}:`)) ?? '')![2]}`);
  return { blocked: field('SigBlk'), ignored: field('SigIgn') };
}

describe.each(SPAWN_METHODS)('runInProcessGroup with spawnMethod %s', (spawnMethod) => {
  it('reports the exit code, and a fatal signal by its Node name', async () => {
    expect((await sh(spawnMethod, 'exit 7')).code).toBe(7);
    const aborted = await sh(spawnMethod, 'kill -s ABRT $$');
    expect(aborted).toMatchObject({ code: null, signal: 'SIGABRT', spawnError: null, timedOut: false });
    expect((await sh(spawnMethod, 'kill -s SEGV $$')).signal).toBe('SIGSEGV');
  });

  it('starts the program as the leader of its own process group, in a new session led by the run (the spawn shim when built)', async () => {
    // Fields after `(comm)`: state, ppid, pgrp, session.
    const statOf = (line: string) => {
      const fields = line.slice(line.lastIndexOf(')') + 2).split(' ');
      return { pid: Number(line.split(' ')[0]), ppid: Number(fields[1]), pgrp: Number(fields[2]), session: Number(fields[3]) };
    };
    const outcome = await sh(spawnMethod, 'cat /proc/$$/stat /proc/$PPID/stat >&2');
    const [programLine, parentLine] = outcome.stderr.tail.split('\n');
    const program = statOf(programLine!);
    const parent = statOf(parentLine!);
    expect(program.pgrp).toBe(program.pid);
    if (spawnShimPath() !== null) {
      // The shim is our child and leads the run's session; the program has a group of its own.
      expect(parent.ppid).toBe(process.pid);
      expect(parent.session).toBe(parent.pid);
      expect(program.session).toBe(parent.pid);
    } else {
      expect(program.ppid).toBe(process.pid);
      expect(program.session).toBe(program.pid);
    }
  });

  it('starts the program with an empty signal mask and no ignored signals (Node itself ignores SIGPIPE)', async () => {
    const outcome = await sh(spawnMethod, 'exec cat /proc/self/status >&2');
    const { blocked, ignored } = signalMasks(outcome.stderr.tail);
    expect(blocked).toBe(0n);
    // Signals 1..31. (glibc's posix_spawn leaves its two internal signals, 32 and 33, ignored in
    // the child; exec'd glibc programs install their own handlers for those before any use.)
    expect(ignored & 0x7fffffffn).toBe(0n);
  });

  it('discards stdout, captures stderr and runs in the given cwd', async () => {
    const outcome = await sh(spawnMethod, 'echo to-stdout; pwd >&2', { cwd: tmp });
    expect(outcome.stderr.tail).toBe(`${tmp}\n`);
  });

  it('feeds given bytes on stdin followed by EOF, an fd as stdin, or /dev/null', async () => {
    const big = Buffer.alloc(300 * 1024, 'a');
    expect((await sh(spawnMethod, 'cat >&2', { stdin: Buffer.from('bytes in') })).stderr.tail).toBe('bytes in');
    const captured = await sh(spawnMethod, 'cat >&2', { stdin: big });
    expect(captured.stderr.tail.length).toBe(big.length);
    const file = path.join(tmp, `stdin-${spawnMethod}`);
    writeFileSync(file, 'from a file');
    const fd = openSync(file, 'r');
    try {
      expect((await sh(spawnMethod, 'cat >&2', { stdin: fd })).stderr.tail).toBe('from a file');
    } finally {
      closeSync(fd);
    }
    expect((await sh(spawnMethod, 'wc -c >&2', { stdin: null })).stderr.tail.trim()).toBe('0');
  });

  it('passes exactly the given environment and argv', async () => {
    const outcome = await run(spawnMethod, '/bin/sh', ['-c', 'echo "$0 $1 $SYMFENCE_X" >&2', 'first', 'second'], { env: { SYMFENCE_X: 'x=1' } });
    expect(outcome.stderr.tail).toBe('first second x=1\n');
    const envCheck = await sh(spawnMethod, 'env >&2', { env: { ONLY: '1', UNSET: undefined } });
    expect(envCheck.stderr.tail).toContain('ONLY=1');
    expect(envCheck.stderr.tail).not.toContain('UNSET');
    expect(envCheck.stderr.tail).not.toContain(`HOME=${process.env.HOME}\n`);
  });

  it('searches a bare program name in the PATH of the given environment, like execvp', async () => {
    const bin = mkdtempSync(path.join(tmp, 'bin-'));
    writeFileSync(path.join(bin, 'fake-solver'), '#!/bin/sh\necho found-in-path >&2\n');
    chmodSync(path.join(bin, 'fake-solver'), 0o755);
    const found = await run(spawnMethod, 'fake-solver', [], { env: { PATH: `/nonexistent:${bin}` } });
    expect(found.stderr.tail).toBe('found-in-path\n');
    const missing = await run(spawnMethod, 'fake-solver', [], { env: { PATH: '/nonexistent' } });
    expect(missing.spawnError?.code).toBe('ENOENT');
    // Without PATH, execvp's default (/bin:/usr/bin) applies.
    expect((await run(spawnMethod, 'true', [], { env: {} })).code).toBe(0);
  });

  it('reports a missing or non-executable program as a spawn error carrying the errno code', async () => {
    const missing = await run(spawnMethod, path.join(tmp, 'no-such-program'), []);
    expect(missing.spawnError?.code).toBe('ENOENT');
    expect(missing.code).toBeNull();
    const plain = path.join(tmp, `not-executable-${spawnMethod}`);
    writeFileSync(plain, 'echo never\n');
    const denied = await run(spawnMethod, plain, []);
    expect(denied.spawnError?.code).toBe('EACCES');
    const noCwd = await run(spawnMethod, '/bin/true', [], { cwd: path.join(tmp, 'no-such-dir') });
    expect(noCwd.spawnError?.code).toBe('ENOENT');
  });

  it('runs an executable script without #! through /bin/sh, as execvp does', async () => {
    const script = path.join(tmp, `no-shebang-${spawnMethod}`);
    writeFileSync(script, 'echo ran-by-sh "$1" >&2\n');
    chmodSync(script, 0o755);
    const outcome = await run(spawnMethod, script, ['arg']);
    expect(outcome.code).toBe(0);
    expect(outcome.stderr.tail).toBe('ran-by-sh arg\n');
  });

  it('delivers stderr larger than one read completely, in order', async () => {
    const outcome = await sh(spawnMethod, 'i=0; while [ $i -lt 3000 ]; do echo "line $i ................................................................................................................................" >&2; i=$((i+1)); done');
    const lines = outcome.stderr.tail.trimEnd().split('\n');
    expect(lines.length).toBe(3000);
    expect(lines[2999]!.startsWith('line 2999 ')).toBe(true);
    expect(outcome.stderr.truncated).toBe(false);
  });

  it('kills a grandchild that keeps stderr open after the leader exits, then reports close', async () => {
    const pidFile = path.join(tmp, `holder-${spawnMethod}.pids`);
    const outcome = await sh(spawnMethod, `sleep 1000 & echo "$$ $!" > ${pidFile}.tmp; mv ${pidFile}.tmp ${pidFile}; exit 0`);
    expect(outcome.code).toBe(0);
    const [, grandchild] = (await waitForFile(pidFile)).trim().split(' ').map(Number);
    expect(await waitForExit(grandchild!)).toBe(true);
  });

  it.skipIf(spawnShimPath() !== null)('without the spawn shim, ends a run whose stderr is held by a process that left the group: exit code kept, no timeout, holder untouched', async () => {
    const pidFile = path.join(tmp, `escaped-${spawnMethod}.pid`);
    // `setsid` puts the holder in a session of its own (AFL++'s fork server child does the same):
    // the group kill cannot reach it, so only the drain bound after exit ends the run. The
    // timeout is shorter than that bound but the run exited in time, so it is no timeout.
    const outcome = await sh(spawnMethod, `setsid sleep 1000 & echo $! > ${pidFile}.tmp; mv ${pidFile}.tmp ${pidFile}; exit 0`, {
      timeoutMs: 2_000,
      killGraceMs: 4_000,
    });
    const holder = Number((await waitForFile(pidFile)).trim());
    try {
      expect(outcome).toMatchObject({ code: 0, signal: null, timedOut: false, cancelled: false, spawnError: null });
      expect(() => process.kill(holder, 0)).not.toThrow();
    } finally {
      process.kill(holder, 'SIGKILL');
    }
    expect(await waitForExit(holder)).toBe(true);
  });

  it.skipIf(spawnShimPath() === null)('under the spawn shim, ends a run whose program left a setsid() grandchild holding stderr with the exit code kept, and kills that grandchild', async () => {
    const pidFile = path.join(tmp, `escaped-shim-${spawnMethod}.pid`);
    const outcome = await sh(spawnMethod, `setsid sleep 1000 & echo $! > ${pidFile}.tmp; mv ${pidFile}.tmp ${pidFile}; exit 3`, {
      timeoutMs: 30_000,
      killGraceMs: 30_000,
    });
    const holder = Number((await waitForFile(pidFile)).trim());
    expect(outcome).toMatchObject({ code: 3, signal: null, timedOut: false, cancelled: false, spawnError: null });
    // The shim reaped it before exiting: by the time the run settled it is gone, not just dying.
    expect(isAlive(holder)).toBe(false);
  });

  it('reports every errno of a failed start as a spawn error, not a thrown exception', async () => {
    const notDir = await run(spawnMethod, '/etc/passwd/x', []);
    expect(notDir.spawnError?.code).toBe('ENOTDIR');
    const tooLong = await run(spawnMethod, '/bin/true', ['x'.repeat(200_000)]);
    expect(tooLong.spawnError?.code).toBe('E2BIG');
  });

  it('on cancel sends SIGTERM to the group, then SIGKILL after the grace when SIGTERM is ignored', async () => {
    const pidFile = path.join(tmp, `stubborn-${spawnMethod}.pids`);
    // Cancel only once the trap is in place (the script publishes its pid after setting it).
    const outcome = await sh(spawnMethod, `trap '' TERM; echo $$ > ${pidFile}.tmp; mv ${pidFile}.tmp ${pidFile}; while :; do sleep 1; done`, {
      killGraceMs: 100,
      cancelled: waitForFile(pidFile).then(() => true),
    });
    expect(outcome).toMatchObject({ cancelled: true, timedOut: false, signal: 'SIGKILL' });
  });
});

describe.skipIf(!nativeSpawnAvailable())('native spawning specifically', () => {
  it('leaves no fd behind after many runs, failed starts and kills included', async () => {
    const fdTargets = (): string[] =>
      readdirSync('/proc/self/fd').map((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`);
        } catch {
          return 'gone';
        }
      });
    const round = () =>
      Promise.all([
        run('native', '/bin/true', []),
        sh('native', 'echo chatter >&2; exit 3', { stdin: Buffer.from('in') }),
        run('native', path.join(tmp, 'absent'), []),
        sh('native', 'sleep 1000', { timeoutMs: 1, killGraceMs: 0 }),
      ]);
    // Warm up lazily opened descriptors (addon load, /dev/null, libuv internals) and the run
    // supervisors kept for this many concurrent runs (one socket each, docs/native.md).
    await sh('native', 'echo warm >&2');
    await round();
    const before = fdTargets();
    for (let i = 0; i < 20; i++) await round();
    const after = fdTargets();
    expect(after.filter((target) => target.includes('pidfd'))).toEqual([]);
    expect(after.length).toBe(before.length);
  });

  it('is not robbed of its exit status by libuv reaping child_process children at the same time', async () => {
    const natives = Array.from({ length: 12 }, () => sh('native', 'exit 7'));
    const others = Array.from({ length: 12 }, () =>
      new Promise<number | null>((resolve) => spawn('/bin/sh', ['-c', 'exit 5'], { stdio: 'ignore' }).once('exit', (code) => resolve(code))),
    );
    expect((await Promise.all(natives)).map((o) => o.code)).toEqual(Array(12).fill(7));
    expect(await Promise.all(others)).toEqual(Array(12).fill(5));
  });

  it('kills and reaps a running solver when the worker thread that started it is terminated', async () => {
    const pidFile = path.join(tmp, 'terminated-worker.pids');
    const worker = new Worker(builtFile('test/fixtures/native-spawn-worker.js'), {
      workerData: { binary: '/bin/sh', argv: [fixture('forking-solver.sh')], env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SYMFENCE_TEST_PIDFILE: pidFile } },
    });
    await once(worker, 'message');
    const [leader, grandchild] = (await waitForFile(pidFile)).trim().split(' ').map(Number);
    await worker.terminate();
    expect(await waitForExit(leader!)).toBe(true);
    expect(await waitForExit(grandchild!)).toBe(true);
    // Reaped, not left a zombie: the pid is gone from /proc.
    expect(existsSync(`/proc/${leader}`)).toBe(false);
  });
});

describe('without the addon', () => {
  it('falls back to child_process for auto and refuses an explicit native with ERR_NATIVE_UNAVAILABLE', async () => {
    // A copy of the compiled modules in a package root that has no native-bindings/build.
    const root = mkdtempSync(path.join(os.tmpdir(), 'symfence-no-native-spawn-'));
    try {
      cpSync(builtFile('src'), path.join(root, 'dist', 'src'), { recursive: true });
      writeFileSync(path.join(root, 'package.json'), '{"type":"module"}');
      symlinkSync(path.join(PACKAGE_ROOT, 'node_modules'), path.join(root, 'node_modules'));
      const dist = (rel: string) => JSON.stringify(path.join(root, 'dist', 'src', rel));
      const probe = `
        const methods = await import(${dist('solver/spawn-method.js')});
        const group = await import(${dist('solver/process-group.js')});
        const { SolverPool } = await import(${dist('solver/solver-pool.js')});
        let nativeCode, poolCode;
        try { methods.resolveSpawnMethod('native'); } catch (e) { nativeCode = e.code; }
        try { new SolverPool({ solver: { spawnMethod: 'native' } }); } catch (e) { poolCode = e.code; }
        const outcome = await group.runInProcessGroup({ binary: '/bin/sh', argv: ['-c', 'exit 3'], env: {}, stdin: null, timeoutMs: 60000, killGraceMs: 100, stderrCapBytes: 1024 });
        console.log(JSON.stringify({ auto: methods.resolveSpawnMethod('auto'), nativeCode, poolCode, exitCode: outcome.code }));`;
      const child = spawn(process.execPath, ['--input-type=module', '-e', probe], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
      const [exitCode] = (await once(child, 'exit')) as [number];
      expect(exitCode).toBe(0);
      expect(JSON.parse(out)).toEqual({ auto: 'child-process', nativeCode: 'ERR_NATIVE_UNAVAILABLE', poolCode: 'ERR_NATIVE_UNAVAILABLE', exitCode: 3 });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
