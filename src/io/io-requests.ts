/**
 * The messages that cross the I/O-thread boundary, in one place: what a caller may ask
 * (`IoRequest`, a discriminated union on `kind`) and what each kind answers (`IoAnswer`).
 * Everything here survives structured clone (bigint, Uint8Array, plain objects).
 *
 * Owner identity: the lease owner string is the coordinator id the I/O thread was started with
 * (one per process); a target claim's `mirrorOwner` is the in-flight set's owner number (one per
 * local holder — the scheduler uses one per admitted job) and is stored durably as the records'
 * `worker` field, which is how a restart rebuilds the mirror with the same owners.
 */
import type { ClaimRefused } from '../lease/claim-outcome.js';
import type { JsonObject } from '../lease/lease-record.js';
import type {
  ClaimResult,
  CompletionResult,
  ExpiredLease,
  FenceResult,
  GroupClaimResult,
  HeartbeatBatchResult,
  LeaseCounts,
  ReplayResult,
  SnapshotEntry,
} from '../lease/lease-results.js';

/** One file to publish under its final name. */
export interface PublishedFile {
  /** Final name inside the directory (no `/`, must not start with `.`). */
  readonly name: string;
  readonly bytes: Uint8Array;
}

export interface GroupClaimRequest {
  readonly targets: readonly bigint[];
  readonly payload: object;
  /** In-flight set owner number (1..2^32−1) of the local holder; stored as the records' `worker`. */
  readonly mirrorOwner: number;
}

export interface GroupFence {
  readonly targets: readonly bigint[];
  readonly token: string;
}

/**
 * A target claim refused before the durable table was asked: a member is held in this process's
 * in-flight set by another local owner. Nothing was written, nothing reserved.
 */
export interface LocalConflict extends ClaimRefused<'local-conflict'> {
  readonly targets: readonly bigint[];
}

export type TargetClaimResult = GroupClaimResult | LocalConflict;

/**
 * One group of a `claimGroups` request whose claim failed (I/O failure, lock timeout): the
 * outcome is unknown-but-restored, nothing is held. `code` is the error's stable code.
 */
export interface ClaimFailure extends ClaimRefused<'failed'> {
  readonly code: string;
  readonly message: string;
}

export type BatchClaimResult = TargetClaimResult | ClaimFailure;

export type IoRequest =
  | ({ readonly kind: 'claimGroup'; readonly nowMs: number } & GroupClaimRequest)
  | { readonly kind: 'claimGroups'; readonly groups: readonly GroupClaimRequest[]; readonly nowMs: number }
  | ({ readonly kind: 'heartbeatGroup'; readonly nowMs: number } & GroupFence)
  | ({ readonly kind: 'releaseGroup'; readonly nowMs: number } & GroupFence)
  | { readonly kind: 'releaseGroups'; readonly claims: readonly GroupFence[]; readonly nowMs: number }
  | { readonly kind: 'claim'; readonly workId: string; readonly payload: object; readonly worker?: number; readonly leaseTtlMs?: number; readonly nowMs: number }
  | { readonly kind: 'heartbeatMany'; readonly leases: readonly (readonly [string, string])[]; readonly nowMs: number }
  | { readonly kind: 'abandon'; readonly workId: string; readonly token: string }
  | { readonly kind: 'beginCommit'; readonly workId: string; readonly token: string; readonly commit?: JsonObject; readonly nowMs: number }
  | { readonly kind: 'completeOnce'; readonly workId: string; readonly token: string; readonly nowMs: number }
  | { readonly kind: 'recoverExpired'; readonly table: 'work' | 'target'; readonly leaseTtlMs?: number; readonly limit?: number; readonly nowMs: number }
  | { readonly kind: 'snapshotCounts'; readonly table: 'work' | 'target'; readonly nowMs: number }
  | { readonly kind: 'snapshotRecords'; readonly table: 'work' | 'target'; readonly limit?: number; readonly corrupt?: 'reject' | 'skip' }
  | { readonly kind: 'sweepExpired'; readonly nowMs: number }
  | { readonly kind: 'ensureDir'; readonly dir: string }
  | { readonly kind: 'listDir'; readonly dir: string }
  | { readonly kind: 'publishFiles'; readonly dir: string; readonly files: readonly PublishedFile[] }
  /** Content-addressed durable staging: creates `dir` durably, keeps names that already exist. */
  | { readonly kind: 'stageFiles'; readonly dir: string; readonly files: readonly PublishedFile[] }
  /**
   * Fenced publication of a committed result: under the work record's lock, only while it is
   * `committing` with `token`, publishes every directory's files, then marks the record `done`.
   */
  | {
      readonly kind: 'publishCommitted';
      readonly workId: string;
      readonly token: string;
      readonly publications: readonly DirectoryFiles[];
      readonly nowMs: number;
      /** Only when the record was not renewed for this long (another coordinator's result). */
      readonly minIdleMs?: number;
    }
  /** Unlinks names in `dir` (missing ones are fine); no barrier: what is left is garbage either way. */
  | { readonly kind: 'removeFiles'; readonly dir: string; readonly names: readonly string[] };

/** Files for one directory of a `publishCommitted` request. */
export interface DirectoryFiles {
  readonly dir: string;
  readonly files: readonly PublishedFile[];
}

/** What each request kind resolves to. */
export interface IoAnswers {
  claimGroup: TargetClaimResult;
  claimGroups: BatchClaimResult[];
  heartbeatGroup: FenceResult;
  releaseGroup: FenceResult;
  releaseGroups: FenceResult[];
  claim: ClaimResult;
  heartbeatMany: Omit<HeartbeatBatchResult, 'directoryBarriers'>;
  abandon: FenceResult;
  beginCommit: FenceResult;
  completeOnce: CompletionResult;
  recoverExpired: ExpiredLease[];
  snapshotCounts: LeaseCounts;
  snapshotRecords: SnapshotEntry[];
  /** Groups dropped from the mirror because their lease expired without a heartbeat. */
  sweepExpired: number;
  ensureDir: void;
  listDir: string[];
  publishFiles: void;
  stageFiles: void;
  publishCommitted: ReplayResult;
  /** Names actually removed. */
  removeFiles: number;
}

export type IoRequestKind = IoRequest['kind'];
export type RequestOf<K extends IoRequestKind> = Extract<IoRequest, { kind: K }>;
export type IoAnswer<K extends IoRequestKind> = IoAnswers[K];

/** Counters of the I/O service since start. */
export interface IoStats {
  /** Group commits run. */
  readonly batches: number;
  /** Requests answered (successfully or not). */
  readonly requests: number;
  /** Largest number of requests in one batch. */
  readonly largestBatch: number;
  /** File barriers issued (fsync calls, or syncfs calls). */
  readonly fileBarriers: number;
  /** Directory barriers issued. */
  readonly directoryBarriers: number;
  /** Target groups currently granted to this process and mirrored. */
  readonly mirroredGroups: number;
  /** Groups removed from the mirror because the lease was lost (stale heartbeat) or expired. */
  readonly lostGroups: number;
}
