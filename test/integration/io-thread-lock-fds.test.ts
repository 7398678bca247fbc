// Lock fds kept open by the I/O thread's tables are process-wide fds: after the thread is closed,
// none of them may remain open in this process.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { IoThread } from '../../src/io/io-thread.js';
import { S, tempRoot } from '../helpers/lease-fixtures.js';

/** Lock files under `root` that this process holds an fd on (Linux /proc). */
function openLockFds(root: string): string[] {
  const held: string[] = [];
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      const target = fs.readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith(root) && target.endsWith('.lock')) held.push(target);
    } catch {
      // the fd closed meanwhile (e.g. the readdir's own)
    }
  }
  return held;
}

describe('I/O thread lock fds', () => {
  it.skipIf(process.platform !== 'linux')('keeps released lock fds open between batches and closes every one on close()', async () => {
    const root = await tempRoot('symfence-io-lockfds-');
    const io = await IoThread.start({
      coordinatorId: 'coord-a',
      targetRoot: path.join(root, 'targets'),
      leaseOptions: { store: 'files', shardCount: 4, leaseTtlMs: 10 * S, verifyFilesystem: false },
      startNowMs: 5_000_000,
    });
    try {
      const targets = [1n, 2n, 3n, 4n];
      const claim = await io.claimGroup(targets, { test: 'fds' }, 1, 5_000_000);
      if (!claim.ok) throw new Error(`claim failed: ${claim.reason}`);
      const release = await io.releaseGroup(targets, claim.token, 5_000_001);
      expect(release.ok).toBe(true);
      // Released, unlocked and kept: one fd per record lock (plus possibly the table's root lock).
      expect(openLockFds(root).filter((p) => !p.endsWith('lease-table.json.lock')).length).toBe(targets.length);
    } finally {
      await io.close();
    }
    expect(openLockFds(root)).toEqual([]);
  });
});
