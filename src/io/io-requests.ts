/**
 * The messages that cross the I/O-thread boundary, in one place: what a caller may ask
 * (`IoRequest`, a discriminated union on `kind`) and what each kind answers (`IoAnswer`). Each
 * kind's request and answer are declared in its own file under requests/ and collected by
 * requests/registry.ts; the shapes shared by several kinds live here. Everything here survives
 * structured clone (bigint, Uint8Array, plain objects).
 *
 * Owner identity: the lease owner string is the coordinator id the I/O thread was started with
 * (one per process); a target claim's `mirrorOwner` is the in-flight set's owner number (one per
 * local holder — the scheduler uses one per admitted job) and is stored durably as the records'
 * `worker` field, which is how a restart rebuilds the mirror with the same owners.
 */
import type { ClaimRefused } from '../lease/claim-outcome.js';
import type { GroupClaimResult } from '../lease/lease-results.js';
import type { GroupAnswers, OpenBackoff } from '../lease/table-contract.js';
import type { IoAnswers, IoRequest, IoRequestKind } from './requests/registry.js';

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
  /** The run's input (SHA-256 hex): members answered on it refuse the claim (`answered`). */
  readonly input?: string;
  /** Members answered on any input refuse the claim too. */
  readonly anyInput?: boolean;
  /** With `input`: members whose question is backing off on it under this policy refuse the claim (`backoff`). */
  readonly backoff?: OpenBackoff;
}

export interface GroupFence {
  readonly targets: readonly bigint[];
  readonly token: string;
  /** What the run answered, kept with the released members (docs/lease-format.md "Answers"). */
  readonly answers?: GroupAnswers;
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
interface ClaimFailure extends ClaimRefused<'failed'> {
  readonly code: string;
  readonly message: string;
}

export type BatchClaimResult = TargetClaimResult | ClaimFailure;

/** Files for one directory of a `publishCommitted` request. */
export interface DirectoryFiles {
  readonly dir: string;
  readonly files: readonly PublishedFile[];
}

export type { IoRequest, IoRequestKind } from './requests/registry.js';
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
  /** Scans of the shared answer records that made the target table's view complete (docs/lease-format.md "Complete views"). */
  readonly answerScans: number;
  /** Scans of the shared answer records that failed (claims then read what the view does not hold). */
  readonly answerScanFailures: number;
}
