/**
 * The in-flight target set (DESIGN §7): which branch targets some job of this process is solving
 * right now, shared by every thread through one SharedArrayBuffer. It sits in front of the durable
 * target lease table as a fast, synchronous local filter; the durable table stays authoritative.
 *
 * Concurrency scheme (the choice DESIGN §7 leaves open):
 * - **Mutations** (reserve, release, rebuild) run under one short writer mutex in the buffer. A
 *   group reserve checks every member, then inserts every member, inside one critical section, so
 *   two reservers can never both admit a target (no double admission), and a reserve that fails
 *   has written nothing (all-or-nothing, no rollback needed).
 * - **The main thread never blocks in `Atomics.wait`**: it spins on the mutex. Worker threads spin
 *   briefly, then sleep on the mutex word (`Atomics.wait` with 1 ms slices; the unlocker notifies).
 *   Critical sections are O(group size) slot writes, so spins are short unless the holder thread
 *   is descheduled. A reserve that cannot get the mutex within `reserveLockWaitMs` (20 ms) gives up and
 *   returns false — the transient false conflict DESIGN allows; a release waits up to
 *   `releaseLockWaitMs` (10 s), then throws `LockTimeoutError` (only a thread terminated inside a
 *   critical section could cause that).
 * - **Reads** (`has`, `ownerOf`, `size`) take no lock. Entries never move except in a rebuild,
 *   which is bracketed by a sequence lock that readers re-check; a slot's TAG version makes the
 *   two-word key read consistent (see `layout.ts`). A reader may see a group that is being
 *   reserved partially; the all-or-nothing guarantee is between reservers.
 * - **Deletion** leaves a tombstone so probe chains stay intact. A run of tombstones that ends at
 *   an empty slot is turned back into empty slots at once (no live chain can pass through it), and
 *   when tombstones plus live entries would pass `MAX_OCCUPIED_LOAD`, the next reserve rebuilds the
 *   table in place without tombstones.
 */
import { isMainThread } from 'node:worker_threads';
import { InflightFullError, LockTimeoutError } from '../errors.js';
import { checkOptionsObject, invalidOption } from '../config/values.js';
import {
  byteLengthFor,
  H_CAPACITY,
  H_LAYOUT_VERSION,
  H_LIVE_COUNT,
  H_MAGIC,
  H_MUTEX,
  H_REBUILD_SEQ,
  H_SLOT_COUNT,
  H_TOMB_COUNT,
  LAYOUT_VERSION,
  MAGIC,
  MAX_CAPACITY,
  MAX_OCCUPIED_LOAD,
  MUTEX_CONTENDED,
  MUTEX_FREE,
  MUTEX_HELD,
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
/** Spins before a worker thread starts sleeping on the mutex word. */
const SPINS_BEFORE_SLEEP = 256;
/** Spins between two clock reads while waiting for the mutex. */
const SPINS_PER_CLOCK_READ = 1024;
const SLEEP_SLICE_MS = 1;

/** Counters for tests, docs and status output; read without the mutex, so only approximately consistent. */
export interface InflightStats {
  readonly size: number;
  readonly capacity: number;
  readonly slotCount: number;
  readonly tombstones: number;
  readonly rebuilds: number;
}

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
    const count = this.scratch.split(targets);
    if (count === 0) return true;
    const { lo, hi } = this.scratch;
    // Lock-free pre-check: a visible conflict fails without touching the mutex.
    for (let i = 0; i < count; i++) {
      if (this.findLive(lo[i]!, hi[i]!) >= 0) return false;
    }
    if (!this.lock(this.reserveLockWaitMs)) return false;
    try {
      for (let i = 0; i < count; i++) {
        if (this.locate(lo[i]!, hi[i]!) >= 0) return false;
      }
      const live = Atomics.load(this.words, H_LIVE_COUNT);
      if (live + count > this.capacity) {
        throw new InflightFullError(
          `in-flight target set is full: ${live} of ${this.capacity} targets held, a group of ${count} does not fit; nothing was reserved`,
          { capacity: this.capacity, size: live, groupSize: count },
        );
      }
      if (live + Atomics.load(this.words, H_TOMB_COUNT) + count > this.maxOccupied) this.rebuild();
      for (let i = 0; i < count; i++) this.insert(lo[i]!, hi[i]!, owner);
      return true;
    } finally {
      this.unlock();
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
    const count = this.scratch.split(targets);
    if (count === 0) return 0;
    const { lo, hi } = this.scratch;
    if (!this.lock(this.releaseLockWaitMs)) {
      throw new LockTimeoutError(
        `in-flight target set: writer mutex still held after ${this.releaseLockWaitMs} ms; nothing was released`,
        { waitMs: this.releaseLockWaitMs },
      );
    }
    let released = 0;
    try {
      for (let i = 0; i < count; i++) {
        const slot = this.locate(lo[i]!, hi[i]!);
        if (slot >= 0 && Atomics.load(this.words, slotBase(slot) + S_OWNER) >>> 0 === owner) {
          this.remove(slot);
          released++;
        }
      }
    } finally {
      this.unlock();
    }
    return released;
  }

  /** Whether some owner holds `target`. Lock-free. */
  has(target: bigint): boolean {
    const [lo, hi] = splitOne(target);
    return this.findLive(lo, hi) >= 0;
  }

  /** The owner holding `target`, or 0 when none does. Lock-free. */
  ownerOf(target: bigint): number {
    const [lo, hi] = splitOne(target);
    for (;;) {
      const slot = this.findLive(lo, hi);
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

  // ---- lock-free reads -------------------------------------------------------------------

  /** Slot of the LIVE entry for (lo, hi), or -1. Retries across a concurrent rebuild. */
  private findLive(lo: number, hi: number): number {
    const words = this.words;
    for (;;) {
      const seq = Atomics.load(words, H_REBUILD_SEQ);
      if ((seq & 1) === 0) {
        const slot = this.probe(lo, hi);
        if (Atomics.load(words, H_REBUILD_SEQ) === seq) return slot;
      }
    }
  }

  private probe(lo: number, hi: number): number {
    const words = this.words;
    let slot = homeSlotOf(lo, hi, this.mask);
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

  // ---- mutations, only under the writer mutex ----------------------------------------------

  /** Slot holding (lo, hi) as LIVE, or -1. Caller holds the mutex, so nothing moves. */
  private locate(lo: number, hi: number): number {
    const words = this.words;
    let slot = homeSlotOf(lo, hi, this.mask);
    for (let step = 0; step < this.slotCount; step++) {
      const base = slotBase(slot);
      const state = Atomics.load(words, base + S_TAG) & STATE_MASK;
      if (state === STATE_EMPTY) return -1;
      if (state === STATE_LIVE && Atomics.load(words, base + S_KEY_LO) === lo && Atomics.load(words, base + S_KEY_HI) === hi) {
        return slot;
      }
      slot = (slot + 1) & this.mask;
    }
    return -1;
  }

  /**
   * Puts an absent key into the first non-LIVE slot of its chain. The key and owner are written
   * before the TAG turns LIVE, so a reader that sees LIVE sees the whole entry.
   */
  private insert(lo: number, hi: number, owner: number): void {
    const words = this.words;
    let slot = homeSlotOf(lo, hi, this.mask);
    for (;;) {
      const base = slotBase(slot);
      const tag = Atomics.load(words, base + S_TAG);
      const state = tag & STATE_MASK;
      if (state !== STATE_LIVE) {
        Atomics.store(words, base + S_KEY_LO, lo);
        Atomics.store(words, base + S_KEY_HI, hi);
        Atomics.store(words, base + S_OWNER, owner | 0);
        Atomics.store(words, base + S_TAG, nextTag(tag, STATE_LIVE));
        if (state === STATE_TOMBSTONE) Atomics.sub(words, H_TOMB_COUNT, 1);
        Atomics.add(words, H_LIVE_COUNT, 1);
        return;
      }
      slot = (slot + 1) & this.mask;
    }
  }

  /**
   * Turns a LIVE slot into a tombstone, then empties the run of tombstones ending at it if the
   * next slot is empty: a chain that reaches an empty slot stops there, so no live entry lies
   * beyond such a run and no probe chain can break.
   */
  private remove(slot: number): void {
    const words = this.words;
    const base = slotBase(slot);
    Atomics.store(words, base + S_TAG, nextTag(Atomics.load(words, base + S_TAG), STATE_TOMBSTONE));
    Atomics.sub(words, H_LIVE_COUNT, 1);
    Atomics.add(words, H_TOMB_COUNT, 1);
    const next = slotBase((slot + 1) & this.mask);
    if ((Atomics.load(words, next + S_TAG) & STATE_MASK) !== STATE_EMPTY) return;
    let cursor = slot;
    for (let step = 0; step < this.slotCount; step++) {
      const at = slotBase(cursor) + S_TAG;
      const tag = Atomics.load(words, at);
      if ((tag & STATE_MASK) !== STATE_TOMBSTONE) return;
      Atomics.store(words, at, nextTag(tag, STATE_EMPTY));
      Atomics.sub(words, H_TOMB_COUNT, 1);
      cursor = (cursor - 1) & this.mask;
    }
  }

  /**
   * Re-inserts every live entry into a table without tombstones. Entries move, so the rebuild
   * sequence is odd throughout and lock-free readers retry until it is even again.
   */
  private rebuild(): void {
    const words = this.words;
    const live = Atomics.load(words, H_LIVE_COUNT);
    const keptLo = new Int32Array(live);
    const keptHi = new Int32Array(live);
    const keptOwner = new Int32Array(live);
    let kept = 0;
    Atomics.add(words, H_REBUILD_SEQ, 1);
    for (let slot = 0; slot < this.slotCount; slot++) {
      const base = slotBase(slot);
      const tag = Atomics.load(words, base + S_TAG);
      const state = tag & STATE_MASK;
      if (state === STATE_LIVE) {
        keptLo[kept] = Atomics.load(words, base + S_KEY_LO);
        keptHi[kept] = Atomics.load(words, base + S_KEY_HI);
        keptOwner[kept] = Atomics.load(words, base + S_OWNER);
        kept++;
      }
      if (state !== STATE_EMPTY) Atomics.store(words, base + S_TAG, nextTag(tag, STATE_EMPTY));
    }
    Atomics.store(words, H_LIVE_COUNT, 0);
    Atomics.store(words, H_TOMB_COUNT, 0);
    for (let i = 0; i < kept; i++) this.insert(keptLo[i]!, keptHi[i]!, keptOwner[i]!);
    Atomics.add(words, H_REBUILD_SEQ, 1);
  }

  /** Takes the writer mutex within `waitMs`; false on timeout. */
  private lock(waitMs: number): boolean {
    const words = this.words;
    if (Atomics.compareExchange(words, H_MUTEX, MUTEX_FREE, MUTEX_HELD) === MUTEX_FREE) return true;
    const deadline = performance.now() + waitMs;
    for (let spins = 1; ; spins++) {
      if (Atomics.load(words, H_MUTEX) === MUTEX_FREE && Atomics.compareExchange(words, H_MUTEX, MUTEX_FREE, MUTEX_HELD) === MUTEX_FREE) {
        return true;
      }
      if (!isMainThread && spins >= SPINS_BEFORE_SLEEP) {
        // Mark the mutex contended so the holder's unlock wakes us; we may own it right away.
        if (Atomics.exchange(words, H_MUTEX, MUTEX_CONTENDED) === MUTEX_FREE) return true;
        Atomics.wait(words, H_MUTEX, MUTEX_CONTENDED, SLEEP_SLICE_MS);
        if (performance.now() > deadline) return false;
      } else if (spins % SPINS_PER_CLOCK_READ === 0 && performance.now() > deadline) {
        return false;
      }
    }
  }

  private unlock(): void {
    if (Atomics.exchange(this.words, H_MUTEX, MUTEX_FREE) === MUTEX_CONTENDED) Atomics.notify(this.words, H_MUTEX, 1);
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
