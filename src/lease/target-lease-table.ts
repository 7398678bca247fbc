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
 * Answers (docs/lease-format.md "Answers"): what runs learnt about a branch lives in its *answer
 * record* (`answerRecordId(target)`, a `done` record with `role: "answers"`), apart from the record
 * that fences its lease, so that claims and heartbeats never write answers again. A release may
 * say on which input the run answered which members; each such member's answer record lists the
 * input in `settled`. A claim that names its input is refused `answered` when a member's answer
 * record lists it, so a question answered by any coordinator is not asked again on that input
 * anywhere in the campaign. A release that records answers locks and writes the lease record and
 * the answer record in one batch, and a claim that names its input locks the lease record and
 * reads both (the answer record itself is not locked, since every write of it holds the lease
 * record's lock). On files and SQLite the claim takes the answer record from its table's view
 * when the answer generation it reads says the view is current (answers-view.ts), and the release
 * also moves that generation on. On etcd every write of an answer record is a new version under a
 * key of its own, next to the lease record's (etcd-backend.ts "Answer versions"): a claim decides
 * from the version its table last saw, or reads it, and its commit checks, in one compare per
 * member on keys that do not exist, that the lease is still free and no newer answer was written. The lease
 * record's lock (files), the transaction (SQLite) or that compare (etcd) orders them, so a release
 * and a claim can never both miss each other. `recordAnswers` writes a committed result's answers
 * without the lease (its release was refused, or it is replayed): it locks the members' lease
 * records all the same, without writing them, so it is ordered with claims as a release is.
 *
 * Open questions count the same way: a release may say which members its run left open on its
 * input; each keeps `[input, attempts, lastOpenMs]` in its answer record's `open`, attempts counted
 * across every coordinator. A claim that names its input and its back-off policy (`backoff`) is
 * refused `backoff` while a member's question on that input is still backing off, or has been
 * left open as often as the policy allows.
 *
 * Tables written before answer records kept answers in the lease records themselves. Those are
 * still honoured by every claim, carried on by claims that do not look at answers, and moved into
 * the answer record by the first release that records an answer for the branch.
 */
import { answerGenerationRecordId, answerRecordId, groupMembers, targetRecordId, type GroupMember } from './identity.js';
import { AnswerEntry, AnswersView, VersionedAnswers, generationOf, inputKey, nextGeneration, type AnswerGeneration } from './answers-view.js';
import type { RecordView } from './batch-overlay.js';
import { checkNowMs, type LeaseOperation, type MoreReads } from './lease-operation.js';
import type { DeclaredAnswer } from './backend-contract.js';
import { MAX_OPEN_INPUTS, MAX_SETTLED_INPUTS, isActiveLease, isInputDigest, type LeaseRecord, type OpenQuestion, type RecordRead } from './lease-record.js';
import { invalidOption } from '../config/values.js';
import { InternalError } from '../errors.js';
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
import type { AnswerWriter, GroupAnswers, OpenBackoff, TargetClaimOptions, TargetLeaseStore, TargetReleaseOptions } from './table-contract.js';

function checkInput(value: unknown, name: string): string {
  if (!isInputDigest(value)) throw invalidOption(name, 'a lowercase hex SHA-256 of the input', value);
  return value;
}

/** A release's (or `recordAnswers`') answers and time, checked; nothing learnt without answers. */
interface CheckedAnswers {
  readonly input: string | undefined;
  readonly answeredNow: ReadonlySet<bigint>;
  readonly openNow: ReadonlySet<bigint>;
  readonly completedMs: number;
}

function checkAnswers(answers: GroupAnswers | undefined, nowMs: number | undefined): CheckedAnswers {
  if (answers === undefined) return { input: undefined, answeredNow: new Set(), openNow: new Set(), completedMs: 0 };
  const input = checkInput(answers?.input, 'answers.input');
  if (!Array.isArray(answers.settled) || !answers.settled.every((t) => typeof t === 'bigint')) throw invalidOption('answers.settled', 'an array of bigint targets', answers.settled);
  if (answers.open !== undefined && (!Array.isArray(answers.open) || !answers.open.every((t) => typeof t === 'bigint'))) throw invalidOption('answers.open', 'an array of bigint targets', answers.open);
  const answeredNow = new Set(answers.settled);
  const openNow = new Set((answers.open ?? []).filter((t) => !answeredNow.has(t)));
  return { input, answeredNow, openNow, completedMs: checkNowMs(nowMs) };
}

/** `recordAnswers`' writer, checked: the lease that asked (owner, token, worker). */
function checkAnswerWriter(value: unknown): AnswerWriter {
  const writer = value as Partial<AnswerWriter> | null;
  if (typeof writer !== 'object' || writer === null) throw invalidOption('writer', '{ owner, token, worker } of the lease that asked', value);
  if (!isToken(writer.token)) throw invalidOption('writer.token', 'a lease token', writer.token);
  return { owner: checkOwner(writer.owner), token: writer.token as string, worker: checkWorker(writer.worker) };
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

/**
 * The answer fields a lease record carries (only records written before answer records existed
 * do), in canonical key order of a target record.
 */
function answerFields(record: LeaseRecord | undefined): { answered?: boolean; open?: readonly OpenQuestion[]; settled?: readonly string[] } {
  if (record === undefined) return {};
  return {
    ...(record.answered === true ? { answered: true } : {}),
    ...(record.open !== undefined && record.open.length > 0 ? { open: record.open } : {}),
    ...(record.answered === true && record.settled !== undefined ? { settled: record.settled } : {}),
  };
}

/** The valid record of a read, if any. */
function validRecord(read: RecordRead): LeaseRecord | undefined {
  return read.state === 'valid' ? read.record : undefined;
}

/** A member's answers: its answer record's and, for a table written before those, its lease record's. */
function memberAnswers(lease: LeaseRecord | undefined, answers: LeaseRecord | undefined): { answered: boolean; settled: readonly string[]; open: readonly OpenQuestion[] } {
  const older = answerFields(lease);
  // The common case: a lease record of this version carries none (a valid record's lists hold no input twice).
  if (older.answered === undefined && older.open === undefined) return { answered: answers?.answered === true, settled: answers?.settled ?? [], open: answers?.open ?? [] };
  const settled = [...(older.settled ?? []), ...(answers?.settled ?? [])];
  const newest = new Map<string, OpenQuestion>();
  for (const row of [...(older.open ?? []), ...(answers?.open ?? [])]) {
    const known = newest.get(row[0]);
    if (known === undefined || row[2] >= known[2]) newest.set(row[0], row);
  }
  const settledOnce = [...new Set(settled.reverse())].reverse();
  const answeredOn = new Set(settledOnce);
  return {
    answered: older.answered === true || answers?.answered === true,
    settled: settledOnce,
    // An input answered in one record and left open in the other was answered.
    open: [...newest.values()].filter((q) => !answeredOn.has(q[0])).sort((a, b) => a[2] - b[2]),
  };
}

const ANSWER_GENERATION_ID = answerGenerationRecordId();
/** Claims planned without a scan after a scan of the answer records failed. */
const SCAN_PAUSE = 256;

/** The state of a lease record in `view`; null when the record could not be read (etcd offline). */
function readableState(view: RecordView, id: string): RecordRead['state'] | null {
  try {
    return view.get(id).state;
  } catch {
    return null;
  }
}

/** The payload of an answer record (a record's payload is an object; an answer record has none of its own). */
const EMPTY_PAYLOAD = Object.freeze({});

/** The fields of a claim's lease record that every claim sets. */
interface LeasedFields {
  readonly attempts: number;
  readonly id: string;
  readonly leaseTtlMs: number;
  readonly owner: string;
  readonly payload: LeaseRecord['payload'];
  readonly previousOwner: string;
  readonly steals: number;
  readonly target: string;
  readonly targets: readonly string[];
  readonly token: string;
  readonly updatedMs: number;
  readonly worker: number;
}

/**
 * A claim's lease record: `f` and the answers a lease record of an older table carries on. Built
 * field by field in canonical key order, as `answerRecordOf`.
 */
function leasedRecord(f: LeasedFields, older: ReturnType<typeof answerFields>): LeaseRecord {
  const r: { -readonly [K in keyof LeaseRecord]: LeaseRecord[K] } = {} as LeaseRecord;
  if (older.answered !== undefined) r.answered = older.answered;
  r.attempts = f.attempts;
  r.id = f.id;
  r.kind = 'target';
  r.leaseTtlMs = f.leaseTtlMs;
  if (older.open !== undefined) r.open = older.open;
  r.owner = f.owner;
  r.payload = f.payload;
  r.previousOwner = f.previousOwner;
  r.schema = 1;
  if (older.settled !== undefined) r.settled = older.settled;
  r.status = 'leased';
  r.steals = f.steals;
  r.target = f.target;
  r.targets = f.targets;
  r.token = f.token;
  r.updatedMs = f.updatedMs;
  r.worker = f.worker;
  return r;
}

/**
 * The answer record a release (or `recordAnswers`) writes for `target`: `done`, role `answers`,
 * the owner, token and worker of the lease that asked, with `answered`, `open` and `settled` when
 * they have anything, as `version` of the branch's answer record. Built field by field in
 * canonical key order (the serialiser then skips sorting, canonical-json.ts):
 * a record literal that starts with a non-empty spread of an optional field cost 27–37 µs to
 * build on Node 20, against 0.2 µs this way, once per member of every claim and answering release.
 */
function answerRecordOf(
  id: string,
  target: bigint,
  lease: AnswerWriter,
  completedMs: number,
  answered: boolean,
  open: readonly OpenQuestion[],
  settled: readonly string[],
  version: number,
): LeaseRecord {
  const r: { -readonly [K in keyof LeaseRecord]: LeaseRecord[K] } = {} as LeaseRecord;
  if (answered) r.answered = true;
  r.attempts = 0;
  r.completedMs = completedMs;
  r.id = id;
  r.kind = 'target';
  if (open.length > 0) r.open = open;
  r.owner = lease.owner;
  r.payload = EMPTY_PAYLOAD;
  r.previousOwner = '';
  r.role = 'answers';
  r.schema = 1;
  if (answered && settled.length > 0) r.settled = settled;
  r.status = 'done';
  r.steals = 0;
  r.target = target.toString(10);
  r.token = lease.token;
  r.updatedMs = completedMs;
  r.version = version;
  r.worker = lease.worker;
  return r;
}

/**
 * What a run learnt about `target` on `input` folded into its answer record (`previous`, and the
 * answers an older table's lease record `older` carries). Answered now (`settledHere`), it joins
 * `settled` (the newest input last, at most `MAX_SETTLED_INPUTS`) and its open row on the input
 * goes; answered there already, the record stays as it is (undefined: nothing to write). Left
 * open now, it counts one more attempt on the input, last at `completedMs` (at most
 * `MAX_OPEN_INPUTS` rows, the least recently left open forgotten first), unless it is already
 * answered there. The release and `recordAnswers` write answers by this one rule.
 */
function nextAnswerRecord(
  answerId: string,
  target: bigint,
  writer: AnswerWriter,
  previous: LeaseRecord | undefined,
  older: LeaseRecord | undefined,
  input: string,
  settledHere: boolean,
  completedMs: number,
): LeaseRecord | undefined {
  const known = memberAnswers(older, previous);
  // Answered on the input already, nothing open there, nothing to move from an older lease record:
  // the record stays as it is (a replay writing a result's answers again changes nothing).
  const olderFields = answerFields(older);
  if (settledHere && previous !== undefined && known.settled.includes(input) && !known.open.some((q) => q[0] === input) && olderFields.answered === undefined && olderFields.open === undefined) {
    return undefined;
  }
  const before = known.open.find((q) => q[0] === input);
  let open = known.open.filter((q) => q[0] !== input);
  // A question already answered on the input stays answered: it is not open as well.
  if (!settledHere && !known.settled.includes(input)) open = [...open, [input, (before?.[1] ?? 0) + 1, completedMs] as const];
  if (open.length > MAX_OPEN_INPUTS) open = open.slice(open.length - MAX_OPEN_INPUTS);
  let settled = known.settled;
  if (settledHere) settled = [...settled.filter((s) => s !== input), input];
  if (settled.length > MAX_SETTLED_INPUTS) settled = settled.slice(settled.length - MAX_SETTLED_INPUTS);
  return answerRecordOf(answerId, target, writer, completedMs, known.answered || settledHere, open, settled, (previous?.version ?? 0) + 1);
}

export class FencedTargetLeaseTable extends LeaseTableBase implements TargetLeaseStore {
  /**
   * The answer records as of one answer generation, for claims that name their input
   * (answers-view.ts). None on a store that versions its answer records itself (etcd,
   * `relateAnswers`), where the generation record would take a 64-member group's release past the
   * transaction bound: there the table keeps the version of each answer record it last saw
   * (`versionedAnswers`), and the store's commit checks that each one a claim decided from is
   * still the newest (etcd-backend.ts).
   */
  private readonly answersView = this.backend.relateAnswers === undefined ? new AnswersView() : undefined;
  /** The answer records this table read or wrote last, where the store versions them (answers-view.ts). */
  private readonly versionedAnswers = this.answersView === undefined ? new VersionedAnswers() : undefined;
  /** Claims still to plan before the view is scanned again, after a scan failed. */
  #scanPause = 0;
  /** The scan under way, which claims planned meanwhile wait for instead of scanning again. */
  #scanning: Promise<void> | undefined;
  /** Where the view was when a scan found no generation record to vouch from (none, or corrupt): no scan again there. */
  #unscannableAt: string | undefined;
  /** Scans of the answer records that made the view complete, and scans that failed. */
  readonly #scanCounts = { scans: 0, failed: 0 };

  /** How often this table scanned the answer records for its view (answers-view.ts "Complete views"). */
  get answerScans(): { readonly scans: number; readonly failed: number } {
    return { ...this.#scanCounts };
  }

  /**
   * Makes the table's view of the answer records complete (answers-view.ts, "Complete views" and
   * `VersionedAnswers`) when it is not: on files and SQLite a scan that takes no lock
   * (`StoreBatch.scanAnswers`); on etcd a keys-only listing (`RecordBackend.answeredBranches`).
   * Not while the view is where a scan found no generation record (or a corrupt one): the next
   * generation, an answer written, is worth a scan. A scan that fails (an I/O error, more branches
   * than a view tracks) leaves the view as it was, claims read what it does not hold, and the
   * next `SCAN_PAUSE` claims do not scan again. Rejects only on a programming error.
   */
  private prepareView(): Promise<void> {
    const view = this.answersView;
    if (view?.isComplete ?? this.versionedAnswers?.isComplete ?? true) return Promise.resolve();
    if (this.#scanning !== undefined) return this.#scanning;
    if (view !== undefined && view.position === this.#unscannableAt) return Promise.resolve();
    if (this.#scanPause > 0) {
      this.#scanPause -= 1;
      return Promise.resolve();
    }
    this.#scanning = this.scanAnswers().finally(() => {
      this.#scanning = undefined;
    });
    return this.#scanning;
  }

  private async scanAnswers(): Promise<void> {
    try {
      let outcome: 'complete' | 'behind' | 'too-large' | 'none';
      if (this.answersView !== undefined) outcome = await this.scanIntoView(this.answersView);
      else if (this.versionedAnswers !== undefined && this.backend.answeredBranches !== undefined) {
        this.versionedAnswers.complete(await this.backend.answeredBranches());
        outcome = this.versionedAnswers.isComplete ? 'complete' : 'too-large';
      } else return;
      if (outcome === 'complete') this.#scanCounts.scans += 1;
      else if (outcome === 'none') this.#unscannableAt = this.answersView?.position;
      else if (outcome === 'too-large') this.pauseScans();
    } catch (error) {
      if (error instanceof InternalError) throw error;
      this.pauseScans();
    }
  }

  private pauseScans(): void {
    this.#scanCounts.failed += 1;
    this.#scanPause = SCAN_PAUSE;
  }

  /** One scan on a store with an answer generation, into `view`. */
  private async scanIntoView(view: AnswersView): Promise<'complete' | 'behind' | 'too-large' | 'none'> {
    const batch = this.backend.begin();
    try {
      const scan = batch.scanAnswers === undefined ? undefined : await batch.scanAnswers(ANSWER_GENERATION_ID);
      const generation = scan === undefined ? undefined : generationOf(scan.generation);
      // A corrupt generation record (claims read every member's answer record until it is
      // repaired), or a store with nothing to list.
      if (scan === undefined || generation === undefined) return 'none';
      if (scan.before === undefined) return view.complete(generation, scan.listed);
      const before = generationOf(scan.before);
      return before === undefined ? 'behind' : view.complete(generation, scan.listed, before);
    } finally {
      await batch.release();
    }
  }

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
    // Only a claim that asks about answers looks at the answer records.
    const asksAnswers = input !== undefined || anyInput;
    // Answer record ids, hashed when first needed: a complete view decides most members without one.
    const answerIds: (string | undefined)[] = [];
    const answerIdOf = (i: number): string => (answerIds[i] ??= answerRecordId(members[i]!.target));
    // Per attempt (the batch may run again): the generation read, each member's answer record
    // from the view (undefined: read in this batch), and what this batch read for the view.
    let readGeneration: AnswerGeneration | undefined;
    let fromView: (AnswerEntry | undefined)[] = [];
    const key = input === undefined ? 0 : inputKey(input);
    let readForView: (readonly [bigint, string, RecordRead])[] = [];
    const answersView = this.answersView;
    // The store versions the answer records (etcd): it is told which lease record each one read belongs to.
    const versionedAnswers = this.versionedAnswers;
    const versioned = asksAnswers && versionedAnswers !== undefined;
    // readMore runs again when the batch does: after a conflict, every answer record is read.
    let attempts = 0;
    const leaseIds = members.map((m) => m.id);
    return {
      name: 'claimGroup',
      lockIds: leaseIds,
      leaseRecordIds: leaseIds,
      ...(asksAnswers ? { prepare: () => this.prepareView() } : {}),
      // Read, not locked: the generation record, and (`readMore`) the answer records the view does
      // not hold at that generation. Only a release writes an answer record, and it holds the
      // member's lease record lock, which this claim takes too; it bumps the generation in the
      // same batch (answers-view.ts has why the view is then exact). Where the store versions the
      // answer records (`readMore` again), the members whose lease record is absent are decided
      // from this table's view at the version it holds (`declared`), or else read (`pinned`); the
      // store checks that version in the compare of the lease record. The others' are read and
      // checked apart (`guarded`). A batch run again after a conflict reads every one.
      ...(versioned
        ? {
            // Members whose lease record is read from the server have their answer record read in
            // the same request, unless the view holds it (the claim then declares that version).
            readAlong: members.flatMap((m, i) => (versionedAnswers!.lookup(m.target, m.id) === undefined ? [[answerIdOf(i), m.id] as const] : [])),
            readMore: (view: RecordView): MoreReads => {
              attempts += 1;
              const pinned: string[] = [];
              const guarded: string[] = [];
              const declared: DeclaredAnswer[] = [];
              const answerRelations: (readonly [string, string])[] = [];
              fromView = members.map((m, i) => {
                const state = readableState(view, m.id);
                if (state === null) return undefined; // unreadable: `apply` fails on the lease record
                const entry = state === 'absent' && attempts === 1 ? versionedAnswers!.lookup(m.target, m.id) : undefined;
                // The answer record id is hashed only if the batch fails (etcd-batch.ts forgets it then).
                if (entry !== undefined) {
                  declared.push({
                    leaseId: m.id,
                    version: entry.version,
                    get answerId(): string {
                      return answerIdOf(i);
                    },
                  });
                }
                else {
                  (state === 'absent' ? pinned : guarded).push(answerIdOf(i));
                  answerRelations.push([answerIdOf(i), m.id]);
                }
                return entry;
              });
              return { guarded, pinned, declared, answerRelations };
            },
            committed: (): void => {
              for (const [target, leaseId, read] of readForView) versionedAnswers!.learn(target, leaseId, read);
            },
          }
        : {}),
      ...(asksAnswers && answersView !== undefined
        ? {
            readIds: [ANSWER_GENERATION_ID],
            readMore: (view: RecordView): MoreReads => {
              readGeneration = generationOf(view.get(ANSWER_GENERATION_ID));
              // A corrupt generation record: every member's answer record is read.
              if (readGeneration !== undefined) answersView.advance(readGeneration);
              // No generation record vouches for nothing (answers-view.ts): every member is read.
              const usable = readGeneration !== undefined && readGeneration.epoch !== '' && answersView.at(readGeneration);
              fromView = members.map((m) => (usable ? answersView.lookup(m.target) : undefined));
              return { guarded: members.flatMap((_, i) => (fromView[i] === undefined ? [answerIdOf(i)] : [])) };
            },
            committed: (changed: boolean): void => {
              if (!changed || readGeneration === undefined) return;
              for (const [target, , read] of readForView) answersView.learn(readGeneration, target, read);
            },
          }
        : {}),
      apply: (view): GroupClaimResult => {
        const corrupt: { id: string; target: bigint; detail: string }[] = [];
        const holders: { id: string; target: bigint; status: LeaseRecord['status']; owner: string; updatedMs: number }[] = [];
        const answered: bigint[] = [];
        const open: OpenMember[] = [];
        readForView = [];
        // When no operation before this one wrote an answer record, the view's entries stand as
        // they are (on etcd, one another operation read newer fails the commit: etcd-batch.ts).
        const answersStaged = asksAnswers && view.answersStaged;
        members.forEach((member, i) => {
          const read = view.get(member.id);
          let answerRead: RecordRead = { state: 'absent' };
          let entry: AnswerEntry | undefined;
          if (asksAnswers) {
            // What this batch read (and staged) first: an earlier release in the batch may have written it.
            const inBatch = fromView[i] === undefined || answersStaged ? view.peek(answerIdOf(i)) : undefined;
            if (inBatch !== undefined) {
              answerRead = inBatch;
              if (fromView[i] === undefined) readForView.push([member.target, member.id, inBatch]);
            } else {
              entry = fromView[i]!;
              answerRead = entry.read;
            }
          }
          if (read.state === 'corrupt') corrupt.push({ id: member.id, target: member.target, detail: read.reason });
          if (answerRead.state === 'corrupt') corrupt.push({ id: answerIdOf(i), target: member.target, detail: answerRead.reason });
          if (read.state === 'corrupt' || answerRead.state === 'corrupt') return;
          const lease = validRecord(read);
          if (asksAnswers) {
            const answers = validRecord(answerRead);
            // The common case reads the answer record as it is: a lease record of this version carries no answers.
            const older = lease !== undefined && (lease.answered !== undefined || lease.open !== undefined);
            const known = older ? memberAnswers(lease, answers) : answers;
            const settledOn = input !== undefined && (!older && entry !== undefined ? entry.settles(input, key) : known?.settled?.includes(input) === true);
            if ((anyInput && known?.answered === true) || settledOn) answered.push(member.target);
            else if (backoff !== undefined) {
              const row = known?.open?.find((q) => q[0] === input);
              if (row !== undefined && backingOff(backoff, row[1], row[2], nowMs)) open.push({ target: member.target, attempts: row[1], lastOpenMs: row[2] });
            }
          }
          if (lease !== undefined && isActiveLease(lease, nowMs, ttlMs, skewMs)) {
            holders.push({ id: member.id, target: member.target, status: lease.status, owner: lease.owner, updatedMs: lease.updatedMs });
          }
        });
        if (corrupt.length > 0) return { ok: false, reason: 'corrupt', corrupt };
        // Before `conflict`: an answered question is refused for good, a held one only for now.
        if (answered.length > 0) return { ok: false, reason: 'answered', answered };
        if (open.length > 0) return { ok: false, reason: 'backoff', open };
        if (holders.length > 0) return { ok: false, reason: 'conflict', holders };
        members.forEach((member) => {
          const previous = validRecord(view.get(member.id));
          // A `done` member (an older table's record that carries answers) is free: its counters start over, as an absent one's.
          const counters = claimCounters(previous?.status === 'leased' ? previous : undefined, owner);
          // Answers a lease record of an older table carries travel with it until a release moves them.
          const lease: LeasedFields = {
            attempts: counters.attempts,
            id: member.id,
            leaseTtlMs: ttlMs,
            owner,
            payload: stored,
            previousOwner: counters.previousOwner,
            steals: counters.steals,
            target: member.target.toString(10),
            targets: groupTargets,
            token,
            updatedMs: nowMs,
            worker,
          };
          view.put(leasedRecord(lease, answerFields(previous)));
        });
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
    const leaseIds = members.map((m) => m.id);
    return {
      name: 'heartbeatGroup',
      lockIds: leaseIds,
      leaseRecordIds: leaseIds,
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
   * all members, and the answer records the release writes, before the first change), else
   * `stale`/`corrupt` with zero mutation. The members' lease records are deleted, so the targets
   * can be claimed again at once (lock files stay). A member answered now (`options.answers.settled`)
   * or left open now (`options.answers.open`) on `answers.input` has its answer record written in
   * the same batch: `answered` and `settled` (the newest input last, at most `MAX_SETTLED_INPUTS`),
   * `open` (a member left open now counts one more attempt on the input, last at `nowMs`;
   * answering it drops its row; at most `MAX_OPEN_INPUTS`, the least recently left open forgotten
   * first). A lease record of an older table that carries answers has them moved into the answer
   * record then; released without a new answer, it stays as a `done` record carrying them.
   */
  planReleaseGroup(targets: Iterable<bigint>, token: string, options: TargetReleaseOptions = {}): LeaseOperation<FenceResult> {
    checkCallOptions(options);
    const members = groupMembers(targets);
    const writes = this.answerWrites(members, checkAnswers(options.answers, options.nowMs));
    return {
      name: 'releaseGroup',
      lockIds: [...members.map((m) => m.id), ...writes.lockIds],
      leaseRecordIds: members.map((m) => m.id),
      ...writes.hooks,
      apply: (view): FenceResult => {
        writes.reset();
        const records = this.validateHeld(view, members, token);
        if (!Array.isArray(records)) return records;
        const corrupt = writes.corrupt(view);
        if (corrupt !== undefined) return corrupt;
        const byTarget = new Map<bigint, LeaseRecord>();
        records.forEach((record, i) => {
          byTarget.set(members[i]!.target, record);
          // Nothing learnt now: a lease record of an older table keeps its answers as a `done` record.
          const older = answerFields(record);
          if (!writes.learns(members[i]!.target) && (older.answered !== undefined || older.open !== undefined)) view.put({ ...record, status: 'done' });
          else view.remove(record.id);
        });
        const recordOf = (target: bigint): LeaseRecord => byTarget.get(target)!;
        writes.write(view, recordOf, recordOf);
        return { ok: true };
      },
    };
  }

  async releaseGroup(targets: Iterable<bigint>, token: string, options: TargetReleaseOptions = {}): Promise<FenceResult> {
    return (await this.runOne(this.planReleaseGroup(targets, token, options))).value;
  }

  /**
   * recordAnswers contract: writes what a committed run answered (`answers`, as a release carries
   * them, at `nowMs`) into the answer records of the members it names, by the release's rule, and
   * writes no lease record (it locks them, as every write of an answer record does): for a result
   * whose release could not carry its answers (the lease expired or was taken meanwhile), and for a
   * result a coordinator replays from its commit manifest (docs/leases.md "Shared answers").
   * `writer` is the lease that asked (kept in the records as a release keeps its own). `ok` once written; `corrupt` with zero mutation when an
   * answer record (or the answer generation) is corrupt. Writing the same answers twice leaves a
   * settled answer as it was and counts an open question's attempt twice.
   */
  planRecordAnswers(answers: GroupAnswers, writer: AnswerWriter, nowMs: number): LeaseOperation<FenceResult> {
    if (typeof answers !== 'object' || answers === null) throw invalidOption('answers', '{ input, settled, open? }', answers);
    const who = checkAnswerWriter(writer);
    const checked = checkAnswers(answers, nowMs);
    const members = groupMembers(new Set([...checked.answeredNow, ...checked.openNow]));
    const writes = this.answerWrites(members, checked);
    return {
      name: 'recordAnswers',
      // The members' lease records are locked (never written, whoever holds them): every write of
      // an answer record holds its lease record's lock, which orders it with the claims that read
      // it (files; the answers view relies on that, answers-view.ts).
      lockIds: [...members.map((m) => m.id), ...writes.lockIds],
      leaseRecordIds: members.map((m) => m.id),
      ...writes.hooks,
      apply: (view): FenceResult => {
        writes.reset();
        const corrupt = writes.corrupt(view);
        if (corrupt !== undefined) return corrupt;
        writes.write(view, () => who, () => undefined);
        return { ok: true };
      },
    };
  }

  async recordAnswers(answers: GroupAnswers, writer: AnswerWriter, nowMs: number): Promise<FenceResult> {
    return (await this.runOne(this.planRecordAnswers(answers, writer, nowMs))).value;
  }

  /**
   * The answer records an operation writes for what a run learnt (`checkAnswers`) about
   * `members`: the records to lock (with the answer generation where the table keeps
   * one), the hooks that keep the table's view current once the batch committed, and the staging
   * itself. The release and `recordAnswers` share it, so both write answers the same way.
   */
  private answerWrites(members: readonly GroupMember[], { input, answeredNow, openNow, completedMs }: CheckedAnswers) {
    // The members whose answer record is written, with its id.
    const learnt = new Map(members.filter((m) => answeredNow.has(m.target) || openNow.has(m.target)).map((m) => [m.target, answerRecordId(m.target)]));
    // Per attempt: the generation record and answer records staged (for the view).
    let wrote: { generation: LeaseRecord | undefined; records: (readonly [bigint, LeaseRecord])[] } | undefined;
    const answersView = this.answersView;
    // Writing answer records bumps the answer generation in the same batch (answers-view.ts); a
    // store that versions them is told which lease record each belongs to instead.
    const generationIds = learnt.size > 0 && answersView !== undefined ? [ANSWER_GENERATION_ID] : [];
    const versionedAnswers = this.versionedAnswers;
    const versioned = learnt.size > 0 && versionedAnswers !== undefined;
    const hooks: Pick<LeaseOperation<FenceResult>, 'answerRelations' | 'committed'> = {
      ...(versioned ? { answerRelations: members.flatMap((m) => (learnt.has(m.target) ? [[learnt.get(m.target)!, m.id] as const] : [])) } : {}),
      ...(answersView !== undefined && generationIds.length > 0
        ? {
            committed: (): void => {
              if (wrote?.generation === undefined) return;
              const generation = generationOf({ state: 'valid', record: wrote.generation })!;
              answersView.advance(generation);
              for (const [target, record] of wrote.records) answersView.learn(generation, target, { state: 'valid', record });
            },
          }
        : {}),
      ...(versioned
        ? {
            committed: (): void => {
              for (const [target, record] of wrote?.records ?? []) versionedAnswers!.learn(target, targetRecordId(target), { state: 'valid', record });
            },
          }
        : {}),
    };
    return {
      lockIds: [...learnt.values(), ...generationIds],
      hooks,
      learns: (target: bigint): boolean => learnt.has(target),
      reset: (): void => {
        wrote = undefined;
      },
      /** The first corrupt record among those written, as the operation's result. */
      corrupt: (view: RecordView): FenceResult | undefined => {
        for (const id of [...learnt.values(), ...generationIds]) {
          const read = view.get(id);
          if (read.state === 'corrupt') return { ok: false, reason: 'corrupt', corrupt: { id, detail: read.reason } };
        }
        return undefined;
      },
      /** Stages every answer record (and the next generation), each as `writer(target)`; `older(target)`: the member's lease record, whose older-table answers join. */
      write: (view: RecordView, writer: (target: bigint) => AnswerWriter, older: (target: bigint) => LeaseRecord | undefined): void => {
        const written: (readonly [bigint, LeaseRecord])[] = [];
        for (const [target, answerId] of learnt) {
          const answerRecord = nextAnswerRecord(answerId, target, writer(target), validRecord(view.get(answerId)), older(target), input!, answeredNow.has(target), completedMs);
          if (answerRecord === undefined) continue;
          view.put(answerRecord);
          written.push([target, answerRecord]);
        }
        let generation: LeaseRecord | undefined;
        if (generationIds.length > 0 && written.length > 0) {
          const previous = generationOf(view.get(ANSWER_GENERATION_ID))!;
          const first = writer(learnt.keys().next().value as bigint);
          generation = nextGeneration(previous, written.map(([target]) => target), { owner: first.owner, token: first.token, worker: first.worker, nowMs: completedMs });
          view.put(generation);
        }
        wrote = { generation, records: written };
      },
    };
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
