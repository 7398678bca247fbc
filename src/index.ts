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
  LaneStateError,
  HintInvalidError,
  GuidanceInvalidError,
  AdmissionProtocolError,
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
  CampaignStartOptions,
  CampaignSummary,
} from './coordinator/campaign.js';
export { CAMPAIGN_OPTIONS } from './coordinator/campaign-options.js';
export type { CampaignOptions } from './coordinator/campaign-options.js';
export { Coordinator, RECOVERY_OWNER } from './coordinator/coordinator.js';
export { WorkLeaseAdapter, TargetLeaseAdapter } from './coordinator/adapters/lease-adapters.js';
export { SchedulerAdapter } from './coordinator/adapters/scheduler-adapter.js';
export { IoWorkLeases, IoTargetLeases } from './coordinator/adapters/io-lease-adapters.js';
export { SolverPoolAdapter } from './coordinator/adapters/solver-adapter.js';
export type { SolverAdapterSettings } from './coordinator/adapters/solver-adapter.js';
export { buildCampaignComponents, startIoThread } from './coordinator/adapters/campaign-components.js';
export type { ComponentSpec } from './coordinator/adapters/campaign-components.js';
export { startDemo, MazeProgress, mazeClassifier, demoSeedBytes } from './coordinator/adapters/demo-campaign.js';
export type { DemoHandle, DemoSummary } from './coordinator/adapters/demo-campaign.js';
export { startAflCampaign, aflComponentsFactory } from './coordinator/adapters/afl-campaign.js';
export type { AflRunSettings } from './coordinator/adapters/afl-campaign.js';
export type { CoordinatorOptions, CoordinatorDeps, CoordinatorEvents, CoordinatorHooks, HeartbeatReport, ShutdownReport } from './coordinator/coordinator.js';
export { IoResultCommits } from './coordinator/adapters/io-result-commits.js';
export type { ResultCommitsClient } from './coordinator/adapters/io-result-commits.js';
export {
  COMMIT_MANIFEST_SCHEMA,
  STAGED_DIR,
  buildCommitManifest,
  parseCommitManifest,
  manifestJson,
  stagedName,
  stagedRelativePath,
  parseStagedName,
} from './commit/commit-manifest.js';
export type { CommitManifest, CommitItem, CommitItemKind, CommitStatus } from './commit/commit-manifest.js';
export { StagedFindings } from './commit/staged-findings.js';
export type { StagingClient } from './commit/staged-findings.js';
export { CommitManifestError, StagedFindingError, OutDirBusyError } from './errors.js';
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
  SolverPortTask,
  SolverOutcome,
  SolverPortStatus,
  TriagedInput,
  WorkSource,
  JobFeedback,
  FindingSink,
  FindingItem,
  PublishedEntry,
  RecoveredWork,
  SeedInput,
  TargetScheduler,
  ResultCommits,
  CommitFinding,
  CommittingWork,
  CommitScan,
  CommitOutcome,
  CommitPublication,
  StagedResult,
} from './coordinator/ports.js';
export { parseAflEntryName, nextAflId, formatAflId } from './triage/afl-names.js';
export { AflQueueReader, listAflQueue, rankQueueEntries, parseAflCommandLine, readAflTargetCommand } from './triage/afl-queue.js';
export type { AflQueueEntry, AflTargetCommand, PickedInput } from './triage/afl-queue.js';
export { QueuePublisher } from './triage/queue-publisher.js';
export type { GuardedPublication } from './triage/queue-publisher.js';
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
export { NodeFsLayer, nodeFsLayer, errnoCode } from './fs/fs-layer.js';
export type { FsLayer, FsOperation, FsStat } from './fs/fs-layer.js';
export { FaultInjectingFsLayer } from './fs/fault-fs-layer.js';
export type { FaultRule, HookRule, FsCall, BarrierCounts, PathMatcher } from './fs/fault-fs-layer.js';
export { FencedWorkLeaseTable, MAX_HEARTBEAT_BATCH } from './lease/work-lease-table.js';
export type { WorkClaimOptions, BeginCommitOptions, CommitPublisher } from './lease/work-lease-table.js';
export { FencedTargetLeaseTable } from './lease/target-lease-table.js';
export { LEASE_TABLE_OPTIONS } from './lease/lease-table-options.js';
export type { LeaseTableOptions } from './lease/lease-table-options.js';
export type { LeaseTableDeps, AtTime, ClaimIdentity } from './lease/lease-table-base.js';
export type { WorkLeaseStore, TargetLeaseStore, LeaseStoreCommon } from './lease/lease-store.js';
export type {
  ClaimResult,
  GroupClaimResult,
  FenceResult,
  CompletionResult,
  HeartbeatBatchResult,
  LeaseHolder,
  CorruptMember,
  ExpiredLease,
  CommittingRecord,
  SnapshotEntry,
  LeaseCounts,
} from './lease/lease-results.js';
export type { LeaseRecord, LeaseStatus, RecordKind, JsonObject } from './lease/lease-record.js';
export { canonicalJson, canonicalJsonBytes } from './lease/canonical-json.js';
export { workIdOf, targetRecordId, shardOf, shardDirName, groupMembers, isRecordId, MAX_GROUP_TARGETS, MAX_TARGET } from './lease/identity.js';
export type { GroupMember } from './lease/identity.js';
export type { LeaseOperation, RecordView, OperationOutcome, ExecutionResult } from './lease/lease-operation.js';
export type { BatchReport, FileBarrierStrategy, DirectoryBarrierMode } from './lease/durability-batch.js';
export type { CoordinationMode, LockerKind } from './lease/record-lock.js';
export { inspectLeaseDirectory, inspectLeaseTable, findLeaseTables } from './lease/lease-inspect.js';
export type { TableInspection, OwnerCounts, CorruptRecordReport, InspectOptions } from './lease/lease-inspect.js';
export { loadNative, nativeLoadError, requireNative } from './native/bindings.js';
export type { NativeBindings, NativeSpawnOptions } from './native/bindings.js';
export { InflightTargetSet } from './inflight/inflight-target-set.js';
export type { InflightStats, InflightSetOptions } from './inflight/inflight-target-set.js';
export { probeFilesystem, FS_PROBE_STEP_NAMES } from './lease/fs-probe.js';
export type { FsProbeOptions, FsProbeReport, FsProbeStepName, FsProbeOps, FsProbeStep, FsProbeContext } from './lease/fs-probe.js';
export { Scheduler } from './scheduler/scheduler.js';
export type { SchedulerInit, SeedInfo, RunFeedback, SchedulerStats, LaneByName } from './scheduler/scheduler.js';
export { SCHEDULER_OPTIONS } from './scheduler/scheduler-options.js';
export type { SchedulerOptions } from './scheduler/scheduler-options.js';
export { Admission } from './scheduler/admission.js';
export type { AdmittedJob, AdmissionOptions, AdmissionStats } from './scheduler/admission.js';
export type { LocalReservations, SharedTargetClaims, SharedClaimOutcome } from './scheduler/admission-ports.js';
export { MapLocalReservations } from './scheduler/map-local-reservations.js';
export { normalizeJob, normalizeActions, targetGroup, formatActionFile, MAX_ACTIONS, MAX_GROUP_SIZE } from './scheduler/replay-job.js';
export type { ReplayJob, S2FAction, ActionKind } from './scheduler/replay-job.js';
export { toBranchId, MAX_BRANCH_ID } from './scheduler/branch-id.js';
export { parseTelemetry, telemetryToJson, TELEMETRY_SCHEMA, MAX_TRACE_ENTRIES, MAX_OPEN_BRANCHES } from './scheduler/telemetry.js';
export type { Telemetry, BranchTraceEntry, SolverCounters, TargetStatus } from './scheduler/telemetry.js';
export { PrefixDagLane } from './scheduler/lanes/prefix-dag-lane.js';
export { CstgLane } from './scheduler/lanes/cstg-lane.js';
export { EdgeDependenceLane, edgeId } from './scheduler/lanes/edge-dependence-lane.js';
export { ConcurrencyLane } from './scheduler/lanes/concurrency-lane.js';
export { FallbackReplayLane } from './scheduler/lanes/fallback-replay-lane.js';
export { ConstraintSummaryCache } from './scheduler/lanes/constraint-summary-cache.js';
export type { Lane, LaneName, Proposal, ObserveContext } from './scheduler/lanes/lane.js';
export { DEFAULT_SCORING } from './scheduler/scoring.js';
export type { ScoringPolicy, PrefixFeatures, CstgFeatures, EdgeFeatures, ConcurrencyFeatures, FallbackFeatures } from './scheduler/scoring.js';
export { parseGuidance } from './scheduler/guidance-map.js';
export { HintFile, parseHint } from './scheduler/hints.js';
export type { Hint, HintSource, Focus, SeedIdentity } from './scheduler/hints.js';
export { applyHints, claimDispatchGroup } from './scheduler/target-contract.js';
export type { DispatchPlan, ContractOutcome, DispatchClaim } from './scheduler/target-contract.js';
export { PublishError } from './errors.js';
export { IoThread, IoClient } from './io/io-thread.js';
export type { IoThreadOptions } from './io/io-thread.js';
export { IoService } from './io/io-service.js';
export type { IoServiceDeps } from './io/io-service.js';
export { IO_OPTIONS } from './io/io-options.js';
export type { IoOptions } from './io/io-options.js';
export { IoSharedTargetClaims, IoDurableWriter } from './io/io-adapters.js';
export type { SharedTargetClaimsOptions, TargetClaimsClient, FilePublicationClient } from './io/io-adapters.js';
export type {
  IoRequest,
  IoRequestKind,
  IoAnswer,
  IoStats,
  GroupClaimRequest,
  GroupFence,
  LocalConflict,
  ClaimFailure,
  TargetClaimResult,
  BatchClaimResult,
  PublishedFile,
  DirectoryFiles,
} from './io/io-requests.js';
export { SolverPool } from './solver/solver-pool.js';
export type { SolverPoolOptions, SolverPoolCounters, RunOptions } from './solver/solver-pool.js';
export { SOLVER_OPTIONS, resolveSolverOptions } from './solver/solver-options.js';
export { nativeSpawnAvailable, resolveSpawnMethod } from './solver/spawn-method.js';
export type { SpawnMethod, SpawnMethodChoice } from './solver/spawn-method.js';
export type { SolverOptions } from './solver/solver-options.js';
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
} from './solver/solver-types.js';
export { classifyExit, FATAL_SIGNALS } from './solver/exit-classification.js';
export type { ExitClass } from './solver/exit-classification.js';
export { parseTelemetryEnvelope } from './solver/telemetry-envelope.js';
export type { TelemetryParser } from './solver/telemetry-envelope.js';
export { aflToolEnv } from './solver/solver-env.js';
export { CoverageBitmap, classifyCounts, DEFAULT_MAP_SIZE_BYTES } from './solver/coverage-bitmap.js';
export { runShowmap } from './solver/showmap.js';
export type { ShowmapRequest, ShowmapResult } from './solver/showmap.js';
export { SolverExitError, MazeInvalidError } from './errors.js';
// Reference solver: a TEST AND DEMO FIXTURE (see docs/reference-solver.md).
export { DEMO_MAZE } from './reference/demo-maze.js';
export { parseMaze, walkMaze, traceMaze, mazeBranchCount, reachedBranches, mazeCoverageMap, mazeEdgeHits, branchId, MAZE_SCHEMA } from './reference/maze.js';
export type { Maze, MazeNode, MazeTest, MazeStep, MazeWalk } from './reference/maze.js';
export { mazeToC } from './reference/maze-c.js';
export { runReference } from './reference/reference-run.js';
export type { ReferenceRun, ReferenceTelemetry } from './reference/reference-run.js';
export { referenceSolverScript, referenceSolverCommand, referenceTriage } from './reference/reference-commands.js';
