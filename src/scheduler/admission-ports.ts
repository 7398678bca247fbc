/**
 * The two reservation layers admission talks to, as narrow ports so the scheduler is unit-tested
 * without threads or disk. The real implementations live elsewhere: `InflightTargetSet` (the
 * SharedArrayBuffer mirror, src/inflight/) and the durable target table reached through the I/O
 * thread (src/lease/, src/io/).
 */
import type { ClaimOutcome } from '../lease/claim-outcome.js';
import type { OpenBackoff } from '../lease/table-contract.js';

// One claim outcome from the lease tables to the coordinator (src/lease/claim-outcome.ts).
export type { ClaimOutcome } from '../lease/claim-outcome.js';

/**
 * The process-local in-flight set (the real one is InflightTargetSet over a SharedArrayBuffer);
 * the coordinator's ports (src/coordinator/ports.ts) use this same interface.
 */
export interface LocalReservations {
  /** All-or-nothing: reserves every member under `owner`, or none. */
  tryReserveGroup(targets: readonly bigint[], owner: number): boolean;
  /** Returns how many members were released. */
  releaseGroup(targets: readonly bigint[], owner: number): number;
}

/**
 * What a claim asks about answers (docs/leases.md "Shared answers"): `input`, the group's seed —
 * members answered on it refuse the claim; `anyInput` — members answered on any input do;
 * `backoff` — members whose question runs left open on the input refuse it (`backoff`) while
 * this policy says wait, or once it says give up.
 */
export interface ClaimAsk {
  readonly input?: string;
  readonly anyInput?: boolean;
  readonly backoff?: OpenBackoff;
}

/** The durable shared target table, reached through the I/O thread: ONE call per round. */
export interface SharedTargetClaims {
  /**
   * `asks[i]`: what group i's claim asks about answers. A port that shares answers refuses the
   * members it names with `answered`, listing them.
   */
  claimGroups(groups: readonly (readonly bigint[])[], now: number, asks?: readonly (ClaimAsk | undefined)[]): Promise<readonly ClaimOutcome[]>;
  releaseGroups(claims: readonly { targets: readonly bigint[]; token: string }[], now: number): Promise<void>;
}
