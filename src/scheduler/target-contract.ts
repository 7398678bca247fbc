/**
 * The target contract (docs/scheduler.md "Hints and the target contract"): the target group a job was admitted (leased)
 * for is exactly the group its solver runs. Hints may change how a job runs (focus, strategy) but
 * never what it targets once its group is leased; an untargeted job may pick up a target from a
 * hint, and then that new group must be claimed before dispatch (`claimDispatchGroup`).
 */
import type { ClaimRefusalReason, ClaimRefused } from '../lease/claim-outcome.js';
import type { ClaimAsk, LocalReservations, SharedTargetClaims } from './admission-ports.js';
import type { Focus, Hint } from './hints.js';
import { fitToGroup, normalizeActions, targetGroup, type ReplayJob } from './replay-job.js';

/** What the coordinator hands to a solver worker. */
export interface DispatchPlan {
  readonly job: ReplayJob;
  readonly focus?: Focus;
  readonly strategy?: number;
}

export interface ContractOutcome {
  readonly plan: DispatchPlan;
  /** `targetGroup(plan.job)`. */
  readonly group: readonly bigint[];
  /**
   * True when the plan's group was not covered by admission (an untargeted job gained a target
   * from a hint): call `claimDispatchGroup` before dispatch, and drop the hint target if it fails.
   */
  readonly needsClaim: boolean;
}

/**
 * Applies hints in order under the contract. The job's target and actions are frozen first; if
 * the frozen group is non-empty they are restored after every hint (focus and strategy changes
 * are kept). A `sample` action in the final plan forces strategy 6 (sampling).
 */
export function applyHints(base: DispatchPlan, hints: readonly (Hint | undefined)[]): ContractOutcome {
  const frozenJob = base.job;
  const frozenGroup = targetGroup(frozenJob);
  let job = frozenJob;
  let focus = base.focus;
  let strategy = base.strategy;
  for (const hint of hints) {
    if (hint === undefined) continue;
    if (hint.focus !== undefined) focus = hint.focus;
    if (hint.strategy !== undefined) strategy = hint.strategy;
    if (frozenGroup.length === 0 && (hint.targetBranch !== undefined || hint.actions !== undefined)) {
      // fitToGroup: a hint target plus 64 solve actions would otherwise run one branch unleased.
      job = fitToGroup({
        seed: job.seed,
        targetBranch: hint.targetBranch ?? job.targetBranch,
        actions: hint.actions !== undefined ? normalizeActions(hint.actions) : job.actions,
      });
    }
  }
  if (job.actions.some((a) => a.kind === 'sample')) strategy = 6;
  const group = targetGroup(job);
  const plan: DispatchPlan = Object.freeze({ job, ...(focus !== undefined ? { focus } : {}), ...(strategy !== undefined ? { strategy } : {}) });
  return { plan, group, needsClaim: frozenGroup.length === 0 && group.length > 0 };
}

/** A dispatch-time claim: granted (with a token when a shared table was asked), or a refused claim. */
export type DispatchClaim =
  | { readonly ok: true; readonly group: readonly bigint[]; readonly owner: number; readonly token?: string }
  /** `local-conflict`: another local owner holds a member; nothing was asked of the shared table. */
  | ClaimRefused<ClaimRefusalReason | 'local-conflict'>;

/**
 * Claims a hint-given group at dispatch time: local reserve (whole group) then, with a shared
 * table, one shared claim. On shared rejection or exception the local reservation is released
 * before returning or rethrowing, so a failed dispatch holds nothing.
 */
export async function claimDispatchGroup(
  group: readonly bigint[],
  owner: number,
  ports: { readonly local: LocalReservations; readonly shared?: SharedTargetClaims },
  now: number,
  ask?: ClaimAsk,
): Promise<DispatchClaim> {
  if (group.length === 0) return { ok: true, group, owner };
  if (!ports.local.tryReserveGroup(group, owner)) return { ok: false, reason: 'local-conflict' };
  if (ports.shared === undefined) return { ok: true, group, owner };
  let outcome;
  try {
    [outcome] = await ports.shared.claimGroups([group], now, [ask]);
  } catch (error) {
    ports.local.releaseGroup(group, owner);
    throw error;
  }
  if (outcome?.ok) return { ok: true, group, owner, token: outcome.token };
  ports.local.releaseGroup(group, owner);
  return { ok: false, reason: outcome?.reason ?? 'error', ...(outcome?.detail !== undefined ? { detail: outcome.detail } : {}) };
}
