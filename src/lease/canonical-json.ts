/**
 * Canonical JSON: the only serialiser lease records and work ids use.
 *
 * Same value → same bytes, always: object keys are sorted (by UTF-16 code unit, recursively),
 * there is no whitespace, and every non-ASCII character is written as `\uXXXX`, so the bytes do
 * not depend on insertion order or on the reader's encoding handling. Determinism is what lets a
 * failed group mutation restore byte-identical records and what makes a work id a stable digest.
 *
 * Strict by design: only plain objects, arrays, strings, finite numbers, booleans, null and
 * `bigint` are accepted. A `bigint` is written as its decimal string (u64 targets never pass
 * through `number`). NaN, ±Infinity, `undefined`, functions, symbols, class instances and cycles
 * throw `InvalidJobError` naming the path of the offending value — before anything is written.
 */
import { InvalidJobError } from '../errors.js';

function fail(path: string, what: string): never {
  throw new InvalidJobError(`cannot serialise ${what} at ${path} as canonical JSON`, { path, reason: what });
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function escapeString(text: string): string {
  // JSON.stringify already escapes quotes, backslashes, control characters and lone surrogates;
  // the replace makes the output pure ASCII.
  return JSON.stringify(text).replace(/[\u007f-\uffff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function write(value: unknown, path: string, stack: Set<object>, out: string[]): void {
  switch (typeof value) {
    case 'string':
      out.push(escapeString(value));
      return;
    case 'number':
      if (!Number.isFinite(value)) fail(path, `non-finite number ${String(value)}`);
      out.push(Object.is(value, -0) ? '0' : JSON.stringify(value));
      return;
    case 'bigint':
      out.push(`"${value.toString(10)}"`);
      return;
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return;
    case 'object': {
      if (value === null) {
        out.push('null');
        return;
      }
      if (stack.has(value)) fail(path, 'a cycle');
      stack.add(value);
      if (Array.isArray(value)) {
        out.push('[');
        for (let i = 0; i < value.length; i += 1) {
          if (i > 0) out.push(',');
          write(value[i], `${path}[${i}]`, stack, out);
        }
        out.push(']');
      } else {
        if (!isPlainObject(value)) fail(path, `an instance of ${value.constructor?.name ?? 'a class'}`);
        const keys = Object.keys(value).sort();
        out.push('{');
        keys.forEach((key, i) => {
          if (i > 0) out.push(',');
          out.push(escapeString(key), ':');
          write((value as Record<string, unknown>)[key], `${path}.${key}`, stack, out);
        });
        out.push('}');
      }
      stack.delete(value);
      return;
    }
    default:
      fail(path, `a value of type ${typeof value}`);
  }
}

/** The canonical JSON text of `value` (no trailing newline). Throws `InvalidJobError`. */
export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  write(value, '$', new Set(), out);
  return out.join('');
}

/** Canonical JSON plus one `\n`, as bytes: the exact content of a record file. */
export function canonicalJsonBytes(value: unknown): Buffer {
  return Buffer.from(`${canonicalJson(value)}\n`, 'ascii');
}
