// Expiry belongs to the holder: each record carries the TTL its holder renews within, readers
// honour it whatever TTL they were opened with, and a record dated beyond the clock-skew bound
// cannot block its target. Clocks are injected (`nowMs`).
import { describe, expect, it } from 'vitest';
import { inspectLeaseTable } from '../../src/lease/lease-inspect.js';
import { targetRecordId } from '../../src/lease/identity.js';
import { MAX_NOW_MS } from '../../src/lease/lease-operation.js';
import { MAX_LEASE_TTL_MS } from '../../src/lease/lease-record.js';
import { openTarget as openTargetTable, openWork as openWorkTable, S, tempRoot } from '../helpers/lease-fixtures.js';
import { describeEachStore } from '../helpers/lease-stores.js';

const T0 = Date.UTC(2026, 0, 1);
const MIN = 60 * S;

async function codeOf(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
    return undefined;
  } catch (error) {
    return (error as { code?: string }).code;
  }
}

describeEachStore('lease expiry', (store) => {
  // Shadow the fixtures: every scenario opens its tables on the store under test.
  const openTarget = (root: string, options: Record<string, unknown> = {}) => openTargetTable(root, { ...store.options(), ...options });
  const openWork = (root: string, options: Record<string, unknown> = {}) => openWorkTable(root, { ...store.options(), ...options });

  it("does not let a 1 s-TTL reader take over a 60 s-TTL holder's target at 2 s, and lets it at 60 s", async () => {
    const root = await tempRoot();
    const holder = await openTarget(root, { coordination: 'single', leaseTtlMs: 60 * S });
    const reader = await openTarget(root, { coordination: 'single', leaseTtlMs: 1 * S });
    expect((await holder.claimGroup([5n], { job: 1 }, { owner: 'holder', nowMs: T0 })).ok).toBe(true);
    const stored = JSON.parse(await store.readRaw(root, targetRecordId(5n)).then((bytes) => bytes!.toString('utf8'))) as { leaseTtlMs: number };
    expect(stored.leaseTtlMs).toBe(60 * S);
    expect(await reader.claimGroup([5n], { job: 2 }, { owner: 'reader', nowMs: T0 + 2 * S })).toMatchObject({ ok: false, reason: 'conflict' });
    expect(await reader.snapshotCounts({ nowMs: T0 + 2 * S })).toMatchObject({ leased: 1, expired: 0 });
    expect(await reader.claimGroup([5n], { job: 2 }, { owner: 'reader', nowMs: T0 + 60 * S })).toMatchObject({ ok: true });
  });

  it("does not let a 1 s-TTL work reader take over or list as expired a 60 s-TTL holder's work", async () => {
    const root = await tempRoot();
    const holder = await openWork(root, { coordination: 'single', leaseTtlMs: 60 * S });
    const reader = await openWork(root, { coordination: 'single', leaseTtlMs: 1 * S });
    const id = 'a'.repeat(64);
    expect((await holder.claim(id, { p: 1 }, { owner: 'holder', nowMs: T0 })).ok).toBe(true);
    expect(await reader.claim(id, { p: 1 }, { owner: 'reader', nowMs: T0 + 2 * S })).toMatchObject({ ok: false, reason: 'conflict' });
    expect(await reader.recoverExpired({ nowMs: T0 + 2 * S })).toEqual([]);
    expect((await inspectLeaseTable(root, { nowMs: T0 + 2 * S, leaseTtlMs: 1 * S, storeOptions: store.options() })).counts).toMatchObject({ leased: 1, expired: 0 });
    // A per-call TTL of 0 is still an explicit forced takeover.
    expect(await reader.claim(id, { p: 1 }, { owner: 'reader', nowMs: T0 + 2 * S, leaseTtlMs: 0 })).toMatchObject({ ok: true });
  });

  it('judges a record without a stored TTL (older writers) by the reader’s TTL', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { coordination: 'single', leaseTtlMs: 60 * S });
    expect((await table.claimGroup([9n], { job: 1 }, { owner: 'old', nowMs: T0 })).ok).toBe(true);
    const file = targetRecordId(9n);
    const { leaseTtlMs: _dropped, ...older } = JSON.parse(await store.readRaw(root, file).then((bytes) => bytes!.toString('utf8'))) as Record<string, unknown>;
    await store.writeRaw(root, file, `${JSON.stringify(older)}\n`);
    const reader = await openTarget(root, { coordination: 'single', leaseTtlMs: 5 * S });
    expect(await reader.claimGroup([9n], { job: 2 }, { owner: 'new', nowMs: T0 + 4 * S })).toMatchObject({ ok: false, reason: 'conflict' });
    expect(await reader.claimGroup([9n], { job: 2 }, { owner: 'new', nowMs: T0 + 5 * S })).toMatchObject({ ok: true });
  });

  it('does not let a record dated 1e12 ms in the future block its target beyond the clock-skew cap', async () => {
    const root = await tempRoot();
    const skewed = await openTarget(root, { coordination: 'single', leaseTtlMs: 60 * S });
    expect((await skewed.claimGroup([3n], { job: 1 }, { owner: 'far-future', nowMs: T0 + 1e12 })).ok).toBe(true);
    const reader = await openTarget(root, { coordination: 'single', leaseTtlMs: 60 * S, maxClockSkewMs: 5 * MIN });
    expect(await reader.snapshotCounts({ nowMs: T0 })).toMatchObject({ leased: 1, expired: 1 });
    expect(await reader.claimGroup([3n], { job: 2 }, { owner: 'reader', nowMs: T0 })).toMatchObject({ ok: true });
  });

  it('keeps a record dated within the skew bound live until its own expiry', async () => {
    const root = await tempRoot();
    const ahead = await openTarget(root, { coordination: 'single', leaseTtlMs: 60 * S });
    expect((await ahead.claimGroup([4n], { job: 1 }, { owner: 'ahead', nowMs: T0 + 4 * MIN })).ok).toBe(true);
    const reader = await openTarget(root, { coordination: 'single', leaseTtlMs: 60 * S, maxClockSkewMs: 5 * MIN });
    expect(await reader.claimGroup([4n], { job: 2 }, { owner: 'reader', nowMs: T0 })).toMatchObject({ ok: false, reason: 'conflict' });
    expect(await reader.claimGroup([4n], { job: 2 }, { owner: 'reader', nowMs: T0 + 5 * MIN - 1 })).toMatchObject({ ok: false, reason: 'conflict' });
    expect(await reader.claimGroup([4n], { job: 2 }, { owner: 'reader', nowMs: T0 + 5 * MIN })).toMatchObject({ ok: true });
  });

  it('caps a stored TTL larger than 24 h at 24 h', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { coordination: 'single', leaseTtlMs: 60 * S });
    expect((await table.claimGroup([6n], { job: 1 }, { owner: 'greedy', nowMs: T0 })).ok).toBe(true);
    const file = targetRecordId(6n);
    const record = JSON.parse(await store.readRaw(root, file).then((bytes) => bytes!.toString('utf8'))) as Record<string, unknown>;
    await store.writeRaw(root, file, `${JSON.stringify({ ...record, leaseTtlMs: 1e15 })}\n`);
    expect(await table.claimGroup([6n], { job: 2 }, { owner: 'reader', nowMs: T0 + MAX_LEASE_TTL_MS - 1 })).toMatchObject({ ok: false, reason: 'conflict' });
    expect(await table.claimGroup([6n], { job: 2 }, { owner: 'reader', nowMs: T0 + MAX_LEASE_TTL_MS })).toMatchObject({ ok: true });
  });

  it('refuses implausible clock values (NaN, negative, 1e308, past year 2200) with ERR_INVALID_OPTION before touching disk', async () => {
    const root = await tempRoot();
    const targets = await openTarget(root + '/t', { coordination: 'single' });
    const work = await openWork(root + '/w', { coordination: 'single' });
    for (const nowMs of [Number.NaN, -1, 1e308, MAX_NOW_MS + 1, Number.POSITIVE_INFINITY]) {
      expect(await codeOf(targets.claimGroup([1n], { job: 1 }, { owner: 'x', nowMs })), String(nowMs)).toBe('ERR_INVALID_OPTION');
      expect(await codeOf(work.claim('a'.repeat(64), { p: 1 }, { owner: 'x', nowMs })), String(nowMs)).toBe('ERR_INVALID_OPTION');
      expect(await codeOf(work.snapshotCounts({ nowMs })), String(nowMs)).toBe('ERR_INVALID_OPTION');
    }
    expect(await targets.snapshotRecords()).toEqual([]);
    expect(await work.snapshotRecords()).toEqual([]);
    expect((await targets.claimGroup([1n], { job: 1 }, { owner: 'x', nowMs: MAX_NOW_MS })).ok).toBe(true);
  });

  it('refuses a maxClockSkewMs that is not a duration in range, naming the option', async () => {
    const root = await tempRoot();
    for (const bad of [-1, Number.NaN, 86_400_001]) {
      await expect(openTarget(root, { coordination: 'single', maxClockSkewMs: bad })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION', message: expect.stringContaining('maxClockSkewMs') });
    }
  });
});
