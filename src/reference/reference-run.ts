/**
 * TEST AND DEMO FIXTURE. What one reference-solver run computes, without any I/O: walk the maze on
 * the input, pick the branches to flip, solve each, and describe the run as `symfence-telemetry/1`.
 *
 * Which branches are flipped:
 * - directed (a target and/or `solve`/`sample` actions): every step on the path whose *opposite* id
 *   is the target or an action branch with kind solve/sample; `skip` actions are never solved (even
 *   when they name the target);
 * - untargeted: the opposite of every step on the path (what plain SymCC does).
 * Solving step k keeps steps 0..k-1 as they went and negates step k. Solutions equal to the input
 * or to an earlier solution are not written.
 */
import type { ActionKind } from '../solver/solver-types.js';
import { walkMaze, type Maze, type MazeStep } from './maze.js';
import { solveConstraints } from './maze-solver.js';

const MAX_TRACE = 512;
const MAX_OPEN = 256;
/** Synthetic, deterministic solver cost: a real clock would make runs non-reproducible. */
const QUERY_BASE_US = 50;
const QUERY_PER_CONSTRAINT_US = 10;

export interface ReferenceJob {
  readonly targetBranch: bigint;
  readonly actions: ReadonlyMap<bigint, ActionKind>;
}

export interface ReferenceTelemetry {
  readonly schema: 'symfence-telemetry/1';
  readonly targetBranch: string;
  readonly targetReached: boolean;
  readonly targetStatus: 'sat' | 'unsat' | 'unknown' | 'none';
  readonly branchTrace: readonly (readonly [string, string, string, string, number, number])[];
  readonly openBranches: readonly string[];
  readonly counters: {
    readonly queries: number;
    readonly sat: number;
    readonly unsat: number;
    readonly unknown: number;
    readonly solverTimeUs: number;
    readonly generated: number;
  };
}

export interface ReferenceRun {
  readonly solutions: readonly Uint8Array[];
  readonly telemetry: ReferenceTelemetry;
  /** Cumulative solver time after each query, for `[STAT] SMT:` lines. */
  readonly statSolvingTimesUs: readonly number[];
  /** The input reaches an `abort` node: the target crashes after solving. */
  readonly crashes: boolean;
}

export function parseActionsText(text: string): Map<bigint, ActionKind> {
  const actions = new Map<bigint, ActionKind>();
  for (const line of text.split('\n')) {
    const [branch, kind] = line.trim().split(/\s+/);
    if (!branch || !kind || !/^\d+$/.test(branch)) continue;
    const k = kind.toLowerCase();
    if ((k === 'solve' || k === 'sample' || k === 'skip') && !actions.has(BigInt(branch))) actions.set(BigInt(branch), k);
  }
  return actions;
}

function wanted(step: MazeStep, job: ReferenceJob | null): boolean {
  if (job === null) return true;
  const kind = job.actions.get(step.opposite);
  if (kind === 'skip') return false;
  if (kind === 'solve' || kind === 'sample') return true;
  return job.targetBranch !== 0n && step.opposite === job.targetBranch;
}

export function runReference(maze: Maze, input: Uint8Array, job: ReferenceJob | null): ReferenceRun {
  const walk = walkMaze(maze, input);
  const solutions: Uint8Array[] = [];
  const seen = new Set<string>([Buffer.from(input).toString('hex')]);
  const statSolvingTimesUs: number[] = [];
  const queried = new Set<number>();
  const open: string[] = [];
  let queries = 0;
  let sat = 0;
  let unsat = 0;
  let unknown = 0;
  let solverTimeUs = 0;
  let targetStatus: ReferenceTelemetry['targetStatus'] = 'none';
  const target = job?.targetBranch ?? 0n;
  let targetReached = false;

  walk.steps.forEach((step, k) => {
    if (target !== 0n && (step.actual === target || step.opposite === target)) targetReached = true;
    if (!wanted(step, job)) {
      if (open.length < MAX_OPEN) open.push(step.opposite.toString(10));
      return;
    }
    queried.add(k);
    queries += 1;
    const constraints = walk.steps.slice(0, k).map((s) => ({ test: s.test, want: s.taken }));
    constraints.push({ test: step.test, want: !step.taken });
    solverTimeUs += QUERY_BASE_US + QUERY_PER_CONSTRAINT_US * constraints.length;
    statSolvingTimesUs.push(solverTimeUs);
    const outcome = solveConstraints(input, constraints);
    if (step.opposite === target) targetStatus = outcome.status;
    if (outcome.status === 'sat') {
      sat += 1;
      const key = Buffer.from(outcome.input).toString('hex');
      if (!seen.has(key)) {
        seen.add(key);
        solutions.push(outcome.input);
      }
    } else if (outcome.status === 'unsat') {
      unsat += 1;
    } else {
      unknown += 1;
      if (open.length < MAX_OPEN) open.push(step.opposite.toString(10));
    }
  });

  const branchTrace = walk.steps
    .slice(0, MAX_TRACE)
    .map((s, k) => [s.parent.toString(10), s.actual.toString(10), s.opposite.toString(10), String(s.site), s.taken ? 1 : 0, queried.has(k) ? 1 : 0] as const);
  return {
    solutions,
    statSolvingTimesUs,
    crashes: walk.aborted,
    telemetry: {
      schema: 'symfence-telemetry/1',
      targetBranch: target.toString(10),
      targetReached,
      targetStatus,
      branchTrace,
      openBranches: open,
      counters: { queries, sat, unsat, unknown, solverTimeUs, generated: solutions.length },
    },
  };
}
