/**
 * Concurrency-guidance lane: per-seed records of how close the seed's path came to the guided
 * sites (site → distance), with the opposite branches seen there and a round-robin cursor.
 * Nearest frontier first; the cursor moves only when a job was admitted.
 */
import type { Telemetry } from '../telemetry.js';
import { DEFAULT_SCORING, type ScoringPolicy } from '../scoring.js';
import { cursorPast, evictOldest, pickFromCursor } from './round-robin.js';
import { cooledDown, resolveCooldownMs, effectiveOutputLimit, type Lane, type LaneCommonOptions, type Proposal } from './lane.js';
import { ageToTime, arr, header, ids, int, num, numOrNull, obj, str } from './state-codec.js';

interface ConcurrencyRecord {
  readonly seed: string;
  bestDistance: number;
  reward: number;
  visits: number;
  openBranches: bigint[];
  cursor: number;
  lastSeenMs: number;
  lastScheduledMs: number | null;
}

interface ConcurrencyOptions extends LaneCommonOptions {
  /** Site → distance. Without guidance the lane learns and proposes nothing. */
  readonly guidance?: ReadonlyMap<bigint, number>;
  /** Record budget (LRU). Default 65536. */
  readonly maxRecords?: number;
  readonly scoring?: ScoringPolicy;
}

const MAX_OPEN = 64;
const SCHEMA = 1;

export class ConcurrencyLane implements Lane {
  readonly name = 'concurrency' as const;
  readonly #records = new Map<string, ConcurrencyRecord>();
  readonly #guidance: ReadonlyMap<bigint, number>;
  readonly #maxRecords: number;
  readonly #cooldownMs: number;
  readonly #seedLive: (seed: string) => boolean;
  readonly #scoring: ScoringPolicy;

  constructor(options: ConcurrencyOptions = {}) {
    this.#guidance = options.guidance ?? new Map();
    this.#maxRecords = Math.max(128, Math.floor(options.maxRecords ?? 65536));
    this.#cooldownMs = resolveCooldownMs(options.cooldownMs);
    this.#seedLive = options.seedLive ?? (() => true);
    this.#scoring = options.scoring ?? DEFAULT_SCORING;
  }

  size(): number {
    return this.#records.size;
  }

  record(seed: string): Readonly<ConcurrencyRecord> | undefined {
    return this.#records.get(seed);
  }

  propose(limit: number, proposalLimit: number, now: number, excluded: ReadonlySet<bigint>): readonly Proposal[] {
    const outputLimit = effectiveOutputLimit(limit, proposalLimit);
    if (outputLimit === 0 || this.#guidance.size === 0) return [];
    const candidates: { r: ConcurrencyRecord; target: bigint; score: number }[] = [];
    for (const r of this.#records.values()) {
      if (!this.#seedLive(r.seed) || !cooledDown(now, r.lastScheduledMs, this.#cooldownMs)) continue;
      let target = 0n;
      if (r.openBranches.length > 0) {
        const picked = pickFromCursor(r.openBranches, r.cursor, excluded);
        if (picked === undefined) continue;
        target = picked;
      }
      const score = this.#scoring.concurrency({ bestDistance: r.bestDistance, reward: r.reward, visits: r.visits, hasOpenBranches: r.openBranches.length > 0 });
      candidates.push({ r, target, score });
    }
    candidates.sort((a, b) => a.r.bestDistance - b.r.bestDistance || b.score - a.score);
    return candidates.slice(0, outputLimit).map((c) => ({
      lane: 'concurrency' as const,
      origin: c.r.seed,
      job: Object.freeze({ seed: c.r.seed, targetBranch: c.target, actions: Object.freeze([]) }),
    }));
  }

  /** Commit contract: the record's cooldown starts and its cursor moves past the dispatched target. */
  commit(accepted: readonly Proposal[], now: number): void {
    for (const proposal of accepted) {
      const r = this.#records.get(proposal.origin);
      if (r === undefined) continue;
      r.lastScheduledMs = now;
      r.cursor = cursorPast(r.openBranches, r.cursor, proposal.job.targetBranch);
    }
  }

  observe(seed: string, telemetry: Telemetry | null, reward: number, now: number): void {
    if (telemetry === null || this.#guidance.size === 0) return;
    let best = Number.POSITIVE_INFINITY;
    const open: bigint[] = [];
    for (const e of telemetry.branchTrace) {
      const d = this.#guidance.get(e.site);
      if (d === undefined) continue;
      best = Math.min(best, d);
      if (!open.includes(e.opposite) && open.length < MAX_OPEN) open.push(e.opposite);
    }
    if (!Number.isFinite(best)) return;
    const existing = this.#records.get(seed);
    if (existing === undefined) {
      this.#records.set(seed, { seed, bestDistance: best, reward, visits: 1, openBranches: open, cursor: 0, lastSeenMs: now, lastScheduledMs: null });
    } else {
      existing.bestDistance = Math.min(existing.bestDistance, best);
      existing.reward = 0.72 * existing.reward + 0.28 * reward;
      existing.visits += 1;
      existing.lastSeenMs = now;
      for (const b of open) if (!existing.openBranches.includes(b) && existing.openBranches.length < MAX_OPEN) existing.openBranches.push(b);
      existing.cursor = existing.openBranches.length === 0 ? 0 : existing.cursor % existing.openBranches.length;
      this.#records.delete(seed);
      this.#records.set(seed, existing);
    }
    evictOldest(this.#records, this.#maxRecords);
  }

  toJSON(now: number): unknown {
    return {
      lane: 'concurrency',
      schema: SCHEMA,
      records: [...this.#records.values()].map((r) => ({
        seed: r.seed,
        bestDistance: r.bestDistance,
        reward: r.reward,
        visits: r.visits,
        openBranches: r.openBranches.map(String),
        cursor: r.cursor,
        lastSeenAgeMs: now - r.lastSeenMs,
        lastScheduledAgeMs: r.lastScheduledMs === null ? null : now - r.lastScheduledMs,
      })),
    };
  }

  restore(snapshot: unknown, now: number): void {
    const o = header(snapshot, 'concurrency', SCHEMA);
    const records = arr(o.records, 'records').map((raw, i): ConcurrencyRecord => {
      const p = `records[${i}]`;
      const r = obj(raw, p);
      const openBranches = ids(r.openBranches, `${p}.openBranches`).slice(0, MAX_OPEN);
      return {
        seed: str(r.seed, `${p}.seed`),
        bestDistance: num(r.bestDistance, `${p}.bestDistance`),
        reward: num(r.reward, `${p}.reward`),
        visits: int(r.visits, `${p}.visits`),
        openBranches,
        cursor: openBranches.length === 0 ? 0 : int(r.cursor, `${p}.cursor`) % openBranches.length,
        lastSeenMs: now - num(r.lastSeenAgeMs, `${p}.lastSeenAgeMs`),
        lastScheduledMs: ageToTime(now, numOrNull(r.lastScheduledAgeMs, `${p}.lastScheduledAgeMs`)),
      };
    });
    this.#records.clear();
    for (const r of records.slice(-this.#maxRecords)) this.#records.set(r.seed, r);
  }
}
