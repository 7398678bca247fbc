/**
 * Whether a failed trace load means the trace is no longer stored: `ERR_STAGED_FINDING` with
 * reason `missing`. The trace store's cap evicts the least recently used traces and keeps their
 * `done` records (docs/campaign.md "Shared traces"), so a done record naming a trace that is gone
 * is expected, not damage. An altered or unreadable trace is not this.
 */
import { codeOf } from '../errors.js';

export function isTraceGone(error: unknown): boolean {
  return codeOf(error) === 'ERR_STAGED_FINDING' && (error as { details?: { reason?: unknown } }).details?.reason === 'missing';
}
