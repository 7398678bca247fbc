/**
 * Dispatch hints: advice from outside the lanes (an agent, a human, a planner) about how to run a
 * seed — which bytes to focus, which strategy profile, which target. Hints are looked up by the
 * input's sha256 or its path. Whether a hint may change the target is decided by the target
 * contract (target-contract.ts), not here.
 */
import { readFile } from 'node:fs/promises';
import { HintInvalidError } from '../errors.js';
import { toBranchId } from './branch-id.js';
import { normalizeActions, type S2FAction } from './replay-job.js';

/** Which input bytes the solver should treat as symbolic. */
export type Focus = { readonly kind: 'range'; readonly lo: number; readonly hi: number } | { readonly kind: 'set'; readonly offsets: readonly number[] };

export interface Hint {
  readonly focus?: Focus;
  /** Suggested primary target (> 0). */
  readonly targetBranch?: bigint;
  readonly actions?: readonly S2FAction[];
  /** Strategy profile index (0 exact … 6 sampling). */
  readonly strategy?: number;
}

export interface SeedIdentity {
  readonly seed: string;
  readonly sha256: string;
  readonly path: string;
}

export interface HintSource {
  hintFor(seed: SeedIdentity): Hint | undefined;
}

const MAX_STRATEGY = 6;
const SHA256 = /^[0-9a-f]{64}$/;

function invalid(where: string, message: string, value: unknown): never {
  throw new HintInvalidError(`hint ${where}: ${message}, received ${JSON.stringify(value)?.slice(0, 80)}`, { where });
}

function parseFocus(raw: unknown, where: string): Focus {
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw)) {
    const { lo, hi } = raw as { lo?: unknown; hi?: unknown };
    if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi) || (lo as number) < 0 || (hi as number) < (lo as number)) {
      invalid(where, 'focus range must be { lo, hi } with integers 0 ≤ lo ≤ hi', raw);
    }
    return { kind: 'range', lo: lo as number, hi: hi as number };
  }
  if (Array.isArray(raw)) {
    if (!raw.every((o) => Number.isSafeInteger(o) && o >= 0)) invalid(where, 'focus set must be a list of byte offsets ≥ 0', raw);
    return { kind: 'set', offsets: [...new Set(raw as number[])].sort((a, b) => a - b) };
  }
  return invalid(where, 'focus must be { lo, hi } or a list of offsets', raw);
}

/**
 * Parses one hint entry (without its key). Unknown fields are errors, so a typo such as
 * `target_branch` is reported rather than silently ignored.
 */
export function parseHint(raw: unknown, where = '$'): Hint {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) invalid(where, 'must be an object', raw);
  const o = raw as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!['sha256', 'path', 'focus', 'targetBranch', 'actions', 'strategy'].includes(key)) invalid(`${where}.${key}`, 'unknown field', key);
  }
  const hint: { -readonly [K in keyof Hint]: Hint[K] } = {};
  if (o.focus !== undefined) hint.focus = parseFocus(o.focus, `${where}.focus`);
  if (o.targetBranch !== undefined) {
    const t = toBranchId(o.targetBranch);
    if (t === 0n) invalid(`${where}.targetBranch`, 'must be a decimal id string in 1..2^64-1', o.targetBranch);
    hint.targetBranch = t;
  }
  if (o.actions !== undefined) {
    if (!Array.isArray(o.actions)) invalid(`${where}.actions`, 'must be a list of { branch, kind }', o.actions);
    hint.actions = normalizeActions(o.actions);
  }
  if (o.strategy !== undefined) {
    if (!Number.isSafeInteger(o.strategy) || (o.strategy as number) < 0 || (o.strategy as number) > MAX_STRATEGY) {
      invalid(`${where}.strategy`, `must be an integer profile 0..${MAX_STRATEGY}`, o.strategy);
    }
    hint.strategy = o.strategy as number;
  }
  return Object.freeze(hint);
}

/**
 * Hints from a JSON file: a list of objects each keyed by `sha256` (64 lowercase hex) or `path`,
 * with optional `focus`, `targetBranch` (decimal string), `actions`, `strategy`. A sha256 match
 * wins over a path match; among duplicates the last entry wins.
 */
export class HintFile implements HintSource {
  readonly #bySha = new Map<string, Hint>();
  readonly #byPath = new Map<string, Hint>();

  constructor(entries: unknown) {
    if (!Array.isArray(entries)) invalid('$', 'a hint file must be a JSON list', typeof entries);
    entries.forEach((entry, i) => {
      const where = `[${i}]`;
      const hint = parseHint(entry, where);
      const { sha256, path } = entry as { sha256?: unknown; path?: unknown };
      if (sha256 === undefined && path === undefined) invalid(where, 'needs a sha256 or path key', entry);
      if (sha256 !== undefined) {
        if (typeof sha256 !== 'string' || !SHA256.test(sha256)) invalid(`${where}.sha256`, 'must be 64 lowercase hex digits', sha256);
        this.#bySha.set(sha256, hint);
      }
      if (path !== undefined) {
        if (typeof path !== 'string' || path.length === 0) invalid(`${where}.path`, 'must be a non-empty string', path);
        this.#byPath.set(path, hint);
      }
    });
  }

  static async load(file: string): Promise<HintFile> {
    const text = await readFile(file, 'utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      throw new HintInvalidError(`hint file ${file} is not valid JSON: ${(error as Error).message}`, { file });
    }
    return new HintFile(parsed);
  }

  get size(): number {
    return this.#bySha.size + this.#byPath.size;
  }

  hintFor(seed: SeedIdentity): Hint | undefined {
    return this.#bySha.get(seed.sha256) ?? this.#byPath.get(seed.path);
  }
}
