/**
 * `symfence/leases`: the fenced lease tables on a shared directory, their inspection, the
 * filesystem probe, the tables as coordinator ports, and the identities stored in them
 * (docs/leases.md, docs/lease-format.md). The I/O thread that runs the tables for a campaign is
 * the campaign's own (docs/io-thread.md); its options are the root entry's `IO_OPTIONS`.
 */
export { FencedWorkLeaseTable, MAX_HEARTBEAT_BATCH } from '../lease/work-lease-table.js';
export { FencedTargetLeaseTable } from '../lease/target-lease-table.js';
export { LEASE_TABLE_OPTIONS } from '../lease/lease-table-options.js';
export type { LeaseTableOptions } from '../lease/lease-table-options.js';
export type { LeaseTableDeps, AtTime, ClaimIdentity } from '../lease/lease-table-base.js';
export type { WorkLeaseStore, TargetLeaseStore, LeaseStoreCommon, WorkClaimOptions, BeginCommitOptions, CommitPublisher } from '../lease/table-contract.js';
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
} from '../lease/lease-results.js';
export type { LeaseRecord, LeaseStatus, RecordKind, JsonObject } from '../lease/lease-record.js';
export type { FileBarrierStrategy, DirectoryBarrierMode } from '../lease/files/durability-batch.js';
export type { CoordinationMode, LockerKind } from '../lease/files/record-lock.js';
export { workIdOf, targetRecordId, answerRecordId, groupMembers, isRecordId, MAX_GROUP_TARGETS, MAX_TARGET } from '../lease/identity.js';
export type { GroupMember } from '../lease/identity.js';

// Inspection (what `symfence leases` prints) and the filesystem probe.
export { inspectLeaseDirectory, inspectLeaseTable, findLeaseTables } from '../lease/lease-inspect.js';
export type { TableInspection, OwnerCounts, CorruptRecordReport, InspectOptions } from '../lease/lease-inspect.js';
export { probeFilesystem, FS_PROBE_STEP_NAMES } from '../lease/files/fs-probe.js';
export type { FsProbeOptions, FsProbeReport, FsProbeStepName, FsProbeOps, FsProbeStep, FsProbeContext } from '../lease/files/fs-probe.js';
export type { FsLayer, FsOperation, FsStat } from '../fs/fs-layer.js';

// The work identity of a job (the work-lease id) and the result manifest stored with beginCommit.
export { jobWorkId, workPayloadOf, jobFromWorkPayload } from '../coordinator/work-identity.js';
export { COMMIT_MANIFEST_SCHEMA, buildCommitManifest, parseCommitManifest } from '../commit/commit-manifest.js';
export type { CommitManifest, CommitItem, CommitItemKind, CommitStatus } from '../commit/commit-manifest.js';

// The tables as coordinator ports, for components of an embedder's own.
export { WorkLeaseAdapter, TargetLeaseAdapter } from '../coordinator/adapters/lease-adapters.js';
