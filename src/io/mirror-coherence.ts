/**
 * Keeps the process's in-flight target set (the SharedArrayBuffer mirror, docs/inflight.md) coherent with
 * the durable target leases the I/O thread grants and loses on this process's behalf.
 *
 * The one rule: **every durable target grant is backed by a local reservation of the same owner,
 * in the mirror before the caller is answered; the I/O thread removes it when the lease ends.**
 *
 * - Insert: before it runs a durable claim, the I/O thread makes sure the whole group is reserved
 *   for the request's `mirrorOwner`. Members the caller already reserved under that owner count
 *   (the scheduler reserves first, docs/scheduler.md "Admission" step 2); free members are reserved by the I/O thread;
 *   a member held by another local owner refuses the claim as `local-conflict` with no disk
 *   access. When the durable claim is refused or fails, the I/O thread drops only what it reserved
 *   itself; the caller's own reservation stays the caller's to release.
 * - Remove: on release (any answer but an I/O failure — after a `stale` answer the lease is not
 *   ours either), on a heartbeat answered `stale`/`corrupt` (lost lease), and when a granted lease
 *   went a whole TTL without a successful heartbeat (expired: anyone may take it over).
 *   Removal is owner-filtered, so a caller's later local release is a harmless no-op.
 * - Rebuild: at start, every live target record of this coordinator is re-reserved under its
 *   record's `worker` number (the mirror owner it was claimed with; 0 is mapped to 1).
 *
 * The durable table wins: the mirror is only a cache in front of it.
 */
import type { InflightTargetSet } from '../inflight/inflight-target-set.js';
import { isActiveLease, isStaleSince, type LeaseRecord } from '../lease/lease-record.js';
import type { LocalConflict, TargetClaimResult } from './io-requests.js';

interface Grant {
  readonly targets: readonly bigint[];
  readonly owner: number;
  renewedMs: number;
}

type PreparedClaim = { readonly ok: true; readonly selfReserved: readonly bigint[] } | LocalConflict;

export class MirrorCoherence {
  readonly #set: InflightTargetSet | null;
  readonly #ttlMs: number;
  readonly #grants = new Map<string, Grant>();
  #lost = 0;

  constructor(set: InflightTargetSet | null, targetLeaseTtlMs: number) {
    this.#set = set;
    this.#ttlMs = targetLeaseTtlMs;
  }

  get enabled(): boolean {
    return this.#set !== null;
  }

  /** Groups granted and mirrored now. */
  get grantCount(): number {
    return this.#grants.size;
  }

  /** Groups dropped because their lease was lost or expired. */
  get lostCount(): number {
    return this.#lost;
  }

  /** Reserves the members of a group the caller did not reserve itself (see the file comment). */
  prepareClaim(targets: readonly bigint[], owner: number): PreparedClaim {
    const set = this.#set;
    if (set === null || targets.length === 0) return { ok: true, selfReserved: [] };
    const free: bigint[] = [];
    const busy: bigint[] = [];
    for (const target of targets) {
      const holder = set.ownerOf(target);
      if (holder === 0) free.push(target);
      else if (holder !== owner) busy.push(target);
    }
    if (busy.length > 0) return { ok: false, reason: 'local-conflict', targets: busy };
    if (free.length > 0 && !set.tryReserveGroup(free, owner)) {
      // Lost a race with another local reserver (or the writer mutex stayed busy): a conflict.
      return { ok: false, reason: 'local-conflict', targets: free.filter((t) => set.has(t)) };
    }
    return { ok: true, selfReserved: free };
  }

  /** After the durable claim: keeps the reservation and tracks the grant, or drops what we took. */
  settleClaim(targets: readonly bigint[], owner: number, selfReserved: readonly bigint[], result: TargetClaimResult | undefined, nowMs: number): void {
    if (this.#set === null) return;
    if (result?.ok) {
      this.#grants.set(result.token, { targets: [...targets], owner, renewedMs: nowMs });
      return;
    }
    if (selfReserved.length > 0) this.#set.releaseGroup(selfReserved, owner);
  }

  /** A successful heartbeat. */
  renewed(token: string, nowMs: number): void {
    const grant = this.#grants.get(token);
    if (grant && nowMs > grant.renewedMs) grant.renewedMs = nowMs;
  }

  /** The lease behind `token` is gone (released, or lost): its targets leave the mirror. */
  ended(token: string, targets: readonly bigint[], lost: boolean): void {
    if (this.#set === null) return;
    const grant = this.#grants.get(token);
    if (!grant) return;
    this.#grants.delete(token);
    if (lost) this.#lost += 1;
    const members = new Set(targets);
    const own = grant.targets.filter((t) => members.has(t));
    this.#set.releaseGroup(own.length > 0 ? own : grant.targets, grant.owner);
  }

  /** Drops every grant that went a whole TTL without a successful heartbeat. Returns how many. */
  sweep(nowMs: number): number {
    if (this.#set === null) return 0;
    let dropped = 0;
    for (const [token, grant] of this.#grants) {
      if (!isStaleSince(grant.renewedMs, this.#ttlMs, nowMs)) continue;
      this.#grants.delete(token);
      this.#set.releaseGroup(grant.targets, grant.owner);
      this.#lost += 1;
      dropped += 1;
    }
    return dropped;
  }

  /**
   * Re-reserves this coordinator's live leases after a restart. `records` are target records;
   * those of other owners, expired or not leased are skipped. Returns the number of groups mirrored.
   */
  rebuild(records: readonly LeaseRecord[], coordinatorId: string, nowMs: number): number {
    const set = this.#set;
    if (set === null) return 0;
    const groups = new Map<string, { targets: bigint[]; owner: number; updatedMs: number }>();
    for (const record of records) {
      if (record.kind !== 'target' || record.owner !== coordinatorId || !isActiveLease(record, nowMs, this.#ttlMs)) continue;
      if (record.target === undefined) continue;
      const group = groups.get(record.token) ?? { targets: [], owner: record.worker >= 1 && record.worker <= 0xffff_ffff ? record.worker : 1, updatedMs: record.updatedMs };
      group.targets.push(BigInt(record.target));
      groups.set(record.token, group);
    }
    let mirrored = 0;
    for (const [token, group] of groups) {
      if (!set.tryReserveGroup(group.targets, group.owner)) continue;
      this.#grants.set(token, { targets: group.targets, owner: group.owner, renewedMs: group.updatedMs });
      mirrored += 1;
    }
    return mirrored;
  }
}
