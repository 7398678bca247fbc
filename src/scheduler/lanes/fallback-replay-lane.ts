/**
 * Fallback replay lane: per-seed records of rewarded or hard seeds with the branches they left
 * open. Keeps workers busy when the structured lanes have nothing: one job per record, target =
 * the first open branch from the cursor that is not in flight. Cursor and last-replay time move
 * only when the job was admitted.
 */
import type { Telemetry } from '../telemetry.js';
import { clamp01, difficultyOf } from '../telemetry-metrics.js';
import { DEFAULT_SCORING, type ScoringPolicy } from '../scoring.js';
import { cursorPast, evictOldest, pickFromCursor } from './round-robin.js';
import { cooledDown, resolveCooldownMs, effectiveOutputLimit, type Lane, type LaneCommonOptions, type Proposal } from './lane.js';
import { ageToTime, arr, header, ids, int, num, numOrNull, obj, str } from './state-codec.js';
import { MAX_OPEN_BRANCHES } from '../telemetry.js';

interface ReplayRecord {
  readonly seed: string;
  reward: number;
  difficulty: number;
  visits: number;
  openBranches: bigint[];
  cursor: number;
  lastReplayMs: number | null;
}

interface FallbackReplayOptions extends LaneCommonOptions {
  /** Record budget (LRU). Default 262144. */
  readonly maxRecords?: number;
  /** Records scoring at or below this are not replayed. Default 0.05. */
  readonly minScore?: number;
  readonly scoring?: ScoringPolicy;
}

const SCHEMA = 1;

export class FallbackReplayLane implements Lane {
  readonly name = 'fallback' as const;
  readonly #records = new Map<string, ReplayRecord>();
  readonly #maxRecords: number;
  readonly #minScore: number;
  readonly #cooldownMs: number;
  readonly #seedLive: (seed: string) => boolean;
  readonly #scoring: ScoringPolicy;

  constructor(options: FallbackReplayOptions = {}) {
    this.#maxRecords = Math.max(128, Math.floor(options.maxRecords ?? 262144));
    this.#minScore = options.minScore ?? 0.05;
    this.#cooldownMs = resolveCooldownMs(options.cooldownMs);
    this.#seedLive = options.seedLive ?? (() => true);
    this.#scoring = options.scoring ?? DEFAULT_SCORING;
  }

  size(): number {
    return this.#records.size;
  }

  record(seed: string): Readonly<ReplayRecord> | undefined {
    return this.#records.get(seed);
  }

  propose(limit: number, proposalLimit: number, now: number, excluded: ReadonlySet<bigint>): readonly Proposal[] {
    const outputLimit = effectiveOutputLimit(limit, proposalLimit);
    if (outputLimit === 0) return [];
    const candidates: { r: ReplayRecord; target: bigint; score: number }[] = [];
    for (const r of this.#records.values()) {
      if (!this.#seedLive(r.seed) || !cooledDown(now, r.lastReplayMs, this.#cooldownMs)) continue;
      const score = this.#scoring.fallback({ reward: r.reward, difficulty: r.difficulty, visits: r.visits, hasOpenBranches: r.openBranches.length > 0 });
      if (!(score > this.#minScore)) continue;
      let target = 0n;
      if (r.openBranches.length > 0) {
        const picked = pickFromCursor(r.openBranches, r.cursor, excluded);
        if (picked === undefined) continue;
        target = picked;
      }
      candidates.push({ r, target, score });
    }
    candidates.sort((a, b) => b.score - a.score);
    return candidates.slice(0, outputLimit).map((c) => ({
      lane: 'fallback' as const,
      origin: c.r.seed,
      job: Object.freeze({ seed: c.r.seed, targetBranch: c.target, actions: Object.freeze([]) }),
    }));
  }

  /** Commit contract: cursor moves past the dispatched target and the replay cooldown starts. */
  commit(accepted: readonly Proposal[], now: number): void {
    for (const proposal of accepted) {
      const r = this.#records.get(proposal.origin);
      if (r === undefined) continue;
      r.lastReplayMs = now;
      r.cursor = cursorPast(r.openBranches, r.cursor, proposal.job.targetBranch);
    }
  }

  /** Also called with `telemetry: null` for runs without telemetry (reward only). */
  observe(seed: string, telemetry: Telemetry | null, reward: number, _now: number): void {
    const r = clamp01(reward);
    const difficulty = telemetry ? difficultyOf(telemetry) : 0;
    let record = this.#records.get(seed);
    if (record === undefined) {
      record = { seed, reward: r, difficulty, visits: 1, openBranches: [...(telemetry?.openBranches ?? [])], cursor: 0, lastReplayMs: null };
    } else {
      record.reward = 0.7 * record.reward + 0.3 * r;
      record.difficulty = Math.max(0.7 * record.difficulty, difficulty);
      record.visits += 1;
      if (telemetry) {
        // A settled target (sat/unsat) is never replayed again; reaching it is not required.
        const resolved = telemetry.targetStatus === 'sat' || telemetry.targetStatus === 'unsat' ? telemetry.targetBranch : 0n;
        const merged = record.openBranches.filter((b) => b !== resolved);
        for (const b of telemetry.openBranches) if (b !== resolved && !merged.includes(b)) merged.push(b);
        record.openBranches = merged.slice(0, MAX_OPEN_BRANCHES);
        record.cursor = record.openBranches.length === 0 ? 0 : record.cursor % record.openBranches.length;
      }
      this.#records.delete(seed);
    }
    this.#records.set(seed, record);
    evictOldest(this.#records, this.#maxRecords);
  }

  toJSON(now: number): unknown {
    return {
      lane: 'fallback',
      schema: SCHEMA,
      records: [...this.#records.values()].map((r) => ({
        seed: r.seed,
        reward: r.reward,
        difficulty: r.difficulty,
        visits: r.visits,
        openBranches: r.openBranches.map(String),
        cursor: r.cursor,
        lastReplayAgeMs: r.lastReplayMs === null ? null : now - r.lastReplayMs,
      })),
    };
  }

  restore(snapshot: unknown, now: number): void {
    const o = header(snapshot, 'fallback', SCHEMA);
    const records = arr(o.records, 'records').map((raw, i): ReplayRecord => {
      const p = `records[${i}]`;
      const r = obj(raw, p);
      const openBranches = ids(r.openBranches, `${p}.openBranches`).slice(0, MAX_OPEN_BRANCHES);
      return {
        seed: str(r.seed, `${p}.seed`),
        reward: num(r.reward, `${p}.reward`),
        difficulty: num(r.difficulty, `${p}.difficulty`),
        visits: int(r.visits, `${p}.visits`),
        openBranches,
        cursor: openBranches.length === 0 ? 0 : int(r.cursor, `${p}.cursor`) % openBranches.length,
        lastReplayMs: ageToTime(now, numOrNull(r.lastReplayAgeMs, `${p}.lastReplayAgeMs`)),
      };
    });
    this.#records.clear();
    for (const r of records.slice(-this.#maxRecords)) this.#records.set(r.seed, r);
  }
}
