/**
 * `symfence/scheduler`: the target scheduler — lanes, admission against the ledger, the in-flight
 * set and shared claims, the telemetry parser and hint files (docs/scheduler.md, docs/inflight.md).
 */
export { Scheduler } from '../scheduler/scheduler.js';
export type { SchedulerInit, SeedInfo, RunFeedback, SchedulerStats, LaneByName } from '../scheduler/scheduler.js';
export { SCHEDULER_OPTIONS } from '../scheduler/scheduler-options.js';
export type { SchedulerOptions } from '../scheduler/scheduler-options.js';

// The lanes (the scheduler builds them from its options; `Scheduler#lanes()`) and their scoring.
export type { Lane, LaneName, Proposal, ObserveContext } from '../scheduler/lanes/lane.js';
export { DEFAULT_SCORING } from '../scheduler/scoring.js';
export type { ScoringPolicy, PrefixFeatures, CstgFeatures, EdgeFeatures, ConcurrencyFeatures, FallbackFeatures } from '../scheduler/scoring.js';

// Admission: local reservations (the in-flight set) and shared target claims.
export { Admission, DEFAULT_LANE_ORDER } from '../scheduler/admission.js';
export type { AdmittedJob, AdmissionOptions, AdmissionStats, LaneOrder } from '../scheduler/admission.js';
export type { LocalReservations, SharedTargetClaims, ClaimOutcome } from '../scheduler/admission-ports.js';
export { MapLocalReservations } from '../scheduler/map-local-reservations.js';
export { InflightTargetSet } from '../inflight/inflight-target-set.js';
export type { InflightStats, InflightSetOptions } from '../inflight/inflight-target-set.js';
export { applyHints, claimDispatchGroup } from '../scheduler/target-contract.js';
export type { DispatchPlan, ContractOutcome, DispatchClaim } from '../scheduler/target-contract.js';

// Jobs, branch ids, telemetry, hints and guidance.
export { normalizeJob, normalizeActions, targetGroup, formatActionFile, MAX_ACTIONS, MAX_GROUP_SIZE } from '../scheduler/replay-job.js';
export type { ReplayJob, S2FAction, ActionKind } from '../scheduler/replay-job.js';
export { toBranchId, MAX_BRANCH_ID } from '../scheduler/branch-id.js';
export { parseTelemetry, TELEMETRY_SCHEMA } from '../scheduler/telemetry.js';
export type { Telemetry, BranchTraceEntry, SolverCounters, TargetStatus } from '../scheduler/telemetry.js';
export { HintFile, parseHint } from '../scheduler/hints.js';
export type { Hint, HintSource, Focus, SeedIdentity } from '../scheduler/hints.js';
export { parseGuidance } from '../scheduler/guidance-map.js';
