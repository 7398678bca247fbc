/**
 * Identities of lease records (docs/lease-format.md "Paths"): work ids, target record ids, shards, target groups.
 *
 * A target record id depends only on the target, so two seeds that share target 88 meet on the
 * same record and the same lock, whichever coordinator asks. Shard placement uses the first 32 bits
 * of the id, so records spread evenly and every coordinator computes the same path.
 */
import * as crypto from 'node:crypto';
import { describeValue } from '../config/values.js';
import { InvalidJobError } from '../errors.js';
import { canonicalJson, type CanonicalJsonLimits } from './canonical-json.js';

/** At most this many targets in one group (and one group operation). */
export const MAX_GROUP_TARGETS = 64;
/** Largest target id (unsigned 64-bit). */
export const MAX_TARGET = (1n << 64n) - 1n;

const RECORD_ID_RE = /^[0-9a-f]{64}$/;

/** True for a 64-character lowercase hex string. */
export function isRecordId(value: unknown): value is string {
  return typeof value === 'string' && RECORD_ID_RE.test(value);
}

/** Throws `InvalidJobError` unless `value` is a record id. */
export function assertRecordId(value: unknown, what = 'record id'): asserts value is string {
  if (!isRecordId(value)) {
    throw new InvalidJobError(`invalid ${what}: expected 64 lowercase hex characters, got ${describeValue(value)}`, {
      value: describeValue(value),
    });
  }
}

/** Node's one-shot digest (20.12 and later): about 2.5 times faster than a `Hash` object for an id's few bytes. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash;

function sha256Hex(text: string): string {
  return oneShot !== undefined ? oneShot('sha256', text, 'hex') : crypto.createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * A work id: the lowercase hex SHA-256 of the UTF-8 of `canonicalJson(identity, limits)`.
 * `identity` is what makes two pieces of work the same work — for a coordinator job, the value
 * `jobWorkId` builds (src/coordinator/work-identity.ts), which leaves the input path out; the
 * payload stored in the record (which carries the path) is a separate value and is not hashed.
 * Throws `InvalidJobError` (`ERR_INVALID_JOB`) for a value canonical JSON refuses.
 */
export function workIdOf(identity: unknown, limits: CanonicalJsonLimits = {}): string {
  return sha256Hex(canonicalJson(identity, limits));
}

/** Throws `InvalidJobError` unless `target` is a bigint in 1..2^64−1. */
function assertTarget(target: unknown): asserts target is bigint {
  if (typeof target !== 'bigint' || target < 1n || target > MAX_TARGET) {
    throw new InvalidJobError(`invalid target: expected a bigint in 1..2^64-1, got ${describeValue(target)}`, {
      value: describeValue(target),
    });
  }
}

/**
 * Record ids of recently used targets: a group claim, its heartbeats and its release hash the same
 * 64 targets. Two generations, so the bound costs no per-entry eviction: when the current one is
 * full it becomes the previous one, and a hit there moves the id forward.
 */
const TARGET_ID_GENERATION = 8192;

/** Record ids of recently used targets, in two generations (see `TARGET_ID_GENERATION`). */
class TargetIdCache {
  #current = new Map<bigint, string>();
  #previous = new Map<bigint, string>();

  constructor(private readonly namespace: string) {}

  idOf(target: bigint): string {
    assertTarget(target);
    let id = this.#current.get(target);
    if (id !== undefined) return id;
    id = this.#previous.get(target) ?? sha256Hex(`${this.namespace}:${target.toString(10)}`);
    if (this.#current.size >= TARGET_ID_GENERATION) {
      this.#previous = this.#current;
      this.#current = new Map();
    }
    this.#current.set(target, id);
    return id;
  }
}

const targetIds = new TargetIdCache('target');
const answerIds = new TargetIdCache('answers');

/** Target record id (the record that fences the branch's lease): SHA-256 of `target:<decimal>`. */
export function targetRecordId(target: bigint): string {
  return targetIds.idOf(target);
}

/**
 * Answer record id (the record that keeps what the campaign learnt about the branch,
 * docs/lease-format.md "Answers"): SHA-256 of `answers:<decimal>`.
 */
export function answerRecordId(target: bigint): string {
  return answerIds.idOf(target);
}

const ANSWER_GENERATION_ID = sha256Hex('answers-generation');

/**
 * The answer generation record's id (the one record that counts every write of an answer record,
 * docs/lease-format.md "Answer generation"): SHA-256 of `answers-generation`.
 */
export function answerGenerationRecordId(): string {
  return ANSWER_GENERATION_ID;
}

/** Shard of a record id: its first 32 bits, modulo the shard count. */
export function shardOf(id: string, shardCount: number): number {
  assertRecordId(id);
  return Number.parseInt(id.slice(0, 8), 16) % shardCount;
}

/** Shard directory name: decimal, zero-padded to at least 3 digits. */
export function shardDirName(shard: number): string {
  return String(shard).padStart(3, '0');
}

/** A group member: the target and its record id. */
export interface GroupMember {
  readonly target: bigint;
  readonly id: string;
}

/**
 * The first items of `values`, refusing (`InvalidJobError`) a value that is not iterable and one
 * that yields more than `max` items. Checked while iterating: an endless or huge iterable costs
 * `max + 1` steps, never the whole sequence.
 */
export function takeAtMost<T>(values: Iterable<T>, max: number, what: string): T[] {
  if (values === null || values === undefined || typeof (values as { [Symbol.iterator]?: unknown })[Symbol.iterator] !== 'function' || typeof values === 'string') {
    throw new InvalidJobError(`${what} is not an iterable of values (got ${values === null ? 'null' : typeof values})`, { reason: 'not iterable' });
  }
  const out: T[] = [];
  for (const value of values) {
    if (out.length === max) throw new InvalidJobError(`${what} has more than ${max} items`, { size: max + 1 });
    out.push(value);
  }
  return out;
}

/**
 * Validates a target group and returns its members sorted by record id — the order of locks,
 * writes, restores and of the `targets` field stored in every member. Duplicates, out-of-range
 * values, non-bigints, an empty group and more than 64 targets are rejected with
 * `InvalidJobError` (job normalisation happens upstream; a lease call gets an exact group).
 */
export function groupMembers(targets: Iterable<bigint>): GroupMember[] {
  const seen = new Set<bigint>();
  const members: GroupMember[] = [];
  for (const target of takeAtMost(targets, MAX_GROUP_TARGETS, 'target group')) {
    assertTarget(target);
    if (seen.has(target)) throw new InvalidJobError(`duplicate target ${target} in group`, { target: target.toString() });
    seen.add(target);
    members.push({ target, id: targetRecordId(target) });
  }
  if (members.length === 0) throw new InvalidJobError('empty target group', {});
  return members.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
