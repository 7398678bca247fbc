/**
 * The `spawnThread: 'main'` engine of `SolverPool`: runs solver tasks on the calling thread, in
 * `slots` slots, each with its own directory, QSYM pruning map and process gate — the same
 * `runSolverTask` contract a solver worker thread runs, minus the thread hop. A slot runs one
 * solver process at a time; a task given to a busy slot is prepared at once and starts when the
 * slot's process exits (slot-gate.ts).
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

export class MainThreadSolverRunner {
  readonly #data: SolverWorkerData;
  readonly #bitmap: CoverageBitmap | null;
  /** Each slot's context, created the first time the slot is used. */
  readonly #contexts: (Promise<SolverRunContext> | undefined)[];

  constructor(data: SolverWorkerData, slots: number, bitmap: CoverageBitmap | null) {
    this.#data = data;
    this.#bitmap = bitmap;
    this.#contexts = new Array<Promise<SolverRunContext> | undefined>(slots).fill(undefined);
  }

  /** Runs one task in slot `slot` (0-based), after the slot's running process, if any, exits. */
  async run(task: WireTask, slot: number): Promise<WireResult> {
    const context = (this.#contexts[slot] ??= createSolverRunContext(this.#data, `main-${slot}`, this.#bitmap));
    return runSolverTask(task, await context);
  }
}
