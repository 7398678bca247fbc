// Every public entry point answers bad input with a SymfenceError of a stable code — never a
// TypeError or RangeError — checks iterables while iterating (an endless generator is refused at
// its 65th target), bounds payload depth and size before serialising, and touches no file.
import { describe, expect, it } from 'vitest';
import { Campaign, SymfenceError, startDemo } from '../../src/index.js';
import {
  FencedTargetLeaseTable,
  FencedWorkLeaseTable,
  buildCommitManifest,
  groupMembers,
  inspectLeaseDirectory,
  jobFromWorkPayload,
  jobWorkId,
  workIdOf,
  workPayloadOf,
} from '../../src/api/leases.js';
import { InflightTargetSet, Scheduler } from '../../src/api/scheduler.js';
// The encoder behind every lease record and manifest the entries above write (not an entry itself).
import { canonicalJson } from '../../src/lease/canonical-json.js';
import { SolverPool } from '../../src/api/solver.js';
import { S, snapshotTree, tempRoot } from '../helpers/lease-fixtures.js';

function* endless(): Generator<bigint> {
  for (let i = 1n; ; i += 1n) yield i;
}

function nested(depth: number, array: boolean): unknown {
  let value: unknown = array ? [] : {};
  for (let i = 0; i < depth; i += 1) value = array ? [value] : { a: value };
  return value;
}

const ID = 'a'.repeat(64);
const T0 = Date.UTC(2026, 0, 1);
const MILLION = Array.from({ length: 1_000_000 }, (_, i) => BigInt(i + 1));
const HUGE = 'x'.repeat(64 * 1024 * 1024);
const DEEP_OBJECT = nested(200_000, false);
const DEEP_ARRAY = nested(200_000, true);
const JOB = { inputPath: '/seed', inputSha256: 'b'.repeat(64), targetBranch: 5n, actions: [], group: [5n], origin: 'afl', depth: 0 };

async function codeOf(call: () => unknown): Promise<string> {
  try {
    await call();
    return 'resolved';
  } catch (error) {
    if (!(error instanceof SymfenceError)) return `not a SymfenceError: ${(error as Error)?.constructor?.name} ${(error as Error)?.message}`.slice(0, 200);
    return error.code;
  }
}

describe('public API under hostile input', () => {
  it('rejects every hostile value with the exact SymfenceError code and leaves the lease directories byte for byte unchanged', async () => {
    const root = await tempRoot('symfence-hostile-api-');
    const work = await FencedWorkLeaseTable.open(`${root}/work`, { coordination: 'single', verifyFilesystem: false, shardCount: 4 });
    const targets = await FencedTargetLeaseTable.open(`${root}/targets`, { coordination: 'single', verifyFilesystem: false, shardCount: 4 });
    const held = await targets.claimGroup([1n], { job: 0 }, { owner: 'holder', nowMs: T0 });
    if (!held.ok) throw new Error('setup');
    const set = InflightTargetSet.create(64);
    const scheduler = new Scheduler({});
    const before = await snapshotTree(root);
    const identity = { owner: 'o', nowMs: T0 };
    const cases: [string, () => unknown, string][] = [
      // Lease tables: options objects, clocks, ids, owners.
      ['work.claim without options', () => work.claim(ID, {}, undefined as never), 'ERR_INVALID_OPTION'],
      ['work.claim with null options', () => work.claim(ID, {}, null as never), 'ERR_INVALID_OPTION'],
      ['work.claim with a number id', () => work.claim(42 as never, {}, identity), 'ERR_INVALID_JOB'],
      ['work.claim with a deep-array id', () => work.claim(DEEP_ARRAY as never, {}, identity), 'ERR_INVALID_JOB'],
      ['work.claim with NaN nowMs', () => work.claim(ID, {}, { owner: 'o', nowMs: Number.NaN }), 'ERR_INVALID_OPTION'],
      ['work.claim with 1e308 nowMs', () => work.claim(ID, {}, { owner: 'o', nowMs: 1e308 }), 'ERR_INVALID_OPTION'],
      ['work.claim with a negative nowMs', () => work.claim(ID, {}, { owner: 'o', nowMs: -1 }), 'ERR_INVALID_OPTION'],
      ['work.claim with a number owner', () => work.claim(ID, {}, { owner: 7 as never, nowMs: T0 }), 'ERR_INVALID_OPTION'],
      ['work.claim with a null payload', () => work.claim(ID, null as never, identity), 'ERR_INVALID_OPTION'],
      ['work.claim with a 200k-deep payload', () => work.claim(ID, DEEP_OBJECT as never, identity), 'ERR_INVALID_JOB'],
      ['work.claim with a 64 MB string payload', () => work.claim(ID, { s: HUGE }, identity), 'ERR_INVALID_JOB'],
      ['work.claim with a NaN in the payload', () => work.claim(ID, { n: Number.NaN }, identity), 'ERR_INVALID_JOB'],
      ['work.heartbeatMany over a number', () => work.heartbeatMany(42 as never, { nowMs: T0 }), 'ERR_INVALID_JOB'],
      ['work.heartbeatMany over an endless generator', () => work.heartbeatMany(endless() as never, { nowMs: T0 }), 'ERR_INVALID_JOB'],
      ['work.heartbeatMany without options', () => work.heartbeatMany([], undefined as never), 'ERR_INVALID_OPTION'],
      ['work.beginCommit with a deep manifest', () => work.beginCommit(ID, 't', { nowMs: T0, commit: DEEP_OBJECT as never }), 'ERR_INVALID_JOB'],
      ['work.complete without options', () => work.complete(ID, 't', undefined as never), 'ERR_INVALID_OPTION'],
      ['work.recoverExpired without options', () => work.recoverExpired(undefined as never), 'ERR_INVALID_OPTION'],
      ['work.snapshotCounts with 1e308', () => work.snapshotCounts({ nowMs: 1e308 }), 'ERR_INVALID_OPTION'],
      ['work.snapshotRecords with null', () => work.snapshotRecords(null as never), 'ERR_INVALID_OPTION'],
      ['work.recoverCommittingRecords with null', () => work.recoverCommittingRecords(null as never), 'ERR_INVALID_OPTION'],
      ['targets.claimGroup over undefined', () => targets.claimGroup(undefined as never, {}, identity), 'ERR_INVALID_JOB'],
      ['targets.claimGroup over null', () => targets.claimGroup(null as never, {}, identity), 'ERR_INVALID_JOB'],
      ['targets.claimGroup over a number', () => targets.claimGroup(42 as never, {}, identity), 'ERR_INVALID_JOB'],
      ['targets.claimGroup over a string', () => targets.claimGroup('123' as never, {}, identity), 'ERR_INVALID_JOB'],
      ['targets.claimGroup over numbers', () => targets.claimGroup([1, 2] as never, {}, identity), 'ERR_INVALID_JOB'],
      ['targets.claimGroup over an endless generator', () => targets.claimGroup(endless(), {}, identity), 'ERR_INVALID_JOB'],
      ['targets.claimGroup over a million targets', () => targets.claimGroup(MILLION, {}, identity), 'ERR_INVALID_JOB'],
      ['targets.claimGroup over a deep array', () => targets.claimGroup(DEEP_ARRAY as never, {}, identity), 'ERR_INVALID_JOB'],
      ['targets.claimGroup without options', () => targets.claimGroup([2n], {}, undefined as never), 'ERR_INVALID_OPTION'],
      ['targets.claimGroup with a 200k-deep payload', () => targets.claimGroup([2n], DEEP_ARRAY as never, identity), 'ERR_INVALID_OPTION'],
      ['targets.claimGroup with a deep payload field', () => targets.claimGroup([2n], { d: DEEP_ARRAY }, identity), 'ERR_INVALID_JOB'],
      ['targets.claimGroup with 1e308 nowMs', () => targets.claimGroup([2n], {}, { owner: 'o', nowMs: 1e308 }), 'ERR_INVALID_OPTION'],
      ['targets.heartbeatGroup over an endless generator', () => targets.heartbeatGroup(endless(), held.token, { nowMs: T0 }), 'ERR_INVALID_JOB'],
      ['targets.heartbeatGroup without options', () => targets.heartbeatGroup([1n], held.token, undefined as never), 'ERR_INVALID_OPTION'],
      ['targets.releaseGroup over null', () => targets.releaseGroup(null as never, held.token), 'ERR_INVALID_JOB'],
      ['FencedWorkLeaseTable.open with null options', () => FencedWorkLeaseTable.open(`${root}/other`, null as never), 'ERR_INVALID_OPTION'],
      ['FencedWorkLeaseTable.open with a number root', () => FencedWorkLeaseTable.open(42 as never, {}), 'ERR_INVALID_OPTION'],
      ['FencedTargetLeaseTable.open with a 1e308 TTL', () => FencedTargetLeaseTable.open(`${root}/other`, { leaseTtlMs: 1e308 }), 'ERR_INVALID_OPTION'],
      ['inspectLeaseDirectory without options', () => inspectLeaseDirectory(root, undefined as never), 'ERR_INVALID_OPTION'],
      ['inspectLeaseDirectory with a number dir', () => inspectLeaseDirectory(42 as never, { nowMs: T0, leaseTtlMs: S }), 'ERR_INVALID_OPTION'],
      ['inspectLeaseDirectory with NaN nowMs', () => inspectLeaseDirectory(root, { nowMs: Number.NaN, leaseTtlMs: S }), 'ERR_INVALID_OPTION'],
      // Identities and serialisation.
      ['canonicalJson of a 200k-deep array', () => canonicalJson(DEEP_ARRAY), 'ERR_INVALID_JOB'],
      ['workIdOf of a 200k-deep object', () => workIdOf(DEEP_OBJECT), 'ERR_INVALID_JOB'],
      ['groupMembers of an endless generator', () => groupMembers(endless()), 'ERR_INVALID_JOB'],
      ['groupMembers of undefined', () => groupMembers(undefined as never), 'ERR_INVALID_JOB'],
      ['jobWorkId of undefined', () => jobWorkId(undefined as never), 'ERR_INVALID_JOB'],
      ['jobWorkId with a number target', () => jobWorkId({ ...JOB, targetBranch: 5 as never }), 'ERR_INVALID_JOB'],
      ['jobWorkId with deep actions', () => jobWorkId({ ...JOB, actions: DEEP_ARRAY as never }), 'ERR_INVALID_JOB'],
      ['workPayloadOf with a null group', () => workPayloadOf({ ...JOB, group: null as never }), 'ERR_INVALID_JOB'],
      ['workPayloadOf with a 64 MB path', () => workPayloadOf({ ...JOB, inputPath: HUGE }), 'ERR_INVALID_JOB'],
      ['jobFromWorkPayload of null', () => jobFromWorkPayload(null as never), 'ERR_INVALID_JOB'],
      ['buildCommitManifest over a number', () => buildCommitManifest(ID, 'ok', '1', 42 as never), 'ERR_COMMIT_MANIFEST'],
      // In-flight set, scheduler, solver pool, campaign.
      ['InflightTargetSet.create with NaN capacity', () => InflightTargetSet.create(Number.NaN), 'ERR_INVALID_OPTION'],
      ['InflightTargetSet.create with null options', () => InflightTargetSet.create(8, null as never), 'ERR_INVALID_OPTION'],
      ['InflightTargetSet.attach of undefined', () => InflightTargetSet.attach(undefined as never), 'ERR_INVALID_OPTION'],
      ['inflight.tryReserveGroup over a generator', () => set.tryReserveGroup(endless() as never, 1), 'ERR_INVALID_JOB'],
      ['inflight.tryReserveGroup over a deep array', () => set.tryReserveGroup(DEEP_ARRAY as never, 1), 'ERR_INVALID_JOB'],
      ['inflight.tryReserveGroup with owner NaN', () => set.tryReserveGroup([1n], Number.NaN), 'ERR_INVALID_OPTION'],
      ['inflight.has of a number', () => set.has(5 as never), 'ERR_INVALID_JOB'],
      ['new Scheduler(undefined)', () => new Scheduler(undefined as never), 'ERR_INVALID_OPTION'],
      ['scheduler.addSeed with null info', () => scheduler.addSeed('s', null as never, 1), 'ERR_INVALID_JOB'],
      ['scheduler.addSeed with NaN now', () => scheduler.addSeed('s', { bytes: 1, sha256: 'c'.repeat(64), path: '/s' } as never, Number.NaN), 'ERR_INVALID_OPTION'],
      ['scheduler.observe of null', () => scheduler.observe(null as never, 1), 'ERR_INVALID_JOB'],
      ['scheduler.release of a number', () => scheduler.release(42 as never), 'ERR_INVALID_JOB'],
      ['scheduler.admit with NaN limit', () => scheduler.admit(Number.NaN, 1), 'ERR_INVALID_OPTION'],
      ['scheduler.restore of a deep array', () => scheduler.restore(DEEP_ARRAY, 1), 'ERR_LANE_STATE'],
      ['new SolverPool(null)', () => new SolverPool(null as never), 'ERR_INVALID_OPTION'],
      ['Campaign.start(undefined)', () => Campaign.start(undefined as never), 'ERR_INVALID_OPTION'],
      ['Campaign.start of a 64 MB string', () => Campaign.start(HUGE as never), 'ERR_INVALID_OPTION'],
      ['startDemo(null)', () => startDemo(null as never, {}), 'ERR_INVALID_OPTION'],
    ];
    const seen: [string, string][] = [];
    for (const [name, call] of cases) seen.push([name, await codeOf(call)]);
    expect(seen).toEqual(cases.map(([name, , code]) => [name, code]));
    expect(await snapshotTree(root)).toEqual(before);
    expect(set.size()).toBe(0);
  });

  it('refuses a pool run with null run options with ERR_INVALID_OPTION', async () => {
    const pool = new SolverPool({ solver: { workers: 1 } });
    try {
      expect(await codeOf(() => pool.run({ command: ['true'] } as never, null as never))).toBe('ERR_INVALID_OPTION');
    } finally {
      await pool.close();
    }
  });
});
