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
 */
import { canonicalJsonBytes } from './canonical-json.js';
import { MAX_GROUP_TARGETS, MAX_TARGET, isRecordId, targetRecordId } from './identity.js';

export const RECORD_SCHEMA = 1;

export type LeaseStatus = 'leased' | 'committing' | 'done';
export const LEASE_STATUSES: readonly LeaseStatus[] = ['leased', 'committing', 'done'];

/** Which table wrote the record. A work table refuses target records and vice versa. */
export type RecordKind = 'work' | 'target';

export type JsonObject = { readonly [key: string]: unknown };

export interface LeaseRecord {
  readonly schema: typeof RECORD_SCHEMA;
  readonly kind: RecordKind;
  /** 64-hex record id; equals the id the record's path is derived from. */
  readonly id: string;
  readonly status: LeaseStatus;
  /** The caller's payload, as canonical JSON (bigints became decimal strings). */
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
  /** 1 on a fresh claim, +1 on every replacement. */
  readonly attempts: number;
  /** +1 when a replacement changed the owner. */
  readonly steals: number;
  /** Durable result manifest stored by `beginCommit` (work records). */
  readonly commit?: JsonObject;
  /** Completion time (work records in `done`). */
  readonly completedMs?: number;
  /** Target records: this member's target, decimal. */
  readonly target?: string;
  /** Target records: the whole group, decimal, in record-id order. */
  readonly targets?: readonly string[];
  readonly [extra: string]: unknown;
}

export type RecordRead =
  | { readonly state: 'absent' }
  | { readonly state: 'valid'; readonly record: LeaseRecord; readonly bytes: Buffer }
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

function isDecimalTarget(value: unknown): value is string {
  if (typeof value !== 'string' || !/^[1-9][0-9]{0,19}$/.test(value)) return false;
  return BigInt(value) <= MAX_TARGET;
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
  if (!isCount(value.attempts)) return 'attempts is not a non-negative integer';
  if (!isCount(value.steals)) return 'steals is not a non-negative integer';
  if (value.commit !== undefined && !isObject(value.commit)) return 'commit is not an object';
  if (value.completedMs !== undefined && !isTime(value.completedMs)) return 'completedMs is not a finite non-negative number';
  if (kind === 'target') {
    if (value.status !== 'leased') return `target record status ${value.status} is not leased`;
    if (!isDecimalTarget(value.target)) return 'target is not a decimal u64 string';
    if (targetRecordId(BigInt(value.target)) !== expectedId) return `target ${value.target} does not hash to id ${expectedId}`;
    const targets = value.targets;
    if (!Array.isArray(targets) || targets.length === 0 || targets.length > MAX_GROUP_TARGETS || !targets.every(isDecimalTarget)) {
      return 'targets is not a list of 1..64 decimal u64 strings';
    }
    if (!targets.includes(value.target)) return 'targets does not contain target';
  }
  return undefined;
}

/** Parses and validates the bytes of a record file. */
export function parseRecord(bytes: Buffer, expectedId: string, kind: RecordKind): RecordRead {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    return { state: 'corrupt', reason: `not valid JSON (${(error as Error).message})`, bytes };
  }
  const problem = recordProblem(value, expectedId, kind);
  if (problem !== undefined) return { state: 'corrupt', reason: problem, bytes };
  return { state: 'valid', record: value as LeaseRecord, bytes };
}

/** The exact bytes of a record file. Throws `InvalidJobError` for an unserialisable value. */
export function serializeRecord(record: LeaseRecord): Buffer {
  return canonicalJsonBytes(record);
}

/** True when `record` is a live lease at `nowMs` under `ttlMs` (TTL 0: nothing is live). */
export function isActiveLease(record: LeaseRecord, nowMs: number, ttlMs: number): boolean {
  // A future `updatedMs` (clock skew) counts as active: the age is negative, below any TTL > 0.
  return record.status === 'leased' && ttlMs > 0 && nowMs - record.updatedMs < ttlMs;
}

/** True when a leased record has expired at `nowMs` (the boundary age == TTL is expired). */
export function isExpiredLease(record: LeaseRecord, nowMs: number, ttlMs: number): boolean {
  return record.status === 'leased' && !isActiveLease(record, nowMs, ttlMs);
}
