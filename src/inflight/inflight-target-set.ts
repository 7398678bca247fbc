/**
 * The in-flight target set: which branch targets some job of this process is solving right now,
 * shared by every thread through one SharedArrayBuffer. It sits in front of the durable target
 * lease table as a fast, synchronous local filter; the durable table stays authoritative. The
 * design is explained in docs/inflight.md.
 *
 * Concurrency scheme:
 * - **Mutations** (reserve, release, rebuild) run under one short writer mutex in the buffer
 *   (`writer-mutex.ts`), taken once per group call. A group reserve checks every member, then
 *   inserts every member, inside one critical section, so two reservers can never both admit a
 *   target (no double admission), and a reserve that fails has written nothing (all-or-nothing,
 *   no rollback needed). A reserve that cannot get the mutex within `reserveLockWaitMs` gives up
 *   and returns false (a transient false conflict); a release waits up to `releaseLockWaitMs`,
 *   then throws `LockTimeoutError` (only a thread terminated inside a critical section could
 *   cause that).
 * - **Under the mutex** every read is a plain typed-array read: only mutex holders write, and the
 *   mutex's seq-cst acquire/release orders their accesses. Writes that a lock-free reader can
 *   observe (a slot's KEY/OWNER/TAG, the counters) stay `Atomics.store`, because only seq-cst
 *   writes give the readers' TAG-version check its meaning (see `layout.ts`).
 * - **Reads** (`has`, `ownerOf`, `size`, and the fail-fast pre-check of a contended reserve) take
 *   no lock and read through `Atomics`. Entries never move except in a rebuild, which is
 *   bracketed by a sequence lock that readers re-check; a slot's TAG version makes the two-word
 *   key read consistent. A reader may see a group that is being reserved partially; the
 *   all-or-nothing guarantee is between reservers.
 * - **Deletion** leaves a tombstone so probe chains stay intact. A run of tombstones that ends at
 *   an empty slot is turned back into empty slots at once (no live chain can pass through it), and
 *   when tombstones plus live entries would pass `MAX_OCCUPIED_LOAD`, the next reserve rebuilds the
 *   table in place without tombstones.
 */
import { InflightFullError, LockTimeoutError } from '../errors.js';
import { checkOptionsObject, invalidOption } from '../config/values.js';
import {
  byteLengthFor,
  H_CAPACITY,
  H_LAYOUT_VERSION,
  H_LIVE_COUNT,
  H_MAGIC,
  H_REBUILD_SEQ,
  H_SLOT_COUNT,
  H_TOMB_COUNT,
  LAYOUT_VERSION,
  MAGIC,
  MAX_CAPACITY,
  MAX_OCCUPIED_LOAD,
  S_KEY_HI,
  S_KEY_LO,
  S_OWNER,
  S_TAG,
  slotBase,
  slotCountFor,
  STATE_EMPTY,
  STATE_LIVE,
  STATE_MASK,
  STATE_TOMBSTONE,
  TAG_VERSION_STEP,
} from './layout.js';
import { checkOwner, homeSlotOf, SplitTargets, splitOne } from './target-ids.js';
import { lockWithin, tryLockNow, unlock } from './writer-mutex.js';

/** Default of `reserveLockWaitMs`. */
export const RESERVE_LOCK_WAIT_MS = 20;
/** Default of `releaseLockWaitMs`. */
export const RELEASE_LOCK_WAIT_MS = 10_000;
const MAX_LOCK_WAIT_MS = 600_000;

/** Per-instance tuning; each thread's instance may choose its own. */
export interface InflightSetOptions {
  /**
   * How long `tryReserveGroup` tries for the writer mutex before giving up and returning false
   * (a transient false conflict). Milliseconds, default 20.
   */
  readonly reserveLockWaitMs?: number;
  /**
   * How long `releaseGroup` waits for the writer mutex before throwing `LockTimeoutError` with
   * nothing released. Milliseconds, default 10 000. Only a thread terminated inside a critical
   * section can hold the mutex that long.
   */
  readonly releaseLockWaitMs?: number;
}

/** Counters for tests, docs and status output; read without the mutex, so only approximately consistent. */
export interface InflightStats {
  readonly size: number;
  readonly capacity: number;
  readonly slotCount: number;
  readonly tombstones: number;
  readonly rebuilds: number;
}

/** `locate` result for an absent key whose chain has no free slot (cannot happen below the load limits). */
const NO_FREE_SLOT = -1;

export class InflightTargetSet {
  /** The shared memory; pass it to another thread and `attach` it there. */
  readonly buffer: SharedArrayBuffer;
  /** Maximum number of targets held at once. */
  readonly capacity: number;
  private readonly words: Int32Array;
  private readonly slotCount: number;
  private readonly mask: number;
  private readonly maxOccupied: number;
  private readonly scratch = new SplitTargets();
  /** Per member of the group being reserved: where the locked check saw it could be inserted. */
  private freeSlots = new Int32Array(64);
  private readonly reserveLockWaitMs: number;
  private readonly releaseLockWaitMs: number;

  private constructor(buffer: SharedArrayBuffer, options: InflightSetOptions) {
    checkOptionsObject(options, 'options');
    this.reserveLockWaitMs = lockWait('reserveLockWaitMs', options.reserveLockWaitMs, RESERVE_LOCK_WAIT_MS);
    this.releaseLockWaitMs = lockWait('releaseLockWaitMs', options.releaseLockWaitMs, RELEASE_LOCK_WAIT_MS);
    this.buffer = buffer;
    this.words = new Int32Array(buffer);
    this.slotCount = Atomics.load(this.words, H_SLOT_COUNT);
    this.capacity = Atomics.load(this.words, H_CAPACITY);
    this.mask = this.slotCount - 1;
    this.maxOccupied = Math.floor(this.slotCount * MAX_OCCUPIED_LOAD);
  }

  /** A new, empty set for up to `capacity` targets (integer in 1..2^24). */
  static create(capacity: number, options: InflightSetOptions = {}): InflightTargetSet {
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > MAX_CAPACITY) {
      throw invalidOption('capacity', `an integer in 1..${MAX_CAPACITY}`, capacity);
    }
    const slotCount = slotCountFor(capacity);
    const buffer = new SharedArrayBuffer(byteLengthFor(slotCount));
    const words = new Int32Array(buffer);
    Atomics.store(words, H_SLOT_COUNT, slotCount);
    Atomics.store(words, H_CAPACITY, capacity);
    Atomics.store(words, H_LAYOUT_VERSION, LAYOUT_VERSION);
    // MAGIC last: a buffer is only attachable once its header is complete.
    Atomics.store(words, H_MAGIC, MAGIC);
    return new InflightTargetSet(buffer, options);
  }

  /** Wraps a buffer made by `create` (typically in another thread). Refuses anything else. */
  static attach(buffer: SharedArrayBuffer, options: InflightSetOptions = {}): InflightTargetSet {
    const expected = 'the .buffer of an InflightTargetSet';
    if (!(buffer instanceof SharedArrayBuffer) || buffer.byteLength < byteLengthFor(0)) {
      throw invalidOption('buffer', expected, buffer);
    }
    const words = new Int32Array(buffer);
    const slotCount = Atomics.load(words, H_SLOT_COUNT);
    if (
      Atomics.load(words, H_MAGIC) !== MAGIC ||
      Atomics.load(words, H_LAYOUT_VERSION) !== LAYOUT_VERSION ||
      slotCount < 8 ||
      (slotCount & (slotCount - 1)) !== 0 ||
      buffer.byteLength !== byteLengthFor(slotCount) ||
      slotCountFor(Atomics.load(words, H_CAPACITY)) !== slotCount
    ) {
      throw invalidOption('buffer', `${expected} (layout version ${LAYOUT_VERSION})`, `SharedArrayBuffer(${buffer.byteLength})`);
    }
    return new InflightTargetSet(buffer, options);
  }

  /**
   * Reserves every target of a group for `owner`, or none of them.
   *
   * Contract: `targets` are distinct bigints in 1..2^64−1 (else `InvalidJobError`), `owner` an
   * integer in 1..2^32−1. Returns true when every target was free and is now held by `owner`.
   * Returns false — with nothing reserved — when any target is already held (by anyone, the same
   * owner included) or, rarely, when the writer mutex stayed busy past `reserveLockWaitMs`.
   * Throws `InflightFullError`, with nothing reserved, when the group would take the set past
   * `capacity`. An empty group is an untargeted job: true, nothing reserved.
   */
  tryReserveGroup(targets: readonly bigint[], owner: number): boolean {
    checkOwner(owner);
    const count = this.scratch.split(targets, this.mask);
    if (count === 0) return true;
    const words = this.words;
    if (!tryLockNow(words)) {
      // Contended: a conflict visible without the mutex fails at once instead of waiting for it.
      if (this.anyMemberLive(count)) return false;
      if (!lockWithin(words, this.reserveLockWaitMs)) return false;
    }
    try {
      return this.reserveLocked(count, owner);
    } finally {
      unlock(words);
    }
  }

  /**
   * Releases the targets of a group that `owner` holds; targets held by another owner or by no
   * one are left alone. Returns how many were released.
   *
   * Contract: same argument rules as `tryReserveGroup`. Never fails half-way once the mutex is
   * held; throws `LockTimeoutError` (nothing released) if the mutex stays busy past
   * `releaseLockWaitMs`.
   */
  releaseGroup(targets: readonly bigint[], owner: number): number {
    checkOwner(owner);
    const count = this.scratch.split(targets, this.mask);
    if (count === 0) return 0;
    const words = this.words;
    if (!tryLockNow(words) && !lockWithin(words, this.releaseLockWaitMs)) {
      throw new LockTimeoutError(
        `in-flight target set: writer mutex still held after ${this.releaseLockWaitMs} ms; nothing was released`,
        { waitMs: this.releaseLockWaitMs },
      );
    }
    try {
      return this.releaseLocked(count, owner);
    } finally {
      unlock(words);
    }
  }

  /** Whether some owner holds `target`. Lock-free. */
  has(target: bigint): boolean {
    const [lo, hi] = splitOne(target);
    return this.findLive(lo, hi, homeSlotOf(lo, hi, this.mask)) >= 0;
  }

  /** The owner holding `target`, or 0 when none does. Lock-free. */
  ownerOf(target: bigint): number {
    const [lo, hi] = splitOne(target);
    const home = homeSlotOf(lo, hi, this.mask);
    for (;;) {
      const slot = this.findLive(lo, hi, home);
      if (slot < 0) return 0;
      const base = slotBase(slot);
      const tag = Atomics.load(this.words, base + S_TAG);
      const owner = Atomics.load(this.words, base + S_OWNER) >>> 0;
      // Same LIVE tag around the owner read: the owner belongs to this key's entry.
      if (
        (tag & STATE_MASK) === STATE_LIVE &&
        Atomics.load(this.words, base + S_KEY_LO) === lo &&
        Atomics.load(this.words, base + S_KEY_HI) === hi &&
        Atomics.load(this.words, base + S_TAG) === tag
      ) {
        return owner;
      }
    }
  }

  /** Number of targets held. Lock-free. */
  size(): number {
    return Atomics.load(this.words, H_LIVE_COUNT);
  }

  stats(): InflightStats {
    return {
      size: Atomics.load(this.words, H_LIVE_COUNT),
      capacity: this.capacity,
      slotCount: this.slotCount,
      tombstones: Atomics.load(this.words, H_TOMB_COUNT),
      rebuilds: Atomics.load(this.words, H_REBUILD_SEQ) >>> 1,
    };
  }

  // ---- lock-free reads: every access through Atomics ---------------------------------------

  /** Whether any member of the split group is visibly LIVE. */
  private anyMemberLive(count: number): boolean {
    const { lo, hi, home } = this.scratch;
    for (let i = 0; i < count; i++) {
      if (this.findLive(lo[i]!, hi[i]!, home[i]!) >= 0) return true;
    }
    return false;
  }

  /** Slot of the LIVE entry for (lo, hi), or -1. Retries across a concurrent rebuild. */
  private findLive(lo: number, hi: number, home: number): number {
    const words = this.words;
    for (;;) {
      const seq = Atomics.load(words, H_REBUILD_SEQ);
      if ((seq & 1) === 0) {
        const slot = this.probe(lo, hi, home);
        if (Atomics.load(words, H_REBUILD_SEQ) === seq) return slot;
      }
    }
  }

  private probe(lo: number, hi: number, home: number): number {
    const words = this.words;
    let slot = home;
    for (let step = 0; step < this.slotCount; step++) {
      const base = slotBase(slot);
      const tag = Atomics.load(words, base + S_TAG);
      const state = tag & STATE_MASK;
      if (state === STATE_EMPTY) return -1;
      if (state === STATE_LIVE && Atomics.load(words, base + S_KEY_LO) === lo && Atomics.load(words, base + S_KEY_HI) === hi) {
        if (Atomics.load(words, base + S_TAG) === tag) return slot;
        // The slot changed while we read its key: look at it again.
        step--;
        continue;
      }
      slot = (slot + 1) & this.mask;
    }
    return -1;
  }

  // ---- mutations, only under the writer mutex: plain reads, atomic stores where readers look --

  /**
   * The critical section of `tryReserveGroup`: check every member, then insert every member.
   * One pass over each chain serves both: `locate` also reports the first free slot of the chain,
   * which stays the right insert position unless an earlier member of the group took it.
   */
  private reserveLocked(count: number, owner: number): boolean {
    const words = this.words;
    const { lo, hi, home } = this.scratch;
    if (this.freeSlots.length < count) this.freeSlots = new Int32Array(this.scratch.lo.length);
    const freeSlots = this.freeSlots;
    for (let i = 0; i < count; i++) {
      const found = this.locate(lo[i]!, hi[i]!, home[i]!);
      if (found >= 0) return false;
      freeSlots[i] = -2 - found;
    }
    const live = words[H_LIVE_COUNT]!;
    if (live + count > this.capacity) {
      throw new InflightFullError(
        `in-flight target set is full: ${live} of ${this.capacity} targets held, a group of ${count} does not fit; nothing was reserved`,
        { capacity: this.capacity, size: live, groupSize: count },
      );
    }
    let tombs = words[H_TOMB_COUNT]!;
    const rebuilt = live + tombs + count > this.maxOccupied;
    if (rebuilt) {
      this.rebuild();
      tombs = 0;
    }
    const tombsBefore = tombs;
    for (let i = 0; i < count; i++) {
      let slot = rebuilt ? NO_FREE_SLOT : freeSlots[i]!;
      if (slot < 0 || (words[slotBase(slot) + S_TAG]! & STATE_MASK) === STATE_LIVE) slot = this.firstFree(home[i]!);
      if (this.fill(slot, lo[i]!, hi[i]!, owner) === STATE_TOMBSTONE) tombs--;
    }
    if (tombs !== tombsBefore) Atomics.store(words, H_TOMB_COUNT, tombs);
    Atomics.store(words, H_LIVE_COUNT, live + count);
    return true;
  }

  /** The critical section of `releaseGroup`. */
  private releaseLocked(count: number, owner: number): number {
    const words = this.words;
    const { lo, hi, home } = this.scratch;
    let released = 0;
    let tombDelta = 0;
    for (let i = 0; i < count; i++) {
      const slot = this.locate(lo[i]!, hi[i]!, home[i]!);
      if (slot >= 0 && words[slotBase(slot) + S_OWNER]! >>> 0 === owner) {
        tombDelta += this.remove(slot);
        released++;
      }
    }
    // Counters only change when they must: each store is a seq-cst write seen by lock-free `size()`.
    if (tombDelta !== 0) Atomics.store(words, H_TOMB_COUNT, words[H_TOMB_COUNT]! + tombDelta);
    if (released > 0) Atomics.store(words, H_LIVE_COUNT, words[H_LIVE_COUNT]! - released);
    return released;
  }

  /**
   * Slot holding (lo, hi) as LIVE if ≥ 0. Otherwise the key is absent and the result is
   * `-2 - free`, `free` being the first non-LIVE slot of its chain (or `NO_FREE_SLOT`).
   * Caller holds the mutex, so nothing moves and plain reads are exact.
   */
  private locate(lo: number, hi: number, home: number): number {
    const words = this.words;
    let free = NO_FREE_SLOT;
    let slot = home;
    for (let step = 0; step < this.slotCount; step++) {
      const base = slotBase(slot);
      const state = words[base + S_TAG]! & STATE_MASK;
      if (state === STATE_LIVE) {
        if (words[base + S_KEY_LO] === lo && words[base + S_KEY_HI] === hi) return slot;
      } else {
        if (free < 0) free = slot;
        if (state === STATE_EMPTY) break;
      }
      slot = (slot + 1) & this.mask;
    }
    return -2 - free;
  }

  /** First non-LIVE slot of the chain starting at `home`. Below the load limits one always exists. */
  private firstFree(home: number): number {
    const words = this.words;
    let slot = home;
    while ((words[slotBase(slot) + S_TAG]! & STATE_MASK) === STATE_LIVE) slot = (slot + 1) & this.mask;
    return slot;
  }

  /**
   * Makes a non-LIVE slot a LIVE entry; returns the slot's previous state. Key and owner are
   * stored before the TAG turns LIVE, all seq-cst, so a reader that sees the LIVE tag sees the
   * whole entry, and a reader that saw the slot's previous tag notices the version change.
   */
  private fill(slot: number, lo: number, hi: number, owner: number): number {
    const words = this.words;
    const base = slotBase(slot);
    const tag = words[base + S_TAG]!;
    // A word that already holds the value needs no store: readers read the same value either way.
    if (words[base + S_KEY_LO] !== lo) Atomics.store(words, base + S_KEY_LO, lo);
    if (words[base + S_KEY_HI] !== hi) Atomics.store(words, base + S_KEY_HI, hi);
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
  private remove(slot: number): number {
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
   * sees the sequence unchanged saw none of them.
   */
  private rebuild(): void {
    const words = this.words;
    const live = words[H_LIVE_COUNT]!;
    const keptLo = new Int32Array(live);
    const keptHi = new Int32Array(live);
    const keptOwner = new Int32Array(live);
    let kept = 0;
    Atomics.add(words, H_REBUILD_SEQ, 1);
    for (let slot = 0; slot < this.slotCount; slot++) {
      const base = slotBase(slot);
      const tag = words[base + S_TAG]!;
      const state = tag & STATE_MASK;
      if (state === STATE_LIVE) {
        keptLo[kept] = words[base + S_KEY_LO]!;
        keptHi[kept] = words[base + S_KEY_HI]!;
        keptOwner[kept] = words[base + S_OWNER]!;
        kept++;
      }
      if (state !== STATE_EMPTY) Atomics.store(words, base + S_TAG, nextTag(tag, STATE_EMPTY));
    }
    Atomics.store(words, H_TOMB_COUNT, 0);
    for (let i = 0; i < kept; i++) {
      const lo = keptLo[i]!;
      const hi = keptHi[i]!;
      this.fill(this.firstFree(homeSlotOf(lo, hi, this.mask)), lo, hi, keptOwner[i]! >>> 0);
    }
    Atomics.add(words, H_REBUILD_SEQ, 1);
  }
}

function lockWait(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 0 || value > MAX_LOCK_WAIT_MS) {
    throw invalidOption(name, `an integer number of milliseconds in 0..${MAX_LOCK_WAIT_MS}`, value);
  }
  return value;
}

/** The TAG after a transition to `state`: version bumped so readers notice the change. */
function nextTag(tag: number, state: number): number {
  return ((tag & ~STATE_MASK) + TAG_VERSION_STEP) | state;
}
