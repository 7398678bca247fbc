/** `sweepExpired`: drops mirrored groups whose lease expired without a heartbeat; answers how many. */
import { NO_OPERATIONS, type RequestKind } from './request-kind.js';

export interface SweepExpiredRequest {
  readonly kind: 'sweepExpired';
  readonly nowMs: number;
}

export const sweepExpired: RequestKind<SweepExpiredRequest, number> = {
  kind: 'sweepExpired',
  readOnly: true,
  keys: () => [],
  plan: (request, ctx) => ({ ...NO_OPERATIONS, read: async () => ctx.mirror.sweep(request.nowMs), finish: (_r, value) => value as number }),
};
