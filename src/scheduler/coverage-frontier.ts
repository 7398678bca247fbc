/**
 * The campaign's coverage frontier: which (site, direction) pairs, and which hit buckets of them,
 * some input of the campaign has taken — learned from every branch trace the scheduler observes
 * (first runs of AFL++ queue entries included, so AFL++'s finds are known here as soon as
 * symfence has traced them). It tiers the questions an input's open branches pose
 * (docs/scheduler.md, "Coverage frontier"):
 *
 *   tier 1  the opposite (site, direction) has never been taken in the campaign;
 *   tier 2  it has, but flipping here would take it a number of times in a hit bucket never seen;
 *   tier 3  context only: the prefix-sensitive branch id is new, the coverage is not.
 *
 * A (site, direction) asked `saturationAsks` times without the campaign gaining anything on it
 * (it stays untaken, or no new bucket) is saturated: its questions drop to tier 3.
 *
 * Key format (`siteDirectionKey`): `(site << 1) | direction` as an unsigned bigint, direction 1 =
 * taken, 0 = not taken, exactly the `site` and `taken` columns of a `branchTrace` row. Site 0
 * ("unknown site") has no key: its questions are always tier 3.
 *
 * Pure and bounded (`maxKeys`, oldest first forgotten); no clock.
 */
import type { BranchTraceEntry } from './telemetry.js';
import { LaneStateError } from '../errors.js';

export type QuestionTier = 1 | 2 | 3;

/** `(site << 1) | direction`; see the file header. */
type SiteDirectionKey = bigint;

export function siteDirectionKey(site: bigint, direction: 0 | 1): SiteDirectionKey {
  return (site << 1n) | BigInt(direction);
}

/** One question an input's trace poses: flip the row whose opposite is `branch`. */
export interface FrontierQuestion {
  /** The prefix-sensitive opposite branch id (what a directed job targets). */
  readonly branch: bigint;
  /** The (site, opposite direction) it would take; undefined for site 0. */
  readonly key: SiteDirectionKey | undefined;
  /** How often the input's own trace takes that (site, direction) already (0 for tier-1 questions). */
  readonly pathHits: number;
}

interface CoverageFrontierOptions {
  /** Asks of one (site, direction) without a gain before it is saturated. Default 4. */
  readonly saturationAsks?: number;
  /** (site, direction) pairs remembered. Default 1 048 576. */
  readonly maxKeys?: number;
}

interface KeyState {
  /** Union of AFL count-class bits of the hit counts seen for this pair (0 = never taken). */
  buckets: number;
  /** Asks since the pair last gained a bucket. */
  asks: number;
}

export interface CoverageFrontierStats {
  /** (site, direction) pairs some input has taken. */
  readonly takenPairs: number;
  /** Hit buckets over all taken pairs. */
  readonly buckets: number;
  /** Pairs asked `saturationAsks` times without a gain. */
  readonly saturatedPairs: number;
  /** Trace observations that added a pair or a bucket, and all trace observations. */
  readonly gainingTraces: number;
  readonly traces: number;
}

const DEFAULT_SATURATION_ASKS = 4;
const SCHEMA = 1;

export class CoverageFrontier {
  readonly saturationAsks: number;
  readonly #maxKeys: number;
  readonly #keys = new Map<SiteDirectionKey, KeyState>();
  #gainingTraces = 0;
  #traces = 0;
  #revivals = 0;

  constructor(options: CoverageFrontierOptions = {}) {
    this.saturationAsks = Math.max(1, Math.floor(options.saturationAsks ?? DEFAULT_SATURATION_ASKS));
    this.#maxKeys = Math.max(1024, Math.floor(options.maxKeys ?? 1 << 20));
  }

  /**
   * Absorbs one run's trace. Returns how many (pair, bucket) bits were new to the campaign; a pair
   * that gains anything starts its saturation count again.
   */
  learn(trace: readonly BranchTraceEntry[]): number {
    let gained = 0;
    for (const [key, hits] of hitsOf(trace)) {
      const bits = bucketOf(hits);
      let state = this.#keys.get(key);
      if (state === undefined) {
        state = { buckets: 0, asks: 0 };
        this.#keys.set(key, state);
        this.#bound();
      }
      if ((state.buckets & bits) !== bits) {
        gained += popcount8(bits & ~state.buckets);
        state.buckets |= bits;
        if (state.asks >= this.saturationAsks) this.#revivals += 1;
        state.asks = 0;
      }
    }
    this.#traces += 1;
    if (gained > 0) this.#gainingTraces += 1;
    return gained;
  }

  /** The questions a trace poses, one per row (the last row wins for a repeated opposite id). */
  questionsOf(trace: readonly BranchTraceEntry[]): Map<bigint, FrontierQuestion> {
    const hits = hitsOf(trace);
    const out = new Map<bigint, FrontierQuestion>();
    for (const row of trace) {
      const direction = row.taken === 1 ? 0 : 1;
      const key = row.site === 0n ? undefined : siteDirectionKey(row.site, direction);
      out.set(row.opposite, { branch: row.opposite, key, pathHits: key === undefined ? 0 : hits.get(key) ?? 0 });
    }
    return out;
  }

  /** The tier of a question now (it moves as the campaign learns and asks). */
  tierOf(question: Pick<FrontierQuestion, 'key' | 'pathHits'>): QuestionTier {
    if (question.key === undefined) return 3;
    const state = this.#keys.get(question.key);
    if (state !== undefined && state.asks >= this.saturationAsks) return 3;
    if (state === undefined || state.buckets === 0) return 1;
    // Flipping this occurrence takes the pair once more than the path already does.
    return (state.buckets & bucketOf(question.pathHits + 1)) === 0 ? 2 : 3;
  }

  /** A directed run asked this pair (called when the job is dispatched). */
  noteAsked(key: SiteDirectionKey | undefined): void {
    if (key === undefined) return;
    let state = this.#keys.get(key);
    if (state === undefined) {
      state = { buckets: 0, asks: 0 };
      this.#keys.set(key, state);
      this.#bound();
    }
    state.asks += 1;
  }

  /**
   * A dispatch of this pair's question never ran (given back: docs/campaign.md "When the lease
   * store fails"): its ask is taken back. A pair that leaves saturation so counts as a revival.
   */
  noteUnasked(key: SiteDirectionKey | undefined): void {
    const state = key === undefined ? undefined : this.#keys.get(key);
    if (state === undefined || state.asks === 0) return;
    if (state.asks === this.saturationAsks) this.#revivals += 1;
    state.asks -= 1;
  }

  /**
   * Counts the events that can move a question to a lower (better) tier: a saturated pair that
   * gains again or whose ask is taken back, a pair forgotten (bounded memory), a restore. Between
   * two equal readings every question's tier has only stayed or risen, so cached tier counts are
   * upper bounds (the frontier lane ranks inputs lazily on that; docs/scheduler.md "Coverage
   * frontier").
   */
  get revivals(): number {
    return this.#revivals;
  }

  #bound(): void {
    if (this.#keys.size <= this.#maxKeys) return;
    this.#keys.delete(this.#keys.keys().next().value as SiteDirectionKey);
    this.#revivals += 1;
  }

  /**
   * The opposite branch ids of `trace` whose question is wanted (tier ≤ `maxTier`, default 2), in
   * trace order, without duplicates: what a directed run over this input should fork at.
   */
  wantedBranchesFor(trace: readonly BranchTraceEntry[], maxTier: 1 | 2 = 2): bigint[] {
    const out: bigint[] = [];
    for (const q of this.questionsOf(trace).values()) if (this.tierOf(q) <= maxTier) out.push(q.branch);
    return out;
  }

  stats(): CoverageFrontierStats {
    let taken = 0;
    let buckets = 0;
    let saturated = 0;
    for (const s of this.#keys.values()) {
      if (s.buckets !== 0) taken += 1;
      buckets += popcount8(s.buckets);
      if (s.asks >= this.saturationAsks) saturated += 1;
    }
    return { takenPairs: taken, buckets, saturatedPairs: saturated, gainingTraces: this.#gainingTraces, traces: this.#traces };
  }

  /** `[key, buckets, asks]` rows, keys as decimal strings. */
  toJSON(): unknown {
    return { schema: SCHEMA, keys: [...this.#keys].map(([k, s]) => [k.toString(), s.buckets, s.asks]) };
  }

  /** Replaces the state with a `toJSON()` snapshot; `ERR_LANE_STATE` on bad input (state unchanged). */
  restore(snapshot: unknown): void {
    const o = snapshot as { schema?: unknown; keys?: unknown };
    if (typeof o !== 'object' || o === null || o.schema !== SCHEMA || !Array.isArray(o.keys)) {
      throw new LaneStateError('coverage frontier state: expected { schema: 1, keys: [...] }', { path: 'coverage' });
    }
    const rows = new Map<SiteDirectionKey, KeyState>();
    o.keys.forEach((row: unknown, i: number) => {
      const r = row as unknown[];
      const ok =
        Array.isArray(r) && r.length === 3 && typeof r[0] === 'string' && /^(0|[1-9][0-9]{0,20})$/.test(r[0]) &&
        Number.isInteger(r[1]) && (r[1] as number) >= 0 && (r[1] as number) <= 255 && Number.isSafeInteger(r[2]) && (r[2] as number) >= 0;
      if (!ok) throw new LaneStateError(`coverage frontier state: keys[${i}] is not [key, buckets 0..255, asks]`, { path: `coverage.keys[${i}]` });
      rows.set(BigInt(r[0] as string), { buckets: r[1] as number, asks: r[2] as number });
    });
    this.#keys.clear();
    for (const [k, s] of [...rows].slice(-this.#maxKeys)) this.#keys.set(k, s);
    this.#revivals += 1;
  }
}

/** Hits per (site, direction) over a trace (site-0 rows have no key). */
function hitsOf(trace: readonly BranchTraceEntry[]): Map<SiteDirectionKey, number> {
  const hits = new Map<SiteDirectionKey, number>();
  for (const row of trace) {
    if (row.site === 0n) continue;
    const key = siteDirectionKey(row.site, row.taken);
    hits.set(key, (hits.get(key) ?? 0) + 1);
  }
  return hits;
}

/** AFL's count classes (the global coverage map uses the same): 1, 2, 3, 4-7, 8-15, 16-31, 32-127, 128+. */
function bucketOf(hits: number): number {
  if (hits <= 0) return 0;
  if (hits <= 3) return 1 << (hits - 1);
  if (hits <= 7) return 8;
  if (hits <= 15) return 16;
  if (hits <= 31) return 32;
  return hits <= 127 ? 64 : 128;
}

function popcount8(v: number): number {
  let n = 0;
  for (let x = v; x !== 0; x &= x - 1) n += 1;
  return n;
}
