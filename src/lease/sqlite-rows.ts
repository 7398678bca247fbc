/**
 * How the SQLite store lays a record out in rows (docs/lease-format.md "SQLite store").
 *
 * Every member of a target group carries the same `payload` and the same list of up to 64
 * `targets` — at 64-bit targets about 1.4 KB of each 1.8 KB record. The SQLite store keeps that
 * part once per group: a row of `lease_groups`, content-addressed by the SHA-256 of its bytes and
 * reference-counted, and each member's row in `lease_records` holds the member's own fields
 * (`record`, canonical JSON without `payload` and `targets`) and the group row's hash (`group_hash`).
 * A row whose `group_hash` is NULL holds a whole record, exactly the bytes of a record file (work
 * records, and rows written by schema 1).
 *
 * Reading: the member bytes and the group bytes are each parsed, joined, and the joined record is
 * validated exactly like a record file (lease-record.ts). A group row is checked against its hash
 * when it is read from the database; a missing or damaged one makes every member that names it
 * corrupt. Group contents are immutable (a changed payload or list is another hash), so a parsed
 * group is cached by hash for as long as the process lives, bounded.
 */
import { createHash } from 'node:crypto';
import { canonicalJsonBytes, type CanonicalJsonMemo } from './canonical-json.js';
import { deepFreeze } from './deep-freeze.js';
import { MAX_PAYLOAD_DEPTH, maxRecordBytes, parseRecord, recordProblem, serializeRecord, type JsonObject, type LeaseRecord, type RecordKind, type RecordRead } from './lease-record.js';
import type { RecordReadCache } from './record-read-cache.js';
import type { StagedRecord } from './record-backend.js';

/** A group row: its content, the SHA-256 of that content (the row's key), and the key as hex. */
export interface GroupBlob {
  readonly hash: Buffer;
  readonly hex: string;
  readonly bytes: Buffer;
}

/** The parsed content of a group row. */
export interface GroupFields {
  readonly payload: JsonObject;
  readonly targets: readonly string[];
}

/** A staged record of the SQLite store: `bytes` are the row's `record`, `group` its group row. */
export interface SqliteStagedRecord extends StagedRecord {
  readonly group: GroupBlob | null;
}

/** The group row of a staged record; null for a whole record (any other store's encoding too). */
export function stagedGroup(staged: StagedRecord): GroupBlob | null {
  return (staged as Partial<SqliteStagedRecord>).group ?? null;
}

const hashHex = (hash: Buffer): string => hash.toString('hex');

function groupBlobOf(bytes: Buffer): GroupBlob {
  const hash = createHash('sha256').update(bytes).digest();
  return { hash, hex: hashHex(hash), bytes };
}

/**
 * A fresh encoder for one batch: a target record with a `targets` list is split into its member
 * bytes and its group row (the group's bytes and hash computed once per distinct frozen
 * `targets`/`payload` pair of the batch); any other record is stored whole. Throws
 * `InvalidJobError` for what a reader would call corrupt (over the size bound), before any write.
 */
export function sqliteEncoder(memo: CanonicalJsonMemo): (record: LeaseRecord) => SqliteStagedRecord {
  const groups = new WeakMap<object, WeakMap<object, GroupBlob>>();
  return (record) => {
    const { payload, targets, ...member } = record;
    if (record.kind !== 'target' || !Array.isArray(targets)) return { record, bytes: serializeRecord(record, memo), group: null };
    const limits = { maxBytes: maxRecordBytes(record.kind), maxDepth: MAX_PAYLOAD_DEPTH + 4, memo };
    const frozen = Object.isFrozen(targets) && Object.isFrozen(payload);
    let group = frozen ? groups.get(targets)?.get(payload) : undefined;
    if (group === undefined) {
      group = groupBlobOf(canonicalJsonBytes({ payload, targets }, limits));
      if (frozen) {
        let byPayload = groups.get(targets);
        if (byPayload === undefined) groups.set(targets, (byPayload = new WeakMap()));
        byPayload.set(payload, group);
      }
    }
    return { record, bytes: canonicalJsonBytes(member, limits), group };
  };
}

/** Parsed group rows by hash, least recently used first out; bounded by entries and bytes. */
export class GroupCache {
  private readonly entries = new Map<string, { readonly fields: GroupFields; readonly size: number }>();
  private bytes = 0;

  constructor(
    private readonly capacity = 4096,
    private readonly capacityBytes = 16 * 1024 * 1024,
  ) {}

  get(hex: string): GroupFields | undefined {
    const hit = this.entries.get(hex);
    if (hit === undefined) return undefined;
    this.entries.delete(hex);
    this.entries.set(hex, hit);
    return hit.fields;
  }

  /** Keeps `fields` (deep-frozen) as the content of the group row `hex` of `size` bytes. */
  remember(hex: string, fields: GroupFields, size: number): void {
    if (this.entries.has(hex) || size > this.capacityBytes) return;
    while (this.entries.size >= this.capacity || this.bytes + size > this.capacityBytes) {
      const oldest = this.entries.keys().next().value as string;
      this.bytes -= this.entries.get(oldest)!.size;
      this.entries.delete(oldest);
    }
    this.entries.set(hex, { fields: deepFreeze(fields), size });
    this.bytes += size;
  }
}

/** Why the bytes of group row `hash` are not a group row, or the parsed fields. */
export function parseGroupRow(hash: Buffer, bytes: unknown, kind: RecordKind): GroupFields | string {
  if (!Buffer.isBuffer(bytes)) return `its group row ${hashHex(hash)} is a ${bytes === null ? 'null' : typeof bytes}, not a blob`;
  if (bytes.length > maxRecordBytes(kind)) return `its group row ${hashHex(hash)} is ${bytes.length} bytes, over the ${maxRecordBytes(kind)}-byte bound`;
  if (!createHash('sha256').update(bytes).digest().equals(hash)) return `its group row ${hashHex(hash)} does not match its hash`;
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    return `its group row ${hashHex(hash)} is not valid JSON (${(error as Error).message})`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `its group row ${hashHex(hash)} is not a JSON object`;
  const keys = Object.keys(value).sort().join(',');
  if (keys !== 'payload,targets') return `its group row ${hashHex(hash)} has fields ${keys || '(none)'}, not payload and targets`;
  return value as GroupFields;
}

/** How a row names its group: a 32-byte hash, or NULL for a row holding a whole record. */
export function groupHashOf(value: unknown): Buffer | null | string {
  if (value === null) return null;
  if (!Buffer.isBuffer(value) || value.length !== 32) return 'group_hash is not a 32-byte blob';
  return value;
}

/**
 * The record a row holds, validated. `record` is the row's `record` column, `groupHash` its
 * `group_hash` column; `group` gives the group row's content (the cache, else the database:
 * `undefined` when the row is missing). `readCache` keeps parsed records per id, keyed by the
 * member bytes and the group hash.
 */
export function decodeRow(
  id: string,
  record: unknown,
  groupHash: unknown,
  kind: RecordKind,
  group: (hash: Buffer) => GroupFields | string,
  readCache?: RecordReadCache,
): RecordRead {
  if (!Buffer.isBuffer(record)) return { state: 'corrupt', reason: `record is a ${record === null ? 'null' : typeof record}, not a blob` };
  if (record.length > maxRecordBytes(kind)) return { state: 'corrupt', reason: `record is ${record.length} bytes, over the ${maxRecordBytes(kind)}-byte bound` };
  const hash = groupHashOf(groupHash);
  if (typeof hash === 'string') return { state: 'corrupt', reason: hash, bytes: record };
  if (hash === null) return readCache !== undefined ? readCache.parse(record, id) : parseRecord(record, id, kind);
  const key = cacheKey(record, hash);
  const hit = readCache?.lookup(id, key);
  if (hit !== undefined) return { state: 'valid', record: hit, bytes: record };
  const fields = group(hash);
  if (typeof fields === 'string') return { state: 'corrupt', reason: fields, bytes: record };
  let member: unknown;
  try {
    member = JSON.parse(record.toString('utf8'));
  } catch (error) {
    return { state: 'corrupt', reason: `not valid JSON (${(error as Error).message})`, bytes: record };
  }
  if (typeof member !== 'object' || member === null || Array.isArray(member)) return { state: 'corrupt', reason: 'not a JSON object', bytes: record };
  if ('payload' in member || 'targets' in member) return { state: 'corrupt', reason: 'a row with a group row holds payload or targets itself', bytes: record };
  const joined = { ...member, payload: fields.payload, targets: fields.targets };
  const problem = recordProblem(joined, id, kind);
  if (problem !== undefined) return { state: 'corrupt', reason: problem, bytes: record };
  readCache?.remember(id, key, joined as LeaseRecord);
  return { state: 'valid', record: joined as LeaseRecord, bytes: record };
}

/** The read-cache key of a row with a group row: its member bytes, then the group hash. */
export function cacheKey(record: Buffer, hash: Buffer): Buffer {
  return Buffer.concat([record, hash]);
}

/** Net reference changes of the group rows a batch touches, by hash. */
export class GroupRefs {
  private readonly deltas = new Map<string, { hash: Buffer; bytes: Buffer | undefined; delta: number }>();

  /** A row that named `before` (or none) now names `after` (or none). */
  move(before: Buffer | null, after: GroupBlob | null): void {
    if (before !== null && after !== null && before.equals(after.hash)) return;
    if (before !== null) this.add(before, undefined, -1);
    if (after !== null) this.add(after.hash, after.bytes, 1);
  }

  /** Every changed group row, ascending by hash. */
  changes(): { hash: Buffer; bytes: Buffer | undefined; delta: number }[] {
    return [...this.deltas.entries()]
      .filter(([, change]) => change.delta !== 0)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([, change]) => change);
  }

  private add(hash: Buffer, bytes: Buffer | undefined, delta: number): void {
    const hex = hashHex(hash);
    const known = this.deltas.get(hex);
    if (known === undefined) this.deltas.set(hex, { hash, bytes, delta });
    else {
      known.delta += delta;
      known.bytes ??= bytes;
    }
  }
}

/** A group row whose reference count disagrees with the rows naming it (for scans). */
export function refsProblem(hex: string, refs: unknown, named: number): string | undefined {
  if (refs === named) return undefined;
  return `group row ${hex} counts ${String(refs)} references but ${named} records name it`;
}
