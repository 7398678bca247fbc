/**
 * `releaseGroups` (and, through `planReleases`, `releaseGroup`): releases target groups, each
 * fenced by its token. A released group leaves the mirror; a release that failed on I/O restored
 * the records, so the lease is still ours and the mirror keeps it.
 */
import { invalidOption } from '../../config/values.js';
import type { FenceResult } from '../../lease/lease-results.js';
import type { GroupFence } from '../io-requests.js';
import { type PlanContext, type Planned, type RequestKind, targetKeys, unwrap } from './request-kind.js';

export interface ReleaseGroupsRequest {
  readonly kind: 'releaseGroups';
  readonly claims: readonly GroupFence[];
  readonly nowMs: number;
}

export function planReleases(claims: readonly GroupFence[], nowMs: number, ctx: PlanContext): Planned<FenceResult[]> {
  if (!Array.isArray(claims)) throw invalidOption('claims', 'an array of { targets, token, answers? }', claims);
  const store = ctx.targetStore();
  const ops = claims.map((c) => store.planReleaseGroup(c.targets, c.token, c.answers !== undefined ? { answers: c.answers, nowMs } : {}));
  return {
    target: ops,
    work: [],
    finish: (r) => {
      const results = claims.map((c, i) => {
        const outcome = r.target[i];
        if (outcome?.ok) ctx.mirror.ended(c.token, c.targets, false);
        return outcome;
      });
      return results.map((o) => unwrap<FenceResult>(o));
    },
  };
}

export const releaseGroups: RequestKind<ReleaseGroupsRequest, FenceResult[]> = {
  kind: 'releaseGroups',
  readOnly: false,
  keys: (request) => (Array.isArray(request.claims) ? request.claims.flatMap((c) => targetKeys(c?.targets)) : []),
  plan: (request, ctx) => planReleases(request.claims, request.nowMs, ctx),
};
