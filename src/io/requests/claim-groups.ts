/**
 * `claimGroups`: claims several target groups in one request (one admission round, one group
 * commit). Never rejects for one group's I/O failure: that group answers a `failed` entry (its
 * records restored, nothing held) and the others keep their results.
 */
import { invalidOption } from '../../config/values.js';
import type { BatchClaimResult, GroupClaimRequest } from '../io-requests.js';
import { type RequestKind, targetKeys } from './request-kind.js';
import { planTargetClaims } from './target-claims.js';

export interface ClaimGroupsRequest {
  readonly kind: 'claimGroups';
  readonly groups: readonly GroupClaimRequest[];
  readonly nowMs: number;
}

export const claimGroups: RequestKind<ClaimGroupsRequest, BatchClaimResult[]> = {
  kind: 'claimGroups',
  readOnly: false,
  keys: (request) => (Array.isArray(request.groups) ? request.groups.flatMap((g) => targetKeys(g?.targets)) : []),
  plan(request, ctx) {
    if (!Array.isArray(request.groups)) throw invalidOption('groups', 'an array of { targets, payload, mirrorOwner }', request.groups);
    const claim = planTargetClaims(request.groups, request.nowMs, ctx);
    return { target: claim.ops, work: [], finish: (r) => claim.finish(r.target).results };
  },
};
