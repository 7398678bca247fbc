/**
 * Solver worker thread entry (piscina). Thin by design: it reads the startup data and hands every
 * task to `src/solver`. Runs from `dist/workers/solver-worker.js`.
 */
import { workerData } from 'node:worker_threads';
import { createSolverTaskHandler, type SolverWorkerData } from '../src/solver/solver-worker-main.js';

export default createSolverTaskHandler(workerData as SolverWorkerData);
