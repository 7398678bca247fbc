/**
 * Chooses each input's first run (`full`: solve every branch, or `trace`: learn the branches and
 * let directed frontier runs ask the ones the campaign wants) by measured yield: edges new to the
 * campaign per second of run time (slot plus triage, `JobFeedback.runMs`), kept per strategy (docs/scheduler.md "Full or directed: the yield
 * split").
 *
 *   yield(k)   = (E_k + 1) / (T_k + 10)            E_k, T_k: new edges and run-seconds of strategy k,
 *                                                 each observation first decaying both by 0.98
 *   fullShare  = clamp(yield(full) / (yield(full) + yield(directed)), 0.1, 0.9)
 *
 * The priors (1 edge in 10 s) make both strategies equal until measured; the 0.1..0.9 bound keeps
 * exploring the worse one; the decay lets the split follow a campaign whose easy edges run out.
 * The choice itself is deterministic: a running credit (like the scheduler share), so the share
 * holds over any number of inputs without randomness. Directed yield counts the trace runs too:
 * they exist only to feed the directed runs.
 */

type FirstRunChoice = 'full' | 'trace';
type YieldStrategy = 'full' | 'directed';
export type { YieldFigures } from '../telemetry/yield-figures.js';
import type { StrategyYield, YieldFigures } from '../telemetry/yield-figures.js';

export const MIN_FULL_SHARE = 0.1;
export const MAX_FULL_SHARE = 0.9;
const DECAY = 0.98;
const PRIOR_EDGES = 1;
const PRIOR_SECONDS = 10;

interface Arm {
  edges: number;
  seconds: number;
  totalEdges: number;
  totalMs: number;
  runs: number;
}

export class FirstRunBandit {
  readonly #arms: Record<YieldStrategy, Arm> = {
    full: { edges: 0, seconds: 0, totalEdges: 0, totalMs: 0, runs: 0 },
    directed: { edges: 0, seconds: 0, totalEdges: 0, totalMs: 0, runs: 0 },
  };
  #credit = 0;

  /** One committed run of `strategy`: the edges it added to the campaign and its solver time. */
  observe(strategy: YieldStrategy, newEdges: number, solverMs: number): void {
    if (!Number.isFinite(newEdges) || newEdges < 0 || !Number.isFinite(solverMs) || solverMs < 0) return;
    const arm = this.#arms[strategy];
    arm.edges = arm.edges * DECAY + newEdges;
    arm.seconds = arm.seconds * DECAY + solverMs / 1000;
    arm.totalEdges += newEdges;
    arm.totalMs += solverMs;
    arm.runs += 1;
  }

  fullShare(): number {
    const full = yieldOf(this.#arms.full);
    const directed = yieldOf(this.#arms.directed);
    return Math.min(MAX_FULL_SHARE, Math.max(MIN_FULL_SHARE, full / (full + directed)));
  }

  /** The next input's first run. */
  choose(): FirstRunChoice {
    this.#credit += this.fullShare();
    if (this.#credit >= 1) {
      this.#credit -= 1;
      return 'full';
    }
    return 'trace';
  }

  figures(): YieldFigures {
    const arm = (a: Arm): StrategyYield => ({ newEdges: a.totalEdges, solverMs: Math.round(a.totalMs), runs: a.runs, edgesPerSolverSecond: yieldOf(a) });
    return { full: arm(this.#arms.full), directed: arm(this.#arms.directed), fullShare: this.fullShare() };
  }
}

function yieldOf(arm: Arm): number {
  return (arm.edges + PRIOR_EDGES) / (arm.seconds + PRIOR_SECONDS);
}
