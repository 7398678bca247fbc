/**
 * Lane scoring behind one small interface, so research scorers (MultiGo, ColorGo, MDP value
 * iteration, TACO, LinUCB …) can be plugged in later without touching selection or admission.
 * Every input is a plain feature record in [0, 1] unless stated; the default formulas are listed
 * in docs/scheduler.md and must stay in sync with it.
 */

export interface PrefixFeatures {
  /** `max(reward, 0.92·parent.reward)`. */
  readonly expected: number;
  /** UCT term `sqrt(ln(1 + totalAttempts) / (1 + attempts))`. */
  readonly exploration: number;
  readonly difficulty: number;
  /** `1 − (visits + 1)/(siblingVisits + siblingCount)`, siblings share (parent, site). */
  readonly rarity: number;
  /** `1/(1 + d)` for the site's guidance distance d, else 0. */
  readonly directed: number;
  readonly age: number;
  /** `min(1, 0.45·solverCost + 0.55·timeoutPenalty)`. */
  readonly costPenalty: number;
}

export interface CstgFeatures {
  /** `(arrivals + 1)/(attempts + 2)`. */
  readonly arrivalProbability: number;
  /** `(divergences + 1)/(attempts + 2)`. */
  readonly divergenceProbability: number;
  /** `(s + 1)/(s + t + 2)` for source visits s and target visits t. */
  readonly reachability: number;
  /** `1/sqrt(1 + t)`. */
  readonly novelty: number;
  readonly reward: number;
  readonly difficulty: number;
  readonly age: number;
  /** `min(1, ln(1 + costSec/max(1, attempts))/4)`. */
  readonly costTerm: number;
}

export interface EdgeFeatures {
  /** `1/(1 + traced + 20·scheduled)`. */
  readonly under: number;
  /** `min(1, ln(1 + coOccurringRows)/8)`. */
  readonly structural: number;
  readonly directed: number;
  /** `clamp01(rewardEma / sqrt(max(0.05, costEma)))`. */
  readonly utility: number;
  readonly hasTargets: boolean;
  /** `min(1, successfulTargets/4)`. */
  readonly success: number;
  /** `min(0.45, 0.08·terminalFailures)`. */
  readonly failurePenalty: number;
  readonly age: number;
}

export interface ConcurrencyFeatures {
  readonly bestDistance: number;
  readonly reward: number;
  readonly visits: number;
  readonly hasOpenBranches: boolean;
}

export interface FallbackFeatures {
  readonly reward: number;
  readonly difficulty: number;
  readonly visits: number;
  readonly hasOpenBranches: boolean;
}

export interface ScoringPolicy {
  prefix(f: PrefixFeatures): number;
  cstg(f: CstgFeatures): number;
  edge(f: EdgeFeatures): number;
  concurrency(f: ConcurrencyFeatures): number;
  fallback(f: FallbackFeatures): number;
}

/** The default formulas (docs/scheduler.md, "Scoring"). */
export const DEFAULT_SCORING: ScoringPolicy = Object.freeze({
  prefix: (f: PrefixFeatures) =>
    0.34 * f.expected + 0.22 * f.exploration + 0.16 * f.difficulty + 0.14 * f.rarity + 0.08 * f.directed + 0.06 * f.age - 0.16 * f.costPenalty,
  cstg: (f: CstgFeatures) =>
    0.28 * f.arrivalProbability +
    0.24 * f.reachability +
    0.18 * f.novelty +
    0.15 * f.reward +
    0.1 * f.difficulty +
    0.05 * f.age -
    0.18 * f.divergenceProbability -
    0.08 * f.costTerm,
  edge: (f: EdgeFeatures) =>
    0.35 * f.under +
    0.18 * f.structural +
    0.16 * f.directed +
    0.14 * f.utility +
    0.1 * (f.hasTargets ? 1 : 0) +
    0.04 * f.success +
    0.03 * f.age -
    f.failurePenalty,
  concurrency: (f: ConcurrencyFeatures) =>
    0.58 / (1 + f.bestDistance) + 0.25 * f.reward + 0.12 / Math.sqrt(Math.max(1, f.visits)) + (f.hasOpenBranches ? 0.2 : 0),
  fallback: (f: FallbackFeatures) =>
    0.45 * f.reward + 0.25 * f.difficulty + 0.15 / Math.sqrt(Math.max(1, f.visits)) + (f.hasOpenBranches ? 0.15 : 0),
});
