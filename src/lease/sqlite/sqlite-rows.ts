/**
 * How the SQLite store lays a record out in rows (docs/lease-format.md "SQLite store").
 *
 * The members of a claimed target group share everything but their own identity: the same
 * holder, token and times, the same `payload` and the same list of up to 64 `targets` — at 64-bit
 * targets about 1.7 KB of each 1.8 KB record. The SQLite store keeps that part (`GROUP_FIELDS`)
 * once per claim: a row of `lease_groups` (its canonical JSON `content` and the SHA-256 of the
 * content), and each member's row in `lease_records`
 * holds only the member's own fields (id, target, counters, and any field a newer writer added)
 * as canonical JSON text, plus the group row's `id`. Rows are text, not blobs: reading a row then
 * costs one string, not a buffer per column. A heartbeat or a new claim names a new group row
 * (the content changed); the old one goes in the transaction its last member leaves it in.
 *
 * The forms of a `lease_records` row:
 * - `record` text, `group_id` an integer: a group member;
 * - `record` text, `group_id` NULL: a whole record (work records), canonical JSON;
 * - `record` a blob, `group_id` NULL: a whole record as the bytes of a record file (schema-1
 *   rows, kept as they were by the upgrade).
 * Anything else is corrupt. Reading joins a member and its group and validates the joined record
 * exactly like a record file (lease-record.ts).
 *
 * Group rows are immutable: their content never changes (another content is another row), and
 * their ids are never reused (`AUTOINCREMENT`), so a parsed group row is cached by id — until
 * another connection commits (it could only have damaged one), then it is read again. A group row
 * is checked against its hash whenever it is read from the database; a missing or damaged one
 * makes every member naming it corrupt. Sizes are UTF-8 bytes, of member and group row together,
 * against the bound of the record they join to.
 */
import { createHash } from 'node:crypto';
import { InvalidJobError } from '../../errors.js';
import { canonicalJson, isPlainAscii, type CanonicalJsonMemo } from '../canonical-json.js';
import { deepFreeze } from '../deep-freeze.js';
import { MAX_PAYLOAD_DEPTH, maxRecordBytes, parseRecord, parseRecordText, recordProblem, type LeaseRecord, type RecordKind, type RecordRead } from '../lease-record.js';
import type { StagedRecord } from '../backend-contract.js';

/** The fields of a target record kept in its group row, in canonical (sorted) order. */
export const GROUP_FIELDS = ['kind', 'leaseTtlMs', 'owner', 'payload', 'schema', 'status', 'targets', 'token', 'updatedMs', 'worker'] as const;
const GROUP_FIELD_SET: ReadonlySet<string> = new Set(GROUP_FIELDS);

/** The parsed content of a group row: the group fields its members share. */
export type GroupFields = Readonly<Record<string, unknown>>;

/** A group row to be written: its fields, their content, and the SHA-256 of it (hex too). */
export interface GroupBlob {
  readonly fields: GroupFields;
  readonly hash: Buffer;
  readonly hex: string;
  readonly content: string;
}

/** A group row as read: its content parsed, and its hash (hex). */
export interface GroupEntry {
  readonly fields: GroupFields;
  readonly hex: string;
  /** Bytes of the row's content. */
  readonly size: number;
}

/** A staged record of the SQLite store: the row's `record` text, and its group row if a member. */
export class SqliteStagedRecord implements StagedRecord {
  constructor(
    readonly record: LeaseRecord,
    readonly text: string,
    readonly group: GroupBlob | null,
  ) {}

  /** The row's text as bytes (only for callers that ask: the store itself writes the text). */
  get bytes(): Buffer {
    return Buffer.from(this.text, 'utf8');
  }
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/** Why a member row and its group row are too big together (their join is the record), if they are. */
function joinedOver(memberBytes: number, groupBytes: number, kind: RecordKind): string | undefined {
  const bound = maxRecordBytes(kind);
  if (memberBytes + groupBytes <= bound) return undefined;
  return `the record is ${memberBytes + groupBytes} bytes with its group row, over the ${bound}-byte bound`;
}

/**
 * A fresh encoder for one batch: a target record with a `targets` list becomes a member row plus
 * its group row (the group row's content and hash computed once per claim in the batch: per
 * distinct frozen `targets`/`payload` pair and holder fields); any other record a whole-record
 * row. Throws `InvalidJobError` for what a reader would call corrupt (over the size bound),
 * before any write.
 */
export function sqliteEncoder(memo: CanonicalJsonMemo): (record: LeaseRecord) => SqliteStagedRecord {
  const claims = new WeakMap<object, WeakMap<object, GroupBlob[]>>();
  return (record) => {
    const limits = { maxBytes: maxRecordBytes(record.kind), maxDepth: MAX_PAYLOAD_DEPTH + 4, memo };
    const { payload, targets } = record;
    if (record.kind !== 'target' || !Array.isArray(targets)) return new SqliteStagedRecord(record, canonicalJson(record, limits), null);
    const frozen = Object.isFrozen(targets) && Object.isFrozen(payload);
    const seen = frozen ? claims.get(targets)?.get(payload) : undefined;
    let group = seen?.find((known) => sameGroupFields(known.fields, record));
    if (group === undefined) {
      const fields: Record<string, unknown> = {};
      for (const key of GROUP_FIELDS) if (record[key] !== undefined) fields[key] = record[key];
      const content = canonicalJson(fields, limits);
      const hash = sha256(content);
      group = { fields, hash, hex: hash.toString('hex'), content };
      if (frozen) {
        let byPayload = claims.get(targets);
        if (byPayload === undefined) claims.set(targets, (byPayload = new WeakMap()));
        if (seen === undefined) byPayload.set(payload, [group]);
        else seen.push(group);
      }
    }
    const text = memberText(record) ?? canonicalJson(memberFields(record), limits);
    // A writer never stores what a reader would call corrupt (canonical text is ASCII: length = bytes).
    const over = joinedOver(text.length, group.content.length, record.kind);
    if (over !== undefined) throw new InvalidJobError(`cannot store target record ${record.id}: ${over}`, { id: record.id, bound: maxRecordBytes(record.kind) });
    return new SqliteStagedRecord(record, text, group);
  };
}

const DECIMAL = /^[0-9]{1,20}$/;

/** The member fields every target record of this version has: attempts, id, previousOwner, steals, target. */
const MEMBER_FIELD_COUNT = 5;

const DIGEST = /^[0-9a-f]{64}$/;

/**
 * True when `record` has only the fields of this version: the member and group fields, and the
 * answer fields a released or re-claimed member may carry (`answered`, `settled`, `open`, `completedMs`).
 */
function hasOnlyKnownFields(record: LeaseRecord): boolean {
  const optional =
    (record.leaseTtlMs === undefined ? 0 : 1) +
    (record.answered === undefined ? 0 : 1) +
    (record.settled === undefined ? 0 : 1) +
    (record.open === undefined ? 0 : 1) +
    (record.completedMs === undefined ? 0 : 1);
  return Object.keys(record).length === MEMBER_FIELD_COUNT + GROUP_FIELDS.length - 1 + optional;
}

/**
 * The canonical JSON of a member row written directly, for a record with only this version's
 * fields and values that need no escaping (every claim's and release's members); undefined
 * otherwise (then the general writer runs). The same bytes canonicalJson gives (tested against it).
 */
export function memberText(record: LeaseRecord): string | undefined {
  const { answered, attempts, completedMs, id, open, previousOwner, settled, steals, target } = record;
  if (!hasOnlyKnownFields(record)) return undefined;
  // `id` is one of the batch's lock ids (the executor refuses any other), which are record ids:
  // 64 lowercase hex characters, nothing to escape.
  if (!Number.isSafeInteger(attempts) || !Number.isSafeInteger(steals) || typeof target !== 'string' || !DECIMAL.test(target) || id.length !== 64) return undefined;
  if (typeof previousOwner !== 'string' || !isPlainAscii(previousOwner)) return undefined;
  if (answered !== undefined && typeof answered !== 'boolean') return undefined;
  if (completedMs !== undefined && !Number.isSafeInteger(completedMs)) return undefined;
  if (settled !== undefined && (!Array.isArray(settled) || !settled.every((d) => typeof d === 'string' && DIGEST.test(d)))) return undefined;
  if (open !== undefined && (!Array.isArray(open) || !open.every(isPlainOpenRow))) return undefined;
  // Keys in sorted order, as canonicalJson writes them.
  return (
    `{${answered === undefined ? '' : `"answered":${answered},`}"attempts":${attempts},${completedMs === undefined ? '' : `"completedMs":${completedMs},`}` +
    `"id":"${id}",${open === undefined ? '' : `"open":[${open.map((q) => `["${q[0]}",${q[1]},${q[2]}]`).join(',')}],`}"previousOwner":"${previousOwner}",` +
    `${settled === undefined ? '' : `"settled":[${settled.map((d) => `"${d}"`).join(',')}],`}"steals":${steals},"target":"${target}"}`
  );
}

/** An open-question row whose canonical text is the plain join of its parts: a digest and two safe integers. */
function isPlainOpenRow(row: unknown): boolean {
  return Array.isArray(row) && row.length === 3 && typeof row[0] === 'string' && DIGEST.test(row[0]) && Number.isSafeInteger(row[1]) && Number.isSafeInteger(row[2]);
}

/** The fields of a member row: every field of `record` that is not a group field. */
function memberFields(record: LeaseRecord): Record<string, unknown> {
  // fromEntries defines own properties: a field named __proto__ stays a field.
  return Object.fromEntries(Object.entries(record).filter(([key]) => !GROUP_FIELD_SET.has(key)));
}

/** True when `record` has exactly the group fields `fields` holds (the same values, ===). */
function sameGroupFields(fields: GroupFields, record: LeaseRecord): boolean {
  for (const key of GROUP_FIELDS) if (fields[key] !== record[key]) return false;
  return true;
}

/** Parsed group rows by id, least recently used first out; bounded by entries and bytes. */
export class GroupCache {
  private readonly entries = new Map<number, GroupEntry>();
  private bytes = 0;

  constructor(
    private readonly capacity = 4096,
    private readonly capacityBytes = 16 * 1024 * 1024,
  ) {}

  get(id: number): GroupEntry | undefined {
    const hit = this.entries.get(id);
    if (hit === undefined) return undefined;
    this.entries.delete(id);
    this.entries.set(id, hit);
    return hit;
  }


  /** Drops every entry: after another connection committed, group rows are read (and checked) again. */
  clear(): void {
    this.entries.clear();
    this.bytes = 0;
  }

  /** Keeps `fields` (deep-frozen) as the content of group row `id` (hash `hex`, `size` bytes). */
  remember(id: number, hex: string, fields: GroupFields, size: number): void {
    if (this.entries.has(id) || size > this.capacityBytes) return;
    while (this.entries.size >= this.capacity || this.bytes + size > this.capacityBytes) {
      const oldest = this.entries.keys().next().value as number;
      this.bytes -= this.entries.get(oldest)!.size;
      this.entries.delete(oldest);
    }
    this.entries.set(id, { fields: deepFreeze(fields), hex, size });
    this.bytes += size;
  }
}

/** The group row `id` as read from the database (`row` undefined: no such row), checked. */
export function parseGroupRow(id: number, row: { hash: unknown; content: unknown } | undefined, kind: RecordKind): GroupEntry | string {
  if (row === undefined) return `its group row ${id} is missing`;
  const { hash, content } = row;
  if (!Buffer.isBuffer(hash) || hash.length !== 32) return `its group row ${id} has no 32-byte hash`;
  if (typeof content !== 'string') return `its group row ${id} holds a ${content === null ? 'null' : typeof content}, not text`;
  const size = Buffer.byteLength(content, 'utf8');
  if (size > maxRecordBytes(kind)) return `its group row ${id} is ${size} bytes, over the ${maxRecordBytes(kind)}-byte bound`;
  if (!sha256(content).equals(hash)) return `its group row ${id} does not match its hash`;
  let value: unknown;
  try {
    value = JSON.parse(content);
  } catch (error) {
    return `its group row ${id} is not valid JSON (${(error as Error).message})`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `its group row ${id} is not a JSON object`;
  const stray = Object.keys(value).find((key) => !GROUP_FIELD_SET.has(key));
  if (stray !== undefined) return `its group row ${id} holds ${JSON.stringify(stray)}, which is not a group field`;
  return { fields: value as GroupFields, hex: hash.toString('hex'), size };
}

/**
 * The record a row holds, validated (the forms are in the file comment). `group` gives a group
 * row's content: the cache, else the database.
 */
export function decodeRow(id: string, record: unknown, groupId: unknown, kind: RecordKind, group: (groupId: number) => GroupEntry | string): RecordRead {
  if (groupId !== null && (typeof groupId !== 'number' || !Number.isSafeInteger(groupId))) return { state: 'corrupt', reason: 'group_id is not an integer' };
  if (Buffer.isBuffer(record)) {
    if (groupId !== null) return { state: 'corrupt', reason: 'a group member row holds a blob, not text' };
    if (record.length > maxRecordBytes(kind)) return { state: 'corrupt', reason: `record is ${record.length} bytes, over the ${maxRecordBytes(kind)}-byte bound` };
    return parseRecord(record, id, kind);
  }
  if (typeof record !== 'string') return { state: 'corrupt', reason: `record is a ${record === null ? 'null' : typeof record}, not text or a blob` };
  const bound = maxRecordBytes(kind);
  const bytes = Buffer.byteLength(record, 'utf8');
  if (bytes > bound) return { state: 'corrupt', reason: `record is ${bytes} bytes, over the ${bound}-byte bound` };
  if (groupId === null) return parseRecordText(record, id, kind);
  // The group row first: the row is checked whenever it is read again.
  const entry = group(groupId);
  if (typeof entry === 'string') return { state: 'corrupt', reason: entry };
  const over = joinedOver(bytes, entry.size, kind);
  if (over !== undefined) return { state: 'corrupt', reason: over };
  return parseMember(record, id, kind, entry.fields);
}

function parseMember(text: string, id: string, kind: RecordKind, fields: GroupFields): RecordRead {
  let member: unknown;
  try {
    member = JSON.parse(text);
  } catch (error) {
    return { state: 'corrupt', reason: `not valid JSON (${(error as Error).message})` };
  }
  if (typeof member !== 'object' || member === null || Array.isArray(member)) return { state: 'corrupt', reason: 'not a JSON object' };
  const own = Object.keys(member).find((key) => GROUP_FIELD_SET.has(key));
  if (own !== undefined) return { state: 'corrupt', reason: `a group member row holds the group field ${own} itself` };
  const joined = { ...member, ...fields };
  const problem = recordProblem(joined, id, kind);
  return problem === undefined ? { state: 'valid', record: joined as LeaseRecord } : { state: 'corrupt', reason: problem };
}

/**
 * The group-row work of one commit: the new group rows its members name (by hash), and the group
 * rows some member left (by id), which go if no row names them any more. A member that stays in
 * its group row changes neither.
 */
export class GroupMoves {
  readonly added = new Map<string, GroupBlob>();
  readonly left = new Set<number>();

  /**
   * A row that named group row `before` (or none; `beforeHex` its hash if known) now names
   * `after`. True when that is the same group row (the row stays in it).
   */
  move(before: number | null, beforeHex: string | undefined, after: GroupBlob | null): boolean {
    if (before !== null && after !== null && beforeHex === after.hex) return true;
    if (before !== null) this.left.add(before);
    if (after !== null && !this.added.has(after.hex)) this.added.set(after.hex, after);
    return false;
  }
}
