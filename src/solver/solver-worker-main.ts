/**
 * The thread side of the solver pool: per-worker private state (scratch dir, QSYM pruning map,
 * view of the shared coverage bitmap) and the task handler piscina calls.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import { CoverageBitmap } from '../triage/coverage-bitmap.js';
import { runSolverTask, type SolverRunContext } from './solver-run.js';
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
  const init = async (): Promise<SolverRunContext> => {
    const workerDir = path.join(data.scratchRoot, `worker-${threadId}`);
    await fs.mkdir(workerDir, { recursive: true });
    // SymCC's QSYM backend loads this map before a run and updates it in place; private per
    // worker because concurrent in-place updates from several solvers would race.
    const pruningMapPath = path.join(workerDir, 'pruning-map');
    await fs.writeFile(pruningMapPath, new Uint8Array(data.pruningMapBytes));
    let runs = 0;
    // A plain snapshot: iterating \`process.env\` goes through an accessor per variable, per run.
    const baseEnv = Object.freeze({ ...process.env });
    return { workerDir, pruningMapPath, bitmap, baseEnv, nextRunId: () => ++runs };
  };
  return async (task: WireTask) => {
    context ??= init();
    return runSolverTask(task, await context);
  };
}
