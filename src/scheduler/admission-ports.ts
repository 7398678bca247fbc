/**
 * The two reservation layers admission talks to, as narrow ports so the scheduler is unit-tested
 * without threads or disk. The real implementations live elsewhere: `InflightTargetSet` (the
 * SharedArrayBuffer mirror, src/inflight/) and the durable target table reached through the I/O
 * thread (src/lease/, src/io/).
 */

/** The process-local in-flight set (the real one is InflightTargetSet over a SharedArrayBuffer). */
export interface LocalReservations {
  tryReserveGroup(targets: readonly bigint[], owner: number): boolean; // all-or-nothing
  releaseGroup(targets: readonly bigint[], owner: number): number;
}

/** The durable shared target table, reached through the I/O thread: ONE call per round. */
export interface SharedTargetClaims {
  claimGroups(groups: readonly (readonly bigint[])[], now: number): Promise<readonly SharedClaimOutcome[]>;
  releaseGroups(claims: readonly { targets: readonly bigint[]; token: string }[], now: number): Promise<void>;
}

export type SharedClaimOutcome =
  | { readonly granted: true; readonly token: string }
  | { readonly granted: false; readonly reason: 'conflict' | 'corrupt' | 'error'; readonly detail?: string };
