/**
 * Site → distance guidance ("how far is this branch site from what we want to reach"), used by
 * the concurrency lane and as the directed term of the Prefix and edge lanes. Accepted forms:
 * JSON `{"distances": {site: d}}` or `{site: d}`, a JSON list of `[site, d]` pairs or
 * `{site, distance}` objects, or text lines `site d` / `site:d` / `site,d` with `#` comments.
 * Sites are decimal or `0x` hex and > 0; distances finite and ≥ 0; duplicates keep the minimum.
 */
import { GuidanceInvalidError } from '../errors.js';
import { MAX_BRANCH_ID } from './branch-id.js';

const MAX_GUIDANCE_ENTRIES = 1_000_000;

function site(raw: unknown, where: string): bigint {
  let value: bigint | undefined;
  if (typeof raw === 'number' && Number.isSafeInteger(raw)) value = BigInt(raw);
  else if (typeof raw === 'string' && /^(0x[0-9a-f]+|[0-9]+)$/i.test(raw.trim())) value = BigInt(raw.trim());
  if (value === undefined || value < 1n || value > MAX_BRANCH_ID) {
    throw new GuidanceInvalidError(`guidance ${where}: site must be an integer id in 1..2^64-1, received ${JSON.stringify(raw)}`, { where });
  }
  return value;
}

function distance(raw: unknown, where: string): number {
  const value = typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : raw;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new GuidanceInvalidError(`guidance ${where}: distance must be a finite number ≥ 0, received ${JSON.stringify(raw)}`, { where });
  }
  return value;
}

/** Parses guidance text; throws `ERR_GUIDANCE_INVALID` naming the line or key of the first bad entry. */
export function parseGuidance(text: string): Map<bigint, number> {
  const out = new Map<bigint, number>();
  const add = (s: bigint, d: number): void => {
    const old = out.get(s);
    out.set(s, old === undefined ? d : Math.min(old, d));
    if (out.size > MAX_GUIDANCE_ENTRIES) throw new GuidanceInvalidError(`guidance has more than ${MAX_GUIDANCE_ENTRIES} sites`, {});
  };
  const trimmed = text.trim();
  if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch (error) {
      throw new GuidanceInvalidError(`guidance is not valid JSON: ${(error as Error).message}`, {});
    }
    if (Array.isArray(parsed)) {
      parsed.forEach((entry, i) => {
        if (Array.isArray(entry) && entry.length === 2) add(site(entry[0], `[${i}][0]`), distance(entry[1], `[${i}][1]`));
        else if (typeof entry === 'object' && entry !== null) {
          const e = entry as Record<string, unknown>;
          add(site(e.site ?? e.id, `[${i}].site`), distance(e.distance, `[${i}].distance`));
        } else throw new GuidanceInvalidError(`guidance [${i}]: expected [site, distance] or {site, distance}`, { where: `[${i}]` });
      });
    } else {
      const root = parsed as Record<string, unknown>;
      const map = typeof root.distances === 'object' && root.distances !== null ? (root.distances as Record<string, unknown>) : root;
      for (const [k, v] of Object.entries(map)) add(site(k, `key ${k}`), distance(v, `key ${k}`));
    }
    return out;
  }
  text.split(/\r?\n/).forEach((line, i) => {
    const content = line.replace(/#.*/, '').trim();
    if (content === '') return;
    const parts = content.split(/[\s:,]+/);
    if (parts.length !== 2) throw new GuidanceInvalidError(`guidance line ${i + 1}: expected "site distance", received ${JSON.stringify(line)}`, { line: i + 1 });
    add(site(parts[0], `line ${i + 1}`), distance(parts[1], `line ${i + 1}`));
  });
  return out;
}
