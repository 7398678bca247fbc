/**
 * The `spawnThread: 'main'` engine of `SolverPool`: runs solver tasks on the calling thread, at
 * most `slots` at a time, each in a slot with its own directory and QSYM pruning map — the same
 * `runSolverTask` contract a solver worker thread runs, minus the thread hop.
 *
 * Why it exists: libuv spawns with fork(); the parent's CPU per fork roughly doubles when other
 * threads of the process are running (page-table copy and TLB shootdowns across the busy threads),
 * which is most of the pool's overhead for short solver runs (`bench/dispatch`). Spawning every
 * run from one thread avoids that. The cost: run-directory bookkeeping and output reading are
 * synchronous (see solver-run.ts) and now block the calling thread for their duration.
 */
import type { CoverageBitmap } from './coverage-bitmap.js';
import { runSolverTask, type SolverRunContext } from './solver-run.js';
import type { WireResult, WireTask } from './solver-types.js';
import { createSolverRunContext, type SolverWorkerData } from './solver-worker-main.js';

/** A slot's context is created asynchronously, once; the wrapper keeps the promise un-flattened. */
interface Slot {
  readonly context: Promise<SolverRunContext>;
}

export class MainThreadSolverRunner {
  readonly #data: SolverWorkerData;
  readonly #slots: number;
  readonly #bitmap: CoverageBitmap | null;
  /** Slots created so far; a slot is created the first time it is needed. */
  #created = 0;
  readonly #free: Slot[] = [];
  readonly #waiting: ((slot: Slot) => void)[] = [];

  constructor(data: SolverWorkerData, slots: number, bitmap: CoverageBitmap | null) {
    this.#data = data;
    this.#slots = slots;
    this.#bitmap = bitmap;
  }

  /** Runs one task in a free slot, waiting (FIFO) for one when all `slots` are busy. */
  async run(task: WireTask): Promise<WireResult> {
    const slot = await this.#acquire();
    try {
      return await runSolverTask(task, await slot.context);
    } finally {
      this.#release(slot);
    }
  }

  #acquire(): Promise<Slot> {
    const free = this.#free.pop();
    if (free !== undefined) return Promise.resolve(free);
    if (this.#created < this.#slots) {
      return Promise.resolve({ context: createSolverRunContext(this.#data, `main-${this.#created++}`, this.#bitmap) });
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  #release(slot: Slot): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next(slot);
    else this.#free.push(slot);
  }
}
