/**
 * `snapshotRecords`: reads a table's records; runs after the batch's commit. `corrupt: 'reject'`
 * (the table's default) fails on a corrupt record, `'skip'` leaves it out.
 */
import { invalidOption } from '../../config/values.js';
import type { SnapshotEntry } from '../../lease/lease-results.js';
import { NO_OPERATIONS, type RequestKind } from './request-kind.js';

export interface SnapshotRecordsRequest {
  readonly kind: 'snapshotRecords';
  readonly table: 'work' | 'target';
  readonly limit?: number;
  readonly corrupt?: 'reject' | 'skip';
}

export const snapshotRecords: RequestKind<SnapshotRecordsRequest, SnapshotEntry[]> = {
  kind: 'snapshotRecords',
  readOnly: true,
  keys: () => [],
  plan(request, ctx) {
    const store = ctx.store(request.table);
    if (request.corrupt !== undefined && request.corrupt !== 'reject' && request.corrupt !== 'skip') throw invalidOption('corrupt', 'reject or skip', request.corrupt);
    const options = { ...(request.limit !== undefined ? { limit: request.limit } : {}), ...(request.corrupt !== undefined ? { corrupt: request.corrupt } : {}) };
    return { ...NO_OPERATIONS, read: () => store.snapshotRecords(options), finish: (_r, value) => value as SnapshotEntry[] };
  },
};
