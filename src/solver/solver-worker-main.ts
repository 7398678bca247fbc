/**
 * The slot side of the solver pool: each slot's private state (its directory, QSYM pruning map and
 * process gate, with the thread's view of the shared coverage bitmap) and the task handler that a
 * solver thread's piscina calls, or the pool itself when the calling thread serves the slots.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import { CoverageBitmap } from './coverage-bitmap.js';
import { SlotGate } from './slot-gate.js';
import { solverBaseEnv } from './solver-env.js';
import { runSolverTask, TRASH_DIR, type SolverRunContext } from './solver-run.js';
import { threadTrash } from './trash-removal.js';
import type { WireResult, WireTask } from './solver-types.js';

/** Startup data the pool hands every worker thread (`workerData`). */
export interface SolverWorkerData {
  readonly scratchRoot: string;
  readonly bitmapBuffer: SharedArrayBuffer | null;
  readonly pruningMapBytes: number;
}

/**
 * The task handler of a thread that serves solver slots — a solver worker thread, or the calling
 * thread of a pool with `spawnThread: 'main'`. Each slot the thread is given (`WireTask.slot`) gets
 * its private context the first time it is used; the slots run side by side on the thread's event
 * loop, one process per slot at a time (each context has its own gate).
 */
export function createSolverTaskHandler(data: SolverWorkerData, bitmap: CoverageBitmap | null = data.bitmapBuffer ? new CoverageBitmap(data.bitmapBuffer) : null): (task: WireTask) => Promise<WireResult> {
  const contexts = new Map<number, Promise<SolverRunContext>>();
  return async (task: WireTask) => {
    let context = contexts.get(task.slot);
    if (context === undefined) {
      context = createSolverRunContext(data, `slot-${task.slot}`, bitmap);
      contexts.set(task.slot, context);
    }
    return runSolverTask(task, await context);
  };
}

/** Slot contexts this thread created (names their run directories). */
let contextsCreated = 0;

/**
 * The private state of one solver slot: its directory under the scratch root, its QSYM pruning map,
 * its environment snapshots and its process gate. Two slots never share a name.
 */
export async function createSolverRunContext(data: SolverWorkerData, slotName: string, bitmap: CoverageBitmap | null): Promise<SolverRunContext> {
  const workerDir = path.join(data.scratchRoot, slotName);
  await fs.mkdir(workerDir, { recursive: true });
  // Shared by the pool's slots; each moves its finished run directories here (docs/solver.md).
  const trashDir = path.join(data.scratchRoot, TRASH_DIR);
  await fs.mkdir(trashDir, { recursive: true });
  // SymCC's QSYM backend loads this map before a run and updates it in place; private per
  // slot because concurrent in-place updates from several solvers would race.
  const pruningMapPath = path.join(workerDir, 'pruning-map');
  await fs.writeFile(pruningMapPath, new Uint8Array(data.pruningMapBytes));
  let runs = 0;
  // Run directories are named by thread and context as well as by run: a thread that replaces a
  // crashed one (piscina starts it with the same slots) must not meet the directories it left.
  const prefix = `run-${threadId}-${++contextsCreated}-`;
  // A plain snapshot: iterating `process.env` goes through an accessor per variable, per run.
  const baseEnv = Object.freeze({ ...process.env });
  return { workerDir, trashDir, pruningMapPath, bitmap, baseEnv, solverEnvBase: solverBaseEnv(baseEnv), nextRunName: () => `${prefix}${++runs}`, gate: new SlotGate(), trash: threadTrash };
}
