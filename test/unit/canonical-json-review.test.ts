// Review of the canonical-JSON fast paths against the definition: the text is the value's own
// enumerable data read once per property (keys sorted by UTF-16 code unit, no whitespace,
// non-ASCII as \uXXXX), never what JSON.stringify's own hooks (toJSON) make of it, and a value
// over `maxBytes` is refused with InvalidJobError, never a RangeError.
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/lease/canonical-json.js';

describe('canonical JSON fast paths (review)', () => {
  it('writes an array of scalars by its items even when the array has its own toJSON', () => {
    const list = Object.assign([1, 2], { toJSON: () => ({ b: 1, a: 'é' }) });
    // The definition walks indexes; JSON.stringify would call toJSON instead.
    expect(canonicalJson(list)).toBe('[1,2]');
  });

  it('reads every property once: a getter that changes between reads cannot put raw non-ASCII in the text', () => {
    let reads = 0;
    const value = {
      get a(): string {
        reads += 1;
        return reads === 1 ? 'x' : 'é';
      },
    };
    const text = canonicalJson(value);
    expect(reads).toBe(1);
    expect(text).toBe('{"a":"x"}');
    expect(/^[\x20-\x7e]*$/.test(text)).toBe(true);
  });

  it('reads every property once: a getter that yields undefined on a second read cannot drop its key', () => {
    let reads = 0;
    const value = {
      get a(): number | undefined {
        reads += 1;
        return reads === 1 ? 1 : undefined;
      },
    };
    expect(canonicalJson(value)).toBe('{"a":1}');
  });

  it('refuses a flat object and a flat array far over maxBytes with InvalidJobError, not a RangeError', () => {
    // Two references to one ~270 MB string: together past V8's longest string.
    const big = 'a'.repeat(270_000_000);
    const attempts = [() => canonicalJson({ a: big, b: big }, { maxBytes: 1000 }), () => canonicalJson([big, big], { maxBytes: 1000 })];
    for (const attempt of attempts) {
      let thrown: unknown;
      try {
        attempt();
      } catch (error) {
        thrown = error;
      }
      expect((thrown as { code?: unknown }).code, String(thrown)).toBe('ERR_INVALID_JOB');
    }
  });
});
