/**
 * One solver slot's process gate: at most one solver process of the slot runs at a time, and a run
 * that arrived while another was running — its directory, input and job files already prepared —
 * starts the moment that process exits (docs/solver.md "Staged runs"). Waiters are served FIFO;
 * a waiter whose abort cell is flipped leaves the queue without ever starting.
 *
 * The gate also knows when the slot's last process exited, so a run can report how long the slot
 * went without a solver before it (`RunTiming.idleMs`), measured on the slot's own thread.
 */
import type { TaskAbortCell } from './abort-cell.js';

interface Waiter {
  readonly grant: () => void;
}

export class SlotGate {
  #held = false;
  readonly #waiters: Waiter[] = [];
  /** When the slot's previous process exited (`performance.now()` of this thread); undefined before the first. */
  #lastExitMs: number | undefined;

  /** True while a process of the slot runs (or is being started). */
  get held(): boolean {
    return this.#held;
  }

  /** Runs waiting for the gate. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /** When the slot's previous process exited, if one has. */
  get lastExitMs(): number | undefined {
    return this.#lastExitMs;
  }

  /**
   * Resolves true once this run holds the gate; false if its abort arrived first (the run must not
   * start, and it holds nothing). Immediate when the gate is free and nobody waits.
   */
  acquire(cell: TaskAbortCell): Promise<boolean> {
    if (cell.abortRequested) return Promise.resolve(false);
    if (!this.#held && this.#waiters.length === 0) {
      this.#held = true;
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve) => {
      let done = false;
      const waiter: Waiter = {
        grant: () => {
          if (done) return;
          done = true;
          resolve(true);
        },
      };
      this.#waiters.push(waiter);
      void cell.whenSettled().then((aborted) => {
        if (done || !aborted) return;
        const at = this.#waiters.indexOf(waiter);
        // Already granted: the holder sees the abort itself once it starts.
        if (at < 0) return;
        this.#waiters.splice(at, 1);
        done = true;
        resolve(false);
      });
    });
  }

  /**
   * The holder's process exited (`exitMs`) or never started: the next waiter holds the gate now.
   * Its continuation runs in the next microtask, before anything the releasing run does after an
   * `await`, so the next process starts before this run's outputs are collected.
   */
  release(exitMs?: number): void {
    if (exitMs !== undefined) this.#lastExitMs = exitMs;
    const next = this.#waiters.shift();
    if (next === undefined) {
      this.#held = false;
      return;
    }
    next.grant();
  }
}
