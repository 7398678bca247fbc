/**
 * The open-addressing table inside the in-flight set's buffer: probing, insert, delete with
 * tombstones, and the in-place rebuild. `SlotTable` is the only code that reads or writes slots and
 * the LIVE/TOMB counters (layout in `layout.ts`, reasoning in docs/inflight.md); the group
 * algorithms and the writer mutex are in `inflight-target-set.ts` and `writer-mutex.ts`.
 *
 * Two kinds of method, never mixed:
 * - **lock-free reads** (`findLive`, `ownerOfLive`) read every word through `Atomics` and make
 *   their reads consistent with the slot's TAG version and the rebuild sequence lock;
 * - **locked methods** (everything else) require the caller to hold the writer mutex: they read
 *   with plain typed-array reads (only mutex holders write, and the mutex orders them) and write
 *   with `Atomics.store` exactly where a lock-free reader looks.
 */
import {
  H_LIVE_COUNT,
  H_REBUILD_SEQ,
  H_SLOT_COUNT,
  H_TOMB_COUNT,
  keyIndex,
  S_KEY_W0,
  S_KEY_W1,
  S_OWNER,
  S_TAG,
  slotBase,
  STATE_EMPTY,
  STATE_LIVE,
  STATE_MASK,
  STATE_TOMBSTONE,
  TAG_VERSION_STEP,
} from './layout.js';
import { homeSlotOf } from './target-ids.js';

/** `locate` result for an absent key whose chain has no free slot (cannot happen below the load limits). */
export const NO_FREE_SLOT = -1;

export class SlotTable {
  readonly slotCount: number;
  readonly mask: number;
  private readonly words: Int32Array;
  /** The same bytes as `words`, one element per 64-bit KEY (and per header word pair). */
  private readonly keys: BigUint64Array;

  constructor(buffer: SharedArrayBuffer) {
    this.words = new Int32Array(buffer);
    this.keys = new BigUint64Array(buffer);
    this.slotCount = Atomics.load(this.words, H_SLOT_COUNT);
    this.mask = this.slotCount - 1;
  }

  // ---- lock-free reads: every access through Atomics ---------------------------------------

  /** Slot of the LIVE entry for `key`, or -1. Retries across a concurrent rebuild. */
  findLive(key: bigint, home: number): number {
    const words = this.words;
    for (;;) {
      const seq = Atomics.load(words, H_REBUILD_SEQ);
      if ((seq & 1) === 0) {
        const slot = this.probe(key, home);
        if (Atomics.load(words, H_REBUILD_SEQ) === seq) return slot;
      }
    }
  }

  /** The owner of the LIVE entry for `key`, or 0. */
  ownerOfLive(key: bigint, home: number): number {
    const words = this.words;
    for (;;) {
      const slot = this.findLive(key, home);
      if (slot < 0) return 0;
      const base = slotBase(slot);
      const tag = Atomics.load(words, base + S_TAG);
      const owner = Atomics.load(words, base + S_OWNER) >>> 0;
      // Same LIVE tag around the owner and key reads: the owner belongs to this key's entry.
      if (
        (tag & STATE_MASK) === STATE_LIVE &&
        Atomics.load(this.keys, keyIndex(slot)) === key &&
        Atomics.load(words, base + S_TAG) === tag
      ) {
        return owner;
      }
    }
  }

  /** Lock-free count of LIVE entries. */
  liveCount(): number {
    return Atomics.load(this.words, H_LIVE_COUNT);
  }

  tombCount(): number {
    return Atomics.load(this.words, H_TOMB_COUNT);
  }

  rebuildCount(): number {
    return Atomics.load(this.words, H_REBUILD_SEQ) >>> 1;
  }

  private probe(key: bigint, home: number): number {
    const words = this.words;
    let slot = home;
    for (let step = 0; step < this.slotCount; step++) {
      const base = slotBase(slot);
      const tag = Atomics.load(words, base + S_TAG);
      const state = tag & STATE_MASK;
      if (state === STATE_EMPTY) return -1;
      // One 64-bit load: the KEY cannot be seen half old, half new.
      if (state === STATE_LIVE && Atomics.load(this.keys, keyIndex(slot)) === key) {
        if (Atomics.load(words, base + S_TAG) === tag) return slot;
        // The slot changed while we read its key: look at it again.
        step--;
        continue;
      }
      slot = (slot + 1) & this.mask;
    }
    return -1;
  }

  // ---- locked methods: caller holds the writer mutex; plain reads, atomic stores where readers look

  /** Plain read of the LIVE count; caller holds the mutex. */
  liveLocked(): number {
    return this.words[H_LIVE_COUNT]!;
  }

  tombsLocked(): number {
    return this.words[H_TOMB_COUNT]!;
  }

  /** Publishes new counters, each only if it changed: every store is a seq-cst write seen by `size()`. */
  storeCounts(live: number, tombs: number): void {
    const words = this.words;
    if (words[H_LIVE_COUNT] !== live) Atomics.store(words, H_LIVE_COUNT, live);
    if (words[H_TOMB_COUNT] !== tombs) Atomics.store(words, H_TOMB_COUNT, tombs);
  }

  /**
   * Slot holding (w0, w1) as LIVE if ≥ 0. Otherwise the key is absent and the result is
   * `-2 - free`, `free` being the first non-LIVE slot of its chain (or `NO_FREE_SLOT`).
   * Nothing moves under the mutex, so plain reads of the KEY as two words are exact.
   */
  locate(w0: number, w1: number, home: number): number {
    const words = this.words;
    let free = NO_FREE_SLOT;
    let slot = home;
    for (let step = 0; step < this.slotCount; step++) {
      const base = slotBase(slot);
      const state = words[base + S_TAG]! & STATE_MASK;
      if (state === STATE_LIVE) {
        if (words[base + S_KEY_W0] === w0 && words[base + S_KEY_W1] === w1) return slot;
      } else {
        if (free < 0) free = slot;
        if (state === STATE_EMPTY) break;
      }
      slot = (slot + 1) & this.mask;
    }
    return -2 - free;
  }

  /** Whether a slot is LIVE (plain read). */
  isLiveLocked(slot: number): boolean {
    return (this.words[slotBase(slot) + S_TAG]! & STATE_MASK) === STATE_LIVE;
  }

  /** Owner word of a slot as an unsigned number (plain read). */
  ownerLocked(slot: number): number {
    return this.words[slotBase(slot) + S_OWNER]! >>> 0;
  }

  /** First non-LIVE slot of the chain starting at `home`. Below the load limits one always exists. */
  firstFree(home: number): number {
    const words = this.words;
    let slot = home;
    while ((words[slotBase(slot) + S_TAG]! & STATE_MASK) === STATE_LIVE) slot = (slot + 1) & this.mask;
    return slot;
  }

  /**
   * Makes a non-LIVE slot a LIVE entry for `key` (whose words are w0, w1); returns the slot's
   * previous state. KEY (one 64-bit store) and OWNER are stored before the TAG turns LIVE, all
   * seq-cst, so a reader that sees the LIVE tag sees the whole entry, and a reader that saw the
   * slot's previous tag notices the version change.
   */
  fill(slot: number, key: bigint, w0: number, w1: number, owner: number): number {
    const words = this.words;
    const base = slotBase(slot);
    const tag = words[base + S_TAG]!;
    // A word that already holds the value needs no store: readers read the same value either way.
    if (words[base + S_KEY_W0] !== w0 || words[base + S_KEY_W1] !== w1) Atomics.store(this.keys, keyIndex(slot), key);
    if (words[base + S_OWNER] !== (owner | 0)) Atomics.store(words, base + S_OWNER, owner | 0);
    Atomics.store(words, base + S_TAG, nextTag(tag, STATE_LIVE));
    return tag & STATE_MASK;
  }

  /**
   * Takes a LIVE slot out; returns the change in the tombstone count. If the next slot is empty,
   * the slot becomes empty at once together with the run of tombstones just before it: a chain
   * that reaches an empty slot stops there, so no live entry lies beyond such a run and no probe
   * chain can break. Otherwise it becomes a tombstone so the chain through it stays intact.
   */
  remove(slot: number): number {
    const words = this.words;
    const at = slotBase(slot) + S_TAG;
    if ((words[slotBase((slot + 1) & this.mask) + S_TAG]! & STATE_MASK) !== STATE_EMPTY) {
      Atomics.store(words, at, nextTag(words[at]!, STATE_TOMBSTONE));
      return 1;
    }
    Atomics.store(words, at, nextTag(words[at]!, STATE_EMPTY));
    let delta = 0;
    let cursor = (slot - 1) & this.mask;
    for (let step = 1; step < this.slotCount; step++) {
      const before = slotBase(cursor) + S_TAG;
      const tag = words[before]!;
      if ((tag & STATE_MASK) !== STATE_TOMBSTONE) break;
      Atomics.store(words, before, nextTag(tag, STATE_EMPTY));
      delta--;
      cursor = (cursor - 1) & this.mask;
    }
    return delta;
  }

  /**
   * Re-inserts every live entry into a table without tombstones and sets the tombstone count to
   * 0 (the live count is unchanged). Entries move, so the rebuild sequence is odd throughout and
   * lock-free readers retry until it is even again; every store is seq-cst so that a reader that
   * sees the sequence unchanged saw none of them. Rare, so it may allocate.
   */
  rebuild(): void {
    const words = this.words;
    const live = words[H_LIVE_COUNT]!;
    const keptKey = new Array<bigint>(live);
    const keptW0 = new Int32Array(live);
    const keptW1 = new Int32Array(live);
    const keptOwner = new Int32Array(live);
    let kept = 0;
    Atomics.add(words, H_REBUILD_SEQ, 1);
    for (let slot = 0; slot < this.slotCount; slot++) {
      const base = slotBase(slot);
      const tag = words[base + S_TAG]!;
      const state = tag & STATE_MASK;
      if (state === STATE_LIVE) {
        keptKey[kept] = this.keys[keyIndex(slot)]!;
        keptW0[kept] = words[base + S_KEY_W0]!;
        keptW1[kept] = words[base + S_KEY_W1]!;
        keptOwner[kept] = words[base + S_OWNER]!;
        kept++;
      }
      if (state !== STATE_EMPTY) Atomics.store(words, base + S_TAG, nextTag(tag, STATE_EMPTY));
    }
    Atomics.store(words, H_TOMB_COUNT, 0);
    for (let i = 0; i < kept; i++) {
      const w0 = keptW0[i]!;
      const w1 = keptW1[i]!;
      this.fill(this.firstFree(homeSlotOf(w0, w1, this.mask)), keptKey[i]!, w0, w1, keptOwner[i]! >>> 0);
    }
    Atomics.add(words, H_REBUILD_SEQ, 1);
  }
}

/** The TAG after a transition to `state`: version bumped so readers notice the change. */
function nextTag(tag: number, state: number): number {
  return ((tag & ~STATE_MASK) + TAG_VERSION_STEP) | state;
}
