/** `releaseGroup`: releases one target group, fenced by its token (see release-groups.ts). */
import type { FenceResult } from '../../lease/lease-results.js';
import type { GroupFence } from '../io-requests.js';
import { type RequestKind, targetKeys } from './request-kind.js';
import { planReleases } from './release-groups.js';

type ReleaseGroupRequest = { readonly kind: 'releaseGroup'; readonly nowMs: number } & GroupFence;

export const releaseGroup: RequestKind<ReleaseGroupRequest, FenceResult> = {
  kind: 'releaseGroup',
  readOnly: false,
  keys: (request) => targetKeys(request.targets),
  plan(request, ctx) {
    const planned = planReleases([{ targets: request.targets, token: request.token, ...(request.answers !== undefined ? { answers: request.answers } : {}) }], request.nowMs, ctx);
    return { ...planned, finish: (r, value) => planned.finish(r, value)[0]! };
  },
};
