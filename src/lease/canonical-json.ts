/**
 * Canonical JSON: the only serialiser lease records and work ids use (the work identity of a job,
 * src/coordinator/work-identity.ts, digests it too).
 *
 * Same value → same bytes, always: object keys are sorted (by UTF-16 code unit, recursively),
 * there is no whitespace, and every non-ASCII character is written as `\uXXXX` (unless
 * `nonAscii: 'utf8'`), so the bytes do not depend on insertion order or on the reader's encoding
 * handling. Determinism is what lets a
 * failed group mutation restore byte-identical records and what makes a work id a stable digest.
 *
 * Strict by design: only plain objects, arrays, strings, finite numbers, booleans, null and
 * `bigint` are accepted. A `bigint` is written as its decimal string (u64 targets never pass
 * through `number`). NaN, ±Infinity, `undefined`, functions, symbols, class instances and cycles
 * throw `InvalidJobError` naming the path of the offending value — before anything is written.
 *
 * Bounded: nesting deeper than `maxDepth` (default 128) and output longer than `maxBytes` are
 * refused with `InvalidJobError` while walking, so a hostile value (200,000 nested arrays, a
 * gigabyte string) costs at most the bound — never a `RangeError` from the stack, never the
 * memory of the whole text.
 *
 * Memo: a group claim stores the same (frozen) `targets` list and payload in each of its up to 64
 * records. With a `memo`, the text of a frozen object or array is written once and reused, by
 * identity, wherever it occurs again — the bytes are those a fresh walk would write, because a
 * value given with a memo must be frozen all the way down (`deepFreeze`; a frozen object with a
 * mutable child would be reused stale) — and the depth and length bounds still apply to every use.
 */
import { InvalidJobError } from '../errors.js';

function fail(path: string, what: string): never {
  throw new InvalidJobError(`cannot serialise ${what} at ${path} as canonical JSON`, { path, reason: what });
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Printable ASCII except `"` and `\`: such a string is its own JSON body, in both forms. */
const PLAIN_ASCII = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** True when `text` is written as itself between quotes (printable ASCII except `"` and `\`). */
export function isPlainAscii(text: string): boolean {
  return PLAIN_ASCII.test(text);
}

function escapeString(text: string, ascii: boolean): string {
  // Fast path for the common case (ids, tokens, decimal targets): a group record repeats its 64
  // targets in each of its 64 members, so this runs thousands of times per group claim.
  if (PLAIN_ASCII.test(text)) return `"${text}"`;
  // JSON.stringify already escapes quotes, backslashes, control characters and lone surrogates;
  // the replace makes the output pure ASCII.
  const json = JSON.stringify(text);
  if (!ascii) return json;
  return json.replace(/[\u007f-\uffff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Bounds of one serialisation. */
export interface CanonicalJsonLimits {
  /** Deepest nesting of objects and arrays (the top-level value is depth 1). Default 128. */
  readonly maxDepth?: number;
  /**
   * Longest output, bytes (ASCII, without the trailing newline; UTF-16 code units with
   * `nonAscii: 'utf8'`). Default: no bound.
   */
  readonly maxBytes?: number;
  /**
   * `escape` (default): every non-ASCII character as `\uXXXX` — the form of record files.
   * `utf8`: non-ASCII characters as themselves, as `JSON.stringify` writes them — the form work
   * ids have always digested (as UTF-8), kept so that no id of a record on disk changes.
   */
  readonly nonAscii?: 'escape' | 'utf8';
  /** Reuse the text of frozen values across serialisations (file comment). */
  readonly memo?: CanonicalJsonMemo;
  /**
   * `decimal` (default): a `bigint` is written as its decimal string. `refuse`: a `bigint` throws
   * `InvalidJobError` — for values that must read back as they were given (lease payloads), where
   * a bigint would silently come back as a string.
   */
  readonly bigints?: 'decimal' | 'refuse';
}

const DEFAULT_MAX_DEPTH = 128;

interface MemoEntry {
  readonly text: string;
  /** Nesting levels of the value itself (1 for an array of scalars). */
  readonly height: number;
  readonly ascii: boolean;
}

/** Texts of frozen values, by identity; pass one to several serialisations of related values. */
export type CanonicalJsonMemo = WeakMap<object, MemoEntry>;

export function canonicalJsonMemo(): CanonicalJsonMemo {
  return new WeakMap();
}

interface WriteState {
  readonly stack: Set<object>;
  /** Keys and indexes from the top-level value down to the one being written (for errors). */
  readonly trail: (string | number)[];
  out: string;
  readonly maxDepth: number;
  readonly maxBytes: number;
  readonly ascii: boolean;
  readonly memo: CanonicalJsonMemo | undefined;
  readonly refuseBigints: boolean;
}

/** `$`, then `.key` or `[index]` per level: where the value being written sits. */
function pathOf(state: WriteState): string {
  let path = '$';
  for (const step of state.trail) path += typeof step === 'number' ? `[${step}]` : `.${step}`;
  return path;
}

function emit(state: WriteState, text: string): void {
  // Checked before joining: a text over the bound is refused, never built (no RangeError).
  if (state.out.length + text.length > state.maxBytes) fail(pathOf(state), `a value longer than ${state.maxBytes} bytes`);
  state.out += text;
}

/** True when `keys` are strictly ascending by UTF-16 code unit (the canonical order). */
function isSorted(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i += 1) if (keys[i - 1]! >= keys[i]!) return false;
  return true;
}

/**
 * For the JSON.stringify path: a fresh plain copy of `value` (whose own keys, in their own order,
 * are `keys`, already sorted) when every value is a string of printable ASCII without `"` or
 * `\\`, a finite number, a boolean or null, no key needs escaping, and the text fits in `room`
 * — so `JSON.stringify` of the copy writes exactly the canonical text (the same key order, the
 * same escapes, numbers by the same rule). Each property is read once, here: a getter cannot
 * answer differently to `JSON.stringify`, and no `toJSON` of the value itself is ever called.
 * Undefined otherwise (the general walk then writes the value, or refuses it where it must).
 */
function flatPlainCopy(value: Record<string, unknown>, keys: readonly string[], room: number): Record<string, unknown> | undefined {
  if (keys.length > FLAT_MAX_KEYS) return undefined;
  const copy: Record<string, unknown> = {};
  let length = 2;
  for (let i = 0; i < keys.length; i += 1) {
    const key = keys[i]!;
    const item = value[key];
    // `copy.__proto__ = …` would set the copy's prototype, not a property: the walk writes it.
    if (key === '__proto__' || !PLAIN_ASCII.test(key) || !isPlainScalar(item)) return undefined;
    length += key.length + 4 + scalarLength(item);
    if (length > room) return undefined;
    copy[key] = item;
  }
  // A toJSON inherited by every object (an altered Object.prototype) would change what
  // JSON.stringify writes; the walk does not call it.
  return 'toJSON' in copy ? undefined : copy;
}

/** The items of `value` in a fresh array, when each is a plain scalar and the text fits `room`. */
function flatPlainItems(value: readonly unknown[], room: number): unknown[] | undefined {
  const items = new Array<unknown>(value.length);
  let length = 2;
  for (let i = 0; i < value.length; i += 1) {
    const item = value[i];
    if (!isPlainScalar(item)) return undefined;
    length += 1 + scalarLength(item);
    if (length > room) return undefined;
    items[i] = item;
  }
  return 'toJSON' in items ? undefined : items;
}

/** No less than the length of a plain scalar's JSON text (exact for strings; 24 covers any number). */
function scalarLength(item: unknown): number {
  return typeof item === 'string' ? item.length + 2 : 24;
}

function isPlainScalar(item: unknown): boolean {
  switch (typeof item) {
    case 'string':
      return PLAIN_ASCII.test(item);
    case 'number':
      return Number.isFinite(item);
    case 'boolean':
      return true;
    case 'object':
      return item === null;
    default:
      return false;
  }
}

/** Flat objects up to this many keys take the JSON.stringify path (records have about 15). */
const FLAT_MAX_KEYS = 64;

/** Escaped object keys with their colon: records and payloads repeat a few keys many times. */
const KEY_TEXT = new Map<string, string>();
const KEY_TEXT_ENTRIES = 4096;
const KEY_TEXT_MAX_LENGTH = 64;

function keyText(key: string, ascii: boolean): string {
  if (!ascii || key.length > KEY_TEXT_MAX_LENGTH) return `${escapeString(key, ascii)}:`;
  let text = KEY_TEXT.get(key);
  if (text === undefined) {
    text = `${escapeString(key, true)}:`;
    if (KEY_TEXT.size < KEY_TEXT_ENTRIES) KEY_TEXT.set(key, text);
  }
  return text;
}

/** Writes `value`; returns its nesting height (0 for a scalar). */
function write(value: unknown, state: WriteState, depth: number): number {
  switch (typeof value) {
    case 'string':
      // The escaped form is at least as long as the string plus its quotes: refuse before escaping.
      if (state.out.length + value.length + 2 > state.maxBytes) fail(pathOf(state), `a value longer than ${state.maxBytes} bytes`);
      emit(state, escapeString(value, state.ascii));
      return 0;
    case 'number':
      if (!Number.isFinite(value)) fail(pathOf(state), `non-finite number ${String(value)}`);
      // String() writes every finite number as JSON.stringify does (-0 as "0" too).
      emit(state, String(value));
      return 0;
    case 'bigint':
      if (state.refuseBigints) fail(pathOf(state), `a bigint (${value.toString(10)}n), which would read back as a string; give it as a decimal string or a number`);
      emit(state, `"${value.toString(10)}"`);
      return 0;
    case 'boolean':
      emit(state, value ? 'true' : 'false');
      return 0;
    case 'object':
      if (value === null) {
        emit(state, 'null');
        return 0;
      }
      return writeComposite(value, state, depth);
    default:
      return fail(pathOf(state), `a value of type ${typeof value}`);
  }
}

/**
 * Writes an array or plain object: from the memo when a frozen value was written before in the
 * same form, else element by element (cycle and depth checked first); returns its height.
 */
function writeComposite(value: object, state: WriteState, depth: number): number {
  const memo = state.memo !== undefined && Object.isFrozen(value) ? state.memo : undefined;
  const known = memo?.get(value);
  if (known !== undefined && known.ascii === state.ascii) {
    if (depth + known.height - 1 > state.maxDepth) fail(pathOf(state), `nesting deeper than ${state.maxDepth} levels`);
    emit(state, known.text);
    return known.height;
  }
  if (state.stack.has(value)) fail(pathOf(state), 'a cycle');
  if (depth > state.maxDepth) fail(pathOf(state), `nesting deeper than ${state.maxDepth} levels`);
  state.stack.add(value);
  const start = state.out.length;
  const flat = Array.isArray(value) ? writeArray(value, state, depth) : writeObject(value, state, depth);
  state.stack.delete(value);
  if (flat.text !== undefined) {
    // Written whole by JSON.stringify (a flat array or object of plain scalars): height 1.
    if (memo !== undefined && flat.memoize) memo.set(value, { text: flat.text, height: 1, ascii: true });
    return 1;
  }
  if (memo !== undefined) memo.set(value, { text: state.out.slice(start), height: flat.inner + 1, ascii: state.ascii });
  return flat.inner + 1;
}

/** What a composite's body wrote: its whole text when JSON.stringify wrote it, else its inner height. */
type Body = { readonly text: string; readonly memoize: boolean; readonly inner?: undefined } | { readonly text?: undefined; readonly inner: number };

function writeArray(value: readonly unknown[], state: WriteState, depth: number): Body {
  // An array of plain scalars (a group's targets) is what JSON.stringify writes.
  const items = state.ascii ? flatPlainItems(value, state.maxBytes - state.out.length) : undefined;
  if (items !== undefined) {
    const text = JSON.stringify(items);
    emit(state, text);
    return { text, memoize: true };
  }
  const { trail } = state;
  let inner = 0;
  emit(state, '[');
  for (let i = 0; i < value.length; i += 1) {
    if (i > 0) emit(state, ',');
    trail.push(i);
    const height = write(value[i], state, depth + 1);
    trail.pop();
    if (height > inner) inner = height;
  }
  emit(state, ']');
  return { inner };
}

function writeObject(value: object, state: WriteState, depth: number): Body {
  if (!isPlainObject(value)) fail(pathOf(state), `an instance of ${value.constructor?.name ?? 'a class'}`);
  const keys = Object.keys(value);
  const inOrder = isSorted(keys);
  if (!inOrder) keys.sort();
  // A flat object whose own keys are already in order (a record read back, a member row) is
  // what JSON.stringify writes, byte for byte, when every value is a plain scalar.
  const copy = inOrder && state.ascii ? flatPlainCopy(value as Record<string, unknown>, keys, state.maxBytes - state.out.length) : undefined;
  if (copy !== undefined) {
    const text = JSON.stringify(copy);
    emit(state, text);
    return { text, memoize: false };
  }
  const { trail } = state;
  let inner = 0;
  emit(state, '{');
  for (let i = 0; i < keys.length; i += 1) {
    const key = keys[i]!;
    if (i > 0) emit(state, ',');
    trail.push(key);
    emit(state, keyText(key, state.ascii));
    const height = write((value as Record<string, unknown>)[key], state, depth + 1);
    trail.pop();
    if (height > inner) inner = height;
  }
  emit(state, '}');
  return { inner };
}

/** The canonical JSON text of `value` (no trailing newline). Throws `InvalidJobError`. */
export function canonicalJson(value: unknown, limits: CanonicalJsonLimits = {}): string {
  const state: WriteState = {
    stack: new Set(),
    trail: [],
    out: '',
    maxDepth: limits.maxDepth ?? DEFAULT_MAX_DEPTH,
    maxBytes: limits.maxBytes ?? Number.POSITIVE_INFINITY,
    ascii: limits.nonAscii !== 'utf8',
    memo: limits.memo,
    refuseBigints: limits.bigints === 'refuse',
  };
  write(value, state, 1);
  return state.out;
}

/** Canonical JSON plus one `\n`, as bytes: the exact content of a record file. */
export function canonicalJsonBytes(value: unknown, limits: CanonicalJsonLimits = {}): Buffer {
  // UTF-8 equals ASCII for the default output, and keeps `nonAscii: 'utf8'` text intact.
  return Buffer.from(`${canonicalJson(value, limits)}\n`, 'utf8');
}
