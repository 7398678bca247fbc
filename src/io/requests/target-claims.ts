/**
 * Target claims with mirror coherence, shared by `claimGroup` and `claimGroups`: every operation
 * is planned (validated) first, so a bad group rejects the request before anything is reserved;
 * then each group is reserved locally in the in-flight mirror, and settled after the commit.
 */
import { InternalError, toErrorData } from '../../errors.js';
import { invalidOption } from '../../config/values.js';
import type { LeaseOperation, OperationOutcome } from '../../lease/lease-operation.js';
import type { GroupClaimResult } from '../../lease/lease-results.js';
import type { BatchClaimResult, GroupClaimRequest } from '../io-requests.js';
import type { PlanContext } from './request-kind.js';

interface PlannedClaims {
  readonly ops: LeaseOperation<unknown>[];
  /** Per group: the claim's result, or (I/O failure, lock timeout) a `failed` entry and its error. */
  finish(outcomes: readonly OperationOutcome<unknown>[]): { results: BatchClaimResult[]; errors: unknown[] };
}

export function planTargetClaims(groups: readonly GroupClaimRequest[], nowMs: number, ctx: PlanContext): PlannedClaims {
  const store = ctx.targetStore();
  const planned = groups.map((g) => {
    const mirrorOwner = checkMirrorOwner(g?.mirrorOwner);
    return { group: g, mirrorOwner, op: store.planClaimGroup(g.targets, g.payload, { owner: ctx.coordinatorId, worker: mirrorOwner, nowMs, ...(g.input !== undefined ? { input: g.input } : {}), ...(g.anyInput !== undefined ? { anyInput: g.anyInput } : {}), ...(g.backoff !== undefined ? { backoff: g.backoff } : {}) }) };
  });
  const prepared = planned.map((p) => ({ ...p, local: ctx.mirror.prepareClaim(p.group.targets, p.mirrorOwner) }));
  const ops = prepared.filter((p) => p.local.ok).map((p) => p.op as LeaseOperation<unknown>);
  return {
    ops,
    finish: (outcomes) => {
      let next = 0;
      const results: BatchClaimResult[] = [];
      const errors: unknown[] = [];
      const resultOf = prepared.map((p) => {
        if (!p.local.ok) return undefined;
        const outcome = outcomes[next++];
        return { outcome, result: outcome?.ok ? (outcome.value as GroupClaimResult) : undefined };
      });
      // A member this request reserved for one group, that a later group of the same owner took as
      // the caller's, stays reserved when the first group is refused and the later one granted.
      const grantedByOwner = new Map<number, Set<bigint>>();
      prepared.forEach((p, i) => {
        if (!resultOf[i]?.result?.ok) return;
        const members = grantedByOwner.get(p.mirrorOwner) ?? new Set<bigint>();
        for (const t of p.group.targets) members.add(t);
        grantedByOwner.set(p.mirrorOwner, members);
      });
      for (const [i, p] of prepared.entries()) {
        if (!p.local.ok) {
          results.push(p.local);
          errors.push(undefined);
          continue;
        }
        const { outcome, result } = resultOf[i]!;
        const keep = result?.ok ? undefined : grantedByOwner.get(p.mirrorOwner);
        const selfReserved = keep === undefined ? p.local.selfReserved : p.local.selfReserved.filter((t) => !keep.has(t));
        ctx.mirror.settleClaim(p.group.targets, p.mirrorOwner, selfReserved, result, nowMs);
        if (result) {
          results.push(result);
          errors.push(undefined);
          continue;
        }
        const error = outcome ? (outcome as { error: unknown }).error : new InternalError('I/O service lost a claim outcome');
        const data = toErrorData(error);
        results.push({ ok: false, reason: 'failed', code: data.code, message: data.message });
        errors.push(error);
      }
      return { results, errors };
    },
  };
}

function checkMirrorOwner(owner: unknown): number {
  if (typeof owner !== 'number' || !Number.isInteger(owner) || owner < 1 || owner > 0xffff_ffff) {
    throw invalidOption('mirrorOwner', 'an integer in 1..2^32−1 (the in-flight set owner number)', owner);
  }
  return owner;
}
