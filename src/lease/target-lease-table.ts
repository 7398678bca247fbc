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
 *
 * Open questions count the same way: a release may say which members its run left open on its
 * input; each keeps `[input, attempts, lastOpenMs]` in `open`, attempts counted across every
 * coordinator. A claim that names its input and its back-off policy (`backoff`) is refused
 * `backoff` while a member's question on that input is still backing off, or has been left open
 * as often as the policy allows.
 */
import { groupMembers, type GroupMember } from './identity.js';
import { checkNowMs, type LeaseOperation } from './lease-operation.js';
import { MAX_OPEN_INPUTS, MAX_SETTLED_INPUTS, isActiveLease, isInputDigest, type LeaseRecord, type OpenQuestion } from './lease-record.js';
import { invalidOption } from '../config/values.js';
import type { FenceResult, GroupClaimResult } from './lease-results.js';
import type { OpenMember } from './claim-outcome.js';
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
import type { OpenBackoff, TargetClaimOptions, TargetLeaseStore, TargetReleaseOptions } from './table-contract.js';

function checkInput(value: unknown, name: string): string {
  if (!isInputDigest(value)) throw invalidOption(name, 'a lowercase hex SHA-256 of the input', value);
  return value;
}

/**
 * The claim options a port's ask about answers becomes: `input` only when it is an input's
 * SHA-256 (any other seed name claims without answers), `anyInput` only when set, `backoff` only
 * with an input.
 */
export function answerClaimOptions(
  ask: { readonly input?: string; readonly anyInput?: boolean; readonly backoff?: OpenBackoff } | undefined,
): { input?: string; anyInput?: true; backoff?: OpenBackoff } {
  if (!isInputDigest(ask?.input)) return ask?.anyInput === true ? { anyInput: true } : {};
  return { input: ask.input, ...(ask.anyInput === true ? { anyInput: true as const } : {}), ...(ask.backoff !== undefined ? { backoff: ask.backoff } : {}) };
}

function checkBackoff(value: unknown): OpenBackoff {
  const policy = value as Partial<OpenBackoff> | null;
  if (
    typeof policy !== 'object' ||
    policy === null ||
    typeof policy.baseMs !== 'number' ||
    !Number.isFinite(policy.baseMs) ||
    policy.baseMs < 0 ||
    !Number.isSafeInteger(policy.maxAttempts) ||
    (policy.maxAttempts as number) < 1
  ) {
    throw invalidOption('backoff', '{ baseMs: a duration in ms ≥ 0, maxAttempts: an integer ≥ 1 }', value);
  }
  return { baseMs: policy.baseMs, maxAttempts: policy.maxAttempts as number };
}

/** When a question left open `attempts` times, last at `lastOpenMs`, may be asked again: `lastOpenMs + baseMs · 2^(attempts−1)`. */
export function backoffEndMs(baseMs: number, attempts: number, lastOpenMs: number): number {
  return lastOpenMs + baseMs * 2 ** Math.min(attempts - 1, 40);
}

/** True when `policy` says a question left open `attempts` times, last at `lastOpenMs`, must not be asked at `nowMs`. */
export function backingOff(policy: OpenBackoff, attempts: number, lastOpenMs: number, nowMs: number): boolean {
  if (attempts >= policy.maxAttempts) return true;
  return nowMs < backoffEndMs(policy.baseMs, attempts, lastOpenMs);
}

/** The answer fields a record carries on, in canonical key order of a target record. */
function answerFields(record: LeaseRecord | undefined): { answered?: boolean; open?: readonly OpenQuestion[]; settled?: readonly string[] } {
  if (record === undefined) return {};
  return {
    ...(record.answered === true ? { answered: true } : {}),
    ...(record.open !== undefined && record.open.length > 0 ? { open: record.open } : {}),
    ...(record.answered === true && record.settled !== undefined ? { settled: record.settled } : {}),
  };
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
    const backoff = options.backoff === undefined ? undefined : checkBackoff(options.backoff);
    if (backoff !== undefined && input === undefined) throw invalidOption('backoff', 'a claim that names its input', options.backoff);
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
        const open: OpenMember[] = [];
        for (const member of members) {
          const read = view.get(member.id);
          if (read.state === 'corrupt') corrupt.push({ id: member.id, target: member.target, detail: read.reason });
          else if (read.state === 'valid') {
            if ((anyInput && read.record.answered === true) || (input !== undefined && read.record.settled?.includes(input) === true)) answered.push(member.target);
            else if (backoff !== undefined) {
              const row = read.record.open?.find((q) => q[0] === input);
              if (row !== undefined && backingOff(backoff, row[1], row[2], nowMs)) open.push({ target: member.target, attempts: row[1], lastOpenMs: row[2] });
            }
            if (isActiveLease(read.record, nowMs, ttlMs, skewMs)) {
              holders.push({ id: member.id, target: member.target, status: read.record.status, owner: read.record.owner, updatedMs: read.record.updatedMs });
            }
          }
        }
        if (corrupt.length > 0) return { ok: false, reason: 'corrupt', corrupt };
        // Before `conflict`: an answered question is refused for good, a held one only for now.
        if (answered.length > 0) return { ok: false, reason: 'answered', answered };
        if (open.length > 0) return { ok: false, reason: 'backoff', open };
        if (holders.length > 0) return { ok: false, reason: 'conflict', holders };
        for (const member of members) {
          const read = view.get(member.id);
          const previous = read.state === 'valid' ? read.record : undefined;
          // A released (`done`) member is free: its counters start over, as an absent one's.
          const counters = claimCounters(previous?.status === 'leased' ? previous : undefined, owner);
          // Keys in canonical order: the serialiser then skips sorting them (canonical-json.ts).
          // A member's answers travel with it through every claim.
          const { answered: wasAnswered, open: wasOpen, settled } = answerFields(previous);
          view.put({
            ...(wasAnswered !== undefined ? { answered: wasAnswered } : {}),
            attempts: counters.attempts,
            id: member.id,
            kind: 'target',
            leaseTtlMs: ttlMs,
            ...(wasOpen !== undefined ? { open: wasOpen } : {}),
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
   * that carries nothing the campaign learnt is deleted, so the target can be claimed again at
   * once (lock files stay). A member answered now (`options.answers.settled`) or before, or with
   * questions left open, stays as a `done` record: free to claim, carrying `answered` and
   * `settled` (the newest input last, at most `MAX_SETTLED_INPUTS`) and `open` (a member left open
   * now on the input counts one more attempt there, last at `nowMs`; answering it drops its row;
   * at most `MAX_OPEN_INPUTS`, the least recently left open forgotten first).
   */
  planReleaseGroup(targets: Iterable<bigint>, token: string, options: TargetReleaseOptions = {}): LeaseOperation<FenceResult> {
    checkCallOptions(options);
    const members = groupMembers(targets);
    const answers = options.answers;
    let input: string | undefined;
    let answeredNow = new Set<bigint>();
    let openNow = new Set<bigint>();
    let completedMs = 0;
    if (answers !== undefined) {
      input = checkInput(answers?.input, 'answers.input');
      if (!Array.isArray(answers.settled) || !answers.settled.every((t) => typeof t === 'bigint')) throw invalidOption('answers.settled', 'an array of bigint targets', answers.settled);
      if (answers.open !== undefined && (!Array.isArray(answers.open) || !answers.open.every((t) => typeof t === 'bigint'))) throw invalidOption('answers.open', 'an array of bigint targets', answers.open);
      answeredNow = new Set(answers.settled);
      openNow = new Set((answers.open ?? []).filter((t) => !answeredNow.has(t)));
      completedMs = checkNowMs(options.nowMs);
    }
    return {
      name: 'releaseGroup',
      lockIds: members.map((m) => m.id),
      apply: (view): FenceResult => {
        const records = this.validateHeld(view, members, token);
        if (!Array.isArray(records)) return records;
        records.forEach((record, i) => {
          const target = members[i]!.target;
          const settledHere = input !== undefined && answeredNow.has(target);
          const openHere = input !== undefined && openNow.has(target);
          let open = record.open ?? [];
          if (settledHere || openHere) {
            const before = open.find((q) => q[0] === input);
            open = open.filter((q) => q[0] !== input);
            if (openHere) open = [...open, [input!, (before?.[1] ?? 0) + 1, completedMs] as const];
            if (open.length > MAX_OPEN_INPUTS) open = open.slice(open.length - MAX_OPEN_INPUTS);
          }
          const answered = record.answered === true || settledHere;
          if (!answered && open.length === 0) {
            view.remove(record.id);
            return;
          }
          let settled = record.settled ?? [];
          if (settledHere) {
            settled = [...settled.filter((s) => s !== input), input!];
            if (settled.length > MAX_SETTLED_INPUTS) settled = settled.slice(settled.length - MAX_SETTLED_INPUTS);
          }
          const { open: _oldOpen, settled: _oldSettled, answered: _oldAnswered, ...rest } = record;
          view.put({
            ...rest,
            ...(answered ? { answered: true } : {}),
            ...(settledHere || openHere ? { completedMs } : {}),
            ...(open.length > 0 ? { open } : {}),
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
