/**
 * `heartbeatMany`: renews many work leases, each fenced by its token. Duplicate ids keep their
 * last token; the leases are renewed in ascending id order, in chunks the table accepts, and the
 * answer merges every chunk's renewed / lost / corrupt ids.
 */
import { invalidOption } from '../../config/values.js';
import type { LeaseOperation } from '../../lease/lease-operation.js';
import type { HeartbeatBatchResult } from '../../lease/lease-results.js';
import { MAX_HEARTBEAT_BATCH } from '../../lease/work-lease-table.js';
import { type RequestKind, unwrap } from './request-kind.js';

export interface HeartbeatManyRequest {
  readonly kind: 'heartbeatMany';
  readonly leases: readonly (readonly [string, string])[];
  readonly nowMs: number;
}

type HeartbeatManyAnswer = Omit<HeartbeatBatchResult, 'directoryBarriers'>;

export const heartbeatMany: RequestKind<HeartbeatManyRequest, HeartbeatManyAnswer> = {
  kind: 'heartbeatMany',
  readOnly: false,
  keys: (request) => (Array.isArray(request.leases) ? request.leases.map((l) => `w:${l?.[0]}`) : []),
  plan(request, ctx) {
    if (!Array.isArray(request.leases)) throw invalidOption('leases', 'an array of [workId, token] pairs', request.leases);
    const store = ctx.workStore();
    const sorted = [...new Map<string, string>(request.leases).entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const ops: LeaseOperation<unknown>[] = [];
    const step = store.heartbeatBatchSize ?? MAX_HEARTBEAT_BATCH;
    for (let start = 0; start < sorted.length; start += step) {
      ops.push(store.planHeartbeatMany(sorted.slice(start, start + step), { nowMs: request.nowMs }));
    }
    return {
      target: [],
      work: ops,
      finish: (r) => {
        const merged = { renewed: [] as string[], lost: [] as string[], corrupt: [] as string[] };
        for (const outcome of r.work) {
          const part = unwrap<HeartbeatManyAnswer>(outcome);
          merged.renewed.push(...part.renewed);
          merged.lost.push(...part.lost);
          merged.corrupt.push(...part.corrupt);
        }
        return merged;
      },
    };
  },
};
