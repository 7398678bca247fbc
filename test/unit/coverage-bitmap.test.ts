import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COUNT_CLASS, CoverageBitmap, classifyCounts } from '../../src/solver/coverage-bitmap.js';

describe('CoverageBitmap', () => {
  it('buckets raw hit counts exactly like AFL', () => {
    const expected: [number, number][] = [[0, 0], [1, 1], [2, 2], [3, 4], [4, 8], [7, 8], [8, 16], [15, 16], [16, 32], [31, 32], [32, 64], [127, 64], [128, 128], [255, 128]];
    for (const [count, bucket] of expected) expect(COUNT_CLASS[count]).toBe(bucket);
    expect([...classifyCounts(new Uint8Array([0, 3, 200]))]).toEqual([0, 4, 128]);
  });

  it('calls an input novel when a known edge reaches a new hit-count bucket', () => {
    const bitmap = new CoverageBitmap(64);
    const map = new Uint8Array(64);
    map[5] = 1;
    expect(bitmap.claim(map)).toEqual({ newBytes: 1, newBits: 1 });
    expect(bitmap.claim(map)).toEqual({ newBytes: 0, newBits: 0 });
    map[5] = 4;
    expect(bitmap.claim(map)).toEqual({ newBytes: 1, newBits: 1 });
    expect(bitmap.edgesCovered()).toBe(1);
  });

  it('buckets raw maps before merging when told they are raw counts', () => {
    const bitmap = new CoverageBitmap(8);
    const raw = new Uint8Array(8);
    raw[0] = 5; // bucket 8
    expect(bitmap.claim(raw, { classified: false })).toEqual({ newBytes: 1, newBits: 1 });
    expect(bitmap.snapshot()[0]).toBe(8);
    expect(bitmap.wouldBeNovel(raw, { classified: false })).toBe(false);
  });

  it('accepts a shorter map (a target with a smaller dynamic map) and refuses a longer one', () => {
    const bitmap = new CoverageBitmap(16);
    expect(bitmap.claim(new Uint8Array([1, 1])).newBytes).toBe(2);
    expect(() => bitmap.claim(new Uint8Array(17))).toThrow(RangeError);
  });

  it('claims every bit exactly once over any sequence of maps (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ minLength: 32, maxLength: 32 }), { maxLength: 20 }), (maps) => {
        const bitmap = new CoverageBitmap(32);
        const union = new Uint8Array(32);
        let claimedBits = 0;
        for (const map of maps) {
          claimedBits += bitmap.claim(map).newBits;
          for (let i = 0; i < 32; i++) union[i]! |= map[i]!;
        }
        const unionBits = [...union].reduce((sum, byte) => sum + byte.toString(2).replace(/0/g, '').length, 0);
        expect(claimedBits).toBe(unionBits);
        expect([...bitmap.snapshot()]).toEqual([...union]);
      }),
    );
  });

  it('claims a sparse edge map exactly like the equivalent dense map (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.array(fc.tuple(fc.integer({ min: 0, max: 37 }), fc.integer({ min: 0, max: 300 })), { maxLength: 12 }), { maxLength: 10 }), (runs) => {
        const sparse = new CoverageBitmap(38);
        const dense = new CoverageBitmap(38);
        for (const run of runs) {
          const edges = new Map(run);
          const raw = new Uint8Array(38);
          for (const [index, hits] of edges) raw[index] = Math.min(255, hits);
          expect(sparse.claimEdges(edges)).toEqual(dense.claim(raw, { classified: false }));
        }
        expect([...sparse.snapshot()]).toEqual([...dense.snapshot()]);
      }),
    );
  });

  it('refuses a sparse edge outside the map', () => {
    const bitmap = new CoverageBitmap(16);
    expect(() => bitmap.claimEdges(new Map([[16, 1]]))).toThrow(RangeError);
    expect(() => bitmap.claimEdges(new Map([[-1, 1]]))).toThrow(RangeError);
  });

  it('counts covered edges in every byte lane, including a map size that is not a multiple of 4', () => {
    const bitmap = new CoverageBitmap(11);
    const map = new Uint8Array(11);
    for (const i of [0, 1, 2, 3, 6, 9, 10]) map[i] = 1;
    bitmap.claim(map);
    expect(bitmap.edgesCovered()).toBe(7);
  });
});
