// acquireAll: lock files opened in parallel, locks still taken in the given (ascending) order,
// and nothing left open or held on any failure.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { createInProcessLocker } from '../../src/lease/files/record-lock.js';
import { tempRoot } from '../helpers/lease-fixtures.js';

function setup(fsLayer: FaultInjectingFsLayer, monotonicNowMs?: () => number) {
  return createInProcessLocker({ fsLayer, lockAcquireTimeoutMs: 50, lockAgeHintMs: 0, ...(monotonicNowMs ? { monotonicNowMs } : {}) });
}

describe('RecordLocker.acquireAll', () => {
  it('opens every lock file before taking the first lock, then locks in the given order', async () => {
    const root = await tempRoot('symfence-lockall-');
    const fsLayer = new FaultInjectingFsLayer();
    const paths = ['a', 'b', 'c', 'd'].map((n) => path.join(root, `${n}.lock`));
    const handles = await setup(fsLayer).acquireAll(paths, (p) => p);
    expect(handles.map((h) => h.path)).toEqual(paths);
    const ops = fsLayer.calls.map((c) => c.op);
    expect(ops.slice(0, 4)).toEqual(['open', 'open', 'open', 'open']);
    await Promise.all(handles.map((h) => h.release()));
    expect(fsLayer.count('close')).toBe(4);
  });

  it('closes every opened lock file and holds nothing when one open fails', async () => {
    const root = await tempRoot('symfence-lockall-');
    const fsLayer = new FaultInjectingFsLayer();
    const paths = ['a', 'b', 'c'].map((n) => path.join(root, `${n}.lock`));
    fsLayer.fail({ op: 'open', path: 'b.lock' });
    const locker = setup(fsLayer);
    await expect(locker.acquireAll(paths, (p) => p)).rejects.toMatchObject({ code: 'ERR_LEASE_IO' });
    expect(fsLayer.count('close')).toBe(2);
    // Nothing is held: the same locks can be taken at once.
    const handles = await locker.acquireAll(paths, (p) => p);
    await Promise.all(handles.map((h) => h.release()));
  });

  it('releases the locks it took when a later one stays contended past the deadline', async () => {
    const root = await tempRoot('symfence-lockall-');
    const fsLayer = new FaultInjectingFsLayer();
    let nowMs = 0;
    const locker = setup(fsLayer, () => (nowMs += 20));
    const paths = ['a', 'b', 'c'].map((n) => path.join(root, `${n}.lock`));
    const blocker = await locker.acquire(paths[1]!, 'b');
    await expect(locker.acquireAll(paths, (p) => p)).rejects.toMatchObject({ code: 'ERR_LOCK_TIMEOUT' });
    await blocker.release();
    expect(fsLayer.count('close')).toBe(fsLayer.count('open'));
    const handles = await locker.acquireAll(paths, (p) => p);
    expect(handles).toHaveLength(3);
    await Promise.all(handles.map((h) => h.release()));
  });
});
