/**
 * The writer mutex of the in-flight target set: a 3-state word (`H_MUTEX` in `layout.ts`) in the
 * set's buffer. Taking it (a seq-cst compare-exchange) and dropping it (a seq-cst exchange) order
 * every read and write made while holding it, so code under the mutex may use plain typed-array
 * reads; see docs/inflight.md for which writes must still be atomic for lock-free readers.
 *
 * The main thread never blocks in `Atomics.wait`: it spins. Worker threads spin briefly, then sleep
 * on the mutex word in short slices; the unlocker notifies one sleeper.
 */
import { isMainThread } from 'node:worker_threads';
import { H_MUTEX, MUTEX_CONTENDED, MUTEX_FREE, MUTEX_HELD } from './layout.js';

/** Spins before a worker thread starts sleeping on the mutex word. */
const SPINS_BEFORE_SLEEP = 256;
/** Spins between two clock reads while waiting for the mutex. */
const SPINS_PER_CLOCK_READ = 1024;
const SLEEP_SLICE_MS = 1;

/** Takes the mutex if it is free right now: one compare-exchange, no waiting. */
export function tryLockNow(words: Int32Array): boolean {
  return Atomics.compareExchange(words, H_MUTEX, MUTEX_FREE, MUTEX_HELD) === MUTEX_FREE;
}

/** Takes the mutex within `waitMs`; false on timeout. */
export function lockWithin(words: Int32Array, waitMs: number): boolean {
  if (tryLockNow(words)) return true;
  const deadline = performance.now() + waitMs;
  for (let spins = 1; ; spins++) {
    if (Atomics.load(words, H_MUTEX) === MUTEX_FREE && tryLockNow(words)) return true;
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

/** Drops the mutex and wakes one sleeping worker if any marked it contended. */
export function unlock(words: Int32Array): void {
  if (Atomics.exchange(words, H_MUTEX, MUTEX_FREE) === MUTEX_CONTENDED) Atomics.notify(words, H_MUTEX, 1);
}
