/**
 * Strict readers for lane-state snapshots. A snapshot is our own output, so anything unexpected
 * means a corrupt or foreign file: fail with `ERR_LANE_STATE` naming the field, never half-load.
 */
import { LaneStateError } from '../../errors.js';
import { parseDecimalU64 } from '../branch-id.js';

type Json = Record<string, unknown>;

export function bad(path: string, expected: string): never {
  throw new LaneStateError(`lane state ${path}: expected ${expected}`, { path, expected });
}

export function obj(value: unknown, path: string): Json {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) bad(path, 'an object');
  return value as Json;
}

export function arr(value: unknown, path: string): unknown[] {
  if (!Array.isArray(value)) bad(path, 'an array');
  return value;
}

export function num(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) bad(path, 'a finite number');
  return value;
}

export function int(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) bad(path, 'a non-negative integer');
  return value;
}

export function numOrNull(value: unknown, path: string): number | null {
  return value === null ? null : num(value, path);
}

export function str(value: unknown, path: string): string {
  if (typeof value !== 'string') bad(path, 'a string');
  return value;
}

export function id(value: unknown, path: string): bigint {
  const parsed = typeof value === 'string' ? parseDecimalU64(value) : undefined;
  if (parsed === undefined) bad(path, 'a decimal u64 string');
  return parsed;
}

export function strings(value: unknown, path: string): string[] {
  return arr(value, path).map((v, i) => str(v, `${path}[${i}]`));
}

export function ids(value: unknown, path: string): bigint[] {
  return arr(value, path).map((v, i) => id(v, `${path}[${i}]`));
}

export function oneOf<T extends string>(value: unknown, allowed: readonly T[], path: string): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) bad(path, `one of ${allowed.join('|')}`);
  return value as T;
}

export function header(snapshot: unknown, lane: string, schema: number): Json {
  const o = obj(snapshot, '$');
  if (o.lane !== lane) bad('lane', `"${lane}"`);
  if (o.schema !== schema) bad('schema', String(schema));
  return o;
}

/** Inverse of the `now − t` ages written by `toJSON`. */
export function ageToTime(now: number, ageMs: number | null): number | null {
  return ageMs === null ? null : now - ageMs;
}
