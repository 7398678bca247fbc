// The lock-fd cache: released lock files stay open (unlocked) for reuse, are re-validated by
// lstat before reuse, and never weaken exclusion, path refusal or fd hygiene.
import fs from 'node:fs';
import { mkdir, rename, symlink, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { loadNative } from '../../src/native/bindings.js';
import { createFlockLocker, createInProcessLocker, type RecordLocker } from '../../src/lease/files/record-lock.js';
import { tempRoot } from '../helpers/lease-fixtures.js';

const native = loadNative();

function inProcess(fsLayer: FaultInjectingFsLayer, lockFdCacheSize: number, monotonicNowMs?: () => number): RecordLocker {
  return createInProcessLocker({ fsLayer, lockAcquireTimeoutMs: 50, lockAgeHintMs: 0, lockFdCacheSize, ...(monotonicNowMs ? { monotonicNowMs } : {}) });
}

function flock(fsLayer: FaultInjectingFsLayer, lockFdCacheSize: number, monotonicNowMs?: () => number): RecordLocker {
  return createFlockLocker({ fsLayer, lockAcquireTimeoutMs: 50, lockAgeHintMs: 0, lockFdCacheSize, ...(monotonicNowMs ? { monotonicNowMs } : {}) });
}

/** The fault layer, also tracking which fds it opened are still open. */
class TrackingFsLayer extends FaultInjectingFsLayer {
  readonly live = new Set<number>();

  override async open(p: string, flags: number, mode?: number): Promise<number> {
    const fd = await super.open(p, flags, mode);
    this.live.add(fd);
    return fd;
  }

  override async close(fd: number): Promise<void> {
    try {
      await super.close(fd);
    } finally {
      this.live.delete(fd);
    }
  }
}

function openFds(fsLayer: FaultInjectingFsLayer): number {
  return (fsLayer as TrackingFsLayer).live.size;
}

describe('lock-fd cache', () => {
  it('reacquires a released lock through its cached fd: one lstat, no open, no close', async () => {
    const root = await tempRoot('symfence-lockcache-');
    const fsLayer = new TrackingFsLayer();
    const locker = inProcess(fsLayer, 8);
    const lockPath = path.join(root, 'a.lock');
    await (await locker.acquire(lockPath, 'a')).release();
    fsLayer.resetCounts();
    const handle = await locker.acquire(lockPath, 'a');
    await handle.release();
    expect(fsLayer.count('open')).toBe(0);
    expect(fsLayer.count('fstat')).toBe(0);
    expect(fsLayer.count('close')).toBe(0);
    expect(fsLayer.count('lstat')).toBe(1);
    await locker.close();
    expect(fsLayer.count('close')).toBe(1);
  });

  it('closes every fd on release when the cache size is 0', async () => {
    const root = await tempRoot('symfence-lockcache-');
    const fsLayer = new TrackingFsLayer();
    const locker = inProcess(fsLayer, 0);
    const lockPath = path.join(root, 'a.lock');
    await (await locker.acquire(lockPath, 'a')).release();
    await (await locker.acquire(lockPath, 'a')).release();
    expect(fsLayer.count('open')).toBe(2);
    expect(openFds(fsLayer)).toBe(0);
  });

  it.skipIf(!native)('a lock file replaced after caching is reopened, and the lock lands on the new inode', async () => {
    const root = await tempRoot('symfence-lockcache-');
    const fsLayer = new TrackingFsLayer();
    const locker = flock(fsLayer, 8);
    const lockPath = path.join(root, 'a.lock');
    await (await locker.acquire(lockPath, 'a')).release();
    const replacement = path.join(root, 'replacement');
    await writeFile(replacement, '');
    await rename(replacement, lockPath);
    fsLayer.resetCounts();
    const handle = await locker.acquire(lockPath, 'a');
    expect(fsLayer.count('open')).toBe(1); // fresh open of the new file
    expect(fsLayer.count('close')).toBe(1); // the stale cached fd
    const probe = fs.openSync(lockPath, 'r+');
    try {
      expect(native!.tryLockExclusive(probe)).toBe(false); // the new inode is the one locked
      await handle.release();
      expect(native!.tryLockExclusive(probe)).toBe(true);
      native!.unlock(probe);
    } finally {
      fs.closeSync(probe);
    }
    await locker.close();
    expect(openFds(fsLayer)).toBe(0);
  });

  it('refuses a directory placed at the lock path after caching, and closes the cached fd', async () => {
    const root = await tempRoot('symfence-lockcache-');
    const fsLayer = new TrackingFsLayer();
    const locker = inProcess(fsLayer, 8);
    const lockPath = path.join(root, 'a.lock');
    await (await locker.acquire(lockPath, 'a')).release();
    await unlink(lockPath);
    await mkdir(lockPath);
    await expect(locker.acquire(lockPath, 'a')).rejects.toMatchObject({ code: 'ERR_LOCK_PATH' });
    expect(openFds(fsLayer)).toBe(0);
    expect(fs.lstatSync(lockPath).isDirectory()).toBe(true);
  });

  it('refuses a symlink placed at the lock path after caching, and closes the cached fd', async () => {
    const root = await tempRoot('symfence-lockcache-');
    const fsLayer = new TrackingFsLayer();
    const locker = inProcess(fsLayer, 8);
    const lockPath = path.join(root, 'a.lock');
    const victim = path.join(root, 'victim');
    await writeFile(victim, 'keep');
    await (await locker.acquire(lockPath, 'a')).release();
    await unlink(lockPath);
    await symlink(victim, lockPath);
    await expect(locker.acquire(lockPath, 'a')).rejects.toMatchObject({ code: 'ERR_LOCK_PATH' });
    expect(openFds(fsLayer)).toBe(0);
    expect(fs.readFileSync(victim, 'utf8')).toBe('keep');
  });

  it('a lock file removed after caching is created again on the next acquisition', async () => {
    const root = await tempRoot('symfence-lockcache-');
    const fsLayer = new TrackingFsLayer();
    const locker = inProcess(fsLayer, 8);
    const lockPath = path.join(root, 'a.lock');
    await (await locker.acquire(lockPath, 'a')).release();
    await unlink(lockPath);
    await (await locker.acquire(lockPath, 'a')).release();
    expect(fs.lstatSync(lockPath).isFile()).toBe(true);
    await locker.close();
    expect(openFds(fsLayer)).toBe(0);
  });

  it('evicts the least recently used idle fd beyond capacity, closing it', async () => {
    const root = await tempRoot('symfence-lockcache-');
    const fsLayer = new TrackingFsLayer();
    const locker = inProcess(fsLayer, 2);
    const [a, b, c] = ['a', 'b', 'c'].map((n) => path.join(root, `${n}.lock`));
    for (const p of [a!, b!]) await (await locker.acquire(p, p)).release();
    await (await locker.acquire(a!, 'a')).release(); // a is now more recent than b
    fsLayer.resetCounts();
    await (await locker.acquire(c!, 'c')).release();
    expect(fsLayer.calls.filter((x) => x.op === 'close').map((x) => x.path)).toEqual([b]);
    fsLayer.resetCounts();
    await (await locker.acquire(a!, 'a')).release();
    await (await locker.acquire(c!, 'c')).release();
    expect(fsLayer.count('open')).toBe(0);
    await (await locker.acquire(b!, 'b')).release();
    expect(fsLayer.count('open')).toBe(1);
    await locker.close();
  });

  it.skipIf(!native)('never hands a held cached fd to a second acquirer in this process: it waits and times out', async () => {
    const root = await tempRoot('symfence-lockcache-');
    const fsLayer = new TrackingFsLayer();
    let nowMs = 0;
    const locker = flock(fsLayer, 8, () => (nowMs += 20));
    const lockPath = path.join(root, 'a.lock');
    await (await locker.acquire(lockPath, 'a')).release();
    const held = await locker.acquire(lockPath, 'a'); // through the cached fd
    await expect(locker.acquire(lockPath, 'a')).rejects.toMatchObject({ code: 'ERR_LOCK_TIMEOUT' });
    await held.release();
    await (await locker.acquire(lockPath, 'a')).release();
    await locker.close();
    expect(openFds(fsLayer)).toBe(0);
  });

  it.skipIf(!native)('an idle cached fd holds no lock: another locker takes the lock at once', async () => {
    const root = await tempRoot('symfence-lockcache-');
    const first = flock(new TrackingFsLayer(), 8);
    const second = flock(new TrackingFsLayer(), 8);
    const lockPath = path.join(root, 'a.lock');
    await (await first.acquire(lockPath, 'a')).release();
    const taken = await second.acquire(lockPath, 'a');
    let nowMs = 0;
    const impatient = flock(new TrackingFsLayer(), 8, () => (nowMs += 20));
    await expect(impatient.acquire(lockPath, 'a')).rejects.toMatchObject({ code: 'ERR_LOCK_TIMEOUT' });
    await taken.release();
    await Promise.all([first.close(), second.close(), impatient.close()]);
  });

  it('leaks no fd when acquireAll fails on an open or a contended lock with cached fds in play', async () => {
    const root = await tempRoot('symfence-lockcache-');
    const fsLayer = new TrackingFsLayer();
    let nowMs = 0;
    const locker = inProcess(fsLayer, 8, () => (nowMs += 20));
    const paths = ['a', 'b', 'c', 'd'].map((n) => path.join(root, `${n}.lock`));
    await Promise.all((await locker.acquireAll([paths[0]!, paths[2]!], (p) => p)).map((h) => h.release()));
    const removeRule = fsLayer.fail({ op: 'open', path: 'b.lock' });
    await expect(locker.acquireAll(paths, (p) => p)).rejects.toMatchObject({ code: 'ERR_LEASE_IO' });
    removeRule();
    const blocker = await locker.acquire(paths[3]!, 'd');
    await expect(locker.acquireAll(paths, (p) => p)).rejects.toMatchObject({ code: 'ERR_LOCK_TIMEOUT' });
    await blocker.release();
    const handles = await locker.acquireAll(paths, (p) => p);
    expect(handles).toHaveLength(4);
    await Promise.all(handles.map((h) => h.release()));
    await locker.close();
    expect(openFds(fsLayer)).toBe(0);
  });

  it('close() closes idle fds at once and a lock held across it on release', async () => {
    const root = await tempRoot('symfence-lockcache-');
    const fsLayer = new TrackingFsLayer();
    const locker = inProcess(fsLayer, 8);
    const [a, b] = ['a', 'b'].map((n) => path.join(root, `${n}.lock`));
    await (await locker.acquire(a!, 'a')).release();
    const held = await locker.acquire(b!, 'b');
    await locker.close();
    expect(openFds(fsLayer)).toBe(1);
    await held.release();
    expect(openFds(fsLayer)).toBe(0);
    await locker.close();
    // Still usable, without caching.
    await (await locker.acquire(a!, 'a')).release();
    expect(openFds(fsLayer)).toBe(0);
  });
});
