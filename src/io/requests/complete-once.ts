/** `completeOnce`: marks a `committing` work record `done`, at most once (the work table's contract). */
import type { CompletionResult } from '../../lease/lease-results.js';
import { type RequestKind, unwrap } from './request-kind.js';

export interface CompleteOnceRequest {
  readonly kind: 'completeOnce';
  readonly workId: string;
  readonly token: string;
  readonly nowMs: number;
}

export const completeOnce: RequestKind<CompleteOnceRequest, CompletionResult> = {
  kind: 'completeOnce',
  readOnly: false,
  keys: (request) => [`w:${request.workId}`],
  plan(request, ctx) {
    const op = ctx.workStore().planCompleteOnce(request.workId, request.token, { nowMs: request.nowMs });
    return { target: [], work: [op], finish: (r) => unwrap<CompletionResult>(r.work[0]) };
  },
};
