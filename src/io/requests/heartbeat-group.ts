/**
 * `heartbeatGroup`: renews every member of a target group, fenced by its token. A renewal keeps
 * the mirror's grant fresh; a refusal (stale token, lost member) drops the group from the mirror.
 */
import type { FenceResult } from '../../lease/lease-results.js';
import type { GroupFence } from '../io-requests.js';
import { type RequestKind, targetKeys, unwrap } from './request-kind.js';

type HeartbeatGroupRequest = { readonly kind: 'heartbeatGroup'; readonly nowMs: number } & GroupFence;

export const heartbeatGroup: RequestKind<HeartbeatGroupRequest, FenceResult> = {
  kind: 'heartbeatGroup',
  readOnly: false,
  keys: (request) => targetKeys(request.targets),
  plan(request, ctx) {
    const op = ctx.targetStore().planHeartbeatGroup(request.targets, request.token, { nowMs: request.nowMs });
    return {
      target: [op],
      work: [],
      finish: (r) => {
        const result = unwrap<FenceResult>(r.target[0]);
        if (result.ok) ctx.mirror.renewed(request.token, request.nowMs);
        else ctx.lost(request.token, request.targets, result.reason);
        return result;
      },
    };
  },
};
