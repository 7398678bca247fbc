/**
 * Fallback replay lane: per-seed records of rewarded or hard seeds with the branches they left
 * open. Keeps workers busy when the structured lanes have nothing (docs/scheduler.md "Fallback
 * replay"): one job per record, asking up to `targetsPerJob` of its open branches from the cursor
 * that are not in flight and that the target ledger allows. A record still in its replay cooldown
 * is proposed after every cooled one, but only with branches this lane has not asked on it yet,
 * so the cooldown still paces every retry. Cursor and last-replay time move only when the job was
 * admitted.
 *
 * Cost per round: the lane keeps its records ordered by score (`#byScore`, updated when a run is
 * observed, a record evicted or the state restored), so a round walks them best first and stops
 * once it has its proposals, instead of scoring and sorting every record — up to 262,144 of them,
 * one per input of a long campaign, and the whole of a round's cost once there are thousands.
 * Only a round the cooled records cannot fill walks them all, as it must to find the cooling ones.
 */
import type { Telemetry } from '../telemetry.js';
import { clamp01, difficultyOf } from '../telemetry-metrics.js';
import { DEFAULT_SCORING, type ScoringPolicy } from '../scoring.js';
import { cursorPast, pickGroupFromCursor } from './round-robin.js';
import { cooledDown, resolveCooldownMs, effectiveOutputLimit, type Lane, type LaneCommonOptions, type Proposal } from './lane.js';
import { ageToTime, arr, header, ids, int, num, numOrNull, obj, str } from './state-codec.js';
import { MAX_OPEN_BRANCHES } from '../telemetry.js';
import type { TargetLedger } from '../target-ledger.js';

interface ReplayRecord {
  readonly seed: string;
  reward: number;
  difficulty: number;
  visits: number;
  openBranches: bigint[];
  cursor: number;
  lastReplayMs: number | null;
  /**
   * Open branches this lane dispatched on the seed (not saved: a restart may ask each once more
   * while cooling); null until the first, as most records are never replayed.
   */
  asked: Set<bigint> | null;
  /** The record's place in the score order: its score when last ranked (NaN scores as -Infinity) … */
  score: number;
  /** … then when it was last (re)inserted into the records map (equal scores keep map order); 0: not ranked. */
  seq: number;
}

/**
 * Better first: higher score, then older (the order a stable sort of the map by score gave).
 * The place lives in the record itself, not in an entry beside it: a campaign holds one record per
 * input it ran (up to the budget), and every byte of one is paid that many times.
 */
function before(a: ReplayRecord, b: ReplayRecord): boolean {
  return a.score > b.score || (a.score === b.score && a.seq < b.seq);
}

interface FallbackReplayOptions extends LaneCommonOptions {
  /** Record budget (LRU). Default 262144. */
  readonly maxRecords?: number;
  /** Records scoring at or below this are not replayed. Default 0.05. */
  readonly minScore?: number;
  /** Open branches of one record asked by one job (answered in one run), 1..64. Default 1. */
  readonly targetsPerJob?: number;
  /** The scheduler's target ledger: branches it does not allow now, or knows answered, are not asked. */
  readonly ledger?: TargetLedger;
  readonly scoring?: ScoringPolicy;
}

const SCHEMA = 1;

export class FallbackReplayLane implements Lane {
  readonly name = 'fallback' as const;
  /** A branch answered on any input is not asked again (the ledger's `answered`). */
  readonly asksOncePerCampaign = true;
  readonly #records = new Map<string, ReplayRecord>();
  /** Every record once, best first (see `before`); kept in step with `#records`. */
  #byScore: ReplayRecord[] = [];
  #seq = 0;
  readonly #maxRecords: number;
  readonly #minScore: number;
  readonly #targetsPerJob: number;
  readonly #ledger: TargetLedger | undefined;
  readonly #cooldownMs: number;
  readonly #seedLive: (seed: string) => boolean;
  readonly #scoring: ScoringPolicy;

  constructor(options: FallbackReplayOptions = {}) {
    this.#maxRecords = Math.max(128, Math.floor(options.maxRecords ?? 262144));
    this.#minScore = options.minScore ?? 0.05;
    const perJob = Math.floor(options.targetsPerJob ?? 1);
    // A group is at most 64 branches (replay-job.ts); anything else asks one.
    this.#targetsPerJob = Number.isFinite(perJob) ? Math.min(64, Math.max(1, perJob)) : 1;
    this.#ledger = options.ledger;
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
    const proposals: Proposal[] = [];
    const ledger = this.#ledger;
    /** Adds `r`'s proposal unless it has nothing to ask now; true when the output is full. */
    const offer = (r: ReplayRecord, ready: boolean): boolean => {
      let targets: readonly bigint[] = [0n];
      if (r.openBranches.length > 0) {
        // While cooling, only branches never asked here: a retry waits for the cooldown.
        const usable = (b: bigint): boolean => (ready || r.asked === null || !r.asked.has(b)) && !(ledger && (ledger.answered(b) || !ledger.allowed(r.seed, b, now)));
        targets = pickGroupFromCursor(r.openBranches, r.cursor, excluded, this.#targetsPerJob, usable);
        // Every open branch is in flight, backing off, answered, or (cooling) asked already.
        if (targets.length === 0) return false;
      } else if (!ready) return false;
      proposals.push({
        lane: 'fallback' as const,
        origin: r.seed,
        job: Object.freeze({
          seed: r.seed,
          targetBranch: targets[0]!,
          actions: Object.freeze(targets.slice(1).map((branch) => Object.freeze({ branch, kind: 'solve' as const }))),
        }),
      });
      return proposals.length >= outputLimit;
    };
    // Cooled records best first, straight from the score order; the cooling ones (only those with
    // open branches: an untargeted replay repeats a whole run, only after the cooldown) after them.
    const cooling: ReplayRecord[] = [];
    for (const r of this.#byScore) {
      if (!(r.score > this.#minScore)) break;
      if (!this.#seedLive(r.seed)) continue;
      if (cooledDown(now, r.lastReplayMs, this.#cooldownMs)) {
        if (offer(r, true)) return proposals;
      } else if (r.openBranches.length > 0) cooling.push(r);
    }
    // Longest since its last replay first, so cooling records take turns.
    cooling.sort((a, b) => a.lastReplayMs! - b.lastReplayMs! || b.score - a.score);
    for (const r of cooling) if (offer(r, false)) return proposals;
    return proposals;
  }

  /** Puts `r` (just inserted at the end of `#records`) in the score order, at its new score. */
  #rank(r: ReplayRecord): void {
    this.#unrank(r);
    this.#place(r);
    this.#byScore.splice(this.#position(r), 0, r);
  }

  /** Gives `r` its place at its current score, next in map order (`#byScore` is the caller's). */
  #place(r: ReplayRecord): void {
    const score = this.#scoring.fallback({ reward: r.reward, difficulty: r.difficulty, visits: r.visits, hasOpenBranches: r.openBranches.length > 0 });
    r.score = Number.isNaN(score) ? -Infinity : score;
    r.seq = ++this.#seq;
  }

  /** Takes `r` out of the score order, found by the place it was given (which nothing else changes). */
  #unrank(r: ReplayRecord): void {
    if (r.seq === 0) return;
    const at = this.#position(r);
    if (this.#byScore[at] === r) this.#byScore.splice(at, 1);
    r.seq = 0;
  }

  /** Index of the first entry of `#byScore` not better than `r` at its place (binary search). */
  #position(r: ReplayRecord): number {
    let lo = 0;
    let hi = this.#byScore.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (before(this.#byScore[mid]!, r)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Evicts the least recently observed records beyond the budget, from the score order too. */
  #evict(): void {
    while (this.#records.size > this.#maxRecords) {
      const oldest = this.#records.values().next().value as ReplayRecord;
      this.#records.delete(oldest.seed);
      this.#unrank(oldest);
    }
  }

  /** Commit contract: cursor moves past the job's last target and the replay cooldown starts. */
  commit(accepted: readonly Proposal[], now: number): void {
    for (const proposal of accepted) {
      const r = this.#records.get(proposal.origin);
      if (r === undefined) continue;
      r.lastReplayMs = now;
      const { targetBranch, actions } = proposal.job;
      const asked = (r.asked ??= new Set());
      if (targetBranch !== 0n) asked.add(targetBranch);
      for (const a of actions) asked.add(a.branch);
      r.cursor = cursorPast(r.openBranches, r.cursor, actions.length > 0 ? actions[actions.length - 1]!.branch : targetBranch);
    }
  }

  /** Also called with `telemetry: null` for runs without telemetry (reward only). */
  observe(seed: string, telemetry: Telemetry | null, reward: number, _now: number): void {
    const r = clamp01(reward);
    const difficulty = telemetry ? difficultyOf(telemetry) : 0;
    let record = this.#records.get(seed);
    if (record === undefined) {
      record = { seed, reward: r, difficulty, visits: 1, openBranches: [...(telemetry?.openBranches ?? [])], cursor: 0, lastReplayMs: null, asked: null, score: 0, seq: 0 };
    } else {
      record.reward = 0.7 * record.reward + 0.3 * r;
      record.difficulty = Math.max(0.7 * record.difficulty, difficulty);
      record.visits += 1;
      if (telemetry) {
        // A settled target (sat/unsat) is never replayed again; reaching it is not required. A
        // group's members settle through the run's answers.
        const resolved = new Set<bigint>();
        if (telemetry.targetStatus === 'sat' || telemetry.targetStatus === 'unsat') resolved.add(telemetry.targetBranch);
        for (const answer of telemetry.answers ?? []) if (answer.status !== 'unknown') resolved.add(answer.branch);
        const merged = record.openBranches.filter((b) => !resolved.has(b));
        for (const b of telemetry.openBranches) if (!resolved.has(b) && !merged.includes(b)) merged.push(b);
        record.openBranches = merged.slice(0, MAX_OPEN_BRANCHES);
        if (record.asked !== null) for (const b of record.asked) if (!record.openBranches.includes(b)) record.asked.delete(b);
        record.cursor = record.openBranches.length === 0 ? 0 : record.cursor % record.openBranches.length;
      }
      this.#records.delete(seed);
    }
    this.#records.set(seed, record);
    this.#rank(record);
    this.#evict();
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
        asked: null,
        score: 0,
        seq: 0,
      };
    });
    this.#records.clear();
    this.#byScore = [];
    // A seed listed twice keeps its last record, at the map position of its first.
    for (const r of records.slice(-this.#maxRecords)) this.#records.set(r.seed, r);
    for (const r of this.#records.values()) {
      this.#place(r);
      this.#byScore.push(r);
    }
    this.#byScore.sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
  }
}
