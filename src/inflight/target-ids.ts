/**
 * Validation and splitting of target ids for the in-flight set. A target is a branch id in
 * 1..2^64−1 carried as a `bigint`. The set stores the bigint itself as one 64-bit KEY and, under
 * the writer mutex, compares it as the KEY's two 32-bit words in memory order (`w0`, `w1`: low
 * half first on little-endian platforms), which this file produces (see `layout.ts`).
 */
import { InvalidJobError } from '../errors.js';
import { describeValue, invalidOption } from '../config/values.js';

const MAX_OWNER = 0xffff_ffff;
/** Words of the per-call hash filter that spares most groups the pairwise duplicate check. */
const FILTER_WORDS = 8;
/** Above this group size, duplicate detection uses a Set instead of pairwise comparison. */
const PAIRWISE_DUPLICATE_LIMIT = 64;

/**
 * Conversion view for splitting a bigint without BigInt arithmetic: storing into a BigUint64Array
 * and reading the two Int32 words back costs no allocation, whereas `t >> 32n` allocates a BigInt
 * per target. Module-level and used synchronously, so one view serves every instance in a thread.
 */
const wide = new BigUint64Array(1);
/** The two words of `wide[0]` in memory order, exactly as a slot's KEY_W0/KEY_W1 hold them. */
const halves = new Int32Array(wide.buffer);

/**
 * Whether `target` is a bigint in 1..2^64−1; on true its words are in `halves[0]` and
 * `halves[1]`. Two comparisons with literal bigints allocate nothing (unlike
 * `BigInt.asUintN(64, t) === t`, which materialises a second BigInt and so feeds the GC).
 */
function loadTarget(target: unknown): target is bigint {
  if (typeof target !== 'bigint' || target <= 0n || target >= 0x1_0000_0000_0000_0000n) return false;
  wide[0] = target;
  return true;
}

/**
 * Reusable scratch for split targets and home slots: grows to the largest group seen, never
 * shrinks, so a group call allocates nothing.
 */
export class SplitTargets {
  /**
   * The validated bigints, copied out of the caller's array so that what is stored is exactly
   * what was checked (the caller's array is not read again). Holding the references allocates
   * nothing.
   */
  keys: bigint[] = new Array<bigint>(64).fill(0n);
  /** KEY_W0 / KEY_W1 of each member (see `layout.ts`). */
  lo = new Int32Array(64);
  hi = new Int32Array(64);
  /** Home slot of each member for the table mask passed to `split`. */
  home = new Int32Array(64);
  /**
   * 256-bit filter over the top 8 bits of each member's hash, empty between calls. Equal targets
   * have equal hashes, so a group whose members all set distinct bits has no duplicate and skips
   * the pairwise comparison; any shared bit falls back to the exact check.
   */
  private readonly hashFilter = new Int32Array(FILTER_WORDS);

  /**
   * Validates `targets` (an array of distinct bigints in 1..2^64−1) and writes them into `keys`,
   * their words into `lo`/`hi` and their home slots (for `mask`) into `home`. Returns the count. Throws
   * `InvalidJobError` naming the first bad entry.
   */
  split(targets: readonly bigint[], mask: number): number {
    if (!Array.isArray(targets)) {
      throw new InvalidJobError('a target group must be an array of bigint target ids', { targets: describeValue(targets) });
    }
    const n = targets.length;
    if (n > this.lo.length) {
      let size = this.lo.length;
      while (size < n) size *= 2;
      this.keys = new Array<bigint>(size).fill(0n);
      this.lo = new Int32Array(size);
      this.hi = new Int32Array(size);
      this.home = new Int32Array(size);
    }
    const { keys, lo, hi, home, hashFilter } = this;
    let maybeDuplicate = false;
    for (let i = 0; i < n; i++) {
      const target = targets[i];
      if (!loadTarget(target)) {
        hashFilter.fill(0);
        throw new InvalidJobError(`target id at index ${i} must be a bigint in 1..2^64-1, got ${describeTarget(target)}`, {
          index: i,
          target: describeTarget(target),
        });
      }
      const l = halves[0]!;
      const h = halves[1]!;
      keys[i] = target;
      lo[i] = l;
      hi[i] = h;
      const hash = hashOf(l, h);
      home[i] = hash & mask;
      const word = hash >>> 29;
      const bit = 1 << ((hash >>> 24) & 31);
      const seen = hashFilter[word]!;
      if ((seen & bit) !== 0) maybeDuplicate = true;
      hashFilter[word] = seen | bit;
    }
    for (let w = 0; w < FILTER_WORDS; w++) hashFilter[w] = 0;
    if (!maybeDuplicate) return n;
    if (n <= PAIRWISE_DUPLICATE_LIMIT) {
      for (let i = 1; i < n; i++) {
        const l = lo[i];
        const h = hi[i];
        for (let j = 0; j < i; j++) {
          if (l === lo[j] && h === hi[j]) throw duplicate(keys, i);
        }
      }
    } else if (new Set(keys.slice(0, n)).size !== n) {
      const seen = new Set<bigint>();
      for (let i = 0; i < n; i++) {
        if (seen.has(keys[i]!)) throw duplicate(keys, i);
        seen.add(keys[i]!);
      }
    }
    return n;
  }
}

/** Throws unless `owner` is an integer in 1..2^32−1 (0 means "no owner" in `ownerOf`). */
export function checkOwner(owner: number): void {
  if (!Number.isInteger(owner) || owner < 1 || owner > MAX_OWNER) {
    throw invalidOption('owner', 'an integer in 1..4294967295', owner);
  }
}

/** KEY_W0 / KEY_W1 of one target id, validated; for single-target reads. */
export function splitOne(target: bigint): [w0: number, w1: number] {
  if (!loadTarget(target)) {
    throw new InvalidJobError(`target id must be a bigint in 1..2^64-1, got ${describeTarget(target)}`, {
      target: describeTarget(target),
    });
  }
  return [halves[0]!, halves[1]!];
}

/**
 * Home slot of a target: a 32-bit avalanche (murmur3 finaliser) of both words, so sequential
 * branch ids and ids differing only in the high half spread over the table.
 */
export function homeSlotOf(lo: number, hi: number, mask: number): number {
  return hashOf(lo, hi) & mask;
}

/** The 32-bit hash behind `homeSlotOf` (as an unsigned number). */
function hashOf(lo: number, hi: number): number {
  let h = lo ^ Math.imul(hi, 0x9e3779b1);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function duplicate(targets: readonly bigint[], index: number): InstanceType<typeof InvalidJobError> {
  return new InvalidJobError(`target group lists target ${targets[index]} twice; a group is a set`, {
    index,
    target: String(targets[index]),
  });
}

const describeTarget = describeValue;

/** Home slot of one target id for `mask`, validated; for single-target reads (allocates nothing). */
export function checkedHome(target: bigint, mask: number): number {
  if (!loadTarget(target)) {
    throw new InvalidJobError(`target id must be a bigint in 1..2^64-1, got ${describeTarget(target)}`, {
      target: describeTarget(target),
    });
  }
  return homeSlotOf(halves[0]!, halves[1]!, mask);
}
