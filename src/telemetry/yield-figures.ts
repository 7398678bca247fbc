/** Measured yield of full and directed first runs, as stats.json carries it (docs/scheduler.md "Full or directed: the yield split"). */

export interface StrategyYield {
  /** Edges new to the campaign and run time (slot plus triage; the field keeps its name), undecayed totals. */
  readonly newEdges: number;
  readonly solverMs: number;
  readonly runs: number;
  /** The decayed estimate the split uses. */
  readonly edgesPerSolverSecond: number;
}

export interface YieldFigures {
  readonly full: StrategyYield;
  readonly directed: StrategyYield;
  /** Share of first runs that are full right now. */
  readonly fullShare: number;
}
