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
 *   writes give the readers' TAG-version check its meaning (see `layout.ts`). The KEY is one
 *   64-bit store of the target bigint.
 * - **Reads** (`has`, `ownerOf`, `size`, and the fail-fast pre-check of a contended reserve) take
 *   no lock and read through `Atomics`. Entries never move except in a rebuild, which is
 *   bracketed by a sequence lock that readers re-check; the KEY is read in one 64-bit load, and a
 *   slot's TAG version ties the KEY and OWNER a reader saw to one entry. A reader may see a group
 *   that is being reserved partially; the all-or-nothing guarantee is between reservers.
 * - **Deletion** leaves a tombstone so probe chains stay intact. A run of tombstones that ends at
 *   an empty slot is turned back into empty slots at once (no live chain can pass through it), and
 *   when tombstones plus live entries would pass `MAX_OCCUPIED_LOAD`, the next reserve rebuilds the
 *   table in place without tombstones.
 *
 * This file holds the facade (options, create/attach, validation) and the two group critical
 * sections; the slot table they drive (probing, insert, delete, rebuild) is `slot-table.ts`.
 */
import { InflightFullError, LockTimeoutError } from '../errors.js';
import { checkOptionsObject, invalidOption } from '../config/values.js';
import {
  byteLengthFor,
  H_CAPACITY,
  H_LAYOUT_VERSION,
  H_MAGIC,
  H_SLOT_COUNT,
  LAYOUT_VERSION,
  MAGIC,
  MAX_CAPACITY,
  MAX_OCCUPIED_LOAD,
  slotCountFor,
  STATE_TOMBSTONE,
} from './layout.js';
import { NO_FREE_SLOT, SlotTable } from './slot-table.js';
import { checkedHome, checkOwner, SplitTargets } from './target-ids.js';
import { lockWithin, tryLockNow, unlock } from './writer-mutex.js';

/** Default of `reserveLockWaitMs`. */
const RESERVE_LOCK_WAIT_MS = 20;
/** Default of `releaseLockWaitMs`. */
const RELEASE_LOCK_WAIT_MS = 10_000;
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

export class InflightTargetSet {
  /** The shared memory; pass it to another thread and `attach` it there. */
  readonly buffer: SharedArrayBuffer;
  /** Maximum number of targets held at once. */
  readonly capacity: number;
  /** The mutex word's view; everything else in the buffer is read and written by `table`. */
  private readonly words: Int32Array;
  private readonly table: SlotTable;
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
    this.table = new SlotTable(buffer);
    this.slotCount = this.table.slotCount;
    this.capacity = Atomics.load(this.words, H_CAPACITY);
    this.mask = this.table.mask;
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
    return this.table.findLive(target, checkedHome(target, this.mask)) >= 0;
  }

  /** The owner holding `target`, or 0 when none does. Lock-free. */
  ownerOf(target: bigint): number {
    return this.table.ownerOfLive(target, checkedHome(target, this.mask));
  }

  /** Number of targets held. Lock-free. */
  size(): number {
    return this.table.liveCount();
  }

  stats(): InflightStats {
    return {
      size: this.table.liveCount(),
      capacity: this.capacity,
      slotCount: this.slotCount,
      tombstones: this.table.tombCount(),
      rebuilds: this.table.rebuildCount(),
    };
  }

  /** Whether any member of the split group is visibly LIVE (lock-free). */
  private anyMemberLive(count: number): boolean {
    const { keys, home } = this.scratch;
    for (let i = 0; i < count; i++) {
      if (this.table.findLive(keys[i]!, home[i]!) >= 0) return true;
    }
    return false;
  }

  // ---- critical sections: caller holds the writer mutex -------------------------------------

  /**
   * The critical section of `tryReserveGroup`: check every member, then insert every member.
   * One pass over each chain serves both: `locate` also reports the first free slot of the chain,
   * which stays the right insert position unless an earlier member of the group took it.
   */
  private reserveLocked(count: number, owner: number): boolean {
    const table = this.table;
    const { keys, lo, hi, home } = this.scratch;
    if (this.freeSlots.length < count) this.freeSlots = new Int32Array(this.scratch.lo.length);
    const freeSlots = this.freeSlots;
    for (let i = 0; i < count; i++) {
      const found = table.locate(lo[i]!, hi[i]!, home[i]!);
      if (found >= 0) return false;
      freeSlots[i] = -2 - found;
    }
    const live = table.liveLocked();
    if (live + count > this.capacity) {
      throw new InflightFullError(
        `in-flight target set is full: ${live} of ${this.capacity} targets held, a group of ${count} does not fit; nothing was reserved`,
        { capacity: this.capacity, size: live, groupSize: count },
      );
    }
    let tombs = table.tombsLocked();
    const rebuilt = live + tombs + count > this.maxOccupied;
    if (rebuilt) {
      table.rebuild();
      tombs = 0;
    }
    for (let i = 0; i < count; i++) {
      let slot = rebuilt ? NO_FREE_SLOT : freeSlots[i]!;
      if (slot < 0 || table.isLiveLocked(slot)) slot = table.firstFree(home[i]!);
      if (table.fill(slot, keys[i]!, lo[i]!, hi[i]!, owner) === STATE_TOMBSTONE) tombs--;
    }
    // Counters once per group, not per member.
    table.storeCounts(live + count, tombs);
    return true;
  }

  /** The critical section of `releaseGroup`. */
  private releaseLocked(count: number, owner: number): number {
    const table = this.table;
    const { lo, hi, home } = this.scratch;
    let released = 0;
    let tombDelta = 0;
    for (let i = 0; i < count; i++) {
      const slot = table.locate(lo[i]!, hi[i]!, home[i]!);
      if (slot >= 0 && table.ownerLocked(slot) === owner) {
        tombDelta += table.remove(slot);
        released++;
      }
    }
    if (released > 0) table.storeCounts(table.liveLocked() - released, table.tombsLocked() + tombDelta);
    return released;
  }
}

function lockWait(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 0 || value > MAX_LOCK_WAIT_MS) {
    throw invalidOption(name, `an integer number of milliseconds in 0..${MAX_LOCK_WAIT_MS}`, value);
  }
  return value;
}
