/**
 * Removing a finished run's trashed directory in slices on the thread's event loop (docs/solver.md,
 * *Where a run's directory goes*).
 *
 * A run directory that holds more than the files its run is known to have left (a flood, entries
 * the collection ignored) is renamed into the trash, then removed here. The thread that does it
 * serves other slots too — every slot of a solver thread, or the coordinator itself when the
 * calling thread serves the slots (`spawnThread`) — so the removal never holds its event loop for
 * more than one slice of `SLICE_ENTRIES` entries. The bound is a count, not a time: a time would
 * cut a slice short whenever the thread is descheduled on a busy host, and leave behind a few
 * stray files that a small run directory should never outlive its result with. The first slice
 * runs at once (a few stray files are gone before the run's result is returned, as before); the
 * rest follows slice by slice, each after the loop has served whatever else is
 * ready (timers, heartbeats, another slot's exit, a shutdown). What is left when the thread ends
 * or the pool closes is removed by the pool's close() within its budget, or by the next pool's
 * sweep.
 */
import { removalBudget, removeTreeBounded } from './bounded-remove.js';

/** Entries one slice may remove: a batch of the bounded walk, about a millisecond of unlinks on tmpfs. */
export const SLICE_ENTRIES = 1024;

export class TrashRemoval {
  /** Trashed directories not yet removed, oldest first. */
  readonly #queue: string[] = [];
  #scheduled = false;
  #waiters: (() => void)[] = [];

  constructor(private readonly sliceEntries = SLICE_ENTRIES) {}

  /** Directories still (partly) in the trash. */
  get pending(): number {
    return this.#queue.length;
  }

  /** Removes `dir`: one slice now, the rest in later slices. */
  remove(dir: string): void {
    this.#queue.push(dir);
    if (!this.#scheduled) this.#slice();
  }

  /** Resolves once every directory handed over so far is gone (or given up to the pool's close). */
  idle(): Promise<void> {
    if (this.#queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  #slice(): void {
    this.#scheduled = false;
    const budget = removalBudget(this.sliceEntries, Infinity);
    while (this.#queue.length > 0) {
      let done: boolean;
      try {
        done = removeTreeBounded(this.#queue[0]!, budget);
      } catch {
        // Left in the trash: the pool's close() or the next pool's sweep removes it.
        done = true;
      }
      if (!done) {
        this.#scheduled = true;
        // Kept referenced: a solver thread between tasks has nothing else keeping its loop
        // turning, and an unreferenced slice there would wait for the next task. A closed pool's
        // directories are renamed away, so what is queued then ends at the next slice.
        setImmediate(() => this.#slice());
        return;
      }
      this.#queue.shift();
    }
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const resolve of waiters) resolve();
  }
}

/** This thread's trash removal: one per thread, shared by every slot it serves. */
export const threadTrash = new TrashRemoval();
