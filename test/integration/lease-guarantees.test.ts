/**
 * Acceptance checks of the lease protocol's promises that the ported W/T scenarios touch only at
 * one step each: exact restore after a fault at *every* step of every mutating group and work
 * operation, locks held until the last directory barrier, and corrupt records left byte-identical
 * by every operation (TTL 0 included).
 */
import { execFileSync } from 'node:child_process';
import { lstat, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FaultInjectingFsLayer, type FaultRule } from '../../src/fs/fault-fs-layer.js';
import { canonicalJsonBytes } from '../../src/lease/canonical-json.js';
import { targetRecordId } from '../../src/lease/identity.js';
import type { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { S, bytesOf, listFiles, openTarget, openWork, snapshotTree, tempRoot } from '../helpers/lease-fixtures.js';

/** Every step a batch that rewrites or deletes existing records goes through. */
const WRITE_STEPS: readonly FaultRule[] = [
  { op: 'open', path: '.tmp' },
  { op: 'write' },
  { op: 'fsync' },
  { op: 'close', path: '.tmp' },
  { op: 'rename' },
  { op: 'rename', when: 'after' },
  { op: 'rename', nth: 2 },
  { op: 'syncDirectory' },
  { op: 'syncDirectory', nth: 2 },
];
const DELETE_STEPS: readonly FaultRule[] = [
  { op: 'unlink' },
  { op: 'unlink', when: 'after' },
  { op: 'unlink', nth: 3 },
  { op: 'syncDirectory' },
  { op: 'syncDirectory', nth: 2 },
];

const GROUP = [11n, 12n, 13n, 14n, 15n, 16n];

async function claimedGroup(table: FencedTargetLeaseTable, nowMs: number): Promise<string> {
  const result = await table.claimGroup(GROUP, { path: 'seed' }, { owner: 'holder', nowMs });
  if (!result.ok) throw new Error(`setup claim failed: ${result.reason}`);
  return result.token;
}

describe('lease protocol guarantees', () => {
  it('restores every member byte for byte after a fault at any step of a group heartbeat or release, and the token still works afterwards', async () => {
    const cases = [
      ...WRITE_STEPS.map((step) => ({ step, op: 'heartbeat' as const })),
      ...DELETE_STEPS.map((step) => ({ step, op: 'release' as const })),
    ];
    for (const { step, op } of cases) {
      const label = `${op} ${JSON.stringify(step)}`;
      const root = await tempRoot();
      const fsLayer = new FaultInjectingFsLayer();
      const table = await openTarget(root, {}, { fsLayer });
      const token = await claimedGroup(table, 10 * S);
      const before = await snapshotTree(root);
      fsLayer.fail(step);
      const call = op === 'heartbeat' ? table.heartbeatGroup(GROUP, token, { nowMs: 19 * S }) : table.releaseGroup(GROUP, token);
      const error = await call.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, label).toMatchObject({ code: 'ERR_LEASE_IO', details: { restored: true } });
      expect(await snapshotTree(root), label).toEqual(before);
      // The restored group is still ours, whole: the fence did not move.
      expect(await table.releaseGroup(GROUP, token), label).toEqual({ ok: true });
    }
  });

  it('restores the previous record exactly after a fault at any step of beginCommit, so a failed commit stays stealable only by expiry', async () => {
    const id = 'e'.repeat(64);
    for (const step of WRITE_STEPS.filter((s) => (s.nth ?? 1) === 1)) {
      const label = JSON.stringify(step);
      const root = await tempRoot();
      const fsLayer = new FaultInjectingFsLayer();
      const table = await openWork(root, {}, { fsLayer });
      const claim = await table.claim(id, { path: 'seed' }, { owner: 'a', nowMs: 10 * S });
      if (!claim.ok) throw new Error('setup');
      const before = await bytesOf(table.recordPath(id));
      fsLayer.fail(step);
      const error = await table.beginCommit(id, claim.token, { nowMs: 11 * S, commit: { children: ['x'] } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, label).toMatchObject({ code: 'ERR_LEASE_IO', details: { restored: true } });
      expect(await bytesOf(table.recordPath(id)), label).toEqual(before);
      // Still leased (not committing): the holder may retry, and it is claimable after the TTL.
      expect(await table.claim(id, { path: 'seed' }, { owner: 'b', nowMs: 15 * S }), label).toMatchObject({ ok: false, reason: 'conflict' });
      expect(await table.beginCommit(id, claim.token, { nowMs: 16 * S, commit: { children: ['x'] } }), label).toEqual({ ok: true });
    }
  });

  it('holds every member lock until the last directory barrier of a group claim has completed', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const holder = await openTarget(root, {}, { fsLayer });
    const contender = await openTarget(root, { lockAcquireTimeoutMs: 20 });
    // Pre-create the shard directories so that the only directory barriers are the publication ones.
    const dirs = [...new Set(GROUP.map((t) => holder.shardDirOf(targetRecordId(t))))].sort();
    for (const dir of dirs) await mkdir(dir, { recursive: true });
    let reached!: () => void;
    const atLastBarrier = new Promise<void>((resolve) => (reached = resolve));
    let proceed!: () => void;
    const resume = new Promise<void>((resolve) => (proceed = resolve));
    // Pause inside the directory barrier of the last touched shard: every name is published, but
    // the claim has not reported success yet.
    fsLayer.hook({ op: 'syncDirectory', path: (p) => p === dirs[dirs.length - 1], run: async () => { reached(); await resume; } });
    const claim = holder.claimGroup(GROUP, { path: 'seed' }, { owner: 'holder', nowMs: 10 * S });
    await atLastBarrier;
    // Every member is still locked: a contender on any one of them times out (it cannot get in).
    for (const t of GROUP) {
      const attempt = await contender.releaseGroup([t], 'whatever').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(attempt, `target ${t}`).toMatchObject({ code: 'ERR_LOCK_TIMEOUT' });
    }
    proceed();
    const result = await claim;
    expect(result.ok).toBe(true);
    // Released after success: the contender gets in at once and sees the holder's fence.
    expect(await contender.claimGroup([GROUP[0]!], { path: 'other' }, { owner: 'contender', nowMs: 11 * S })).toMatchObject({ ok: false, reason: 'conflict' });
  });

  it('leaves a corrupt work record byte-identical through every operation, including a TTL-0 claim', async () => {
    const root = await tempRoot();
    const table = await openWork(root);
    const id = 'c'.repeat(64);
    await mkdir(table.shardDirOf(id), { recursive: true });
    const corrupt = canonicalJsonBytes({ schema: 1, kind: 'work', id, status: 'leased', payload: {}, owner: 'm', previousOwner: '', worker: 0, token: 't', updatedMs: -1, attempts: 1, steals: 0 });
    await writeFile(table.recordPath(id), corrupt);
    const at = { nowMs: 100 * S };
    expect(await table.claim(id, { p: 1 }, { owner: 'x', nowMs: 100 * S, leaseTtlMs: 0 })).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(await table.heartbeat(id, 't', at)).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(await table.beginCommit(id, 't', at)).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(await table.abandon(id, 't')).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(await table.completeOnce(id, 't', at)).toBe('corrupt');
    expect(await table.replayCommitOnce(id, 't', () => undefined, at)).toBe('corrupt');
    expect(await table.recoverExpired({ nowMs: 100 * S, leaseTtlMs: 0 })).toEqual([]);
    expect(await bytesOf(table.recordPath(id))).toEqual(corrupt);
    expect(await table.snapshotCounts(at)).toMatchObject({ corrupt: 1, leased: 0 });
  });

  it('leaves a corrupt target member and its healthy siblings byte-identical through claim, heartbeat and release', async () => {
    const root = await tempRoot();
    const table = await openTarget(root);
    const token = await claimedGroup(table, 10 * S);
    const victim = targetRecordId(GROUP[2]!);
    // A record of the right shape whose target does not hash to its id: a redirected member.
    const bytes = await bytesOf(table.recordPath(victim));
    const redirected = Buffer.from(bytes!.toString('ascii').replace(`"target":"${GROUP[2]}"`, `"target":"${GROUP[3]}"`), 'ascii');
    await writeFile(table.recordPath(victim), redirected);
    const before = await snapshotTree(root);
    expect(await table.claimGroup(GROUP, { p: 2 }, { owner: 'other', nowMs: 100 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(await table.heartbeatGroup(GROUP, token, { nowMs: 19 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(await table.releaseGroup(GROUP, token)).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(await snapshotTree(root)).toEqual(before);
  });

  it('calls a FIFO at a record path corrupt at once instead of blocking in open, and refuses one at a lock path', async () => {
    const root = await tempRoot();
    const table = await openWork(root);
    const id = 'f'.repeat(64);
    const lockOnly = 'd'.repeat(64);
    await mkdir(table.shardDirOf(id), { recursive: true });
    await mkdir(table.shardDirOf(lockOnly), { recursive: true });
    execFileSync('mkfifo', [table.recordPath(id), table.lockPath(lockOnly)]);
    // Before the fix this claim never settled: open(O_RDONLY) of a FIFO waits for a writer.
    expect(await table.claim(id, { p: 1 }, { owner: 'x', nowMs: 1 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(await table.snapshotCounts({ nowMs: 1 * S })).toMatchObject({ corrupt: 1 });
    const error = await table.claim(lockOnly, { p: 1 }, { owner: 'x', nowMs: 1 * S }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: 'ERR_LOCK_PATH' });
    expect((await lstat(table.recordPath(id))).isFIFO()).toBe(true);
    expect((await lstat(table.lockPath(lockOnly))).isFIFO()).toBe(true);
  });

  it('lets a second coordinator open a new root while the first is still writing its metadata, instead of calling it corrupt', async () => {
    const root = await tempRoot();
    const firstFs = new FaultInjectingFsLayer();
    const secondFs = new FaultInjectingFsLayer();
    let firstWriting!: () => void;
    const atWrite = new Promise<void>((resolve) => (firstWriting = resolve));
    let resumeFirst!: () => void;
    const resume = new Promise<void>((resolve) => (resumeFirst = resolve));
    // The first opener stops after creating lease-table.json, before writing a byte into it.
    firstFs.hook({ op: 'write', path: 'lease-table.json', run: async () => { firstWriting(); await resume; } });
    let secondAtLock!: () => void;
    const atLock = new Promise<'at-lock'>((resolve) => (secondAtLock = () => resolve('at-lock')));
    secondFs.hook({ op: 'open', path: 'lease-table.json.lock', run: () => secondAtLock() });
    const first = openTarget(root, {}, { fsLayer: firstFs });
    await atWrite;
    const second = openTarget(root, {}, { fsLayer: secondFs });
    // Before the fix the second read the empty file, retried for ~100 ms and failed ERR_LEASE_CORRUPT.
    const settledEarly = second.then(
      () => 'opened' as const,
      (e: { code?: string }) => `failed ${e.code}`,
    );
    expect(await Promise.race([atLock, settledEarly])).toBe('at-lock');
    resumeFirst();
    await first;
    expect(await settledEarly).toBe('opened');
  });

  it('names an empty metadata file left by a crashed creator as corrupt, and never rewrites it', async () => {
    const root = await tempRoot();
    await writeFile(path.join(root, 'lease-table.json'), '');
    const error = await openTarget(root).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: 'ERR_LEASE_CORRUPT' });
    expect(await bytesOf(path.join(root, 'lease-table.json'))).toEqual(Buffer.alloc(0));
  });

  it('creates no lock file or shard directory for any argument it refuses, in either table', async () => {
    const root = await tempRoot();
    const targets = await openTarget(root);
    const workRoot = await tempRoot();
    const work = await openWork(workRoot);
    const before = [await listFiles(root), await listFiles(workRoot)];
    const refusals: Promise<unknown>[] = [
      targets.claimGroup([1n, 1n], { p: 1 }, { owner: 'm', nowMs: 1 }),
      targets.claimGroup(Array.from({ length: 65 }, (_, i) => BigInt(i + 1)), { p: 1 }, { owner: 'm', nowMs: 1 }),
      targets.claimGroup([1n, 2n], { p: Number.NaN }, { owner: 'm', nowMs: 1 }),
      targets.claimGroup([1n, 2n], { p: 1 }, { owner: '', nowMs: 1 }),
      targets.claimGroup([1n, 2n], { p: 1 }, { owner: 'm', nowMs: Number.POSITIVE_INFINITY }),
      targets.heartbeatGroup([1n, 2n], 'tok', { nowMs: -1 }),
      targets.releaseGroup([0n], 'tok'),
      work.claim('A'.repeat(64), { p: 1 }, { owner: 'm', nowMs: 1 }),
      work.claim('a'.repeat(64), { p: 1n << 70n, f: () => 1 } as object, { owner: 'm', nowMs: 1 }),
      work.claim('a'.repeat(64), { p: 1 }, { owner: 'm', nowMs: 1, leaseTtlMs: Number.NaN }),
      work.beginCommit('a'.repeat(64), 'tok', { nowMs: 1, commit: [] as unknown as object }),
      work.heartbeatMany([['a'.repeat(64), 'tok']], { nowMs: Number.NaN }),
    ];
    for (const [i, refusal] of refusals.entries()) {
      const error = await refusal.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((error as { code?: string } | undefined)?.code, `refusal ${i}`).toMatch(/^ERR_(INVALID_JOB|INVALID_OPTION)$/);
    }
    expect([await listFiles(root), await listFiles(workRoot)]).toEqual(before);
  });
});
