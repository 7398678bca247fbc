/**
 * `FencedWorkLeaseTable`: exact-work leases (docs/leases.md, docs/lease-format.md "Records"). One record per work id; the lifecycle
 *
 *   (absent) --claim--> leased --beginCommit--> committing --complete--> done
 *                        | ^ heartbeat            | heartbeat
 *                        | +-- claim by anyone once expired (new token; the old one is fenced)
 *                        +--abandon--> (absent)
 *
 * `beginCommit` is the point of no return: a committing record is never claimed again, not even
 * with TTL 0; only its token holder can complete it, or a recovering coordinator can replay it
 * from its durable manifest. `done` is permanent.
 *
 * Every mutating method has a `plan…` twin that builds the operation without I/O, for the I/O
 * thread's cross-request batches (`executeBatch`).
 */
import { InvalidJobError, LeaseCorruptError } from '../errors.js';
import { invalidOption } from '../config/values.js';
import { assertRecordId, takeAtMost } from './identity.js';
import { checkNowMs, type LeaseOperation } from './lease-operation.js';
import { isActiveLease, isStaleSince, MAX_COMMIT_BYTES, type JsonObject, type LeaseRecord } from './lease-record.js';
import type { ClaimResult, CommittingRecord, CompletionResult, FenceResult, HeartbeatBatchResult, PublicationClaim, ReplayResult } from './lease-results.js';
import {
  HEARTBEAT_BATCH_RECORDS,
  LeaseTableBase,
  checkCallOptions,
  checkLimit,
  checkOwner,
  checkTtlMs,
  checkWorker,
  claimCounters,
  isToken,
  makeToken,
  normalizePayload,
  openCore,
  type AtTime,
  type ReplayOptions,
  type ClaimIdentity,
  type LeaseTableDeps,
} from './lease-table-base.js';
import type { LeaseTableOptions } from './lease-table-options.js';
import { canonicalJson } from './canonical-json.js';
import type { BeginCommitOptions, CommitPublisher, FinishPublicationOptions, WorkClaimOptions, WorkLeaseStore } from './table-contract.js';

/** Most records one heartbeat batch locks at once (bounds open lock fds). */
export const MAX_HEARTBEAT_BATCH = HEARTBEAT_BATCH_RECORDS;
/** Most leases one `heartbeatMany` call accepts (checked while iterating: an endless iterable is refused). */
const MAX_HEARTBEAT_LEASES = 1_048_576;

function corruptOf(id: string, read: { state: 'corrupt'; reason: string }): { id: string; detail: string } {
  return { id, detail: read.reason };
}

export class FencedWorkLeaseTable extends LeaseTableBase implements WorkLeaseStore {
  /** Opens (creating durably if needed) a work table at `root`. See `LEASE_TABLE_OPTIONS`. */
  static async open(root: string, options?: Partial<Record<keyof LeaseTableOptions, unknown>>, deps: LeaseTableDeps = {}): Promise<FencedWorkLeaseTable> {
    return new FencedWorkLeaseTable(await openCore(root, options, deps, 'work'));
  }

  /**
   * Claim contract. Pre: valid id, payload, owner, worker, `nowMs`, optional TTL (else throws,
   * before any I/O). Under the lock: corrupt → `corrupt`; done, committing, or leased and not yet
   * expired under the holder's stored TTL (`expiryOf` in lease-record.ts; TTL 0 forces) →
   * `conflict` (with `doneCommit`, a done holder's commit manifest in `holder.commit`); otherwise a brand-new leased record is written (attempts+1, steals+1 if the owner
   * changed) carrying this claimer's TTL, and its token returned. Failure: zero mutation before
   * publication; `LeaseIoError` after restore otherwise.
   */
  planClaim(workId: string, payload: object, options: WorkClaimOptions): LeaseOperation<ClaimResult> {
    checkCallOptions(options);
    assertRecordId(workId, 'work id');
    const stored = normalizePayload(payload);
    const owner = checkOwner(options.owner);
    const worker = checkWorker(options.worker);
    const nowMs = checkNowMs(options.nowMs);
    const ttlMs = options.leaseTtlMs === undefined ? this.options.leaseTtlMs : checkTtlMs(options.leaseTtlMs);
    // The TTL this holder promises to renew within; a forced takeover (TTL 0) holds under the table's.
    const holderTtlMs = ttlMs > 0 ? ttlMs : this.options.leaseTtlMs;
    const skewMs = this.options.maxClockSkewMs;
    const doneCommit = options.doneCommit ?? false;
    if (typeof doneCommit !== 'boolean') throw invalidOption('doneCommit', 'a boolean', doneCommit);
    const token = makeToken(owner, worker, nowMs);
    return {
      name: 'claim',
      lockIds: [workId],
      apply: (view): ClaimResult => {
        const read = view.get(workId);
        if (read.state === 'corrupt') return { ok: false, reason: 'corrupt', corrupt: corruptOf(workId, read) };
        const previous = read.state === 'valid' ? read.record : undefined;
        if (previous && (previous.status !== 'leased' || isActiveLease(previous, nowMs, ttlMs, skewMs))) {
          const commit = doneCommit && previous.status === 'done' ? previous.commit : undefined;
          return { ok: false, reason: 'conflict', holder: { id: workId, status: previous.status, owner: previous.owner, updatedMs: previous.updatedMs, ...(commit !== undefined ? { commit } : {}) } };
        }
        const counters = claimCounters(previous, owner);
        view.put({ schema: 1, kind: 'work', id: workId, status: 'leased', payload: stored, owner, worker, token, updatedMs: nowMs, leaseTtlMs: holderTtlMs, ...counters });
        return { ok: true, token, ...counters };
      },
    };
  }

  async claim(workId: string, payload: object, options: WorkClaimOptions): Promise<ClaimResult> {
    return (await this.runOne(this.planClaim(workId, payload, options))).value;
  }

  /**
   * Heartbeat contract: renews (`updatedMs = nowMs`) every entry whose record is leased or
   * committing and holds the same token; everything else is `lost` and untouched. Expiry is not
   * checked: an expired lease nobody stole can still be renewed. All entries of one batch (up to
   * `MAX_HEARTBEAT_BATCH`, ascending id) are published together with one directory barrier per
   * touched shard. Failure: `LeaseIoError`, every record of the failed batch restored (earlier
   * batches of a larger call stay renewed — same tokens, only the expiry differs).
   */
  planHeartbeatMany(leases: Iterable<readonly [string, string]>, options: AtTime): LeaseOperation<Omit<HeartbeatBatchResult, 'directoryBarriers'>> {
    checkCallOptions(options);
    const entries = new Map<string, string>();
    for (const lease of takeAtMost(leases, MAX_HEARTBEAT_LEASES, 'heartbeat leases')) {
      if (!Array.isArray(lease)) throw new InvalidJobError('a heartbeat lease is not a [workId, token] pair', { reason: 'not a pair' });
      const [id, token] = lease as readonly [unknown, unknown];
      assertRecordId(id, 'work id');
      entries.set(id, typeof token === 'string' ? token : '');
    }
    const nowMs = checkNowMs(options.nowMs);
    const ids = [...entries.keys()].sort();
    return {
      name: 'heartbeatMany',
      lockIds: ids,
      apply: (view) => {
        const renewed: string[] = [];
        const lost: string[] = [];
        const corrupt: string[] = [];
        for (const id of ids) {
          const read = view.get(id);
          const token = entries.get(id)!;
          if (read.state === 'corrupt') {
            corrupt.push(id);
            lost.push(id);
            continue;
          }
          if (read.state !== 'valid' || read.record.status === 'done' || !isToken(token) || read.record.token !== token) {
            lost.push(id);
            continue;
          }
          view.put({ ...read.record, updatedMs: nowMs });
          renewed.push(id);
        }
        return { renewed, lost, corrupt };
      },
    };
  }

  async heartbeatMany(leases: Iterable<readonly [string, string]>, options: AtTime): Promise<HeartbeatBatchResult> {
    checkCallOptions(options);
    const all = takeAtMost(leases, MAX_HEARTBEAT_LEASES, 'heartbeat leases');
    for (const lease of all) if (!Array.isArray(lease)) throw new InvalidJobError('a heartbeat lease is not a [workId, token] pair', { reason: 'not a pair' });
    checkNowMs(options.nowMs);
    const sorted = [...new Map(all).entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const result = { renewed: [] as string[], lost: [] as string[], corrupt: [] as string[], directoryBarriers: 0 };
    const step = this.heartbeatBatchSize;
    for (let start = 0; start < sorted.length; start += step) {
      const { value, report } = await this.runOne(this.planHeartbeatMany(sorted.slice(start, start + step), options));
      result.renewed.push(...value.renewed);
      result.lost.push(...value.lost);
      result.corrupt.push(...value.corrupt);
      result.directoryBarriers += report.directoryBarriers;
    }
    return result;
  }

  /** One lease: `ok` when renewed, else `stale` or `corrupt`. */
  async heartbeat(workId: string, token: string, options: AtTime): Promise<FenceResult> {
    const result = await this.heartbeatMany([[workId, token]], options);
    if (result.renewed.includes(workId)) return { ok: true };
    return await this.negative(workId, result.corrupt.includes(workId));
  }

  /**
   * Abandon contract: deletes a *leased* (pre-commit) record whose token matches — work that was
   * never dispatched. Committing/done records, other tokens and corrupt records → negative, no
   * mutation. The lock file stays; a later claim starts fresh (attempts 1).
   */
  planAbandon(workId: string, token: string): LeaseOperation<FenceResult> {
    assertRecordId(workId, 'work id');
    return {
      name: 'abandon',
      lockIds: [workId],
      apply: (view): FenceResult => {
        const read = view.get(workId);
        if (read.state === 'corrupt') return { ok: false, reason: 'corrupt', corrupt: corruptOf(workId, read) };
        if (read.state !== 'valid' || read.record.status !== 'leased' || !isToken(token) || read.record.token !== token) {
          return { ok: false, reason: 'stale', id: workId };
        }
        view.remove(workId);
        return { ok: true };
      },
    };
  }

  async abandon(workId: string, token: string): Promise<FenceResult> {
    return (await this.runOne(this.planAbandon(workId, token))).value;
  }

  /**
   * beginCommit contract (irreversible): the record must be leased or committing with this token
   * (expiry is not checked: a lease nobody stole is still ours). Sets committing, `updatedMs`, and
   * the manifest if given. Idempotent for the same token and manifest; a different manifest on a
   * committing record → `manifest-mismatch`, no mutation. Resolves `ok` only once durable.
   */
  planBeginCommit(workId: string, token: string, options: BeginCommitOptions): LeaseOperation<FenceResult> {
    checkCallOptions(options);
    assertRecordId(workId, 'work id');
    const manifest = options.commit === undefined ? undefined : normalizePayload(options.commit, 'commit', MAX_COMMIT_BYTES);
    const nowMs = checkNowMs(options.nowMs);
    return {
      name: 'beginCommit',
      lockIds: [workId],
      apply: (view): FenceResult => {
        const read = view.get(workId);
        if (read.state === 'corrupt') return { ok: false, reason: 'corrupt', corrupt: corruptOf(workId, read) };
        if (read.state !== 'valid' || read.record.status === 'done' || !isToken(token) || read.record.token !== token) {
          return { ok: false, reason: 'stale', id: workId };
        }
        const record = read.record;
        if (record.status === 'committing' && manifest !== undefined && (record.commit === undefined || canonicalJson(record.commit) !== canonicalJson(manifest))) {
          return { ok: false, reason: 'manifest-mismatch', id: workId };
        }
        const next: LeaseRecord = { ...record, status: 'committing', updatedMs: nowMs, ...(manifest !== undefined ? { commit: manifest } : {}) };
        view.put(next);
        return { ok: true };
      },
    };
  }

  async beginCommit(workId: string, token: string, options: BeginCommitOptions): Promise<FenceResult> {
    return (await this.runOne(this.planBeginCommit(workId, token, options))).value;
  }

  /**
   * completeOnce contract: done with the same token → `already`; leased or committing with this
   * token → `done` (`completedMs = nowMs`, `updatedMs` untouched) and `completed`; otherwise
   * `stale` (or `corrupt`), no mutation.
   */
  planCompleteOnce(workId: string, token: string, options: AtTime): LeaseOperation<CompletionResult> {
    checkCallOptions(options);
    assertRecordId(workId, 'work id');
    const nowMs = checkNowMs(options.nowMs);
    return {
      name: 'completeOnce',
      lockIds: [workId],
      apply: (view): CompletionResult => {
        const read = view.get(workId);
        if (read.state === 'corrupt') return 'corrupt';
        if (read.state !== 'valid' || !isToken(token) || read.record.token !== token) return 'stale';
        if (read.record.status === 'done') return 'already';
        view.put({ ...read.record, status: 'done', completedMs: nowMs });
        return 'completed';
      },
    };
  }

  async completeOnce(workId: string, token: string, options: AtTime): Promise<CompletionResult> {
    return (await this.runOne(this.planCompleteOnce(workId, token, options))).value;
  }

  /** True when `completeOnce` says `completed` or `already`. */
  async complete(workId: string, token: string, options: AtTime): Promise<boolean> {
    const result = await this.completeOnce(workId, token, options);
    return result === 'completed' || result === 'already';
  }

  /**
   * Publishing a committed result (docs/leases.md "Publishing a committed result"): the claim, the
   * publication, the finish. The publication runs outside every lease batch — no lock, transaction
   * or lock key is held while files are written — so the record itself says who may publish. The
   * claim (one short batch) checks that the record is `committing` with `token` and a manifest,
   * and that the caller may publish now:
   *
   * - a publication another coordinator took over (`takenOverMs`) is its taker's for a whole TTL
   *   from then → `live`, for everyone, the result's owner included;
   * - another coordinator's result (`minIdleMs` > 0) only when the record was not renewed for
   *   `minIdleMs` (else `live`: its owner is alive); the claim then takes the publication over:
   *   `takenOverMs` = `updatedMs` = now, durable before the caller publishes. So does a claim on a
   *   publication whose taker fell silent;
   * - the caller's own result (`minIdleMs` 0): the record is renewed (`updatedMs` = now) unless it
   *   was renewed within half its TTL; then the claim writes nothing, and no replayer can take
   *   over before half a TTL has passed.
   *
   * The finish (`planFinishPublication`) marks the record done only if nobody took the
   * publication over since the claim. A publisher stalled for over half a TTL in the middle of its
   * publication may see its files published a second time by a replayer (into the replayer's
   * queue), as after a crash between publication and finish.
   */
  planClaimPublication(workId: string, token: string, options: ReplayOptions): LeaseOperation<PublicationClaim> {
    checkCallOptions(options);
    assertRecordId(workId, 'work id');
    const nowMs = checkNowMs(options.nowMs);
    const minIdleMs = options.minIdleMs ?? 0;
    if (!Number.isFinite(minIdleMs) || minIdleMs < 0) throw invalidOption('minIdleMs', 'a non-negative number of ms', minIdleMs);
    return {
      name: 'claimPublication',
      lockIds: [workId],
      apply: (view): PublicationClaim => {
        const read = view.get(workId);
        if (read.state === 'corrupt') return { state: 'corrupt' };
        if (read.state !== 'valid' || !isToken(token) || read.record.token !== token) return { state: 'stale' };
        const record = read.record;
        if (record.status === 'done') return { state: 'already' };
        if (record.status !== 'committing' || record.commit === undefined) return { state: 'stale' };
        const commit = structuredClone(record.commit) as JsonObject;
        const ttlMs = record.leaseTtlMs ?? this.options.leaseTtlMs;
        const skewMs = this.options.maxClockSkewMs;
        // Times are compared as the silence check of a replay always was: on the callers' clocks,
        // which agree to well within half a TTL (docs/leases.md "Publishing a committed result").
        if (record.takenOverMs !== undefined && !isStaleSince(record.takenOverMs, ttlMs, nowMs, skewMs)) return { state: 'live' };
        // Under the lock: a renewal since the caller's (lock-free) scan means the owner is alive. Only
        // a replayer asks (minIdleMs > 0): the owner's own publication must not be refused because its
        // own heartbeat, run first in the same I/O batch, stamped the record later than `nowMs`.
        if (minIdleMs > 0 && !isStaleSince(record.updatedMs, minIdleMs, nowMs, skewMs)) return { state: 'live' };
        const idleMs = nowMs - record.updatedMs;
        if (minIdleMs > 0 || record.takenOverMs !== undefined) {
          view.put({ ...record, updatedMs: nowMs, takenOverMs: nowMs });
          return { state: 'publish', commit, takenOverMs: nowMs };
        }
        if (idleMs >= ttlMs / 2) view.put({ ...record, updatedMs: nowMs });
        return { state: 'publish', commit };
      },
    };
  }

  /**
   * The finish of a publication claimed by `planClaimPublication` (`takenOverMs`: the claim's):
   * `committing` with `token`, not taken over since the claim → `done` (`completedMs` = now) →
   * `completed`; done with `token` → `already`; taken over since, or anything else → `stale`, no
   * mutation.
   */
  planFinishPublication(workId: string, token: string, options: FinishPublicationOptions): LeaseOperation<CompletionResult> {
    checkCallOptions(options);
    assertRecordId(workId, 'work id');
    const nowMs = checkNowMs(options.nowMs);
    const takenOverMs = options.takenOverMs;
    if (takenOverMs !== undefined) checkNowMs(takenOverMs, 'takenOverMs');
    return {
      name: 'finishPublication',
      lockIds: [workId],
      apply: (view): CompletionResult => {
        const read = view.get(workId);
        if (read.state === 'corrupt') return 'corrupt';
        if (read.state !== 'valid' || !isToken(token) || read.record.token !== token) return 'stale';
        if (read.record.status === 'done') return 'already';
        if (read.record.status !== 'committing' || read.record.takenOverMs !== takenOverMs) return 'stale';
        view.put({ ...read.record, status: 'done', completedMs: nowMs });
        return 'completed';
      },
    };
  }

  /**
   * replayCommitOnce: claims the publication of a committing record (`planClaimPublication`),
   * calls `publish(manifest)` outside every lease batch, then finishes it → `completed`. If
   * `publish` throws, the error propagates and the record stays committing (retry later). Without
   * a claim: `already` (done with this token), `live`, `stale` or `corrupt`, nothing published.
   */
  async replayCommitOnce(workId: string, token: string, publish: CommitPublisher, options: ReplayOptions): Promise<ReplayResult> {
    if (typeof publish !== 'function') throw invalidOption('publish', 'a function', publish);
    const claim = (await this.runOne(this.planClaimPublication(workId, token, options))).value;
    if (claim.state !== 'publish') return claim.state;
    await publish(claim.commit);
    const finish = { nowMs: options.nowMs, ...(claim.takenOverMs !== undefined ? { takenOverMs: claim.takenOverMs } : {}) };
    return (await this.runOne(this.planFinishPublication(workId, token, finish))).value;
  }

  /**
   * Committing records to replay after a crash, sorted by (updatedMs, id). Fails closed with
   * `LeaseCorruptError` on any corrupt record or a committing record without a manifest.
   */
  async recoverCommittingRecords(options: { readonly limit?: number } = {}): Promise<CommittingRecord[]> {
    checkCallOptions(options);
    const limit = checkLimit(options.limit);
    const committing = (await this.snapshotRecords()).filter((e) => e.record.status === 'committing');
    const out = committing.map(({ id, record }) => {
      if (record.commit === undefined) {
        throw new LeaseCorruptError(`committing record lacks durable manifest: ${id}`, { id });
      }
      return { id, payload: record.payload, token: record.token, commit: record.commit };
    });
    return limit > 0 ? out.slice(0, limit) : out;
  }

  private async negative(id: string, corrupt: boolean): Promise<FenceResult> {
    return corrupt ? { ok: false, reason: 'corrupt', corrupt: { id, detail: 'record is corrupt' } } : { ok: false, reason: 'stale', id };
  }
}
