import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FS_PROBE_STEP_NAMES, probeFilesystem, type FsProbeOptions } from '../../src/lease/files/fs-probe.js';
import { loadNative, type NativeBindings } from '../../src/native/bindings.js';

const native = loadNative();

async function failureOf(dir: string, options?: FsProbeOptions): Promise<{ code?: string; details?: Record<string, unknown> }> {
  try {
    await probeFilesystem(dir, options);
  } catch (error) {
    return error as { code?: string; details?: Record<string, unknown> };
  }
  throw new Error('the probe passed but was expected to fail');
}

describe('probeFilesystem', () => {
  let dir: string;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'symfence-probe-test-'));
  });

  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('refuses with ERR_NATIVE_UNAVAILABLE when the addon is missing', async () => {
    const error = await failureOf(dir, { native: null });
    expect(error.code).toBe('ERR_NATIVE_UNAVAILABLE');
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  describe.skipIf(!native)('with the addon', () => {
    const real = native!;

    it('passes every step on a local temporary directory and leaves nothing behind', async () => {
      const report = await probeFilesystem(dir);
      expect(report.dir).toBe(path.resolve(dir));
      expect(report.steps.map((s) => s.step)).toEqual([...FS_PROBE_STEP_NAMES]);
      expect(fs.readdirSync(dir)).toEqual([]);
    });

    it('names the directory step when the directory does not exist', async () => {
      const error = await failureOf(path.join(dir, 'missing'));
      expect(error.code).toBe('ERR_FS_PROBE');
      expect(error.details).toMatchObject({ step: 'directory', errno: 'ENOENT' });
    });

    it('names the directory step when the path is a regular file', async () => {
      const file = path.join(dir, 'plain-file');
      fs.writeFileSync(file, '');
      const error = await failureOf(file);
      expect(error.details).toMatchObject({ step: 'directory', errno: 'ENOTDIR' });
    });

    it('names the replace step when rename does not replace the existing file, and cleans up', async () => {
      const error = await failureOf(dir, { ops: { rename: async () => undefined } });
      expect(error.code).toBe('ERR_FS_PROBE');
      expect(error.details).toMatchObject({ step: 'replace' });
      expect(fs.readdirSync(dir)).toEqual([]);
    });

    it('names the directory-fsync step and the errno when directories cannot be fsynced', async () => {
      const einval = Object.assign(new Error('fsync: invalid argument'), { code: 'EINVAL' });
      const error = await failureOf(dir, {
        ops: {
          fsyncDirectory: async () => {
            throw einval;
          },
        },
      });
      expect(error.details).toMatchObject({ step: 'directory-fsync', errno: 'EINVAL' });
    });

    it('names the durable-unlink step when an unlinked file is still there', async () => {
      const error = await failureOf(dir, { ops: { unlink: async () => undefined } });
      expect(error.details).toMatchObject({ step: 'durable-unlink' });
      expect(fs.readdirSync(dir)).toEqual([]);
    });

    it('names the flock-exclusion step when another process does not keep this one out', async () => {
      const lockIgnoringFs: NativeBindings = { ...real, tryLockExclusive: () => true, unlock: () => undefined };
      const error = await failureOf(dir, { native: lockIgnoringFs });
      expect(error.details).toMatchObject({ step: 'flock-exclusion' });
      expect(fs.readdirSync(dir)).toEqual([]);
    });

    it('names the flock-release step when a killed holder leaves its lock behind', async () => {
      const neverFree: NativeBindings = { ...real, tryLockExclusive: () => false };
      const error = await failureOf(dir, { native: neverFree });
      expect(error.details).toMatchObject({ step: 'flock-release' });
    });

    it('lets a test replace a whole step, reporting that step by name', async () => {
      const error = await failureOf(dir, {
        steps: {
          'file-fsync': async () => {
            throw new Error('simulated');
          },
        },
      });
      expect(error.details).toMatchObject({ step: 'file-fsync', reason: 'simulated' });
    });
  });
});
