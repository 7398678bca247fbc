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
  readonly out: string[];
  readonly maxDepth: number;
  readonly maxBytes: number;
  readonly ascii: boolean;
  readonly memo: CanonicalJsonMemo | undefined;
  bytes: number;
}

function emit(state: WriteState, text: string, path: string): void {
  state.bytes += text.length;
  if (state.bytes > state.maxBytes) fail(path, `a value longer than ${state.maxBytes} bytes`);
  state.out.push(text);
}

/** Writes `value`; returns its nesting height (0 for a scalar). */
function write(value: unknown, path: string, state: WriteState, depth: number): number {
  switch (typeof value) {
    case 'string':
      // The escaped form is at least as long as the string plus its quotes: refuse before escaping.
      if (state.bytes + value.length + 2 > state.maxBytes) fail(path, `a value longer than ${state.maxBytes} bytes`);
      emit(state, escapeString(value, state.ascii), path);
      return 0;
    case 'number':
      if (!Number.isFinite(value)) fail(path, `non-finite number ${String(value)}`);
      emit(state, Object.is(value, -0) ? '0' : JSON.stringify(value), path);
      return 0;
    case 'bigint':
      emit(state, `"${value.toString(10)}"`, path);
      return 0;
    case 'boolean':
      emit(state, value ? 'true' : 'false', path);
      return 0;
    case 'object': {
      if (value === null) {
        emit(state, 'null', path);
        return 0;
      }
      const memo = state.memo !== undefined && Object.isFrozen(value) ? state.memo : undefined;
      const known = memo?.get(value);
      if (known !== undefined && known.ascii === state.ascii) {
        if (depth + known.height - 1 > state.maxDepth) fail(path, `nesting deeper than ${state.maxDepth} levels`);
        emit(state, known.text, path);
        return known.height;
      }
      if (state.stack.has(value)) fail(path, 'a cycle');
      if (depth > state.maxDepth) fail(path, `nesting deeper than ${state.maxDepth} levels`);
      state.stack.add(value);
      const start = state.out.length;
      let inner = 0;
      if (Array.isArray(value)) {
        emit(state, '[', path);
        for (let i = 0; i < value.length; i += 1) {
          if (i > 0) emit(state, ',', path);
          inner = Math.max(inner, write(value[i], `${path}[${i}]`, state, depth + 1));
        }
        emit(state, ']', path);
      } else {
        if (!isPlainObject(value)) fail(path, `an instance of ${value.constructor?.name ?? 'a class'}`);
        const keys = Object.keys(value).sort();
        emit(state, '{', path);
        keys.forEach((key, i) => {
          if (i > 0) emit(state, ',', path);
          emit(state, escapeString(key, state.ascii), path);
          emit(state, ':', path);
          inner = Math.max(inner, write((value as Record<string, unknown>)[key], `${path}.${key}`, state, depth + 1));
        });
        emit(state, '}', path);
      }
      state.stack.delete(value);
      if (memo !== undefined) memo.set(value, { text: state.out.slice(start).join(''), height: inner + 1, ascii: state.ascii });
      return inner + 1;
    }
    default:
      return fail(path, `a value of type ${typeof value}`);
  }
}

/** The canonical JSON text of `value` (no trailing newline). Throws `InvalidJobError`. */
export function canonicalJson(value: unknown, limits: CanonicalJsonLimits = {}): string {
  const state: WriteState = {
    stack: new Set(),
    out: [],
    maxDepth: limits.maxDepth ?? DEFAULT_MAX_DEPTH,
    maxBytes: limits.maxBytes ?? Number.POSITIVE_INFINITY,
    ascii: limits.nonAscii !== 'utf8',
    memo: limits.memo,
    bytes: 0,
  };
  write(value, '$', state, 1);
  return state.out.join('');
}

/** Canonical JSON plus one `\n`, as bytes: the exact content of a record file. */
export function canonicalJsonBytes(value: unknown, limits: CanonicalJsonLimits = {}): Buffer {
  // UTF-8 equals ASCII for the default output, and keeps `nonAscii: 'utf8'` text intact.
  return Buffer.from(`${canonicalJson(value, limits)}\n`, 'utf8');
}
