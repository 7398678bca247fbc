/**
 * Memory layout of the shared in-flight target set. Every index into the buffer is named here;
 * `InflightTargetSet` (with its `writer-mutex.ts`) is the only code that reads or writes the
 * buffer. Lock-free readers go through `Atomics`; under the writer mutex reads are plain and only
 * the writes a lock-free reader can observe are `Atomics.store` (see docs/inflight.md).
 *
 * The buffer is one `Int32Array`: a 16-word header, then `slotCount` slots of 4 words each.
 *
 * ```
 *  word  0        1          2           3          4       5          6        7      8..15
 *      +--------+----------+-----------+----------+-------+----------+--------+------+--------+
 *      | MAGIC  | LAYOUT   | SLOT      | CAPACITY | MUTEX | REBUILD  | LIVE   | TOMB | (zero, |
 *      |        | VERSION  | COUNT     | (max     | 0/1/2 | SEQ      | COUNT  | COUNT| spare) |
 *      |        |          | (pow. 2)  |  live)   |       | even=ok  |        |      |        |
 *      +--------+----------+-----------+----------+-------+----------+--------+------+--------+
 *  word 16 + 4*i: slot i
 *      +----------------------------+-------------+-------------+---------------+
 *      | TAG = version << 2 | state | KEY_LO (u32)| KEY_HI (u32)| OWNER (u32)   |
 *      | state: 0 EMPTY 1 LIVE      | low half of | high half of| ≥ 1 while LIVE|
 *      |        2 TOMBSTONE         | the target  | the target  |               |
 *      +----------------------------+-------------+-------------+---------------+
 * ```
 *
 * Why two 32-bit halves instead of a `BigUint64Array`: reading a BigUint64Array element yields a
 * heap BigInt per probe, which would dominate the cost of a lookup; two Int32 words compare as
 * plain numbers. A lock-free reader makes the two-word read consistent with the slot's TAG: the
 * TAG's version changes on every state change of the slot, and writers only touch KEY/OWNER while
 * the slot is not LIVE, with seq-cst stores ordered after the TAG change that left LIVE, so "same
 * TAG before and after reading the key" means the key belongs to that LIVE entry.
 */

/** "SYMF" in ASCII: `attach()` refuses a buffer that was not made by `InflightTargetSet.create`. */
export const MAGIC = 0x53594d46;
/** Bumped whenever this layout changes, so an old buffer is refused instead of misread. */
export const LAYOUT_VERSION = 1;

export const HEADER_WORDS = 16;
export const H_MAGIC = 0;
export const H_LAYOUT_VERSION = 1;
/** Number of slots; a power of two so the probe sequence is `(home + k) & (slotCount - 1)`. */
export const H_SLOT_COUNT = 2;
/** Maximum number of LIVE entries (the `capacity` the caller asked for). */
export const H_CAPACITY = 3;
/** Writer mutex: 0 = free, 1 = held, 2 = held and a worker thread may be sleeping on it. */
export const H_MUTEX = 4;
/** Sequence lock around whole-table rebuilds: odd while entries move, readers retry. */
export const H_REBUILD_SEQ = 5;
export const H_LIVE_COUNT = 6;
export const H_TOMB_COUNT = 7;

export const MUTEX_FREE = 0;
export const MUTEX_HELD = 1;
export const MUTEX_CONTENDED = 2;

export const SLOT_WORDS = 4;
export const S_TAG = 0;
export const S_KEY_LO = 1;
export const S_KEY_HI = 2;
export const S_OWNER = 3;

export const STATE_MASK = 0b11;
export const STATE_EMPTY = 0;
export const STATE_LIVE = 1;
export const STATE_TOMBSTONE = 2;
/** Added to a TAG on every transition; the version lives above the two state bits. */
export const TAG_VERSION_STEP = 4;

/**
 * Live entries never exceed 3/4 of the slots: `slotCount` is the smallest power of two with
 * `capacity <= slotCount * MAX_LIVE_LOAD`. Short linear-probe chains at full capacity.
 */
export const MAX_LIVE_LOAD = 0.75;
/**
 * LIVE + TOMBSTONE slots never exceed 7/8 of the slots: a reservation that would cross this line
 * first rebuilds the table without tombstones. Keeps empty slots around so a miss ends early.
 */
export const MAX_OCCUPIED_LOAD = 0.875;

/** Largest accepted capacity (2^24 live targets → 2^25 slots, 512 MiB of buffer). */
export const MAX_CAPACITY = 2 ** 24;

/** Slot count for a capacity: smallest power of two ≥ 8 that keeps live load ≤ MAX_LIVE_LOAD. */
export function slotCountFor(capacity: number): number {
  let slots = 8;
  while (capacity > slots * MAX_LIVE_LOAD) slots *= 2;
  return slots;
}

/** Buffer size in bytes for a slot count. */
export function byteLengthFor(slotCount: number): number {
  return (HEADER_WORDS + slotCount * SLOT_WORDS) * Int32Array.BYTES_PER_ELEMENT;
}

/** Word index of a slot's first word. */
export function slotBase(slot: number): number {
  return HEADER_WORDS + slot * SLOT_WORDS;
}
