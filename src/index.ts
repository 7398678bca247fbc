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
  CampaignStateError,
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
export { Campaign } from './coordinator/campaign.js';
export type {
  CampaignComponents,
  CampaignComponentsFactory,
  CampaignContext,
  CampaignEvents,
  CampaignFinding,
  CampaignRuntime,
  CampaignSummary,
} from './coordinator/campaign.js';
export { CAMPAIGN_OPTIONS } from './coordinator/campaign-options.js';
export type { CampaignOptions } from './coordinator/campaign-options.js';
export { Coordinator } from './coordinator/coordinator.js';
export type { CoordinatorOptions, CoordinatorDeps, CoordinatorEvents, HeartbeatReport, ShutdownReport } from './coordinator/coordinator.js';
export { DispatchTransaction } from './coordinator/dispatch-transaction.js';
export { heartbeatIntervalMs } from './coordinator/heartbeat-period.js';
export { jobWorkId, workPayloadOf, jobFromWorkPayload } from './coordinator/work-identity.js';
export { systemClock } from './coordinator/ports.js';
export { SeedWorkSource, untargetedJob } from './coordinator/seed-work-source.js';
export type { SeedWorkSourceOptions } from './coordinator/seed-work-source.js';
export type {
  Clock,
  CoordinatorJob,
  JobAction,
  AdmittedWork,
  ClaimOutcome,
  WorkLeasePort,
  TargetLeasePort,
  SolverPort,
  SolverTask,
  SolverOutcome,
  SolverStatus,
  GeneratedInput,
  WorkSource,
  JobFeedback,
  FindingSink,
  FindingItem,
  PublishedEntry,
  RecoveredWork,
  SeedInput,
  TargetScheduler,
} from './coordinator/ports.js';
export { parseAflEntryName, nextAflId, formatAflId } from './triage/afl-names.js';
export { AflQueueReader, listAflQueue, rankQueueEntries, parseAflCommandLine, readAflTargetCommand } from './triage/afl-queue.js';
export type { AflQueueEntry, AflTargetCommand, PickedInput } from './triage/afl-queue.js';
export { QueuePublisher } from './triage/queue-publisher.js';
export { FsDirectWriter } from './triage/durable-writer.js';
export type { DurableWriter, DurableFile } from './triage/durable-writer.js';
export { createCounters } from './telemetry/counters.js';
export type { CampaignCounters } from './telemetry/counters.js';
export { readStatsFile } from './telemetry/stats-file.js';
export type { StatsSnapshot } from './telemetry/stats-file.js';
export { readCampaignStatus } from './telemetry/campaign-status.js';
export type { CampaignStatus } from './telemetry/campaign-status.js';
export { readJobLog } from './telemetry/job-log.js';
export type { JobLogEntry, JobLogStatus } from './telemetry/job-log.js';
