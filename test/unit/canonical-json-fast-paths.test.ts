// The fast paths of the canonical-JSON writer give the bytes of the plain definition: keys
// sorted by UTF-16 code unit at every level, no whitespace, every non-ASCII character as \uXXXX,
// numbers as JSON writes them. A flat object whose keys are already in order is written by
// JSON.stringify; the reference below never takes that path.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/lease/canonical-json.js';

function escaped(text: string): string {
  return JSON.stringify(text).replace(/[\u007f-\uffff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The definition, written the slow way. */
function reference(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${keys.map((k) => `${escaped(k)}:${reference((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  if (typeof value === 'string') return escaped(value);
  return JSON.stringify(value);
}

/** The same entries, inserted in canonical key order (the order the JSON.stringify path needs). */
function inKeyOrder(value: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

const scalar = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.constantFrom('plain', 'with "quote"', 'back\\slash', 'tab\there', 'ünïcødé', '\u2028', '\ud800', '\u007f'),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
  fc.constantFrom(0, -0, 1e21, 5e-324, Number.MAX_SAFE_INTEGER),
  fc.boolean(),
  fc.constant(null),
);
const key = fc.oneof(fc.string(), fc.constantFrom('a', 'b', 'Z', '10', '9', '2', '', ' ', 'é', '"', 'schema', 'id', '__proto__x'));

describe('canonical JSON fast paths', () => {
  it('writes a flat object the same whatever its insertion order, in key order or not', () => {
    fc.assert(
      fc.property(fc.dictionary(key, scalar, { maxKeys: 20 }), (flat) => {
        const want = reference(flat);
        expect(canonicalJson(flat)).toBe(want);
        expect(canonicalJson(inKeyOrder(flat))).toBe(want);
      }),
      { numRuns: 500 },
    );
  });

  it('writes nested objects and arrays of flat objects as the definition does', () => {
    const nested = fc.letrec<{ value: unknown }>((tie) => ({
      value: fc.oneof({ depthSize: 'small' }, scalar, fc.array(tie('value'), { maxLength: 4 }), fc.dictionary(key, tie('value'), { maxKeys: 5 }).map(inKeyOrder), fc.dictionary(key, tie('value'), { maxKeys: 5 })),
    }));
    fc.assert(
      fc.property(nested.value, (value) => {
        expect(canonicalJson(value)).toBe(reference(value));
      }),
      { numRuns: 500 },
    );
  });

  it('still bounds a flat object by length and refuses what it always refused', () => {
    const flat = inKeyOrder({ a: 'x'.repeat(50), b: 1 });
    expect(() => canonicalJson(flat, { maxBytes: 40 })).toThrow(/longer than 40 bytes/);
    expect(() => canonicalJson(inKeyOrder({ a: 1, b: Number.NaN }))).toThrow(/non-finite number NaN at \$\.b/);
    expect(() => canonicalJson(inKeyOrder({ a: 1, b: undefined }))).toThrow(/undefined at \$\.b/);
    expect(() => canonicalJson({ x: [inKeyOrder({ a: 1, f: () => 1 })] })).toThrow(/function at \$\.x\[0\]\.f/);
    expect(canonicalJson({ deep: [[[inKeyOrder({ a: 1 })]]] }, { maxDepth: 5 })).toBe('{"deep":[[[{"a":1}]]]}');
    // An own "__proto__" key (as JSON.parse makes one) is a key like any other.
    expect(canonicalJson(JSON.parse('{"__proto__":1,"a":2}'))).toBe('{"__proto__":1,"a":2}');
    expect(() => canonicalJson({ deep: [[[inKeyOrder({ a: 1 })]]] }, { maxDepth: 4 })).toThrow(/nesting deeper than 4 levels/);
  });
});

describe('SQLite member rows', () => {
  it('writes a member row directly exactly as canonical JSON writes its fields', async () => {
    const { memberText } = await import('../../src/lease/sqlite/sqlite-rows.js');
    const record = (attempts: number, previousOwner: string, steals: number, target: string, extra: Record<string, unknown> = {}) =>
      ({ attempts, id: 'ab'.repeat(32), kind: 'target', leaseTtlMs: 1000, owner: 'o', payload: {}, previousOwner, schema: 1, status: 'leased', steals, target, targets: [target], token: 't', updatedMs: 5, worker: 0, ...extra }) as never;
    fc.assert(
      fc.property(fc.nat(), fc.string({ unit: 'binary' }), fc.nat(), fc.bigInt({ min: 1n, max: 2n ** 64n - 1n }), (attempts, owner, steals, target) => {
        const r = record(attempts, owner, steals, target.toString());
        const text = memberText(r);
        const { attempts: a, id, previousOwner, steals: st, target: t } = r as Record<string, unknown>;
        const want = canonicalJson({ attempts: a, id, previousOwner, steals: st, target: t });
        // Either written directly (and then exactly the canonical text) or left to the general writer.
        if (text !== undefined) expect(text).toBe(want);
        else expect(/^[\x20\x21\x23-\x5b\x5d-\x7e]*$/.test(owner)).toBe(false);
      }),
      { numRuns: 300 },
    );
    // A member with answers (released, or re-claimed after) is written directly too.
    const digest = fc.stringMatching(/^[0-9a-f]{64}$/);
    fc.assert(
      fc.property(
        fc.option(fc.boolean(), { nil: undefined }),
        fc.option(fc.nat(), { nil: undefined }),
        fc.option(fc.uniqueArray(digest, { maxLength: 4 }), { nil: undefined }),
        fc.option(fc.array(fc.tuple(digest, fc.integer({ min: 1, max: 1000 }), fc.nat()), { minLength: 1, maxLength: 4 }), { nil: undefined }),
        (answered, completedMs, settled, open) => {
          const extra = {
            ...(answered !== undefined ? { answered } : {}),
            ...(completedMs !== undefined ? { completedMs } : {}),
            ...(settled !== undefined ? { settled } : {}),
            ...(open !== undefined ? { open } : {}),
          };
          const r = record(2, 'prev', 1, '77', extra);
          const { attempts, id, previousOwner, steals, target } = r as Record<string, unknown>;
          expect(memberText(r)).toBe(canonicalJson({ attempts, id, previousOwner, steals, target, ...extra }));
        },
      ),
      { numRuns: 300 },
    );
    // A record with a field this version does not know, or an answer field of another type, is never written directly.
    expect(memberText(record(1, '', 0, '5', { newer: true }))).toBeUndefined();
    expect(memberText(record(1.5, '', 0, '5'))).toBeUndefined();
    expect(memberText(record(1, '', 0, '5', { settled: ['A'.repeat(64)] }))).toBeUndefined();
    expect(memberText(record(1, '', 0, '5', { answered: 1 }))).toBeUndefined();
    expect(memberText(record(1, '', 0, '5', { completedMs: 1.5 }))).toBeUndefined();
    expect(memberText(record(1, '', 0, '5', { open: [['a'.repeat(64), 1.5, 3]] }))).toBeUndefined();
    expect(memberText(record(1, '', 0, '5', { open: [['A'.repeat(64), 1, 3]] }))).toBeUndefined();
    expect(memberText(record(1, '', 0, '5', { open: 'x' }))).toBeUndefined();
  });
});
