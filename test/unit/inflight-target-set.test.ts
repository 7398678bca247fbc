import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { InflightTargetSet } from '../../src/inflight/inflight-target-set.js';
import { homeSlotOf, splitOne } from '../../src/inflight/target-ids.js';
import { H_LAYOUT_VERSION, H_MUTEX, keyIndex, LAYOUT_VERSION, MUTEX_FREE, MUTEX_HELD } from '../../src/inflight/layout.js';
import { codeOf } from '../helpers/error-code.js';

/** `count` distinct targets whose home slot is `home` in a table of `slotCount` slots. */
function collidingTargets(slotCount: number, home: number, count: number, start = 1n): bigint[] {
  const found: bigint[] = [];
  for (let t = start; found.length < count; t++) {
    const [lo, hi] = splitOne(t);
    if (homeSlotOf(lo, hi, slotCount - 1) === home) found.push(t);
  }
  return found;
}

describe('InflightTargetSet', () => {
  it('reserves a whole group and reports each member held by its owner', () => {
    const set = InflightTargetSet.create(16);
    expect(set.tryReserveGroup([1n, 2n, 3n], 7)).toBe(true);
    expect(set.size()).toBe(3);
    for (const t of [1n, 2n, 3n]) {
      expect(set.has(t)).toBe(true);
      expect(set.ownerOf(t)).toBe(7);
    }
    expect(set.has(4n)).toBe(false);
    expect(set.ownerOf(4n)).toBe(0);
  });

  it('rejects a group with one busy member and reserves none of the others', () => {
    const set = InflightTargetSet.create(16);
    expect(set.tryReserveGroup([1n, 2n, 3n], 1)).toBe(true);
    expect(set.tryReserveGroup([10n, 11n, 3n, 12n], 2)).toBe(false);
    for (const t of [10n, 11n, 12n]) expect(set.has(t)).toBe(false);
    expect(set.size()).toBe(3);
  });

  it('rejects a group when the same owner already holds a member', () => {
    const set = InflightTargetSet.create(16);
    expect(set.tryReserveGroup([5n], 1)).toBe(true);
    expect(set.tryReserveGroup([6n, 5n], 1)).toBe(false);
    expect(set.has(6n)).toBe(false);
  });

  it('accepts an empty group as an untargeted job without reserving anything', () => {
    const set = InflightTargetSet.create(4);
    expect(set.tryReserveGroup([], 1)).toBe(true);
    expect(set.releaseGroup([], 1)).toBe(0);
    expect(set.size()).toBe(0);
  });

  it('releases only the members the caller owns and returns how many', () => {
    const set = InflightTargetSet.create(16);
    set.tryReserveGroup([1n, 2n, 3n], 1);
    set.tryReserveGroup([4n], 2);
    expect(set.releaseGroup([1n, 2n, 3n], 2)).toBe(0);
    expect(set.releaseGroup([1n, 2n, 4n, 9n], 1)).toBe(2);
    expect(set.has(1n)).toBe(false);
    expect(set.has(2n)).toBe(false);
    expect(set.ownerOf(3n)).toBe(1);
    expect(set.ownerOf(4n)).toBe(2);
    expect(set.size()).toBe(2);
    expect(set.tryReserveGroup([1n, 2n], 3)).toBe(true);
  });

  it('keeps targets that differ only in the high 32 bits apart, up to 2^64-1', () => {
    const set = InflightTargetSet.create(8);
    const max = (1n << 64n) - 1n;
    expect(set.tryReserveGroup([1n, 1n + (1n << 32n), max], 4_294_967_295)).toBe(true);
    expect(set.ownerOf(max)).toBe(4_294_967_295);
    expect(set.has(1n << 32n)).toBe(false);
    expect(set.releaseGroup([1n + (1n << 32n)], 4_294_967_295)).toBe(1);
    expect(set.has(1n)).toBe(true);
    expect(set.has(max)).toBe(true);
  });

  it('stores each target as one 64-bit KEY and keeps ids with the high bit set, 2^63 and 2^64-1 exact', () => {
    const set = InflightTargetSet.create(16);
    const max = (1n << 64n) - 1n;
    const high = [1n << 63n, (1n << 63n) + 1n, max, max - 1n, (1n << 63n) | (1n << 32n), 0x8000_0000_ffff_ffffn];
    expect(set.tryReserveGroup(high, 4_294_967_295)).toBe(true);
    // Reading the buffer (never writing it): every target is one element of the 64-bit view.
    const keys = new BigUint64Array(set.buffer);
    const stored = new Set<bigint>();
    for (let slot = 0; slot < set.stats().slotCount; slot++) stored.add(keys[keyIndex(slot)]!);
    for (const t of high) {
      expect(stored.has(t)).toBe(true);
      expect(set.ownerOf(t)).toBe(4_294_967_295);
    }
    // Same low or high word as a held id, but a different id: not held.
    for (const t of [(1n << 63n) + 2n, max - 2n, 1n << 32n, 0xffff_ffffn, 0x7fff_ffff_ffff_ffffn]) expect(set.has(t)).toBe(false);
    expect(set.releaseGroup([max, 1n << 63n], 4_294_967_295)).toBe(2);
    expect(set.has(max)).toBe(false);
    expect(set.ownerOf((1n << 63n) + 1n)).toBe(4_294_967_295);
    expect(set.size()).toBe(4);
  });

  it('refuses ids that would wrap onto a held 64-bit key and leaves that key alone', () => {
    const set = InflightTargetSet.create(8);
    expect(set.tryReserveGroup([5n, (1n << 64n) - 1n], 1)).toBe(true);
    for (const wrapped of [(1n << 64n) + 5n, -((1n << 64n) - 5n), -1n, 1n << 64n, 0n]) {
      expect(codeOf(() => set.releaseGroup([wrapped], 1))).toBe('ERR_INVALID_JOB');
      expect(codeOf(() => set.tryReserveGroup([wrapped], 2))).toBe('ERR_INVALID_JOB');
      expect(codeOf(() => set.has(wrapped))).toBe('ERR_INVALID_JOB');
    }
    expect(set.ownerOf(5n)).toBe(1);
    expect(set.ownerOf((1n << 64n) - 1n)).toBe(1);
    expect(set.size()).toBe(2);
  });

  it('moves ids with the high bit set intact through a rebuild', () => {
    const set = InflightTargetSet.create(6);
    const { slotCount } = set.stats();
    const chain = collidingTargets(slotCount, 3, 6, (1n << 64n) - 5000n);
    expect(chain.every((t) => t >= 1n << 63n)).toBe(true);
    chain.forEach((t, i) => expect(set.tryReserveGroup([t], i + 1)).toBe(true));
    for (let i = 1; i <= 4; i++) expect(set.releaseGroup([chain[i]!], i + 1)).toBe(1);
    expect(set.stats()).toMatchObject({ size: 2, tombstones: 4, rebuilds: 0 });
    const others = collidingTargets(slotCount, 7, 2, 1n << 63n);
    expect(set.tryReserveGroup(others, 9)).toBe(true);
    expect(set.stats()).toMatchObject({ size: 4, tombstones: 0, rebuilds: 1 });
    expect(set.ownerOf(chain[0]!)).toBe(1);
    expect(set.ownerOf(chain[5]!)).toBe(6);
    for (const t of others) expect(set.ownerOf(t)).toBe(9);
    for (const t of chain.slice(1, 5)) expect(set.has(t)).toBe(false);
  });

  it('finds entries behind a released one in the same probe chain, and reuses or clears its tombstone', () => {
    const set = InflightTargetSet.create(16);
    const { slotCount } = set.stats();
    const [a, b, c, d] = collidingTargets(slotCount, 3, 4);
    for (const [t, owner] of [[a, 1], [b, 2], [c, 3]] as const) expect(set.tryReserveGroup([t!], owner)).toBe(true);

    expect(set.releaseGroup([a!], 1)).toBe(1);
    expect(set.stats().tombstones).toBe(1);
    expect(set.ownerOf(b!)).toBe(2);
    expect(set.ownerOf(c!)).toBe(3);

    // A new key of the same chain takes the tombstone's slot.
    expect(set.tryReserveGroup([d!], 4)).toBe(true);
    expect(set.stats().tombstones).toBe(0);
    expect(set.ownerOf(c!)).toBe(3);

    // Releasing from the chain's tail empties the trailing tombstones at once.
    expect(set.releaseGroup([b!], 2)).toBe(1);
    expect(set.stats().tombstones).toBe(1);
    expect(set.releaseGroup([c!], 3)).toBe(1);
    expect(set.stats().tombstones).toBe(0);
    expect(set.ownerOf(d!)).toBe(4);
    expect(set.releaseGroup([d!], 4)).toBe(1);
    expect(set.stats()).toMatchObject({ size: 0, tombstones: 0 });
  });

  it('gives every member of one group that shares a probe chain its own slot, tombstones included', () => {
    const set = InflightTargetSet.create(16);
    const { slotCount } = set.stats();
    const [a, b, c, d, e] = collidingTargets(slotCount, 5, 5);
    expect(set.tryReserveGroup([a!, b!], 1)).toBe(true);
    expect(set.releaseGroup([a!], 1)).toBe(1);
    expect(set.stats().tombstones).toBe(1);
    // c, d and e all find the chain's first free slot (a's tombstone) while they are checked;
    // only the first of them may take it, the others must go further down the chain.
    expect(set.tryReserveGroup([c!, d!, e!], 2)).toBe(true);
    expect(set.stats()).toMatchObject({ size: 4, tombstones: 0 });
    expect([b, c, d, e].map((t) => set.ownerOf(t!))).toEqual([1, 2, 2, 2]);
    expect(set.has(a!)).toBe(false);
    expect(set.releaseGroup([c!, d!, e!, b!], 2)).toBe(3);
    expect(set.ownerOf(b!)).toBe(1);
    expect(set.releaseGroup([b!], 1)).toBe(1);
    expect(set.stats()).toMatchObject({ size: 0, tombstones: 0 });
  });

  it('rebuilds without tombstones when they would crowd out empty slots, keeping every entry', () => {
    const set = InflightTargetSet.create(6);
    const { slotCount } = set.stats();
    expect(slotCount).toBe(8);
    const chain = collidingTargets(slotCount, 2, 6);
    chain.forEach((t, i) => expect(set.tryReserveGroup([t], i + 1)).toBe(true));
    expect(set.releaseGroup(chain.slice(1, 5), 2)).toBe(1);
    for (let i = 3; i <= 5; i++) expect(set.releaseGroup([chain[i - 1]!], i)).toBe(1);
    expect(set.stats()).toMatchObject({ size: 2, tombstones: 4, rebuilds: 0 });

    const others = collidingTargets(slotCount, 6, 2, 1000n);
    expect(set.tryReserveGroup(others, 9)).toBe(true);
    expect(set.stats()).toMatchObject({ size: 4, tombstones: 0, rebuilds: 1 });
    expect(set.ownerOf(chain[0]!)).toBe(1);
    expect(set.ownerOf(chain[5]!)).toBe(6);
    for (const t of others) expect(set.ownerOf(t)).toBe(9);
  });

  it('raises ERR_INFLIGHT_FULL and admits nothing when a group does not fit', () => {
    const set = InflightTargetSet.create(4);
    expect(set.tryReserveGroup([1n, 2n, 3n], 1)).toBe(true);
    expect(codeOf(() => set.tryReserveGroup([4n, 5n], 2))).toBe('ERR_INFLIGHT_FULL');
    expect(set.has(4n)).toBe(false);
    expect(set.has(5n)).toBe(false);
    expect(set.size()).toBe(3);
    expect(set.tryReserveGroup([4n], 2)).toBe(true);
    expect(codeOf(() => set.tryReserveGroup([9n], 2))).toBe('ERR_INFLIGHT_FULL');
    // A conflict is reported as a conflict even when the set is full.
    expect(set.tryReserveGroup([1n], 2)).toBe(false);
    expect(codeOf(() => InflightTargetSet.create(2).tryReserveGroup([1n, 2n, 3n], 1))).toBe('ERR_INFLIGHT_FULL');
  });

  it.each([
    ['zero', 0n],
    ['negative', -1n],
    ['2^64', 1n << 64n],
    ['a number', 1 as unknown as bigint],
    ['a string', '1' as unknown as bigint],
  ])('rejects a target id that is %s with ERR_INVALID_JOB', (_name, bad) => {
    const set = InflightTargetSet.create(8);
    expect(codeOf(() => set.tryReserveGroup([1n, bad], 1))).toBe('ERR_INVALID_JOB');
    expect(set.size()).toBe(0);
    expect(codeOf(() => set.releaseGroup([bad], 1))).toBe('ERR_INVALID_JOB');
    expect(codeOf(() => set.has(bad))).toBe('ERR_INVALID_JOB');
    expect(codeOf(() => set.ownerOf(bad))).toBe('ERR_INVALID_JOB');
  });

  it('rejects a group that lists a target twice, reserving nothing', () => {
    const set = InflightTargetSet.create(8);
    expect(codeOf(() => set.tryReserveGroup([1n, 2n, 1n], 1))).toBe('ERR_INVALID_JOB');
    expect(set.size()).toBe(0);
    const big = Array.from({ length: 70 }, (_, i) => BigInt(i + 1));
    expect(codeOf(() => InflightTargetSet.create(100).tryReserveGroup([...big, 5n], 1))).toBe('ERR_INVALID_JOB');
    expect(codeOf(() => set.tryReserveGroup('1' as unknown as bigint[], 1))).toBe('ERR_INVALID_JOB');
  });

  it('finds a duplicate anywhere in a group, also among members whose hashes share filter bits', () => {
    const set = InflightTargetSet.create(256);
    // Distinct targets whose hashes agree in the top 8 bits: the duplicate filter flags them,
    // the exact check must still let the group through.
    const alike: bigint[] = [];
    for (let t = 1n; alike.length < 12; t++) {
      const [w0, w1] = splitOne(t);
      if (homeSlotOf(w0, w1, -1) >>> 24 === 0x5a) alike.push(t);
    }
    expect(set.tryReserveGroup(alike, 1)).toBe(true);
    expect(set.releaseGroup(alike, 1)).toBe(12);
    const group = Array.from({ length: 40 }, (_, i) => (1n << 63n) + BigInt(i) * 7919n);
    expect(codeOf(() => set.tryReserveGroup([...group, group[17]!], 1))).toBe('ERR_INVALID_JOB');
    expect(codeOf(() => set.tryReserveGroup([...alike, alike[0]!], 1))).toBe('ERR_INVALID_JOB');
    expect(set.size()).toBe(0);
    expect(set.tryReserveGroup(group, 2)).toBe(true);
    // A release is checked the same way and releases nothing when a member is listed twice.
    expect(codeOf(() => set.releaseGroup([group[3]!, group[9]!, group[3]!], 2))).toBe('ERR_INVALID_JOB');
    expect(set.size()).toBe(40);
    expect(set.releaseGroup(group, 2)).toBe(40);
  });

  it.each([0, -1, 1.5, 2 ** 32, Number.NaN])('rejects owner %s with ERR_INVALID_OPTION', (owner) => {
    const set = InflightTargetSet.create(8);
    expect(codeOf(() => set.tryReserveGroup([1n], owner))).toBe('ERR_INVALID_OPTION');
    expect(codeOf(() => set.releaseGroup([1n], owner))).toBe('ERR_INVALID_OPTION');
  });

  it.each([0, -3, 2.5, 2 ** 24 + 1, Number.POSITIVE_INFINITY])('rejects capacity %s with ERR_INVALID_OPTION', (capacity) => {
    expect(codeOf(() => InflightTargetSet.create(capacity))).toBe('ERR_INVALID_OPTION');
  });

  it('shares one table between instances attached to the same buffer', () => {
    const first = InflightTargetSet.create(32);
    const second = InflightTargetSet.attach(first.buffer);
    expect(second.capacity).toBe(32);
    expect(first.tryReserveGroup([42n], 1)).toBe(true);
    expect(second.tryReserveGroup([42n, 43n], 2)).toBe(false);
    expect(second.ownerOf(42n)).toBe(1);
    expect(second.releaseGroup([42n], 1)).toBe(1);
    expect(first.has(42n)).toBe(false);
  });

  it('refuses to attach a buffer that was not made by create', () => {
    expect(codeOf(() => InflightTargetSet.attach(new SharedArrayBuffer(1024)))).toBe('ERR_INVALID_OPTION');
    expect(codeOf(() => InflightTargetSet.attach(new SharedArrayBuffer(4)))).toBe('ERR_INVALID_OPTION');
    expect(codeOf(() => InflightTargetSet.attach(new ArrayBuffer(1024) as unknown as SharedArrayBuffer))).toBe('ERR_INVALID_OPTION');
    const real = InflightTargetSet.create(8).buffer;
    const truncated = new SharedArrayBuffer(real.byteLength - 16);
    new Int32Array(truncated).set(new Int32Array(real).subarray(0, truncated.byteLength / 4));
    expect(codeOf(() => InflightTargetSet.attach(truncated))).toBe('ERR_INVALID_OPTION');
  });

  it('refuses to attach a buffer whose layout version is not this one', () => {
    const real = InflightTargetSet.create(8);
    real.tryReserveGroup([7n], 1);
    for (const version of [LAYOUT_VERSION - 1, LAYOUT_VERSION + 1]) {
      // A copy, so the live set's buffer is never written by the test.
      const copy = new SharedArrayBuffer(real.buffer.byteLength);
      new Int32Array(copy).set(new Int32Array(real.buffer));
      expect(codeOf(() => InflightTargetSet.attach(copy))).toBeUndefined();
      new Int32Array(copy)[H_LAYOUT_VERSION] = version;
      expect(codeOf(() => InflightTargetSet.attach(copy))).toBe('ERR_INVALID_OPTION');
    }
  });

  describe('while another thread holds the writer mutex (simulated by setting the mutex word)', () => {
    // The only place a test writes the buffer: it plays a thread stuck inside a critical section.
    const holdMutex = (set: InflightTargetSet, state: number): void => {
      Atomics.store(new Int32Array(set.buffer), H_MUTEX, state);
    };

    it('still answers reads, because reads take no lock', () => {
      const set = InflightTargetSet.create(8);
      set.tryReserveGroup([5n], 3);
      holdMutex(set, MUTEX_HELD);
      expect(set.has(5n)).toBe(true);
      expect(set.ownerOf(5n)).toBe(3);
      expect(set.size()).toBe(1);
    });

    it('reports a conflict for a reserve, reserving nothing, once reserveLockWaitMs has passed', () => {
      const set = InflightTargetSet.create(8, { reserveLockWaitMs: 1 });
      holdMutex(set, MUTEX_HELD);
      expect(set.tryReserveGroup([1n, 2n], 1)).toBe(false);
      holdMutex(set, MUTEX_FREE);
      expect(set.size()).toBe(0);
      expect(set.tryReserveGroup([1n, 2n], 1)).toBe(true);
    });

    it('throws ERR_LOCK_TIMEOUT for a release, releasing nothing, once releaseLockWaitMs has passed', () => {
      const set = InflightTargetSet.create(8, { releaseLockWaitMs: 1 });
      set.tryReserveGroup([1n, 2n], 1);
      holdMutex(set, MUTEX_HELD);
      expect(codeOf(() => set.releaseGroup([1n, 2n], 1))).toBe('ERR_LOCK_TIMEOUT');
      holdMutex(set, MUTEX_FREE);
      expect(set.size()).toBe(2);
      expect(set.releaseGroup([1n, 2n], 1)).toBe(2);
    });

    it.each([-1, 1.5, 600_001])('rejects lock wait %s with ERR_INVALID_OPTION', (waitMs) => {
      expect(codeOf(() => InflightTargetSet.create(8, { reserveLockWaitMs: waitMs }))).toBe('ERR_INVALID_OPTION');
      expect(codeOf(() => InflightTargetSet.attach(InflightTargetSet.create(8).buffer, { releaseLockWaitMs: waitMs }))).toBe(
        'ERR_INVALID_OPTION',
      );
    });
  });

  it('behaves like a Map from target to owner over random operation sequences', () => {
    const pool = [1n, 2n, 3n, 17n, 1n << 32n, (1n << 32n) + 1n, 99_999n, (1n << 64n) - 1n, 123_456_789_012n, 8n, 9n, 10n, 1n << 63n, (1n << 63n) + 1n];
    const target = fc.constantFrom(...pool);
    const group = fc.uniqueArray(target, { maxLength: 5 });
    const owner = fc.integer({ min: 1, max: 3 });
    const op = fc.oneof(
      fc.record({ kind: fc.constant('reserve' as const), group, owner }),
      fc.record({ kind: fc.constant('release' as const), group, owner }),
      fc.record({ kind: fc.constant('query' as const), target }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10 }), fc.array(op, { maxLength: 80 }), (capacity, ops) => {
        const set = InflightTargetSet.create(capacity);
        const model = new Map<bigint, number>();
        for (const o of ops) {
          if (o.kind === 'reserve') {
            const busy = o.group.some((t) => model.has(t));
            const fits = model.size + o.group.length <= capacity;
            if (!busy && !fits) {
              expect(codeOf(() => set.tryReserveGroup(o.group, o.owner))).toBe('ERR_INFLIGHT_FULL');
            } else {
              expect(set.tryReserveGroup(o.group, o.owner)).toBe(!busy);
              if (!busy) for (const t of o.group) model.set(t, o.owner);
            }
          } else if (o.kind === 'release') {
            const mine = o.group.filter((t) => model.get(t) === o.owner);
            expect(set.releaseGroup(o.group, o.owner)).toBe(mine.length);
            for (const t of mine) model.delete(t);
          } else {
            expect(set.has(o.target)).toBe(model.has(o.target));
            expect(set.ownerOf(o.target)).toBe(model.get(o.target) ?? 0);
          }
          expect(set.size()).toBe(model.size);
        }
        for (const t of pool) expect(set.ownerOf(t)).toBe(model.get(t) ?? 0);
        const stats = set.stats();
        expect(stats.size + stats.tombstones).toBeLessThanOrEqual(stats.slotCount);
      }),
      { numRuns: 300 },
    );
  });
});
