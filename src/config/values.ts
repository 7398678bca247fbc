/**
 * Parsers for option values. Each takes the option's name so every rejection names the option,
 * the expected form and the value received. Values arrive as numbers (library callers) or strings
 * (flags and environment variables); both forms are accepted wherever they make sense.
 */
import { InvalidOptionError } from '../errors.js';

/** Longest description of a received value in an error message. */
const MAX_DESCRIBED_CHARS = 200;

function clip(text: string): string {
  return text.length > MAX_DESCRIBED_CHARS ? `${text.slice(0, MAX_DESCRIBED_CHARS)}… (${text.length} characters)` : text;
}

/**
 * A short, safe description of any received value for an error message: never throws (a
 * 200,000-deep array, a cyclic object, a throwing `toString`) and never longer than ~200
 * characters (a gigabyte string is not copied into the message).
 */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return value.length > MAX_DESCRIBED_CHARS ? `${JSON.stringify(value.slice(0, MAX_DESCRIBED_CHARS))}… (${value.length} characters)` : JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) return String(value);
  if (typeof value === 'symbol' || typeof value === 'function') return `a ${typeof value}`;
  if (Array.isArray(value) && value.length > 64) return `an array of ${value.length} items`;
  try {
    return clip(JSON.stringify(value) ?? Object.prototype.toString.call(value));
  } catch {
    return Object.prototype.toString.call(value);
  }
}

const describe = describeValue;

/** What an option error may add: why the value cannot be used, more details, the underlying error. */
interface InvalidOptionExtra {
  readonly because?: string;
  readonly details?: Readonly<Record<string, unknown>>;
  readonly cause?: unknown;
}

/**
 * The one way an `ERR_INVALID_OPTION` is built: it names the option, the expected form and the
 * value received (`details.option`, `.expected`, `.value`), and says why when there is more to say.
 */
export function invalidOption(name: string, expected: string, value: unknown, extra: InvalidOptionExtra = {}): InstanceType<typeof InvalidOptionError> {
  const because = extra.because === undefined ? '' : `: ${extra.because}`;
  const error = new InvalidOptionError(`option ${name}: expected ${expected}, got ${describe(value)}${because}`, {
    option: name,
    expected,
    value: describe(value),
    ...extra.details,
  });
  if (extra.cause !== undefined) (error as { cause?: unknown }).cause = extra.cause;
  return error;
}

/**
 * Throws `ERR_INVALID_OPTION` naming `name` unless `value` is an options object (a non-null,
 * non-array object): a missing or mistyped options argument must not surface as a `TypeError`
 * from the first property read.
 */
export function checkOptionsObject(value: unknown, name: string): asserts value is object {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidOption(name, 'an options object', value);
}

const DURATION_UNITS_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const DURATION_RE = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/;

/** `1500`, `"1500"`, `"1500ms"`, `"30s"`, `"5m"`, `"1.5h"` → milliseconds (finite, ≥ 0). */
export function parseDurationMs(name: string, value: unknown): number {
  const expected = 'a duration: milliseconds, or a number with unit ms, s, m or h (e.g. 30s, 5m)';
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) throw invalidOption(name, expected, value);
    return value;
  }
  if (typeof value !== 'string') throw invalidOption(name, expected, value);
  const match = DURATION_RE.exec(value.trim());
  if (!match) throw invalidOption(name, expected, value);
  const ms = Number(match[1]) * (DURATION_UNITS_MS[match[2] ?? 'ms'] ?? 1);
  if (!Number.isFinite(ms)) throw invalidOption(name, expected, value);
  return ms;
}

const SIZE_UNITS: Readonly<Record<string, number>> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
};
const SIZE_RE = /^(\d+)\s*([a-z]*)$/;

/** `65536`, `"64k"`, `"64KiB"`, `"1M"` → bytes (a safe non-negative integer). */
export function parseSizeBytes(name: string, value: unknown): number {
  const expected = 'a size in bytes, optionally with unit k, M or G (e.g. 64k, 1M)';
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) throw invalidOption(name, expected, value);
    return value;
  }
  if (typeof value !== 'string') throw invalidOption(name, expected, value);
  const match = SIZE_RE.exec(value.trim().toLowerCase());
  const unit = match ? SIZE_UNITS[match[2] ?? ''] : undefined;
  if (!match || unit === undefined) throw invalidOption(name, expected, value);
  const bytes = Number(match[1]) * unit;
  if (!Number.isSafeInteger(bytes)) throw invalidOption(name, expected, value);
  return bytes;
}

/** A safe integer, from a number or a decimal string. */
export function parseInteger(name: string, value: unknown): number {
  const expected = 'an integer';
  const n = typeof value === 'string' && /^[+-]?\d+$/.test(value.trim()) ? Number(value.trim()) : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) throw invalidOption(name, expected, value);
  return n;
}

/** A finite number, from a number or a decimal string. */
export function parseFiniteNumber(name: string, value: unknown): number {
  const expected = 'a finite number';
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value.trim()) : value;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw invalidOption(name, expected, value);
  return n;
}

const TRUE_WORDS = new Set(['1', 'true', 'yes', 'on']);
const FALSE_WORDS = new Set(['0', 'false', 'no', 'off']);

export function parseBoolean(name: string, value: unknown): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string') {
    const word = value.trim().toLowerCase();
    if (TRUE_WORDS.has(word)) return true;
    if (FALSE_WORDS.has(word)) return false;
  }
  throw invalidOption(name, 'a boolean (true/false, 1/0, yes/no, on/off)', value);
}

export function parseNonEmptyString(name: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) throw invalidOption(name, 'a non-empty string', value);
  if (value.includes('\0')) throw invalidOption(name, 'a string without NUL bytes', value);
  return value;
}

export function checkRange(name: string, value: number, min: number | undefined, max: number | undefined, unit = ''): number {
  const suffix = unit ? ` ${unit}` : '';
  if (min !== undefined && value < min) {
    throw invalidOption(name, max === undefined ? `at least ${min}${suffix}` : `between ${min} and ${max}${suffix}`, value);
  }
  if (max !== undefined && value > max) {
    throw invalidOption(name, min === undefined ? `at most ${max}${suffix}` : `between ${min} and ${max}${suffix}`, value);
  }
  return value;
}
