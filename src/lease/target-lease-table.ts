/**
 * `FencedTargetLeaseTable`: all-or-nothing leases on target groups (docs/leases.md, docs/lease-format.md). A job's group
 * (≤ 64 branch targets) is claimed before dispatch so that no two coordinators solve the same
 * branch at once, heartbeated while the job runs, and released (records deleted) after triage.
 *
 * Every group operation: locks in ascending record-id order; the whole group read and validated
 * before the first mutation (conflict, stale token, corrupt member → zero mutation); one
 * durability batch (content durable before names, one directory barrier per touched shard, locks
 * held until the last barrier); on an I/O failure the exact previous bytes of every touched member
 * are restored under the locks and the call rejects with `LeaseIoError`.
 *
 * A target token never authorises a result: only the exact-work table's `beginCommit` does.
 */
import { groupMembers, type GroupMember } from './identity.js';
import { checkNowMs, type LeaseOperation } from './lease-operation.js';
import { isActiveLease, type LeaseRecord } from './lease-record.js';
import type { FenceResult, GroupClaimResult } from './lease-results.js';
import {
  LeaseTableBase,
  checkCallOptions,
  checkOwner,
  checkWorker,
  claimCounters,
  isToken,
  makeToken,
  normalizePayload,
  openCore,
  type AtTime,
  type ClaimIdentity,
  type LeaseTableDeps,
} from './lease-table-base.js';
import type { LeaseTableOptions } from './lease-table-options.js';
import type { TargetLeaseStore } from './table-contract.js';

export class FencedTargetLeaseTable extends LeaseTableBase implements TargetLeaseStore {
  /** Opens (creating durably if needed) a target table at `root`. See `LEASE_TABLE_OPTIONS`. */
  static async open(root: string, options?: Partial<Record<keyof LeaseTableOptions, unknown>>, deps: LeaseTableDeps = {}): Promise<FencedTargetLeaseTable> {
    return new FencedTargetLeaseTable(await openCore(root, options, deps, 'target'));
  }

  /**
   * claimGroup contract. Pre (throws before any lock file or shard directory exists): 1..64
   * distinct bigint targets, a serialisable plain-object payload, owner, worker, `nowMs`. Under
   * every member's lock: any corrupt member → `corrupt` (all listed); any member leased and not
   * yet expired under its holder's stored TTL (`expiryOf` in lease-record.ts) → `conflict` (all listed); either way zero mutation. Otherwise every member
   * gets a new leased record with one shared token (counters per member from its own previous
   * record) and the token is returned once all of them are durable.
   */
  planClaimGroup(targets: Iterable<bigint>, payload: object, options: ClaimIdentity): LeaseOperation<GroupClaimResult> {
    checkCallOptions(options);
    const members = groupMembers(targets);
    const stored = normalizePayload(payload);
    const owner = checkOwner(options.owner);
    const worker = checkWorker(options.worker);
    const nowMs = checkNowMs(options.nowMs);
    const ttlMs = this.options.leaseTtlMs;
    const skewMs = this.options.maxClockSkewMs;
    const token = makeToken(owner, worker, nowMs);
    const groupTargets = Object.freeze(members.map((m) => m.target.toString(10)));
    return {
      name: 'claimGroup',
      lockIds: members.map((m) => m.id),
      apply: (view): GroupClaimResult => {
        const corrupt: { id: string; target: bigint; detail: string }[] = [];
        const holders: { id: string; target: bigint; status: LeaseRecord['status']; owner: string; updatedMs: number }[] = [];
        for (const member of members) {
          const read = view.get(member.id);
          if (read.state === 'corrupt') corrupt.push({ id: member.id, target: member.target, detail: read.reason });
          else if (read.state === 'valid' && isActiveLease(read.record, nowMs, ttlMs, skewMs)) {
            holders.push({ id: member.id, target: member.target, status: read.record.status, owner: read.record.owner, updatedMs: read.record.updatedMs });
          }
        }
        if (corrupt.length > 0) return { ok: false, reason: 'corrupt', corrupt };
        if (holders.length > 0) return { ok: false, reason: 'conflict', holders };
        for (const member of members) {
          const read = view.get(member.id);
          const counters = claimCounters(read.state === 'valid' ? read.record : undefined, owner);
          // Keys in canonical order: the serialiser then skips sorting them (canonical-json.ts).
          view.put({
            attempts: counters.attempts,
            id: member.id,
            kind: 'target',
            leaseTtlMs: ttlMs,
            owner,
            payload: stored,
            previousOwner: counters.previousOwner,
            schema: 1,
            status: 'leased',
            steals: counters.steals,
            target: member.target.toString(10),
            targets: groupTargets,
            token,
            updatedMs: nowMs,
            worker,
          });
        }
        return { ok: true, token, ids: members.map((m) => m.id) };
      },
    };
  }

  async claimGroup(targets: Iterable<bigint>, payload: object, options: ClaimIdentity): Promise<GroupClaimResult> {
    return (await this.runOne(this.planClaimGroup(targets, payload, options))).value;
  }

  /**
   * heartbeatGroup contract: every member must be a valid leased record holding `token`, else
   * `stale`/`corrupt` with zero mutation. All members get `updatedMs = nowMs` in one batch, so the
   * group keeps one shared expiry point (on failure all are restored to the old one).
   */
  planHeartbeatGroup(targets: Iterable<bigint>, token: string, options: AtTime): LeaseOperation<FenceResult> {
    checkCallOptions(options);
    const members = groupMembers(targets);
    const nowMs = checkNowMs(options.nowMs);
    return {
      name: 'heartbeatGroup',
      lockIds: members.map((m) => m.id),
      apply: (view): FenceResult => {
        const records = this.validateHeld(view, members, token);
        if (!Array.isArray(records)) return records;
        for (const record of records) view.put({ ...record, updatedMs: nowMs });
        return { ok: true };
      },
    };
  }

  async heartbeatGroup(targets: Iterable<bigint>, token: string, options: AtTime): Promise<FenceResult> {
    return (await this.runOne(this.planHeartbeatGroup(targets, token, options))).value;
  }

  /**
   * releaseGroup contract: every member must be a valid leased record holding `token` (checked for
   * all members before the first unlink), else `stale`/`corrupt` with zero mutation. Records are
   * deleted, not marked done, so the targets can be claimed again at once; lock files stay.
   */
  planReleaseGroup(targets: Iterable<bigint>, token: string): LeaseOperation<FenceResult> {
    const members = groupMembers(targets);
    return {
      name: 'releaseGroup',
      lockIds: members.map((m) => m.id),
      apply: (view): FenceResult => {
        const records = this.validateHeld(view, members, token);
        if (!Array.isArray(records)) return records;
        for (const record of records) view.remove(record.id);
        return { ok: true };
      },
    };
  }

  async releaseGroup(targets: Iterable<bigint>, token: string): Promise<FenceResult> {
    return (await this.runOne(this.planReleaseGroup(targets, token))).value;
  }

  /** The members' records when all are leased with `token`; the first negative result otherwise. */
  private validateHeld(view: { get: (id: string) => import('./lease-record.js').RecordRead }, members: readonly GroupMember[], token: string): LeaseRecord[] | FenceResult {
    const records: LeaseRecord[] = [];
    for (const member of members) {
      const read = view.get(member.id);
      if (read.state === 'corrupt') return { ok: false, reason: 'corrupt', corrupt: { id: member.id, detail: read.reason } };
      if (read.state !== 'valid' || read.record.status !== 'leased' || !isToken(token) || read.record.token !== token) {
        return { ok: false, reason: 'stale', id: member.id };
      }
      records.push(read.record);
    }
    return records;
  }
}
