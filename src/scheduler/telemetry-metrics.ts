/**
 * Quantities derived from one telemetry record, shared by the lanes. Each is clamped to [0, 1].
 * The formulas are documented in docs/scheduler.md.
 */
import type { Telemetry } from './telemetry.js';

export function clamp01(x: number): number {
  return Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0;
}

/** `min(1, ln(1 + solverTimeUs/1000) / 10)`: solver time on a log scale (1 at ~22 s). */
export function solverCostOf(t: Telemetry): number {
  return clamp01(Math.log1p(t.counters.solverTimeUs / 1000) / 10);
}

/** Share of queries that ended `unknown` (timeouts or solver give-ups). */
export function timeoutRatioOf(t: Telemetry): number {
  return clamp01(t.counters.unknown / Math.max(1, t.counters.queries));
}

/**
 * Difficulty of the path this run took:
 * `0.35·solverCost + 0.30·timeoutRatio + 0.20·min(1, |open|/max(1, |trace|)) + 0.15·interesting/max(1, |trace|)`.
 */
export function difficultyOf(t: Telemetry): number {
  const traced = Math.max(1, t.branchTrace.length);
  const interesting = t.branchTrace.reduce((n, e) => n + e.interesting, 0);
  return clamp01(
    0.35 * solverCostOf(t) + 0.3 * timeoutRatioOf(t) + 0.2 * Math.min(1, t.openBranches.length / traced) + 0.15 * (interesting / traced),
  );
}

/** `true` when the run reached its target and the solver settled it (sat or unsat). */
export function isTerminalOutcome(t: Telemetry): boolean {
  return t.targetBranch > 0n && t.targetReached && (t.targetStatus === 'sat' || t.targetStatus === 'unsat');
}
