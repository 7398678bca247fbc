/**
 * Consistent codes and exits: every refusal while a campaign starts exits 2 (nothing ran), and a
 * lease payload holding a bigint is refused with a code instead of reading back as a string.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCliCaptured } from '../helpers/cli-in-process.js';
import { fakeAflOut, REFERENCE_SOLVER } from '../helpers/cli-process.js';
import { freePort } from '../helpers/etcd-server.js';
import { openTarget, openWork } from '../helpers/lease-fixtures.js';
import { codeOfAsync } from '../helpers/error-code.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tmp(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-refusal-'));
  dirs.push(dir);
  return dir;
}

describe('start-up refusals', () => {
  it('exits 2 with the store code when etcd is unreachable at start, having run nothing', async () => {
    const root = tmp();
    const out = fakeAflOut(root, ['seed'], 'builtin:demo @@');
    // Nothing listens on a port that was just free: connections to 127.0.0.1 are refused.
    const port = await freePort();
    const { code, err } = await runCliCaptured(
      'run', '--afl-out', out, '--afl-instance', 'main', '--workers', '1', '--log-level', 'silent',
      '--lease-store', 'etcd', '--etcd-endpoints', `127.0.0.1:${port}`, '--etcd-timeout', '1s',
      '--showmap', `${process.execPath} ${REFERENCE_SOLVER} showmap`,
      '--', process.execPath, REFERENCE_SOLVER, 'builtin:demo', '@@',
    );
    expect(err).toMatch(/\[ERR_ETCD_UNAVAILABLE\]|\[ERR_LEASE_IO\]/);
    expect(err).not.toContain('ERR_INTERNAL');
    expect(code).toBe(2);
  });
});

describe('lease payloads', () => {
  it('refuses a bigint anywhere in a work or target payload with ERR_INVALID_JOB, writing nothing', async () => {
    const root = tmp();
    const work = await openWork(path.join(root, 'work'), { coordination: 'single' });
    const targets = await openTarget(path.join(root, 'targets'), { coordination: 'single' });
    try {
      const now = Date.now();
      expect(await codeOfAsync(work.claim('a'.repeat(64), { target: 5n }, { owner: 'o', nowMs: now }))).toBe('ERR_INVALID_JOB');
      expect(await codeOfAsync(work.claim('b'.repeat(64), { nested: [{ id: 1n << 70n }] }, { owner: 'o', nowMs: now }))).toBe('ERR_INVALID_JOB');
      expect(await codeOfAsync(targets.claimGroup([1n, 2n], { job: 7n }, { owner: 'o', nowMs: now }))).toBe('ERR_INVALID_JOB');
      // Nothing was claimed: the same ids are free for a payload without a bigint.
      const fine = await work.claim('a'.repeat(64), { target: '5' }, { owner: 'o', nowMs: now });
      expect(fine.ok).toBe(true);
      const group = await targets.claimGroup([1n, 2n], { job: '7' }, { owner: 'o', nowMs: now });
      expect(group.ok).toBe(true);
    } finally {
      await work.close();
      await targets.close();
    }
  });
});
