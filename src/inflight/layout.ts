/**
 * Memory layout of the shared in-flight target set. Every index into the buffer is named here;
 * `SlotTable` (`slot-table.ts`) is the only code that reads or writes the slots and counters,
 * `writer-mutex.ts` the mutex word, `InflightTargetSet` the rest of the header at create/attach.
 * Lock-free readers go through `Atomics`; under the writer mutex reads are plain and only the
 * writes a lock-free reader can observe are `Atomics.store` (see docs/inflight.md).
 *
 * The buffer is viewed as an `Int32Array` (`words`) and, over the same bytes, a `BigUint64Array`
 * (`keys`): a 16-word header, then `slotCount` slots of 4 words each. Each slot starts on an
 * 8-byte boundary, so its KEY is one element of the 64-bit view.
 *
 * ```
 *  word  0        1          2           3          4       5          6        7      8..15
 *      +--------+----------+-----------+----------+-------+----------+--------+------+--------+
 *      | MAGIC  | LAYOUT   | SLOT      | CAPACITY | MUTEX | REBUILD  | LIVE   | TOMB | (zero, |
 *      |        | VERSION  | COUNT     | (max     | 0/1/2 | SEQ      | COUNT  | COUNT| spare) |
 *      |        |          | (pow. 2)  |  live)   |       | even=ok  |        |      |        |
 *      +--------+----------+-----------+----------+-------+----------+--------+------+--------+
 *  word 16 + 4*i (= 64-bit element 8 + 2*i): slot i
 *      +------------------------------+------------------------------+---------------+
 *      | KEY (u64: KEY_W0, KEY_W1)    | TAG = version << 2 | state   | OWNER (u32)   |
 *      | the target; written with one | state: 0 EMPTY 1 LIVE        | ≥ 1 while LIVE|
 *      | 64-bit Atomics.store         |        2 TOMBSTONE           |               |
 *      +------------------------------+------------------------------+---------------+
 * ```
 *
 * The KEY is written as one 64-bit `Atomics.store` of the target bigint itself (no splitting, one
 * seq-cst store instead of two) and read lock-free as one 64-bit `Atomics.load` of the same
 * element, so a reader never sees half of one key and half of another. Under the writer mutex,
 * where nothing races, it is read as two plain Int32 words compared with the target's halves:
 * reading a BigUint64Array element would make a heap BigInt per probe. The TAG version still
 * changes on every state change of the slot, and writers only touch KEY/OWNER while the slot is
 * not LIVE, with seq-cst stores ordered after the TAG change that left LIVE: "same TAG before and
 * after" is what pins a lock-free reader's KEY and OWNER reads to one entry.
 */

/** "SYMF" in ASCII: `attach()` refuses a buffer that was not made by `InflightTargetSet.create`. */
export const MAGIC = 0x53594d46;
/** Bumped whenever this layout changes, so an old buffer is refused instead of misread. */
export const LAYOUT_VERSION = 2;

const HEADER_WORDS = 16;
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

const SLOT_WORDS = 4;
/**
 * Word offsets in a slot. KEY_W0/KEY_W1 are the KEY's two 32-bit words in memory order (low half
 * first on little-endian platforms); `target-ids.ts` splits a target the same way.
 */
export const S_KEY_W0 = 0;
export const S_KEY_W1 = 1;
export const S_TAG = 2;
export const S_OWNER = 3;
/** 64-bit elements per slot and before the first slot (the KEY is a slot's first element). */
const SLOT_KEYS = SLOT_WORDS / 2;
const HEADER_KEYS = HEADER_WORDS / 2;

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
const MAX_LIVE_LOAD = 0.75;
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

/** Index of a slot's KEY in the 64-bit view. */
export function keyIndex(slot: number): number {
  return HEADER_KEYS + slot * SLOT_KEYS;
}
