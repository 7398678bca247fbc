import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadNative, NATIVE_ADDON_PATH, nativeLoadError } from '../../src/native/bindings.js';
import { builtFile } from '../../src/util/paths.js';

const native = loadNative();
const allowMissing = process.env.SYMFENCE_ALLOW_NO_NATIVE === '1';

/**
 * A child `node` process that opens `file`, tries `flock(LOCK_EX|LOCK_NB)` through the addon and
 * reports `locked` or `busy` on stdout, then stays alive (holding whatever it got) until killed
 * or until its stdin closes. The report line is the handshake: no sleeps anywhere.
 */
const CHILD = `
const fs = require('node:fs');
const native = require(process.argv[1]);
const fd = fs.openSync(process.argv[2], 'r+');
process.stdout.write(native.tryLockExclusive(fd) ? 'locked\\n' : 'busy\\n');
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
`;

interface LockChild {
  readonly child: ChildProcess;
  readonly report: string;
}

async function spawnLockChild(file: string): Promise<LockChild> {
  const child = spawn(process.execPath, ['-e', CHILD, NATIVE_ADDON_PATH, file], { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdout!.setEncoding('utf8');
  let buffered = '';
  const report = await new Promise<string>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => reject(new Error(`lock child exited early (${code ?? signal})`)));
    child.stdout!.on('data', (chunk: string) => {
      buffered += chunk;
      const newline = buffered.indexOf('\n');
      if (newline >= 0) resolve(buffered.slice(0, newline));
    });
  });
  child.removeAllListeners('exit');
  return { child, report };
}

async function endChild(child: ChildProcess, how: 'stdin' | 'SIGKILL'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  if (how === 'SIGKILL') child.kill('SIGKILL');
  else child.stdin!.end();
  await exited;
}

describe('native flock addon', () => {
  it('is built (set SYMFENCE_ALLOW_NO_NATIVE=1 to run without it)', () => {
    if (!native && !allowMissing) {
      throw new Error(`native addon missing at ${NATIVE_ADDON_PATH}: ${nativeLoadError()?.message ?? 'unknown'}`);
    }
    expect(native !== null || allowMissing).toBe(true);
  });

  it('reports null, and a NativeUnavailableError naming the load failure, from an install without the addon', async () => {
    // A copy of the compiled modules in a package root that has no native-bindings/build.
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'symfence-no-native-'));
    try {
      fs.cpSync(builtFile('src'), path.join(root, 'dist', 'src'), { recursive: true });
      fs.writeFileSync(path.join(root, 'package.json'), '{"type":"module"}');
      const probe = `
        const m = await import(${JSON.stringify(path.join(root, 'dist', 'src', 'native', 'bindings.js'))});
        let code;
        try { m.requireNative('multi-coordinator mode'); } catch (e) { code = e.code; }
        console.log(JSON.stringify({ loaded: m.loadNative() !== null, code, reason: m.nativeLoadError()?.code }));`;
      const child = spawn(process.execPath, ['--input-type=module', '-e', probe], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
      const [exitCode] = (await once(child, 'exit')) as [number];
      expect(exitCode).toBe(0);
      expect(JSON.parse(out)).toEqual({ loaded: false, code: 'ERR_NATIVE_UNAVAILABLE', reason: 'MODULE_NOT_FOUND' });
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  describe.skipIf(!native)('with the addon loaded', () => {
    const addon = native!;
    let dir: string;
    let lockFile: string;
    const fds: number[] = [];
    const children: ChildProcess[] = [];

    const open = (flags = 'r+'): number => {
      const fd = fs.openSync(lockFile, flags);
      fds.push(fd);
      return fd;
    };

    beforeEach(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'symfence-flock-'));
      lockFile = path.join(dir, 'record.json.lock');
      fs.writeFileSync(lockFile, '');
    });

    afterEach(async () => {
      for (const child of children.splice(0)) await endChild(child, 'SIGKILL');
      for (const fd of fds.splice(0)) {
        try {
          fs.closeSync(fd);
        } catch {
          // already closed by the test
        }
      }
      fs.rmSync(dir, { recursive: true, force: true });
    });

    it('excludes a second open file description in the same process until unlocked', () => {
      const first = open();
      const second = open();
      expect(addon.tryLockExclusive(first)).toBe(true);
      expect(addon.tryLockExclusive(second)).toBe(false);
      addon.unlock(first);
      expect(addon.tryLockExclusive(second)).toBe(true);
      expect(addon.tryLockExclusive(first)).toBe(false);
    });

    it('frees the lock when the holding descriptor is closed', () => {
      const first = open();
      const second = open();
      expect(addon.tryLockExclusive(first)).toBe(true);
      fs.closeSync(first);
      expect(addon.tryLockExclusive(second)).toBe(true);
    });

    it('keeps another process out of a lock this process holds', async () => {
      const mine = open();
      expect(addon.tryLockExclusive(mine)).toBe(true);
      const { child, report } = await spawnLockChild(lockFile);
      children.push(child);
      expect(report).toBe('busy');
      addon.unlock(mine);
      const second = await spawnLockChild(lockFile);
      children.push(second.child);
      expect(second.report).toBe('locked');
    });

    it('keeps this process out of a lock another process holds, and frees it at once when that process is SIGKILLed', async () => {
      const { child, report } = await spawnLockChild(lockFile);
      children.push(child);
      expect(report).toBe('locked');
      const mine = open();
      expect(addon.tryLockExclusive(mine)).toBe(false);
      await endChild(child, 'SIGKILL');
      expect(child.signalCode).toBe('SIGKILL');
      // The kernel closed the child's descriptors before reporting its exit: no retry loop needed.
      expect(addon.tryLockExclusive(mine)).toBe(true);
    });

    it('throws an error whose code is the errno name for a closed descriptor', () => {
      const fd = open();
      fs.closeSync(fd);
      for (const call of [() => addon.tryLockExclusive(fd), () => addon.unlock(fd), () => addon.syncfs(fd)]) {
        let caught: unknown;
        try {
          call();
        } catch (error) {
          caught = error;
        }
        expect(caught).toBeInstanceOf(Error);
        expect((caught as NodeJS.ErrnoException).code).toBe('EBADF');
        expect((caught as NodeJS.ErrnoException).errno).toBe(-os.constants.errno.EBADF);
      }
    });

    it('rejects a descriptor that is not a non-negative integer', () => {
      const codeOf = (call: () => unknown): unknown => {
        try {
          call();
        } catch (error) {
          return (error as NodeJS.ErrnoException).code;
        }
        return undefined;
      };
      expect(codeOf(() => addon.tryLockExclusive(-1))).toBe('ERR_OUT_OF_RANGE');
      expect(codeOf(() => addon.tryLockExclusive(1.5))).toBe('ERR_OUT_OF_RANGE');
      expect(codeOf(() => addon.unlock('3' as unknown as number))).toBe('ERR_INVALID_ARG_TYPE');
    });

    it('syncs the filesystem of a real descriptor, for files and directories', () => {
      const file = open();
      fs.writeSync(file, 'payload');
      expect(() => addon.syncfs(file)).not.toThrow();
      const dirFd = fs.openSync(dir, 'r');
      fds.push(dirFd);
      expect(() => addon.syncfs(dirFd)).not.toThrow();
    });
  });
});
