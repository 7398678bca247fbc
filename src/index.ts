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
export { loadNative, nativeLoadError, requireNative } from './native/bindings.js';
export type { NativeBindings } from './native/bindings.js';
export { InflightTargetSet } from './inflight/inflight-target-set.js';
export type { InflightStats, InflightSetOptions } from './inflight/inflight-target-set.js';
export { probeFilesystem, FS_PROBE_STEP_NAMES } from './lease/fs-probe.js';
export type { FsProbeOptions, FsProbeReport, FsProbeStepName, FsProbeOps, FsProbeStep, FsProbeContext } from './lease/fs-probe.js';
