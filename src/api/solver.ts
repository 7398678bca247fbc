/**
 * `symfence/solver`: the solver pool and what it runs on — the SymCC environment contract, the
 * preload library, the telemetry-source decision, spawn methods, exit classification and the
 * coverage triage of generated inputs (docs/solver.md).
 */
export { SolverPool } from '../solver/solver-pool.js';
export type { SolverPoolOptions, SolverPoolCounters, RunOptions } from '../solver/solver-pool.js';
export { SOLVER_OPTIONS, SOLVER_CAMPAIGN_OPTIONS, resolveSolverOptions } from '../solver/solver-options.js';
export type { SolverOptions } from '../solver/solver-options.js';
export type {
  SolverTask,
  SolverResult,
  SolverStatus,
  SolverInput,
  CommandTemplate,
  InputMode,
  DirectedJob,
  OutputCaps,
  TriageSettings,
  GeneratedInput,
  CoverageNovelty,
  ShowmapOutcome,
} from '../solver/solver-types.js';

// The SymCC contract: environment, preload library, telemetry source.
export { CONTRACT_VARIABLES, buildSolverEnv, validateTaskEnv, aflToolEnv } from '../solver/solver-env.js';
export type { SolverContractEnv } from '../solver/solver-env.js';
export { preloadLibraryPath, PRELOAD_LIBRARY_PATH } from '../solver/preload-library.js';
export { decideSolverTelemetry } from '../solver/solver-telemetry.js';
export type { SolverTelemetryDecision, SolverTelemetryMode, DecideTelemetryInput } from '../solver/solver-telemetry.js';
export { parseTelemetryEnvelope } from '../solver/telemetry-envelope.js';
export type { TelemetryParser } from '../solver/telemetry-envelope.js';

// Processes.
export { resolveSpawnMethod } from '../solver/spawn-method.js';
export type { SpawnMethod, SpawnMethodChoice } from '../solver/spawn-method.js';
export { classifyExit } from '../solver/exit-classification.js';
export type { ExitClass } from '../solver/exit-classification.js';

// Coverage triage of generated inputs.
export { CoverageBitmap } from '../solver/coverage-bitmap.js';
export { runShowmap } from '../solver/showmap.js';
export type { ShowmapRequest, ShowmapResult } from '../solver/showmap.js';
