// What a warm claim + release costs in fs calls per record, through the counting fs layer: the
// lock-fd cache keeps every barrier and every byte with fewer calls; a record read costs one
// fstat (type and size are checked before any byte is read, docs/lease-format.md).
import { describe, expect, it } from 'vitest';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { S, openTarget, recordFiles, tempRoot } from '../helpers/lease-fixtures.js';

const GROUP = Array.from({ length: 16 }, (_, i) => BigInt(i + 1));

async function cycle(table: Awaited<ReturnType<typeof openTarget>>, nowMs: number): Promise<void> {
  const claim = await table.claimGroup(GROUP, { path: 'seed' }, { owner: 'master', nowMs });
  if (!claim.ok) throw new Error(`claim failed: ${claim.reason}`);
  const release = await table.releaseGroup(GROUP, claim.token);
  if (!release.ok) throw new Error(`release failed: ${release.reason}`);
}

describe('lease fs calls per record', () => {
  it('a warm claim and release open no lock file: one lstat per lock, one fstat per existing record, same barriers', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, { shardCount: 4, fileBarrier: 'fsync' }, { fsLayer });
    await cycle(table, 10 * S);
    fsLayer.resetCounts();
    await cycle(table, 11 * S);
    const lockCalls = fsLayer.calls.filter((c) => c.path.endsWith('.lock'));
    expect(lockCalls.map((c) => c.op)).toEqual(Array(2 * GROUP.length).fill('lstat'));
    // One fstat and one read per existing record (the release); the claim's records are absent
    // (open: ENOENT). No fstat on a lock file.
    expect(fsLayer.count('fstat')).toBe(GROUP.length);
    expect(fsLayer.calls.filter((c) => c.op === 'fstat').every((c) => c.path.endsWith('.json'))).toBe(true);
    expect(fsLayer.count('read')).toBe(GROUP.length);
    expect(fsLayer.barriers().file).toBe(GROUP.length);
    expect(fsLayer.count('rename')).toBe(GROUP.length);
    expect(fsLayer.count('unlink')).toBe(GROUP.length);
    expect(await recordFiles(root)).toEqual([]);
    await table.close();
  });

  it('with the cache disabled every lock file is opened, checked and closed each time', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, { shardCount: 4, lockFdCacheSize: 0 }, { fsLayer });
    await cycle(table, 10 * S);
    fsLayer.resetCounts();
    await cycle(table, 11 * S);
    const lockOps = fsLayer.calls.filter((c) => c.path.endsWith('.lock')).map((c) => c.op);
    for (const op of ['open', 'fstat', 'close'] as const) expect(lockOps.filter((o) => o === op)).toHaveLength(2 * GROUP.length);
    expect(lockOps.filter((o) => o === 'lstat')).toHaveLength(0);
  });
});
