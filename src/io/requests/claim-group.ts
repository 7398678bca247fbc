/**
 * `claimGroup`: claims one target group for this coordinator. A member held in the in-flight
 * mirror by another local owner answers `local-conflict` without asking the table (nothing
 * written, nothing reserved); an I/O failure or lock timeout rejects, with the records restored.
 */
import type { GroupClaimRequest, TargetClaimResult } from '../io-requests.js';
import { type RequestKind, targetKeys } from './request-kind.js';
import { planTargetClaims } from './target-claims.js';

type ClaimGroupRequest = { readonly kind: 'claimGroup'; readonly nowMs: number } & GroupClaimRequest;

export const claimGroup: RequestKind<ClaimGroupRequest, TargetClaimResult> = {
  kind: 'claimGroup',
  readOnly: false,
  keys: (request) => targetKeys(request.targets),
  plan(request, ctx) {
    const claim = planTargetClaims([request], request.nowMs, ctx);
    return {
      target: claim.ops,
      work: [],
      finish: (r) => {
        const { results, errors } = claim.finish(r.target);
        if (errors[0] !== undefined) throw errors[0];
        return results[0] as TargetClaimResult;
      },
    };
  },
};
