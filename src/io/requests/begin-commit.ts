/**
 * `beginCommit`: moves a held work lease to `committing` (optionally recording the commit
 * manifest), fenced by its token (the work table's beginCommit contract).
 */
import type { JsonObject } from '../../lease/lease-record.js';
import type { FenceResult } from '../../lease/lease-results.js';
import { type RequestKind, unwrap } from './request-kind.js';

export interface BeginCommitRequest {
  readonly kind: 'beginCommit';
  readonly workId: string;
  readonly token: string;
  readonly commit?: JsonObject;
  readonly nowMs: number;
}

export const beginCommit: RequestKind<BeginCommitRequest, FenceResult> = {
  kind: 'beginCommit',
  readOnly: false,
  keys: (request) => [`w:${request.workId}`],
  plan(request, ctx) {
    const op = ctx.workStore().planBeginCommit(request.workId, request.token, { nowMs: request.nowMs, ...(request.commit !== undefined ? { commit: request.commit } : {}) });
    return { target: [], work: [op], finish: (r) => unwrap<FenceResult>(r.work[0]) };
  },
};
