/**
 * `FencedTargetLeaseTable`: all-or-nothing leases on target groups (docs/leases.md, docs/lease-format.md). A job's group
 * (≤ 64 branch targets) is claimed before dispatch so that no two coordinators solve the same
 * branch at once, heartbeated while the job runs, and released after triage (records deleted,
 * but for the members that hold answers: see "Answers" below).
 *
 * Every group operation: locks in ascending record-id order; the whole group read and validated
 * before the first mutation (conflict, stale token, corrupt member → zero mutation); one
 * durability batch (content durable before names, one directory barrier per touched shard, locks
 * held until the last barrier); on an I/O failure the exact previous bytes of every touched member
 * are restored under the locks and the call rejects with `LeaseIoError`.
 *
 * A target token never authorises a result: only the exact-work table's `beginCommit` does.
 *
 * Answers (docs/lease-format.md "Answers"): a release may say on which input the run answered
 * which members; those members then stay as `done` records listing the input in `settled` (every
 * member that already carried answers stays too, released). A claim that names its input is
 * refused `answered` when a member lists it, so a question answered by any coordinator is not
 * asked again on that input anywhere in the campaign; the same lock that fences the lease fences
 * the answer, so a release and a claim can never both miss each other.
 */
import { groupMembers, type GroupMember } from './identity.js';
import { checkNowMs, type LeaseOperation } from './lease-operation.js';
import { MAX_SETTLED_INPUTS, isActiveLease, isInputDigest, type LeaseRecord } from './lease-record.js';
import { invalidOption } from '../config/values.js';
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
import type { TargetClaimOptions, TargetLeaseStore, TargetReleaseOptions } from './table-contract.js';

function checkInput(value: unknown, name: string): string {
  if (!isInputDigest(value)) throw invalidOption(name, 'a lowercase hex SHA-256 of the input', value);
  return value;
}

/**
 * The claim options a port's ask about answers becomes: `input` only when it is an input's
 * SHA-256 (any other seed name claims without answers), `anyInput` only when set.
 */
export function answerClaimOptions(ask: { readonly input?: string; readonly anyInput?: boolean } | undefined): { input?: string; anyInput?: true } {
  return { ...(isInputDigest(ask?.input) ? { input: ask.input } : {}), ...(ask?.anyInput === true ? { anyInput: true as const } : {}) };
}

/** The answer fields a record carries on, in canonical key order of a target record. */
function answerFields(record: LeaseRecord | undefined): { answered?: boolean; settled?: readonly string[] } {
  if (record === undefined || record.answered !== true) return {};
  return record.settled !== undefined ? { answered: true, settled: record.settled } : { answered: true };
}

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
  planClaimGroup(targets: Iterable<bigint>, payload: object, options: TargetClaimOptions): LeaseOperation<GroupClaimResult> {
    checkCallOptions(options);
    const input = options.input === undefined ? undefined : checkInput(options.input, 'input');
    if (options.anyInput !== undefined && typeof options.anyInput !== 'boolean') throw invalidOption('anyInput', 'a boolean', options.anyInput);
    const anyInput = options.anyInput === true;
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
        const answered: bigint[] = [];
        for (const member of members) {
          const read = view.get(member.id);
          if (read.state === 'corrupt') corrupt.push({ id: member.id, target: member.target, detail: read.reason });
          else if (read.state === 'valid') {
            if ((anyInput && read.record.answered === true) || (input !== undefined && read.record.settled?.includes(input) === true)) answered.push(member.target);
            if (isActiveLease(read.record, nowMs, ttlMs, skewMs)) {
              holders.push({ id: member.id, target: member.target, status: read.record.status, owner: read.record.owner, updatedMs: read.record.updatedMs });
            }
          }
        }
        if (corrupt.length > 0) return { ok: false, reason: 'corrupt', corrupt };
        // Before `conflict`: an answered question is refused for good, a held one only for now.
        if (answered.length > 0) return { ok: false, reason: 'answered', answered };
        if (holders.length > 0) return { ok: false, reason: 'conflict', holders };
        for (const member of members) {
          const read = view.get(member.id);
          const previous = read.state === 'valid' ? read.record : undefined;
          // A released (`done`) member is free: its counters start over, as an absent one's.
          const counters = claimCounters(previous?.status === 'leased' ? previous : undefined, owner);
          // Keys in canonical order: the serialiser then skips sorting them (canonical-json.ts).
          // A member's answers travel with it through every claim.
          const { answered: wasAnswered, settled } = answerFields(previous);
          view.put({
            ...(wasAnswered !== undefined ? { answered: wasAnswered } : {}),
            attempts: counters.attempts,
            id: member.id,
            kind: 'target',
            leaseTtlMs: ttlMs,
            owner,
            payload: stored,
            previousOwner: counters.previousOwner,
            schema: 1,
            ...(settled !== undefined ? { settled } : {}),
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

  async claimGroup(targets: Iterable<bigint>, payload: object, options: TargetClaimOptions): Promise<GroupClaimResult> {
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
   * all members before the first change), else `stale`/`corrupt` with zero mutation. A member
   * without answers is deleted, so the target can be claimed again at once (lock files stay). A
   * member answered now (`options.answers`) or before stays as a `done` record: free to claim,
   * carrying `answered` and `settled`, the newest input last and at most `MAX_SETTLED_INPUTS`.
   */
  planReleaseGroup(targets: Iterable<bigint>, token: string, options: TargetReleaseOptions = {}): LeaseOperation<FenceResult> {
    checkCallOptions(options);
    const members = groupMembers(targets);
    const answers = options.answers;
    let input: string | undefined;
    let answeredNow = new Set<bigint>();
    let completedMs = 0;
    if (answers !== undefined) {
      input = checkInput(answers?.input, 'answers.input');
      if (!Array.isArray(answers.settled) || !answers.settled.every((t) => typeof t === 'bigint')) throw invalidOption('answers.settled', 'an array of bigint targets', answers.settled);
      answeredNow = new Set(answers.settled);
      completedMs = checkNowMs(options.nowMs);
    }
    return {
      name: 'releaseGroup',
      lockIds: members.map((m) => m.id),
      apply: (view): FenceResult => {
        const records = this.validateHeld(view, members, token);
        if (!Array.isArray(records)) return records;
        records.forEach((record, i) => {
          const now = input !== undefined && answeredNow.has(members[i]!.target);
          if (!now && record.answered !== true) {
            view.remove(record.id);
            return;
          }
          let settled = record.settled ?? [];
          if (now) {
            settled = [...settled.filter((s) => s !== input), input!];
            if (settled.length > MAX_SETTLED_INPUTS) settled = settled.slice(settled.length - MAX_SETTLED_INPUTS);
          }
          view.put({
            ...record,
            answered: true,
            ...(now ? { completedMs } : {}),
            ...(settled.length > 0 ? { settled } : {}),
            status: 'done',
          });
        });
        return { ok: true };
      },
    };
  }

  async releaseGroup(targets: Iterable<bigint>, token: string, options: TargetReleaseOptions = {}): Promise<FenceResult> {
    return (await this.runOne(this.planReleaseGroup(targets, token, options))).value;
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
