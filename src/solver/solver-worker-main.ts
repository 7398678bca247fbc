/**
 * The thread side of the solver pool: per-worker private state (scratch dir, QSYM pruning map,
 * view of the shared coverage bitmap) and the task handler piscina calls.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import { CoverageBitmap } from './coverage-bitmap.js';
import { SlotGate } from './slot-gate.js';
import { solverBaseEnv } from './solver-env.js';
import { runSolverTask, TRASH_DIR, type SolverRunContext } from './solver-run.js';
import type { WireResult, WireTask } from './solver-types.js';

/** Startup data the pool hands every worker thread (`workerData`). */
export interface SolverWorkerData {
  readonly scratchRoot: string;
  readonly bitmapBuffer: SharedArrayBuffer | null;
  readonly pruningMapBytes: number;
}

export function createSolverTaskHandler(data: SolverWorkerData): (task: WireTask) => Promise<WireResult> {
  let context: Promise<SolverRunContext> | null = null;
  const bitmap = data.bitmapBuffer ? new CoverageBitmap(data.bitmapBuffer) : null;
  return async (task: WireTask) => {
    context ??= createSolverRunContext(data, `worker-${threadId}`, bitmap);
    return runSolverTask(task, await context);
  };
}

/**
 * The private state of one solver slot — a worker thread, or one of the main-thread slots of a
 * pool with `spawnThread: 'main'`: its directory under the scratch root, its QSYM pruning map and
 * its environment snapshots. Two slots never share a name.
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
  // A plain snapshot: iterating `process.env` goes through an accessor per variable, per run.
  const baseEnv = Object.freeze({ ...process.env });
  return { workerDir, trashDir, pruningMapPath, bitmap, baseEnv, solverEnvBase: solverBaseEnv(baseEnv), nextRunId: () => ++runs, gate: new SlotGate() };
}
