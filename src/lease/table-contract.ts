/**
 * The lease store as the coordinator and the I/O thread see it: no paths, no files, no locks.
 * `FencedWorkLeaseTable` and `FencedTargetLeaseTable` implement these over a shared directory;
 * a coordination service (etcd: leases with keep-alive, multi-key transactions) can implement
 * them later. Code above `src/lease/` should depend on these interfaces.
 *
 * Contract shared by every implementation: expected outcomes are values (nothing changed when
 * `ok` is false), failures are thrown `SymfenceError`s; a success is reported only once the change
 * is durable; a group operation is all-or-nothing; `committing` work is never taken over.
 */
import type { ExecutionResult, LeaseOperation } from './lease-operation.js';
import type {
  ClaimResult,
  CommittingRecord,
  CompletionResult,
  PublicationClaim,
  ReplayResult,
  ExpiredLease,
  FenceResult,
  GroupClaimResult,
  HeartbeatBatchResult,
  LeaseCounts,
  SnapshotEntry,
} from './lease-results.js';
import type { AtTime, ClaimIdentity, ReplayOptions } from './lease-table-base.js';
import type { JsonObject } from './lease-record.js';

export interface WorkClaimOptions extends ClaimIdentity {
  /**
   * Per-call TTL, ms (≥ 0). 0 = forced takeover of any leased record. Otherwise the TTL this claim
   * stores as its own (its holder renews within it) and the one used for an earlier record that
   * carries no TTL of its own; a record with a stored TTL is judged by that. Default: the table TTL.
   */
  readonly leaseTtlMs?: number;
  /**
   * A claim refused by a `done` record answers with that record's commit manifest
   * (`holder.commit`): what the finished work left for the others, such as a trace (docs/campaign.md
   * "Shared traces"). Default false: a refusal carries no manifest.
   */
  readonly doneCommit?: boolean;
}

/**
 * The claimer's back-off policy for questions left open (docs/lease-format.md "Answers"): a
 * question left open `attempts` times, last at `lastOpenMs`, may be asked again from
 * `lastOpenMs + baseMs · 2^(attempts − 1)` on, and not at all once `attempts ≥ maxAttempts`.
 */
export interface OpenBackoff {
  readonly baseMs: number;
  readonly maxAttempts: number;
}

/**
 * A group claim; `input` (the run's input, SHA-256 hex) asks the table to refuse members answered
 * on it, `anyInput` to refuse members answered on any input, and `backoff` (with `input`) to
 * refuse members whose question runs left open on it while the policy says wait.
 */
export interface TargetClaimOptions extends ClaimIdentity {
  readonly input?: string;
  readonly anyInput?: boolean;
  readonly backoff?: OpenBackoff;
}

/**
 * What a finished run learnt on `input` (SHA-256 hex): the members it answered (sat or unsat) and
 * the members it left open (`unknown`, a timeout, a kill), whose attempts count up campaign-wide.
 */
export interface GroupAnswers {
  readonly input: string;
  readonly settled: readonly bigint[];
  readonly open?: readonly bigint[];
}

/** The lease whose run answered: its owner, token and worker, kept in the answer records it writes. */
export interface AnswerWriter {
  readonly owner: string;
  readonly token: string;
  readonly worker: number;
}

/** A release; with `answers`, `nowMs` (the release time, kept as `completedMs`) is required. */
export interface TargetReleaseOptions {
  readonly answers?: GroupAnswers;
  readonly nowMs?: number;
}

export interface BeginCommitOptions extends AtTime {
  /** Durable result manifest, replayable after a crash. Omitted: an existing manifest is kept. */
  readonly commit?: JsonObject;
}

/** The finish of a publication: the time, and the claim's `takenOverMs` (absent when it has none). */
export interface FinishPublicationOptions extends AtTime {
  readonly takenOverMs?: number;
}

/**
 * Publishes a committed result; called by `replayCommitOnce` between its claim and its finish,
 * outside every lease batch (docs/leases.md "Publishing a committed result").
 */
export type CommitPublisher = (commit: JsonObject) => void | Promise<void>;

/** What both stores offer: scans, counts, and batched execution of planned operations. */
export interface LeaseStoreCommon {
  /** Runs planned operations in one durability unit (the I/O thread's group commit). */
  executeBatch(operations: readonly LeaseOperation<unknown>[]): Promise<ExecutionResult>;
  snapshotRecords(options?: { readonly limit?: number }): Promise<SnapshotEntry[]>;
  recoverExpired(options: AtTime & { readonly leaseTtlMs?: number; readonly limit?: number }): Promise<ExpiredLease[]>;
  snapshotCounts(options: AtTime): Promise<LeaseCounts>;
  /** Most leases one planned heartbeat should carry (a store may bound its transactions). */
  readonly heartbeatBatchSize?: number;
}

export interface WorkLeaseStore extends LeaseStoreCommon {
  planClaim(workId: string, payload: object, options: WorkClaimOptions): LeaseOperation<ClaimResult>;
  claim(workId: string, payload: object, options: WorkClaimOptions): Promise<ClaimResult>;
  planHeartbeatMany(leases: Iterable<readonly [string, string]>, options: AtTime): LeaseOperation<Omit<HeartbeatBatchResult, 'directoryBarriers'>>;
  heartbeatMany(leases: Iterable<readonly [string, string]>, options: AtTime): Promise<HeartbeatBatchResult>;
  heartbeat(workId: string, token: string, options: AtTime): Promise<FenceResult>;
  planAbandon(workId: string, token: string): LeaseOperation<FenceResult>;
  abandon(workId: string, token: string): Promise<FenceResult>;
  planBeginCommit(workId: string, token: string, options: BeginCommitOptions): LeaseOperation<FenceResult>;
  beginCommit(workId: string, token: string, options: BeginCommitOptions): Promise<FenceResult>;
  planCompleteOnce(workId: string, token: string, options: AtTime): LeaseOperation<CompletionResult>;
  completeOnce(workId: string, token: string, options: AtTime): Promise<CompletionResult>;
  complete(workId: string, token: string, options: AtTime): Promise<boolean>;
  planClaimPublication(workId: string, token: string, options: ReplayOptions): LeaseOperation<PublicationClaim>;
  planFinishPublication(workId: string, token: string, options: FinishPublicationOptions): LeaseOperation<CompletionResult>;
  replayCommitOnce(workId: string, token: string, publish: CommitPublisher, options: ReplayOptions): Promise<ReplayResult>;
  recoverCommittingRecords(options?: { readonly limit?: number }): Promise<CommittingRecord[]>;
}

export interface TargetLeaseStore extends LeaseStoreCommon {
  planClaimGroup(targets: Iterable<bigint>, payload: object, options: TargetClaimOptions): LeaseOperation<GroupClaimResult>;
  claimGroup(targets: Iterable<bigint>, payload: object, options: TargetClaimOptions): Promise<GroupClaimResult>;
  planHeartbeatGroup(targets: Iterable<bigint>, token: string, options: AtTime): LeaseOperation<FenceResult>;
  heartbeatGroup(targets: Iterable<bigint>, token: string, options: AtTime): Promise<FenceResult>;
  planReleaseGroup(targets: Iterable<bigint>, token: string, options?: TargetReleaseOptions): LeaseOperation<FenceResult>;
  releaseGroup(targets: Iterable<bigint>, token: string, options?: TargetReleaseOptions): Promise<FenceResult>;
  planRecordAnswers(answers: GroupAnswers, writer: AnswerWriter, nowMs: number): LeaseOperation<FenceResult>;
  recordAnswers(answers: GroupAnswers, writer: AnswerWriter, nowMs: number): Promise<FenceResult>;
  /** Scans of the answer records that made the table's view complete, and scans that failed (docs/lease-format.md "Complete views"). */
  readonly answerScans?: { readonly scans: number; readonly failed: number };
}
