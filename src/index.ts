/**
 * The public API of symfence. Every export is named here explicitly; `test/unit/exports.test.ts`
 * snapshots the list so an accidental addition or removal shows up in review.
 */
export {
  SymfenceError,
  InvalidOptionError,
  UsageError,
  LeaseConflictError,
  LeaseStaleTokenError,
  LeaseCorruptError,
  LeaseIoError,
  LockTimeoutError,
  LockPathError,
  NativeUnavailableError,
  FsProbeError,
  InflightFullError,
  InvalidJobError,
  TelemetryInvalidError,
  SolverTimeoutError,
  SolverOutputBudgetError,
  SolverSpawnError,
  AflError,
  AbortedError,
  ClosedError,
  QueueClosedError,
  toErrorData,
  fromErrorData,
  isErrorData,
  registeredErrorCodes,
} from './errors.js';
export type { ErrorData } from './errors.js';
export {
  defineOptionSchema,
  optionsFromEnv,
  optionsFromFlags,
  resolveLayered,
} from './config/schema.js';
export type { OptionSchema, OptionSpec, OptionSpecs, ResolvedOptions, OptionsInput } from './config/schema.js';
export { parseDurationMs, parseSizeBytes } from './config/values.js';
export { createLogger, silentLogger, componentLogger, LOGGER_OPTIONS } from './telemetry/logger.js';
export type { Logger, LoggerOptions } from './telemetry/logger.js';
export { PACKAGE_VERSION } from './version.js';
export { SolverPool } from './solver/solver-pool.js';
export type { SolverPoolOptions, SolverPoolCounters, RunOptions } from './solver/solver-pool.js';
export { SOLVER_OPTIONS, resolveSolverOptions } from './solver/solver-options.js';
export type { SolverOptions } from './solver/solver-options.js';
export type {
  SolverTask,
  SolverResult,
  SolverStatus,
  SolverInput,
  CommandTemplate,
  InputMode,
  DirectedJob,
  ActionKind,
  OutputCaps,
  TriageSettings,
  GeneratedInput,
  CoverageNovelty,
  ShowmapOutcome,
} from './solver/solver-types.js';
export { classifyExit, FATAL_SIGNALS } from './solver/exit-classification.js';
export type { ExitClass } from './solver/exit-classification.js';
export { parseTelemetryEnvelope, TELEMETRY_SCHEMA } from './solver/telemetry-envelope.js';
export type { TelemetryParser } from './solver/telemetry-envelope.js';
export { aflToolEnv } from './solver/solver-env.js';
export { CoverageBitmap, classifyCounts, DEFAULT_MAP_SIZE_BYTES } from './triage/coverage-bitmap.js';
export { runShowmap } from './triage/showmap.js';
export type { ShowmapRequest, ShowmapResult } from './triage/showmap.js';
export { SolverExitError, MazeInvalidError } from './errors.js';
// Reference solver: a TEST AND DEMO FIXTURE (see docs/reference-solver.md).
export { DEMO_MAZE } from './reference/demo-maze.js';
export { parseMaze, walkMaze, mazeBranchCount, reachedBranches, mazeCoverageMap, branchId, MAZE_SCHEMA } from './reference/maze.js';
export type { Maze, MazeNode, MazeTest, MazeStep, MazeWalk } from './reference/maze.js';
export { mazeToC } from './reference/maze-c.js';
export { runReference } from './reference/reference-run.js';
export type { ReferenceRun, ReferenceTelemetry } from './reference/reference-run.js';
export { referenceSolverScript, referenceSolverCommand, referenceTriage } from './reference/reference-commands.js';
