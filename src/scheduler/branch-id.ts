/**
 * Branch ids are unsigned 64-bit prefix-sensitive hashes. They are `bigint` everywhere in
 * symfence: a JS `number` silently loses precision above 2^53, which would merge distinct
 * targets into one lease.
 */

/** Largest valid branch id, 2^64 − 1. */
export const MAX_BRANCH_ID = (1n << 64n) - 1n;

const DECIMAL_U64 = /^(0|[1-9][0-9]{0,19})$/;

/**
 * Lenient conversion used by job normalisation: anything that is not an integer in 1..2^64−1
 * becomes 0 ("no branch"). Accepts bigint, safe non-negative integer numbers and decimal strings.
 * Booleans, NaN, ±Infinity, negatives, fractions, 2^64 and objects all map to 0.
 */
export function toBranchId(raw: unknown): bigint {
  let value: bigint;
  if (typeof raw === 'bigint') value = raw;
  else if (typeof raw === 'number') {
    if (!Number.isSafeInteger(raw)) return 0n;
    value = BigInt(raw);
  } else if (typeof raw === 'string') {
    const text = raw.trim();
    if (!DECIMAL_U64.test(text)) return 0n;
    value = BigInt(text);
  } else return 0n;
  return value >= 1n && value <= MAX_BRANCH_ID ? value : 0n;
}

/** Strict parse of a decimal u64 string (0 allowed); `undefined` when malformed or out of range. */
export function parseDecimalU64(text: string): bigint | undefined {
  if (!DECIMAL_U64.test(text)) return undefined;
  const value = BigInt(text);
  return value <= MAX_BRANCH_ID ? value : undefined;
}
