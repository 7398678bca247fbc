/**
 * What the solver already learned about a target branch: settled (sat/unsat: never retry) or
 * unsettled (timeout/diverged: retry after an exponential back-off). LRU-bounded.
 */
import type { Telemetry } from '../telemetry.js';
import { evictOldest } from './round-robin.js';
import { arr, id, int, num, oneOf } from './state-codec.js';

type SummaryStatus = 'sat' | 'unsat' | 'timeout' | 'diverged';

interface ConstraintSummary {
  readonly status: SummaryStatus;
  readonly observations: number;
  /** Monotonic ms before which the branch is not retried; Infinity for settled branches. */
  readonly nextRetryMs: number;
}

const TIMEOUT_RETRY_BASE_MS = 30_000;
const DIVERGED_RETRY_BASE_MS = 5_000;
const MAX_RETRY_DELAY_MS = 3_600_000;

export class ConstraintSummaryCache {
  readonly #capacity: number;
  readonly #entries = new Map<bigint, ConstraintSummary>();

  constructor(capacity: number) {
    this.#capacity = Math.max(128, Math.floor(capacity));
  }

  get size(): number {
    return this.#entries.size;
  }

  get(branch: bigint): ConstraintSummary | undefined {
    return this.#entries.get(branch);
  }

  /**
   * Records the outcome of a targeted run. Not reached → diverged (back-off 5 s·2^k); reached and
   * sat/unsat → settled; reached and unknown → timeout (back-off 30 s·2^k); reached and none →
   * diverged. Delay capped at one hour. Untargeted runs teach nothing here.
   */
  observe(t: Telemetry, now: number): void {
    if (t.targetBranch === 0n) return;
    let status: SummaryStatus;
    if (!t.targetReached) status = 'diverged';
    else if (t.targetStatus === 'sat' || t.targetStatus === 'unsat') status = t.targetStatus;
    else if (t.targetStatus === 'unknown') status = 'timeout';
    else status = 'diverged';
    const previous = this.#entries.get(t.targetBranch);
    const observations = (previous?.observations ?? 0) + 1;
    let nextRetryMs = Number.POSITIVE_INFINITY;
    if (status === 'timeout' || status === 'diverged') {
      const base = status === 'timeout' ? TIMEOUT_RETRY_BASE_MS : DIVERGED_RETRY_BASE_MS;
      nextRetryMs = now + Math.min(MAX_RETRY_DELAY_MS, base * 2 ** Math.min(7, observations - 1));
    }
    this.#entries.delete(t.targetBranch);
    this.#entries.set(t.targetBranch, { status, observations, nextRetryMs });
    evictOldest(this.#entries, this.#capacity);
  }

  /** May this branch be scheduled at `now`? No entry → yes; settled → never; else after back-off. */
  allows(branch: bigint, now: number): boolean {
    const entry = this.#entries.get(branch);
    if (entry === undefined) return true;
    return now >= entry.nextRetryMs;
  }

  /** Retry deadlines are stored relative to `now` so they survive a restart with a new clock. */
  toJSON(now: number): unknown[] {
    return [...this.#entries].map(([branch, e]) => [
      branch.toString(),
      e.status,
      e.observations,
      Number.isFinite(e.nextRetryMs) ? Math.max(0, e.nextRetryMs - now) : null,
    ]);
  }

  restore(raw: unknown, now: number): void {
    const parsed = arr(raw, 'constraints').map((row, i) => {
      const r = arr(row, `constraints[${i}]`);
      const retry = r[3] === null ? null : num(r[3], `constraints[${i}][3]`);
      const entry: ConstraintSummary = {
        status: oneOf(r[1], ['sat', 'unsat', 'timeout', 'diverged'] as const, `constraints[${i}][1]`),
        observations: int(r[2], `constraints[${i}][2]`),
        nextRetryMs: retry === null ? Number.POSITIVE_INFINITY : now + Math.min(MAX_RETRY_DELAY_MS, retry),
      };
      return [id(r[0], `constraints[${i}][0]`), entry] as const;
    });
    this.#entries.clear();
    for (const [branch, entry] of parsed.slice(-this.#capacity)) this.#entries.set(branch, entry);
  }
}
