/** `abandon`: gives a work lease back, fenced by its token (the work table's abandon contract). */
import type { FenceResult } from '../../lease/lease-results.js';
import { type RequestKind, unwrap } from './request-kind.js';

export interface AbandonRequest {
  readonly kind: 'abandon';
  readonly workId: string;
  readonly token: string;
}

export const abandon: RequestKind<AbandonRequest, FenceResult> = {
  kind: 'abandon',
  readOnly: false,
  keys: (request) => [`w:${request.workId}`],
  plan: (request, ctx) => ({ target: [], work: [ctx.workStore().planAbandon(request.workId, request.token)], finish: (r) => unwrap<FenceResult>(r.work[0]) }),
};
