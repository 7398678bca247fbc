/** `recoverExpired`: the table's leases expired at `nowMs` (its recoverExpired contract); runs after the batch's commit. */
import type { ExpiredLease } from '../../lease/lease-results.js';
import { NO_OPERATIONS, type RequestKind } from './request-kind.js';

export interface RecoverExpiredRequest {
  readonly kind: 'recoverExpired';
  readonly table: 'work' | 'target';
  readonly leaseTtlMs?: number;
  readonly limit?: number;
  readonly nowMs: number;
}

export const recoverExpired: RequestKind<RecoverExpiredRequest, ExpiredLease[]> = {
  kind: 'recoverExpired',
  readOnly: true,
  keys: () => [],
  plan(request, ctx) {
    const store = ctx.store(request.table);
    const options = { nowMs: request.nowMs, ...(request.leaseTtlMs !== undefined ? { leaseTtlMs: request.leaseTtlMs } : {}), ...(request.limit !== undefined ? { limit: request.limit } : {}) };
    return { ...NO_OPERATIONS, read: () => store.recoverExpired(options), finish: (_r, value) => value as ExpiredLease[] };
  },
};
