/**
 * The root entry of symfence (`import … from 'symfence'`): what an embedder needs to run a
 * campaign, handle its errors and read its events and counters. The building blocks have their
 * own entries — `symfence/leases`, `symfence/scheduler`, `symfence/solver`, `symfence/testing`
 * (src/api/*.ts; docs/campaign.md "Embedding"). Every export is named explicitly;
 * test/unit/exports.test.ts snapshots each entry's names as the package's exports map resolves
 * them, so an accidental addition or removal shows up in review.
 */
export { PACKAGE_VERSION } from './version.js';

// Running a campaign.
export { Campaign } from './coordinator/campaign.js';
export type {
  CampaignComponents,
  CampaignComponentsFactory,
  CampaignContext,
  CampaignEvents,
  CampaignFinding,
  CampaignRuntime,
  CampaignStartOptions,
  CampaignSummary,
} from './coordinator/campaign.js';
export { startAflCampaign } from './coordinator/adapters/afl-campaign.js';
export type { AflRunSettings } from './coordinator/adapters/afl-campaign.js';
export { startDemo } from './coordinator/adapters/demo-campaign.js';
export type { DemoHandle, DemoSummary } from './coordinator/adapters/demo-campaign.js';
export type { CoordinatorHooks, CoordinatorPorts, ShutdownReport } from './coordinator/coordinator.js';

// Options: the schemas (defaults, flags, environment variables) and their resolved types.
export { CAMPAIGN_OPTIONS } from './coordinator/campaign-options.js';
export type { CampaignOptions } from './coordinator/campaign-options.js';
export { SOLVER_OPTIONS, SOLVER_CAMPAIGN_OPTIONS } from './solver/solver-options.js';
export type { SolverOptions } from './solver/solver-options.js';
export { IO_OPTIONS } from './io/io-options.js';
export type { IoOptions } from './io/io-options.js';
export type { OptionSchema, OptionSpec, OptionSpecs, ResolvedOptions, OptionsInput } from './config/schema.js';

// The ports a custom `CampaignComponents` implements (docs/campaign.md "Embedding").
export type { Clock } from './core/clock.js';
export type { PublishedEntry, FindingItem, FindingSink } from './core/findings.js';
export type {
  CoordinatorJob,
  JobAction,
  AdmittedWork,
  ClaimOutcome,
  RecoveredWork,
  WorkLeasePort,
  TargetLeasePort,
  LocalReservations,
  SolverPort,
  SolverPortTask,
  SolverOutcome,
  SolverPortStatus,
  TriagedInput,
  WorkSource,
  JobFeedback,
  SeedInput,
  ResultCommits,
} from './coordinator/ports.js';

// Events, counters and the files a campaign writes.
export type { CampaignCounters } from './telemetry/counters.js';
export { readStatsFile } from './telemetry/stats-file.js';
export type { StatsSnapshot } from './telemetry/stats-file.js';
export { readCampaignStatus } from './telemetry/campaign-status.js';
export type { CampaignStatus } from './telemetry/campaign-status.js';
export { forEachJobLogEntry, readJobLog } from './telemetry/job-log.js';
export type { JobLogEntry, JobLogStatus } from './telemetry/job-log.js';
export { solverUtilisation } from './telemetry/counters.js';

// The campaign report (`symfence report`): HTML and SVG charts from campaign outputs.
export { writeReport } from './report/write-report.js';
export type { WriteReportOptions, WrittenReport } from './report/write-report.js';

// Errors: every class, with a stable `code`, and their form across thread boundaries.
export {
  SymfenceError,
  InvalidOptionError,
  UsageError,
  LeaseCorruptError,
  LeaseIoError,
  LockTimeoutError,
  LockPathError,
  NativeUnavailableError,
  FsProbeError,
  LeaseStoreUnsupportedError,
  LeaseStoreSchemaError,
  LeaseStoreReplacedError,
  InflightFullError,
  InvalidJobError,
  TelemetryInvalidError,
  SolverTimeoutError,
  SolverOutputBudgetError,
  SolverNotSymccError,
  SolverSilentError,
  SolverSpawnError,
  PreloadUnsupportedError,
  SolverNotFoundError,
  ShowmapSetupError,
  SetupFailuresError,
  AflError,
  AbortedError,
  ClosedError,
  QueueClosedError,
  PublishError,
  LaneStateError,
  HintInvalidError,
  GuidanceInvalidError,
  AdmissionProtocolError,
  SolverExitError,
  MazeInvalidError,
  CampaignStateError,
  PlotDataInvalidError,
  CommitManifestError,
  StagedFindingError,
  OutDirBusyError,
  EtcdUnavailableError,
  LeaseRecordTooLargeError,
  StagedFindingTooLargeError,
  InternalError,
  ERROR_CODES,
  codeOf,
  toErrorData,
  fromErrorData,
  isErrorData,
  registeredErrorCodes,
} from './errors.js';
export type { ErrorData, ForeignErrorCode, SymfenceErrorCode } from './errors.js';
