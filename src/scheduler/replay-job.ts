/**
 * Job identity (docs/scheduler.md "Jobs and target groups"): a `ReplayJob` is one SymCC run on one seed, with an optional primary
 * target branch and an ordered S2F action plan for other opposite branches on the same path.
 */
import { InvalidJobError } from '../errors.js';
import { toBranchId } from './branch-id.js';

export type ActionKind = 'solve' | 'sample' | 'skip';

/** One S2F action: what the runtime should do when it reaches the opposite branch `branch`. */
export interface S2FAction {
  readonly branch: bigint;
  readonly kind: ActionKind;
}

export interface ReplayJob {
  /** Seed id as registered with the scheduler (`Scheduler.addSeed`). */
  readonly seed: string;
  /** Primary target; `0n` = none. */
  readonly targetBranch: bigint;
  readonly actions: readonly S2FAction[];
}

/** At most this many actions per job, and members per target group. */
export const MAX_ACTIONS = 64;
export const MAX_GROUP_SIZE = 64;

const ACTION_KINDS: ReadonlySet<string> = new Set(['solve', 'sample', 'skip']);

/**
 * Normalises a raw action list: entries are `{ branch, kind }` objects or `[branch, kind]` pairs;
 * branch ids outside 1..2^64−1 and kinds other than solve/sample/skip (case-insensitive) are
 * dropped; the first action per branch wins; at most 64 are kept. Never throws on bad entries —
 * a malformed action is simply not part of the plan.
 */
export function normalizeActions(raw: unknown): readonly S2FAction[] {
  if (!Array.isArray(raw)) return [];
  const out: S2FAction[] = [];
  const seen = new Set<bigint>();
  for (const entry of raw) {
    if (out.length >= MAX_ACTIONS) break;
    let branchRaw: unknown;
    let kindRaw: unknown;
    if (Array.isArray(entry)) [branchRaw, kindRaw] = entry as unknown[];
    else if (typeof entry === 'object' && entry !== null) {
      branchRaw = (entry as { branch?: unknown }).branch;
      kindRaw = (entry as { kind?: unknown }).kind;
    } else continue;
    const branch = toBranchId(branchRaw);
    if (branch === 0n || typeof kindRaw !== 'string') continue;
    const kind = kindRaw.trim().toLowerCase();
    if (!ACTION_KINDS.has(kind) || seen.has(branch)) continue;
    seen.add(branch);
    out.push(Object.freeze({ branch, kind: kind as ActionKind }));
  }
  return Object.freeze(out);
}

/**
 * Builds a frozen, normalised job. The seed must be a non-empty string (else `ERR_INVALID_JOB`);
 * an invalid target becomes 0 (untargeted); actions are normalised by `normalizeActions`.
 */
export function normalizeJob(raw: { seed: unknown; targetBranch?: unknown; actions?: unknown }): ReplayJob {
  if (typeof raw !== 'object' || raw === null) {
    throw new InvalidJobError('a job must be an object { seed, targetBranch, actions }', { received: typeof raw });
  }
  if (typeof raw.seed !== 'string' || raw.seed.length === 0) {
    throw new InvalidJobError('job seed must be a non-empty string', { received: String(raw.seed) });
  }
  if (raw.actions !== undefined && !Array.isArray(raw.actions)) {
    throw new InvalidJobError('job actions must be an array of { branch, kind }', { received: typeof raw.actions });
  }
  return Object.freeze({
    seed: raw.seed,
    targetBranch: toBranchId(raw.targetBranch),
    actions: normalizeActions(raw.actions ?? []),
  });
}

/**
 * The target group G(job): primary (if > 0) then every non-skip action branch, de-duplicated,
 * order kept, at most 64. Empty = untargeted (no target lease needed).
 */
export function targetGroup(job: Pick<ReplayJob, 'targetBranch' | 'actions'>): readonly bigint[] {
  const group: bigint[] = [];
  const seen = new Set<bigint>();
  const add = (branch: bigint): void => {
    if (branch > 0n && !seen.has(branch) && group.length < MAX_GROUP_SIZE) {
      seen.add(branch);
      group.push(branch);
    }
  };
  add(job.targetBranch);
  for (const action of job.actions) if (action.kind !== 'skip') add(action.branch);
  return group;
}

/**
 * The job with every non-skip action that did not fit into `targetGroup(job)` removed, so that
 * the group leased for a job is exactly the set of branches its solver will solve (the target
 * contract). Only a primary plus 64 distinct non-skip actions (e.g. from a hint) overflows.
 */
export function fitToGroup(job: ReplayJob): ReplayJob {
  const group = new Set(targetGroup(job));
  if (job.actions.every((a) => a.kind === 'skip' || group.has(a.branch))) return job;
  return Object.freeze({ ...job, actions: Object.freeze(job.actions.filter((a) => a.kind === 'skip' || group.has(a.branch))) });
}

/** `(seed, primary)` key of the admission's seen-set. */
export function seedTargetKey(job: ReplayJob): string {
  return `${job.targetBranch.toString()}\u0000${job.seed}`;
}

/** The S2F action file format the runtime reads: one `<branch> <kind>\n` line per action. */
export function formatActionFile(actions: readonly S2FAction[]): string {
  return actions.map((a) => `${a.branch.toString()} ${a.kind}\n`).join('');
}
