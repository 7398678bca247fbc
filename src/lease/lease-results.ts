/**
 * Result shapes of the lease tables. Expected outcomes (a conflict, a stale token, a corrupt
 * record) are values, discriminated on `ok` and `reason`; failures (bad arguments, lock timeout,
 * I/O) are thrown `SymfenceError`s (`ERR_INVALID_OPTION`, `ERR_INVALID_JOB`, `ERR_LOCK_TIMEOUT`,
 * `ERR_LOCK_PATH`, `ERR_LEASE_IO`, `ERR_NATIVE_UNAVAILABLE`). Every negative result has mutated
 * nothing.
 */
import type { ClaimGranted, ClaimRefused, OpenMember } from './claim-outcome.js';
import type { JsonObject, LeaseRecord, LeaseStatus } from './lease-record.js';

/** The record that blocked a claim. */
export interface LeaseHolder {
  readonly id: string;
  readonly status: LeaseStatus;
  readonly owner: string;
  readonly updatedMs: number;
  /** A `done` work record's commit manifest, when the claim asked for it (`doneCommit`) and the record has one. */
  readonly commit?: JsonObject;
}

/** A corrupt record met by an operation (it was left untouched). */
export interface CorruptMember {
  readonly id: string;
  readonly detail: string;
}

/** A work claim: the claim outcome (src/lease/claim-outcome.ts) with the table's detail. */
export type ClaimResult =
  | (ClaimGranted & { readonly attempts: number; readonly steals: number; readonly previousOwner: string })
  /** A live lease, a `committing` or a `done` record holds the id. */
  | (ClaimRefused<'conflict'> & { readonly holder: LeaseHolder })
  | (ClaimRefused<'corrupt'> & { readonly corrupt: CorruptMember });

/** A target-group claim: the claim outcome with the table's detail. */
export type GroupClaimResult =
  | (ClaimGranted & { readonly ids: readonly string[] })
  /** Some members are held (all conflicting members are listed). */
  | (ClaimRefused<'conflict'> & { readonly holders: readonly (LeaseHolder & { readonly target: bigint })[] })
  | (ClaimRefused<'corrupt'> & { readonly corrupt: readonly (CorruptMember & { readonly target: bigint })[] })
  /** The claim named an input on which some members were answered already (all such members listed). */
  | (ClaimRefused<'answered'> & { readonly answered: readonly bigint[] })
  /** The claim named an input and a back-off policy; some members' questions are backing off on it (all listed). */
  | (ClaimRefused<'backoff'> & { readonly open: readonly OpenMember[] });

/** Heartbeat, abandon, beginCommit, heartbeatGroup, releaseGroup. */
export type FenceResult =
  | { readonly ok: true }
  /** The token does not match, the record is gone, or it is in a state the call does not accept. */
  | { readonly ok: false; readonly reason: 'stale'; readonly id: string }
  | { readonly ok: false; readonly reason: 'corrupt'; readonly corrupt: CorruptMember }
  /** beginCommit on a `committing` record with a different manifest. */
  | { readonly ok: false; readonly reason: 'manifest-mismatch'; readonly id: string };

/** completeOnce / replayCommitOnce: `already` = done earlier with the same token. */
export type CompletionResult = 'completed' | 'already' | 'stale' | 'corrupt';

/**
 * replayCommitOnce: a completion result, or `live` — the record was renewed within `minIdleMs`
 * (its owner is alive and will finish it), so nothing was published.
 */
export type ReplayResult = CompletionResult | 'live';

/**
 * claimPublication: `publish` — the caller may publish the manifest now, then finish passing
 * `takenOverMs` (set when the caller took the publication over) — or the replay result that says
 * why nothing is to be published.
 */
export type PublicationClaim =
  | { readonly state: 'publish'; readonly commit: JsonObject; readonly takenOverMs?: number }
  | { readonly state: Exclude<ReplayResult, 'completed'> };

export interface HeartbeatBatchResult {
  /** Ids renewed, sorted. */
  readonly renewed: readonly string[];
  /** Ids not renewed (stale token, gone, wrong state, corrupt), sorted. */
  readonly lost: readonly string[];
  /** The subset of `lost` whose record is corrupt. */
  readonly corrupt: readonly string[];
  /** Directory barriers issued (one per touched shard per batch). */
  readonly directoryBarriers: number;
}

export interface ExpiredLease {
  readonly id: string;
  readonly payload: JsonObject;
  readonly owner: string;
  readonly token: string;
  readonly updatedMs: number;
}

export interface CommittingRecord {
  readonly id: string;
  readonly payload: JsonObject;
  readonly token: string;
  readonly commit: JsonObject;
}

export interface SnapshotEntry {
  readonly id: string;
  readonly record: LeaseRecord;
}

export interface LeaseCounts {
  readonly leased: number;
  /** Leased records whose TTL has run out (a subset of `leased`). */
  readonly expired: number;
  readonly committing: number;
  readonly done: number;
  readonly corrupt: number;
}
