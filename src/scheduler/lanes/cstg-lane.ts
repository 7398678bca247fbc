/**
 * CSTG lane: a concolic state-transition graph. A transition is keyed by the *opposite* prefix id
 * (the state a flip would reach); its counters say how often a run targeting it actually arrived
 * there. Jobs carry several of a seed's best transitions as solve/sample actions.
 */
import type { Telemetry } from '../telemetry.js';
import { clamp01, difficultyOf } from '../telemetry-metrics.js';
import type { S2FAction } from '../replay-job.js';
import { DEFAULT_SCORING, type ScoringPolicy } from '../scoring.js';
import {
  ageTerm,
  cooledDown,
  effectiveOutputLimit,
  newestLiveSeed,
  rememberSeed,
  resolveCooldownMs,
  type Lane,
  type LaneCommonOptions,
  type ObserveContext,
  type Proposal,
} from './lane.js';
import { evictOldest } from './round-robin.js';
import { ageToTime, arr, header, id, int, num, numOrNull, obj, oneOf, strings } from './state-codec.js';

type TransitionStatus = 'open' | 'diverged' | 'timeout' | 'sat' | 'unsat';
const STATUSES: readonly TransitionStatus[] = ['open', 'diverged', 'timeout', 'sat', 'unsat'];
const ACTIVE: ReadonlySet<TransitionStatus> = new Set(['open', 'diverged', 'timeout']);

interface Transition {
  readonly id: bigint;
  source: bigint;
  site: bigint;
  status: TransitionStatus;
  observations: number;
  /** Runs that targeted this transition (feedback, not commit, counts these). */
  attempts: number;
  arrivals: number;
  divergences: number;
  reward: number;
  /** EMA of elapsed time of targeted runs. */
  costMs: number;
  difficulty: number;
  lastSeenMs: number;
  lastScheduledMs: number | null;
  seeds: string[];
}

interface CstgOptions extends LaneCommonOptions {
  /** Transition budget, at least 128. Default 8192. */
  readonly maxTransitions?: number;
  /** Actions per job, clamped to [1, 64]. Default 16. */
  readonly actionCap?: number;
  readonly scoring?: ScoringPolicy;
}

const SCHEMA = 1;

export class CstgLane implements Lane {
  readonly name = 'cstg' as const;
  readonly #transitions = new Map<bigint, Transition>();
  /** Visits per actual prefix, LRU-bounded at 2·maxTransitions. */
  readonly #nodeVisits = new Map<bigint, number>();
  readonly #maxTransitions: number;
  readonly #actionCap: number;
  readonly #cooldownMs: number;
  readonly #seedLive: (seed: string) => boolean;
  readonly #scoring: ScoringPolicy;
  /** Committed (admitted) jobs. */
  #scheduled = 0;

  constructor(options: CstgOptions = {}) {
    this.#maxTransitions = Math.min(1_000_000, Math.max(128, Math.floor(options.maxTransitions ?? 8192)));
    this.#actionCap = Math.min(64, Math.max(1, Math.floor(options.actionCap ?? 16)));
    this.#cooldownMs = resolveCooldownMs(options.cooldownMs);
    this.#seedLive = options.seedLive ?? (() => true);
    this.#scoring = options.scoring ?? DEFAULT_SCORING;
  }

  size(): number {
    return this.#transitions.size;
  }

  get scheduled(): number {
    return this.#scheduled;
  }

  transition(branch: bigint): Readonly<Transition> | undefined {
    return this.#transitions.get(branch);
  }

  propose(limit: number, proposalLimit: number, now: number, excluded: ReadonlySet<bigint>): readonly Proposal[] {
    const outputLimit = effectiveOutputLimit(limit, proposalLimit);
    if (outputLimit === 0) return [];
    const candidates: { t: Transition; seed: string; score: number }[] = [];
    for (const t of this.#transitions.values()) {
      if (!ACTIVE.has(t.status) || excluded.has(t.id) || !cooledDown(now, t.lastScheduledMs, this.#cooldownMs)) continue;
      const seed = newestLiveSeed(t.seeds, this.#seedLive);
      if (seed === undefined) continue;
      const s = this.#nodeVisits.get(t.source) ?? 0;
      const v = this.#nodeVisits.get(t.id) ?? 0;
      const score = this.#scoring.cstg({
        arrivalProbability: (t.arrivals + 1) / (t.attempts + 2),
        divergenceProbability: (t.divergences + 1) / (t.attempts + 2),
        reachability: (s + 1) / (s + v + 2),
        novelty: 1 / Math.sqrt(1 + v),
        reward: t.reward,
        difficulty: t.difficulty,
        age: ageTerm(now, t.lastScheduledMs, this.#cooldownMs),
        costTerm: Math.min(1, Math.log1p(t.costMs / 1000 / Math.max(1, t.attempts)) / 4),
      });
      candidates.push({ t, seed, score });
    }
    candidates.sort((a, b) => b.score - a.score);
    const bySeed = new Map<string, Transition[]>();
    for (const c of candidates) {
      const list = bySeed.get(c.seed);
      if (list) list.push(c.t);
      else bySeed.set(c.seed, [c.t]);
    }
    const out: Proposal[] = [];
    const used = new Set<string>();
    for (const c of candidates) {
      if (out.length >= outputLimit) break;
      if (used.has(c.seed)) continue;
      used.add(c.seed);
      const actions: S2FAction[] = (bySeed.get(c.seed) ?? [])
        .slice(0, this.#actionCap)
        .map((t) => ({ branch: t.id, kind: t.attempts > 0 && t.difficulty >= 0.55 && (t.divergences + 1) / (t.attempts + 2) < 0.7 ? 'sample' : 'solve' }));
      out.push({ lane: 'cstg', origin: c.t.id.toString(), job: Object.freeze({ seed: c.seed, targetBranch: c.t.id, actions: Object.freeze(actions) }) });
    }
    return out;
  }

  /** Commit contract: cooldown starts for every non-skip action's transition; `scheduled` += jobs. Attempts move only on feedback. */
  commit(accepted: readonly Proposal[], now: number): void {
    for (const proposal of accepted) {
      for (const action of proposal.job.actions) {
        if (action.kind === 'skip') continue;
        const t = this.#transitions.get(action.branch);
        if (t !== undefined) t.lastScheduledMs = now;
      }
    }
    this.#scheduled += accepted.length;
  }

  observe(seed: string, telemetry: Telemetry | null, reward: number, now: number, context: ObserveContext = {}): void {
    if (telemetry === null) return; // an untargeted run teaches this lane nothing
    const targeted = telemetry.targetBranch;
    const difficulty = difficultyOf(telemetry);
    const elapsedMs = Math.max(0, context.elapsedMs ?? 0);
    const killed = context.killed ?? false;
    let targetSeen = false;
    const recordAttempt = (t: Transition): void => {
      t.attempts += 1;
      t.costMs = t.attempts === 1 ? elapsedMs : 0.75 * t.costMs + 0.25 * elapsedMs;
      t.reward = clamp01(0.72 * t.reward + 0.28 * clamp01(reward));
      t.lastSeenMs = now;
    };
    for (const entry of telemetry.branchTrace) {
      this.#visit(entry.actual);
      let t = this.#transitions.get(entry.opposite);
      if (t === undefined) {
        t = newTransition(entry.opposite, entry.parent, entry.site, now);
        this.#transitions.set(t.id, t);
      } else {
        t.source = entry.parent;
        t.site = entry.site;
      }
      t.observations += 1;
      t.lastSeenMs = now;
      t.difficulty = Math.max(0.75 * t.difficulty, difficulty);
      rememberSeed(t.seeds, seed);
      if (targeted > 0n && entry.opposite === targeted) {
        targetSeen = true;
        recordAttempt(t);
        applyOutcome(t, telemetry, killed || telemetry.counters.unknown > 0);
      }
    }
    if (targeted > 0n && !targetSeen) {
      // Truncated or empty trace: the explicit target outcome still counts.
      let t = this.#transitions.get(targeted);
      if (t === undefined && telemetry.targetReached) {
        t = newTransition(targeted, 0n, 0n, now);
        rememberSeed(t.seeds, seed);
        this.#transitions.set(targeted, t);
      }
      if (t !== undefined) {
        recordAttempt(t);
        applyOutcome(t, telemetry, killed);
      }
    }
    this.#prune();
  }

  toJSON(now: number): unknown {
    return {
      lane: 'cstg',
      schema: SCHEMA,
      scheduled: this.#scheduled,
      nodeVisits: [...this.#nodeVisits].map(([k, v]) => [k.toString(), v]),
      transitions: [...this.#transitions.values()].map((t) => ({
        id: t.id.toString(),
        source: t.source.toString(),
        site: t.site.toString(),
        status: t.status,
        observations: t.observations,
        attempts: t.attempts,
        arrivals: t.arrivals,
        divergences: t.divergences,
        reward: t.reward,
        costMs: t.costMs,
        difficulty: t.difficulty,
        lastSeenAgeMs: now - t.lastSeenMs,
        lastScheduledAgeMs: t.lastScheduledMs === null ? null : now - t.lastScheduledMs,
        seeds: [...t.seeds],
      })),
    };
  }

  restore(snapshot: unknown, now: number): void {
    const o = header(snapshot, 'cstg', SCHEMA);
    const scheduled = int(o.scheduled, 'scheduled');
    const visits = arr(o.nodeVisits, 'nodeVisits').map((row, i) => {
      const r = arr(row, `nodeVisits[${i}]`);
      return [id(r[0], `nodeVisits[${i}][0]`), int(r[1], `nodeVisits[${i}][1]`)] as const;
    });
    const transitions = arr(o.transitions, 'transitions').map((raw, i): Transition => {
      const p = `transitions[${i}]`;
      const t = obj(raw, p);
      return {
        id: id(t.id, `${p}.id`),
        source: id(t.source, `${p}.source`),
        site: id(t.site, `${p}.site`),
        status: oneOf(t.status, STATUSES, `${p}.status`),
        observations: int(t.observations, `${p}.observations`),
        attempts: int(t.attempts, `${p}.attempts`),
        arrivals: int(t.arrivals, `${p}.arrivals`),
        divergences: int(t.divergences, `${p}.divergences`),
        reward: num(t.reward, `${p}.reward`),
        costMs: num(t.costMs, `${p}.costMs`),
        difficulty: num(t.difficulty, `${p}.difficulty`),
        lastSeenMs: now - num(t.lastSeenAgeMs, `${p}.lastSeenAgeMs`),
        lastScheduledMs: ageToTime(now, numOrNull(t.lastScheduledAgeMs, `${p}.lastScheduledAgeMs`)),
        seeds: strings(t.seeds, `${p}.seeds`).slice(-4),
      };
    });
    this.#scheduled = scheduled;
    this.#nodeVisits.clear();
    for (const [k, v] of visits) this.#nodeVisits.set(k, v);
    this.#transitions.clear();
    for (const t of transitions) this.#transitions.set(t.id, t);
    this.#prune();
  }

  #visit(actual: bigint): void {
    const n = (this.#nodeVisits.get(actual) ?? 0) + 1;
    this.#nodeVisits.delete(actual);
    this.#nodeVisits.set(actual, n);
    evictOldest(this.#nodeVisits, 2 * this.#maxTransitions);
  }

  /** Over budget: settled transitions go first, then the lowest reward, oldest, least observed. */
  #prune(): void {
    const excess = this.#transitions.size - this.#maxTransitions;
    if (excess <= 0) return;
    const victims = [...this.#transitions.values()]
      .sort(
        (a, b) =>
          Number(ACTIVE.has(a.status)) - Number(ACTIVE.has(b.status)) ||
          a.reward - b.reward ||
          a.lastSeenMs - b.lastSeenMs ||
          a.observations - b.observations,
      )
      .slice(0, excess);
    for (const t of victims) this.#transitions.delete(t.id);
  }
}

function newTransition(branch: bigint, source: bigint, site: bigint, now: number): Transition {
  return {
    id: branch,
    source,
    site,
    status: 'open',
    observations: 0,
    attempts: 0,
    arrivals: 0,
    divergences: 0,
    reward: 0,
    costMs: 0,
    difficulty: 0,
    lastSeenMs: now,
    lastScheduledMs: null,
    seeds: [],
  };
}

/**
 * Outcome table: reached + sat/unsat → that status; reached + unknown → timeout; reached + none →
 * diverged (a divergence too); not reached → a divergence, `timeout` when `timedOut` else `diverged`.
 */
function applyOutcome(t: Transition, telemetry: Telemetry, timedOut: boolean): void {
  if (telemetry.targetReached) {
    t.arrivals += 1;
    if (telemetry.targetStatus === 'sat' || telemetry.targetStatus === 'unsat') t.status = telemetry.targetStatus;
    else if (telemetry.targetStatus === 'unknown') t.status = 'timeout';
    else {
      t.divergences += 1;
      t.status = 'diverged';
    }
  } else {
    t.divergences += 1;
    t.status = timedOut ? 'timeout' : 'diverged';
  }
}
