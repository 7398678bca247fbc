/** `snapshotCounts`: counts a table's records by state at `nowMs`; runs after the batch's commit. */
import type { LeaseCounts } from '../../lease/lease-results.js';
import { NO_OPERATIONS, type RequestKind } from './request-kind.js';

export interface SnapshotCountsRequest {
  readonly kind: 'snapshotCounts';
  readonly table: 'work' | 'target';
  readonly nowMs: number;
}

export const snapshotCounts: RequestKind<SnapshotCountsRequest, LeaseCounts> = {
  kind: 'snapshotCounts',
  readOnly: true,
  keys: () => [],
  plan(request, ctx) {
    const store = ctx.store(request.table);
    return { ...NO_OPERATIONS, read: () => store.snapshotCounts({ nowMs: request.nowMs }), finish: (_r, value) => value as LeaseCounts };
  },
};
