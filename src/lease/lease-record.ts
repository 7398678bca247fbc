/**
 * The lease record: schema 1, its fields, and strict validation of every record read.
 *
 * A record that cannot be read, does not parse, is of another schema or kind, has a missing or
 * ill-typed field, a non-finite or negative time, or whose `id` does not match the path it was read
 * from is *corrupt*. Corrupt records fail closed: claims refuse them, scans report them, and no
 * operation ever overwrites or deletes one (an operator has to look at it).
 *
 * Unknown extra fields are allowed and survive in-place updates (heartbeat, beginCommit,
 * complete), so a newer writer can add fields without older readers calling its records corrupt.
 * `leaseTtlMs` (the holder's TTL) is such a field: records written before it existed have none
 * and are judged with the reader's TTL (docs/lease-format.md "Expiry").
 *
 * Size: a record file is small canonical JSON. Its bound (`maxRecordBytes`) follows from the
 * schema — a payload of at most `MAX_PAYLOAD_BYTES`, up to 64 targets, and for work records a
 * commit manifest of at most `MAX_MANIFEST_ITEMS` items — and is checked before a record is read
 * and before one is written.
 */
import { canonicalJsonBytes, type CanonicalJsonMemo } from './canonical-json.js';
import { MAX_GROUP_TARGETS, MAX_TARGET, answerGenerationRecordId, answerRecordId, isRecordId, targetRecordId } from './identity.js';

const RECORD_SCHEMA = 1;

/** Largest canonical JSON of a caller's payload, bytes. */
export const MAX_PAYLOAD_BYTES = 1024 * 1024;
/** Deepest nesting of a payload (objects and arrays), counting the payload object as 1. */
export const MAX_PAYLOAD_DEPTH = 64;
/**
 * Largest stored commit manifest, bytes: 100,001 items (`MAX_MANIFEST_ITEMS`,
 * commit-manifest.ts) of at most ~270 bytes each fit with room to spare.
 */
export const MAX_COMMIT_BYTES = 32 * 1024 * 1024;
/** Room for a record's own fields (ids, owner, token, times, targets) around payload and manifest. */
const RECORD_FIELD_BYTES = 64 * 1024;
/** Largest TTL a record may carry; a larger stored value counts as this (see `expiryOf`). */
export const MAX_LEASE_TTL_MS = 86_400_000;
/** Default bound on how far a record's `updatedMs` may lie ahead of the reader's clock. */
const DEFAULT_MAX_CLOCK_SKEW_MS = 300_000;

/** Largest record file of `kind` a reader accepts (a larger one is corrupt without being read). */
export function maxRecordBytes(kind: RecordKind): number {
  return kind === 'work' ? MAX_PAYLOAD_BYTES + MAX_COMMIT_BYTES + RECORD_FIELD_BYTES : MAX_PAYLOAD_BYTES + RECORD_FIELD_BYTES;
}

export type LeaseStatus = 'leased' | 'committing' | 'done';
const LEASE_STATUSES: readonly LeaseStatus[] = ['leased', 'committing', 'done'];

/** Most inputs a target record remembers as settled; the oldest is forgotten first. */
export const MAX_SETTLED_INPUTS = 64;

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Most inputs a target record remembers a question left open on; the least recently left open is forgotten first. */
export const MAX_OPEN_INPUTS = 64;
/**
 * Targets the answer generation record lists at most, the newest writes (answers-view.ts); a
 * table's view older than its list starts over.
 */
export const MAX_GENERATION_CHANGES = 256;

/**
 * One question a run left open on a target record's branch: `[input, attempts, lastOpenMs]` —
 * the input (SHA-256), how many runs in the campaign left it open, and when the last one was
 * released (docs/lease-format.md "Answers").
 */
export type OpenQuestion = readonly [input: string, attempts: number, lastOpenMs: number];

/** True for a lowercase hex SHA-256 (an input's identity in `settled`). */
export function isInputDigest(value: unknown): value is string {
  return typeof value === 'string' && SHA256_HEX.test(value);
}

/** Which table wrote the record. A work table refuses target records and vice versa. */
export type RecordKind = 'work' | 'target';

export type JsonObject = { readonly [key: string]: unknown };

export interface LeaseRecord {
  readonly schema: typeof RECORD_SCHEMA;
  readonly kind: RecordKind;
  /** 64-hex record id; equals the id the record's path is derived from. */
  readonly id: string;
  readonly status: LeaseStatus;
  /** The caller's payload, as canonical JSON (a payload holding a bigint is refused with ERR_INVALID_JOB). */
  readonly payload: JsonObject;
  /** Coordinator name of the holder. */
  readonly owner: string;
  /** Holder this claim replaced; `""` for a fresh claim. */
  readonly previousOwner: string;
  /** Worker index of the holder (informational). */
  readonly worker: number;
  /** Fencing token: opaque, compared by exact equality. */
  readonly token: string;
  /** Last claim / heartbeat / beginCommit time, ms since the epoch (injected clock). Expiry counts from here. */
  readonly updatedMs: number;
  /**
   * The holder's TTL, ms: the lease is live until `updatedMs + leaseTtlMs` whatever TTL the
   * reader was opened with. Absent in records of writers that predate it (reader's TTL applies).
   */
  readonly leaseTtlMs?: number;
  /** 1 on a fresh claim, +1 on every replacement. */
  readonly attempts: number;
  /** +1 when a replacement changed the owner. */
  readonly steals: number;
  /** Durable result manifest stored by `beginCommit` (work records). */
  readonly commit?: JsonObject;
  /** Completion time (work records in `done`). */
  readonly completedMs?: number;
  /**
   * Work records: when another coordinator last took the publication of this committing result
   * over (`claimPublication`), ms since the epoch. Such a publication is left to its taker for a
   * whole TTL from then, by the result's owner too.
   */
  readonly takenOverMs?: number;
  /** Target records: this member's target, decimal. */
  readonly target?: string;
  /** Target records: the whole group, decimal, in record-id order (absent on an answer record). */
  readonly targets?: readonly string[];
  /**
   * Target records: `"answers"` on a branch's answer record, the `done` record at
   * `answerRecordId(target)` that keeps `answered`, `settled` and `open` apart from the record
   * that fences the branch's lease (docs/lease-format.md "Answers"). `"answers-generation"` on
   * the one record that counts every write of an answer record (`answerGenerationRecordId()`,
   * docs/lease-format.md "Answer generation"). Absent on a lease record.
   */
  readonly role?: 'answers' | 'answers-generation';
  /**
   * Target records: the inputs (SHA-256, lowercase hex) on which this branch's question was
   * answered (sat or unsat), oldest first, at most `MAX_SETTLED_INPUTS` (docs/lease-format.md
   * "Answers"). A claim naming one of them is refused `answered`.
   */
  readonly settled?: readonly string[];
  /** Target records: the branch was answered on some input (kept when `settled` forgets inputs). */
  readonly answered?: boolean;
  /**
   * Target records: the inputs on which runs left this branch's question open (`unknown`, a
   * timeout or a kill), least recently left open first, at most `MAX_OPEN_INPUTS`, none twice,
   * none also in `settled`. A claim naming one of them with a back-off policy is refused `backoff`
   * while the back-off lasts.
   */
  readonly open?: readonly OpenQuestion[];
  /**
   * Answer records: how many writes of this branch's answer record this one is (1, 2, …): each
   * release that writes it writes the next. The etcd store keeps each version under a key of its
   * own (docs/lease-format.md "Answer versions"). Absent on a record written before versions.
   */
  readonly version?: number;
  readonly [extra: string]: unknown;
}

export type RecordRead =
  | { readonly state: 'absent' }
  /** `bytes`: the stored bytes, where a store keeps a record as one byte string (files, etcd). */
  | { readonly state: 'valid'; readonly record: LeaseRecord; readonly bytes?: Buffer }
  | { readonly state: 'corrupt'; readonly reason: string; readonly bytes?: Buffer };

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isTime(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** A u64 target as a record stores it: decimal, no leading zero, at most 2^64 − 1. */
export function isDecimalTarget(value: unknown): value is string {
  if (typeof value !== 'string' || !/^[1-9][0-9]{0,19}$/.test(value)) return false;
  // Below 20 digits a decimal is below 2^64 (20 digits); only those need the exact comparison.
  return value.length < 20 || BigInt(value) <= MAX_TARGET;
}

/**
 * Why `value` is not a valid record for `expectedId` of `kind`, or undefined when it is valid.
 * Only numbers count as numbers (no numeric strings, no booleans): a strict reader.
 */
export function recordProblem(value: unknown, expectedId: string, kind: RecordKind): string | undefined {
  if (!isObject(value)) return 'not a JSON object';
  if (value.schema !== RECORD_SCHEMA) return `schema ${JSON.stringify(value.schema)} is not ${RECORD_SCHEMA}`;
  if (value.kind !== kind) return `kind ${JSON.stringify(value.kind)} is not ${JSON.stringify(kind)}`;
  if (!isRecordId(value.id)) return 'id is not 64 lowercase hex characters';
  if (value.id !== expectedId) return `id ${value.id} does not match its path (${expectedId})`;
  if (typeof value.status !== 'string' || !LEASE_STATUSES.includes(value.status as LeaseStatus)) {
    return `status ${JSON.stringify(value.status)} is not one of ${LEASE_STATUSES.join(', ')}`;
  }
  if (!isObject(value.payload)) return 'payload is not an object';
  if (typeof value.owner !== 'string' || value.owner === '') return 'owner is not a non-empty string';
  if (typeof value.previousOwner !== 'string') return 'previousOwner is not a string';
  if (!isCount(value.worker)) return 'worker is not a non-negative integer';
  if (typeof value.token !== 'string' || value.token === '') return 'token is not a non-empty string';
  if (!isTime(value.updatedMs)) return 'updatedMs is not a finite non-negative number';
  if (value.leaseTtlMs !== undefined && (!isTime(value.leaseTtlMs) || value.leaseTtlMs === 0)) return 'leaseTtlMs is not a finite positive number';
  if (!isCount(value.attempts)) return 'attempts is not a non-negative integer';
  if (!isCount(value.steals)) return 'steals is not a non-negative integer';
  if (value.commit !== undefined && !isObject(value.commit)) return 'commit is not an object';
  if (value.completedMs !== undefined && !isTime(value.completedMs)) return 'completedMs is not a finite non-negative number';
  if (value.takenOverMs !== undefined && !isTime(value.takenOverMs)) return 'takenOverMs is not a finite non-negative number';
  if (kind === 'target') {
    if (value.role === 'answers-generation') return generationProblem(value, expectedId);
    // `done`: released, kept only for the answers it carries (docs/lease-format.md "Answers").
    if (value.status === 'committing') return 'target record status committing is not leased or done';
    const settled = value.settled;
    if (settled !== undefined) {
      if (!Array.isArray(settled) || settled.length > MAX_SETTLED_INPUTS || !settled.every(isInputDigest)) {
        return `settled is not a list of at most ${MAX_SETTLED_INPUTS} lowercase hex SHA-256 digests`;
      }
      if (new Set(settled).size !== settled.length) return 'settled lists an input twice';
      if (settled.length > 0 && value.answered !== true) return 'settled lists inputs but answered is not true';
    }
    if (value.answered !== undefined && typeof value.answered !== 'boolean') return 'answered is not a boolean';
    const open = value.open;
    if (open !== undefined) {
      if (!Array.isArray(open) || open.length === 0 || open.length > MAX_OPEN_INPUTS || !open.every(isOpenQuestion)) {
        return `open is not a list of 1..${MAX_OPEN_INPUTS} [input SHA-256, attempts ≥ 1, lastOpenMs] rows`;
      }
      const inputs = new Set(open.map((q) => q[0]));
      if (inputs.size !== open.length) return 'open lists an input twice';
      if (Array.isArray(settled) && settled.some((s) => inputs.has(s as string))) return 'open lists an input that settled lists';
    }
    if (value.status === 'done' && value.answered !== true && open === undefined) return 'a done target record carries no answer';
    if (!isDecimalTarget(value.target)) return 'target is not a decimal u64 string';
    if (value.role !== undefined) {
      if (value.role !== 'answers') return `role ${JSON.stringify(value.role)} is not "answers" or "answers-generation"`;
      if (value.status !== 'done') return 'an answer record is not done';
      if (value.version !== undefined && (!isCount(value.version) || value.version < 1)) return 'version is not a positive integer';
      // The release that rewrites it writes the next version, which must be a safe integer too.
      if (value.version !== undefined && value.version >= Number.MAX_SAFE_INTEGER) return 'version leaves no room for a next one';
      if (answerRecordId(BigInt(value.target)) !== expectedId) return `target ${value.target} does not hash to answer record id ${expectedId}`;
      if (value.targets !== undefined) return 'an answer record lists targets';
      return undefined;
    }
    if (value.version !== undefined) return 'a lease record carries an answer version';
    if (targetRecordId(BigInt(value.target)) !== expectedId) return `target ${value.target} does not hash to id ${expectedId}`;
    const targets = value.targets;
    if (!Array.isArray(targets) || targets.length === 0 || targets.length > MAX_GROUP_TARGETS || !targets.every(isDecimalTarget)) {
      return 'targets is not a list of 1..64 decimal u64 strings';
    }
    if (!targets.includes(value.target)) return 'targets does not contain target';
  }
  return undefined;
}

/** Why a record with `role: "answers-generation"` is not a valid answer generation record (answers-view.ts). */
function generationProblem(value: Record<string, unknown>, expectedId: string): string | undefined {
  if (expectedId !== answerGenerationRecordId()) return `id ${expectedId} is not the answer generation record's`;
  if (value.status !== 'done') return 'the answer generation record is not done';
  if (value.target !== undefined || value.targets !== undefined) return 'the answer generation record names targets';
  if (value.answered !== undefined || value.settled !== undefined || value.open !== undefined) return 'the answer generation record carries answers';
  if (typeof value.epoch !== 'string' || !/^[0-9a-f]{16}$/.test(value.epoch)) return 'epoch is not 16 lowercase hex characters';
  const { generation, since, changed } = value;
  if (!isCount(generation) || generation < 1) return 'generation is not a positive integer';
  if (!isCount(since) || since >= generation) return 'since is not a non-negative integer below generation';
  if (!Array.isArray(changed) || changed.length > MAX_GENERATION_CHANGES) return `changed is not a list of at most ${MAX_GENERATION_CHANGES} rows`;
  const seen = new Set<string>();
  let last = since;
  for (const row of changed as unknown[]) {
    if (!Array.isArray(row) || row.length !== 2 || !isCount(row[0]) || !isDecimalTarget(row[1])) return 'changed is not a list of [generation, decimal target] rows';
    if (row[0] <= since || row[0] > generation || row[0] < last) return 'changed lists generations out of order or outside since..generation';
    if (seen.has(row[1])) return 'changed lists a target twice';
    seen.add(row[1]);
    last = row[0];
  }
  return undefined;
}

function isOpenQuestion(value: unknown): value is OpenQuestion {
  return Array.isArray(value) && value.length === 3 && isInputDigest(value[0]) && isCount(value[1]) && value[1] >= 1 && isTime(value[2]);
}

/**
 * True when a target record carries something the campaign learnt (answers or open questions):
 * such a record outlives its lease as `done` (docs/lease-format.md "Answers").
 */
export function carriesAnswers(record: LeaseRecord): boolean {
  return record.answered === true || (record.open !== undefined && record.open.length > 0);
}

/**
 * True for a record that tells lock-free readers which records changed (the answer generation
 * record, docs/lease-format.md "Answer generation"): a store publishes it before the records it
 * names and never puts it back (files/durability-batch.ts).
 */
export function announcesChanges(record: LeaseRecord): boolean {
  return record.role === 'answers-generation';
}

/** Parses and validates the bytes of a record file. */
export function parseRecord(bytes: Buffer, expectedId: string, kind: RecordKind): RecordRead {
  return { ...parseRecordText(bytes.toString('utf8'), expectedId, kind), bytes };
}

/** Parses and validates a record's JSON text (a record file's bytes, decoded; a SQLite row). */
export function parseRecordText(text: string, expectedId: string, kind: RecordKind): RecordRead & { state: 'valid' | 'corrupt' } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { state: 'corrupt', reason: `not valid JSON (${(error as Error).message})` };
  }
  const problem = recordProblem(value, expectedId, kind);
  if (problem !== undefined) return { state: 'corrupt', reason: problem };
  return { state: 'valid', record: value as LeaseRecord };
}

/**
 * The exact bytes of a record file. Throws `InvalidJobError` for an unserialisable value or a
 * record larger than `maxRecordBytes` (a writer never stores what a reader would call corrupt).
 */
export function serializeRecord(record: LeaseRecord, memo?: CanonicalJsonMemo): Buffer {
  return canonicalJsonBytes(record, { maxBytes: maxRecordBytes(record.kind), maxDepth: MAX_PAYLOAD_DEPTH + 4, ...(memo ? { memo } : {}) });
}

/**
 * The one staleness rule (docs/lease-format.md "Expiry"): something renewed at `sinceMs` with a
 * TTL of `ttlMs` ends at `sinceMs + min(ttlMs, MAX_LEASE_TTL_MS)`, as the reader at `nowMs` sees
 * it. A time more than `maxClockSkewMs` ahead of the reader's clock is outside the clock
 * assumption (docs/leases.md) and ends at once: otherwise a far-off clock — or a bogus time —
 * would hold it for ever. The result is therefore never later than
 * `nowMs + maxClockSkewMs + MAX_LEASE_TTL_MS`. Every expiry is this one: a lease record's, a
 * taken-over publication's, a committing result's silence before another coordinator replays
 * it, a `done` result's settling before its staged copies go, the I/O thread's mirror grants.
 */
export function leaseEndMs(sinceMs: number, ttlMs: number, nowMs: number, maxClockSkewMs = DEFAULT_MAX_CLOCK_SKEW_MS): number {
  if (sinceMs > nowMs + maxClockSkewMs) return nowMs;
  return sinceMs + Math.min(ttlMs, MAX_LEASE_TTL_MS);
}

/** True once something renewed at `sinceMs` has gone unrenewed for its TTL (`leaseEndMs`; the boundary is stale). */
export function isStaleSince(sinceMs: number, ttlMs: number, nowMs: number, maxClockSkewMs = DEFAULT_MAX_CLOCK_SKEW_MS): boolean {
  return nowMs >= leaseEndMs(sinceMs, ttlMs, nowMs, maxClockSkewMs);
}

/**
 * When the lease in `record` ends (`leaseEndMs`): from `updatedMs`, with the holder's stored TTL
 * (the reader's `readerTtlMs` for a record without one).
 */
function expiryOf(record: LeaseRecord, nowMs: number, readerTtlMs: number, maxClockSkewMs = DEFAULT_MAX_CLOCK_SKEW_MS): number {
  return leaseEndMs(record.updatedMs, record.leaseTtlMs ?? readerTtlMs, nowMs, maxClockSkewMs);
}

/**
 * True when `record` is a live lease at `nowMs`. `readerTtlMs` 0 is an explicit forced takeover:
 * nothing is live. Otherwise the holder's TTL decides (see `expiryOf`).
 */
export function isActiveLease(record: LeaseRecord, nowMs: number, readerTtlMs: number, maxClockSkewMs = DEFAULT_MAX_CLOCK_SKEW_MS): boolean {
  return record.status === 'leased' && readerTtlMs > 0 && nowMs < expiryOf(record, nowMs, readerTtlMs, maxClockSkewMs);
}

/** True when a leased record has expired at `nowMs` (the boundary `nowMs == expiry` is expired). */
export function isExpiredLease(record: LeaseRecord, nowMs: number, readerTtlMs: number, maxClockSkewMs = DEFAULT_MAX_CLOCK_SKEW_MS): boolean {
  return record.status === 'leased' && !isActiveLease(record, nowMs, readerTtlMs, maxClockSkewMs);
}
