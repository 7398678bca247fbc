/** `claim`: claims one work item for this coordinator (the work table's claim contract). */
import type { ClaimResult } from '../../lease/lease-results.js';
import { type RequestKind, unwrap } from './request-kind.js';

export interface ClaimRequest {
  readonly kind: 'claim';
  readonly workId: string;
  readonly payload: object;
  readonly worker?: number;
  readonly leaseTtlMs?: number;
  /** A done record's commit manifest with the refusal (the table's `doneCommit`). */
  readonly doneCommit?: boolean;
  readonly nowMs: number;
}

export const claim: RequestKind<ClaimRequest, ClaimResult> = {
  kind: 'claim',
  readOnly: false,
  keys: (request) => [`w:${request.workId}`],
  plan(request, ctx) {
    const op = ctx.workStore().planClaim(request.workId, request.payload, {
      owner: ctx.coordinatorId,
      worker: request.worker,
      nowMs: request.nowMs,
      ...(request.leaseTtlMs !== undefined ? { leaseTtlMs: request.leaseTtlMs } : {}),
      ...(request.doneCommit === true ? { doneCommit: true } : {}),
    });
    return { target: [], work: [op], finish: (r) => unwrap<ClaimResult>(r.work[0]) };
  },
};
