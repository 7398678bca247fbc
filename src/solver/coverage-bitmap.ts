/**
 * The global AFL-style coverage map shared by every solver thread of a process.
 *
 * Layout: one SharedArrayBuffer of `sizeBytes` bytes (default 65,536 = AFL's MAP_SIZE); byte `i`
 * holds the union of the hit-count *buckets* (one bit each) ever seen for edge `i`:
 *
 *   byte i:  bit 0   1   2   3    4     5      6       7
 *   hits:        1   2   3  4-7  8-15 16-31 32-127 128-255
 *
 * An input is novel when some byte of its bucketed map has a bit the global map lacks (a new edge,
 * or a known edge in a new hit-count bucket). Claims use `Atomics.or`, which returns the previous
 * byte atomically, so when several threads merge overlapping maps at once exactly one of them sees
 * each new bit as new: the same finding is never published twice by two threads. Bits are only
 * ever added, which also makes the cheap non-atomic pre-check below safe (a bit seen set stays set).
 * This class is the only code that touches the buffer.
 */
import type { CoverageNovelty } from './solver-types.js';

const DEFAULT_MAP_SIZE_BYTES = 65_536;

/** AFL's `count_class_lookup8`: raw hit count → one-hot bucket. */
export const COUNT_CLASS: Uint8Array = (() => {
  const table = new Uint8Array(256);
  for (let count = 0; count < 256; count++) {
    table[count] =
      count === 0 ? 0
      : count === 1 ? 1
      : count === 2 ? 2
      : count === 3 ? 4
      : count <= 7 ? 8
      : count <= 15 ? 16
      : count <= 31 ? 32
      : count <= 127 ? 64
      : 128;
  }
  return table;
})();

/** Buckets raw hit counts (what `afl-showmap -r` or a raw trace gives) into AFL's classes. */
export function classifyCounts(raw: Uint8Array): Uint8Array {
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = COUNT_CLASS[raw[i]!]!;
  return out;
}

interface ClaimOptions {
  /**
   * The map is already bucketed (what `afl-showmap -b` writes, and the reference solver's showmap
   * mode). Default true. Pass false for raw hit counts.
   */
  readonly classified?: boolean;
}

export class CoverageBitmap {
  readonly buffer: SharedArrayBuffer;
  readonly sizeBytes: number;
  readonly #map: Uint8Array;

  constructor(bufferOrSize: SharedArrayBuffer | number = DEFAULT_MAP_SIZE_BYTES) {
    const buffer = typeof bufferOrSize === 'number' ? new SharedArrayBuffer(bufferOrSize) : bufferOrSize;
    if (!(buffer instanceof SharedArrayBuffer) || buffer.byteLength === 0) {
      throw new RangeError('CoverageBitmap needs a non-empty SharedArrayBuffer or a positive size');
    }
    this.buffer = buffer;
    this.sizeBytes = buffer.byteLength;
    this.#map = new Uint8Array(buffer);
  }

  /**
   * Merges `map` into the global map and returns what this call was first to set. A map longer
   * than the global map is an error (edges would be lost silently); a shorter one (an AFL++ target
   * with a smaller dynamic map) covers the first bytes only.
   */
  claim(map: Uint8Array, options: ClaimOptions = {}): CoverageNovelty {
    if (map.length > this.sizeBytes) {
      throw new RangeError(`coverage map of ${map.length} bytes exceeds the shared map (${this.sizeBytes} bytes)`);
    }
    const classified = options.classified ?? true;
    const global = this.#map;
    let newBytes = 0;
    let newBits = 0;
    for (let i = 0; i < map.length; i++) {
      const raw = map[i]!;
      if (raw === 0) continue;
      const bits = classified ? raw : COUNT_CLASS[raw]!;
      // Plain read first: bits never disappear, so "already all set" is final and skips the RMW.
      if ((global[i]! & bits) === bits) continue;
      const previous = Atomics.or(global, i, bits);
      const gained = bits & ~previous;
      if (gained !== 0) {
        newBytes += 1;
        newBits += popcount8(gained);
      }
    }
    return { newBytes, newBits };
  }

  /**
   * `claim` for a sparse map: `edges` maps a map index to its raw hit count (bucketed here). Same
   * atomicity as `claim`; costs what the input touched instead of a pass over the whole map.
   */
  claimEdges(edges: ReadonlyMap<number, number>): CoverageNovelty {
    const global = this.#map;
    let newBytes = 0;
    let newBits = 0;
    for (const [index, hits] of edges) {
      if (!Number.isInteger(index) || index < 0 || index >= this.sizeBytes) {
        throw new RangeError(`coverage edge index ${index} is outside the shared map (${this.sizeBytes} bytes)`);
      }
      const bits = COUNT_CLASS[Math.min(255, Math.max(0, hits))]!;
      if (bits === 0 || (global[index]! & bits) === bits) continue;
      const gained = bits & ~Atomics.or(global, index, bits);
      if (gained !== 0) {
        newBytes += 1;
        newBits += popcount8(gained);
      }
    }
    return { newBytes, newBits };
  }

  /** True when `map` would add a bit, without merging it. */
  wouldBeNovel(map: Uint8Array, options: ClaimOptions = {}): boolean {
    const classified = options.classified ?? true;
    const limit = Math.min(map.length, this.sizeBytes);
    for (let i = 0; i < limit; i++) {
      const raw = map[i]!;
      if (raw === 0) continue;
      const bits = classified ? raw : COUNT_CLASS[raw]!;
      if ((Atomics.load(this.#map, i) & bits) !== bits) return true;
    }
    return false;
  }

  /**
   * Number of map bytes (edges) with any bit set. A statistic, read word by word with plain loads:
   * bits are only ever added, so a concurrent claim can at worst be missed by this one count, and a
   * per-byte `Atomics.load` pass over 64 KiB cost milliseconds per call.
   */
  edgesCovered(): number {
    const whole = this.sizeBytes >>> 2;
    const words = new Uint32Array(this.buffer, 0, whole);
    let count = 0;
    for (let w = 0; w < whole; w++) {
      const word = words[w]!;
      if (word === 0) continue;
      if ((word & 0xff) !== 0) count++;
      if ((word & 0xff00) !== 0) count++;
      if ((word & 0xff0000) !== 0) count++;
      if ((word & 0xff000000) !== 0) count++;
    }
    for (let i = whole << 2; i < this.sizeBytes; i++) if (this.#map[i] !== 0) count++;
    return count;
  }

  /** A private copy of the current map (for stats files or persistence). */
  snapshot(): Uint8Array {
    const copy = new Uint8Array(this.sizeBytes);
    for (let i = 0; i < this.sizeBytes; i++) copy[i] = Atomics.load(this.#map, i);
    return copy;
  }
}

function popcount8(value: number): number {
  let v = value - ((value >> 1) & 0x55);
  v = (v & 0x33) + ((v >> 2) & 0x33);
  return (v + (v >> 4)) & 0x0f;
}
