// The real I/O thread end to end: several callers (main thread and solver-like threads on their
// own ports), mirror coherence across threads, error transport, startup failure, close, restart.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidJobError, InvalidOptionError, LeaseCorruptError } from '../../src/errors.js';
import { InflightTargetSet } from '../../src/inflight/inflight-target-set.js';
import { IoDurableWriter, IoSharedTargetClaims } from '../../src/io/io-adapters.js';
import type { TargetClaimResult } from '../../src/io/io-requests.js';
import { IoThread } from '../../src/io/io-thread.js';
import { targetRecordId } from '../../src/lease/identity.js';
import { builtFile } from '../../src/util/paths.js';
import { openTarget, S, tempRoot } from '../helpers/lease-fixtures.js';
import { describeEachStore } from '../helpers/lease-stores.js';

const T0 = 5_000_000;
const TTL = 10 * S;
const threads: IoThread[] = [];

afterEach(async () => {
  await Promise.all(threads.splice(0).map((t) => t.close()));
});

async function start(root: string, inflight?: InflightTargetSet, extra: Partial<Parameters<typeof IoThread.start>[0]> = {}, store: Record<string, unknown> = {}): Promise<IoThread> {
  const io = await IoThread.start({
    coordinatorId: 'coord-a',
    targetRoot: path.join(root, 'targets'),
    workRoot: path.join(root, 'work'),
    leaseOptions: { shardCount: 4, leaseTtlMs: TTL, verifyFilesystem: false, ...store },
    startNowMs: T0,
    ...(inflight ? { inflight } : {}),
    ...extra,
  });
  threads.push(io);
  return io;
}

function runPortClient(port: MessagePort | import('node:worker_threads').MessagePort, groups: bigint[][], mirrorOwnerBase: number): Promise<{ value?: TargetClaimResult; error?: { code: string } }[]> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(builtFile('test/fixtures/io-port-client.js'), {
      workerData: { port, groups, mirrorOwnerBase, nowMs: T0 },
      transferList: [port as never],
    });
    worker.once('message', (m) => resolve(m as never));
    worker.once('error', reject);
  });
}

describeEachStore('I/O thread', (store) => {
  it('gives every target at most one holder when the main thread and two solver threads claim overlapping groups', async () => {
    const root = await tempRoot('symfence-io-thread-');
    const inflight = InflightTargetSet.create(1024);
    const io = await start(root, inflight, {}, store.options());
    const groupsFor = (offset: number): bigint[][] => Array.from({ length: 8 }, (_, i) => Array.from({ length: 5 }, (_, k) => BigInt(1 + ((offset + i * 3 + k * 7) % 48))));
    const [portA, portB] = [await io.createPort(), await io.createPort()];
    const mainGroups = groupsFor(0);
    const [mainResults, aResults, bResults] = await Promise.all([
      Promise.all(mainGroups.map((g, i) => io.claimGroup(g, { from: 'main' }, 100 + i, T0))),
      runPortClient(portA, groupsFor(1), 200),
      runPortClient(portB, groupsFor(2), 300),
    ]);
    const all: { targets: bigint[]; result: TargetClaimResult; owner: number }[] = [
      ...mainResults.map((result, i) => ({ targets: mainGroups[i]!, result, owner: 100 + i })),
      ...aResults.map((r, i) => ({ targets: groupsFor(1)[i]!, result: r.value!, owner: 200 + i })),
      ...bResults.map((r, i) => ({ targets: groupsFor(2)[i]!, result: r.value!, owner: 300 + i })),
    ];
    const holder = new Map<bigint, string>();
    for (const { targets, result, owner } of all) {
      expect(result).toBeDefined();
      if (!result.ok) continue;
      for (const t of targets) {
        expect(holder.has(t)).toBe(false);
        holder.set(t, result.token);
        expect(inflight.ownerOf(t)).toBe(owner);
      }
    }
    expect(holder.size).toBeGreaterThan(0);
    expect(inflight.size()).toBe(holder.size);
    const records = await io.snapshotRecords('target');
    expect(records).toHaveLength(holder.size);
    for (const { record } of records) expect(record.token).toBe(holder.get(BigInt(record.target!)));
  });

  it('shows a grant in the main thread\'s mirror by the time the claim is answered, and removes it on release', async () => {
    const root = await tempRoot('symfence-io-thread-');
    const inflight = InflightTargetSet.create(64);
    const io = await start(root, inflight, {}, store.options());
    const result = await io.claimGroup([11n, 12n], {}, 42, T0);
    expect(result.ok).toBe(true);
    expect([inflight.ownerOf(11n), inflight.ownerOf(12n)]).toEqual([42, 42]);
    expect(await io.releaseGroup([11n, 12n], (result as { token: string }).token, T0)).toEqual({ ok: true });
    expect(inflight.size()).toBe(0);
  });

  it('brings a lease error raised in the thread back as the same class with the same code', async () => {
    const root = await tempRoot('symfence-io-thread-');
    const io = await start(root, undefined, {}, store.options());
    const id = targetRecordId(7n);
    await store.writeRaw(path.join(root, 'targets'), id, '{ not json');
    const corrupt = await io.snapshotRecords('target').catch((e: unknown) => e);
    expect(corrupt).toBeInstanceOf(LeaseCorruptError);
    expect(corrupt).toMatchObject({ code: 'ERR_LEASE_CORRUPT' });
    const invalid = await io.claimGroup([], {}, 1, T0).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(InvalidJobError);
    expect(invalid).toMatchObject({ code: 'ERR_INVALID_JOB' });
    // A corrupt member is a value, not an error: the claim says so and writes nothing.
    expect(await io.claimGroup([7n, 8n], {}, 1, T0)).toMatchObject({ ok: false, reason: 'corrupt' });
  });

  it('answers queued requests on close, is idempotent, and refuses requests afterwards', async () => {
    const root = await tempRoot('symfence-io-thread-');
    const io = await start(root, undefined, {}, store.options());
    const claims = Array.from({ length: 10 }, (_, i) => io.claimGroup([BigInt(i + 1)], {}, 1, T0));
    const closing = io.close();
    await io.close();
    await closing;
    for (const result of await Promise.all(claims)) expect(result.ok).toBe(true);
    await expect(io.claimGroup([99n], {}, 1, T0)).rejects.toMatchObject({ code: 'ERR_CLOSED' });
  });

  it.skipIf(store.leasesOutliveClose === false)('rebuilds the mirror from this coordinator\'s durable leases after a restart', async () => {
    const root = await tempRoot('symfence-io-thread-');
    const first = await start(root, InflightTargetSet.create(64), {}, store.options());
    expect((await first.claimGroup([1n, 2n], {}, 5, T0)).ok).toBe(true);
    expect((await first.claimGroup([3n], {}, 6, T0)).ok).toBe(true);
    await first.close();
    const other = await openTarget(path.join(root, 'targets'), { leaseTtlMs: TTL, ...store.options() });
    expect((await other.claimGroup([4n], {}, { owner: 'coord-b', nowMs: T0 })).ok).toBe(true);
    const inflight = InflightTargetSet.create(64);
    const second = await start(root, inflight, { startNowMs: T0 + 1 }, store.options());
    expect([1n, 2n, 3n, 4n].map((t) => inflight.ownerOf(t))).toEqual([5, 5, 6, 0]);
    expect((await second.stats()).mirroredGroups).toBe(2);
  });

  it('implements the scheduler\'s shared-claims port with one request per round, using the owners the scheduler reserved', async () => {
    const root = await tempRoot('symfence-io-thread-');
    const inflight = InflightTargetSet.create(64);
    const io = await start(root, inflight, {}, store.options());
    const other = await openTarget(path.join(root, 'targets'), { leaseTtlMs: TTL, ...store.options() });
    expect((await other.claimGroup([30n], {}, { owner: 'coord-b', nowMs: T0 })).ok).toBe(true);
    const claims = new IoSharedTargetClaims(io, { inflight });
    const groups = [[10n, 11n], [30n, 31n], [20n]];
    groups.forEach((g, i) => expect(inflight.tryReserveGroup(g, 50 + i)).toBe(true));
    const before = (await io.stats()).requests;
    const outcomes = await claims.claimGroups(groups, T0);
    expect((await io.stats()).requests - before).toBe(1);
    expect(outcomes.map((o) => (o.ok ? 'granted' : o.reason))).toEqual(['granted', 'conflict', 'granted']);
    expect(inflight.ownerOf(10n)).toBe(50);
    expect(inflight.ownerOf(30n)).toBe(51); // the scheduler's reservation stays the scheduler's to drop
    const tokens = outcomes.flatMap((o, i) => (o.ok ? [{ targets: groups[i]!, token: o.token }] : []));
    await claims.releaseGroups(tokens, T0);
    expect(inflight.has(10n)).toBe(false);
    expect(inflight.has(20n)).toBe(false);
    expect((await io.snapshotCounts('target', T0)).leased).toBe(1);
  });

  it('runs work lease requests through the same thread', async () => {
    const root = await tempRoot('symfence-io-thread-');
    const io = await start(root, undefined, {}, store.options());
    const workId = `00000000${'e'.repeat(56)}`;
    const claim = await io.claimWork(workId, { seed: 'x' }, T0);
    expect(claim.ok).toBe(true);
    const token = (claim as { token: string }).token;
    expect(await io.heartbeatWork([[workId, token]], T0 + 1)).toMatchObject({ renewed: [workId], lost: [] });
    expect(await io.beginCommit(workId, token, T0 + 2, { outputs: 1 })).toEqual({ ok: true });
    expect(await io.completeWork(workId, token, T0 + 3)).toBe(true);
    expect(await io.claimWork(workId, {}, T0 + 4)).toMatchObject({ ok: false, reason: 'conflict' });
  });
});

describe('I/O thread (store-independent)', () => {
  it('rejects start with the thread\'s own error class when an option is invalid', async () => {
    const root = await tempRoot('symfence-io-thread-');
    const error = await IoThread.start({ coordinatorId: 'c', targetRoot: root, ioOptions: { maxBatchRequests: 0 } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect(error).toMatchObject({ code: 'ERR_INVALID_OPTION', details: { option: 'maxBatchRequests' } });
  });
  it('publishes queue files through the thread as the campaign\'s durable writer', async () => {
    const root = await tempRoot('symfence-io-thread-');
    const io = await start(root, undefined, {}, { store: 'files' });
    const writer = new IoDurableWriter(io);
    const queue = path.join(root, 'afl', 'symfence', 'queue');
    await writer.ensureDir(queue);
    await writer.publish(queue, [{ name: 'id:000000,src:000001', bytes: new Uint8Array([1, 2, 3]) }]);
    expect(await writer.list(queue)).toEqual(['id:000000,src:000001']);
    expect([...(await readFile(path.join(queue, 'id:000000,src:000001')))]).toEqual([1, 2, 3]);
    expect(await readdir(path.dirname(queue))).toEqual(['queue']);
  });
});
