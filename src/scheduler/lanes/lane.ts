/**
 * What every scheduler lane implements. The contract that makes admission transactional:
 * `propose` never mutates, `commit` is given only jobs whose whole target group was admitted,
 * and `observe` is the only other writer. Time is always passed in (`now`, monotonic ms).
 */
import { invalidOption } from '../../config/values.js';
import type { ReplayJob } from '../replay-job.js';
import type { Telemetry } from '../telemetry.js';

export type LaneName = 'frontier' | 'prefix' | 'cstg' | 'edge' | 'concurrency' | 'fallback';

/** A job as proposed by a lane. `origin` names the lane entry that produced it (for commit). */
export interface Proposal {
  readonly lane: LaneName;
  readonly job: ReplayJob;
  readonly origin: string;
}

/** Extra facts about the run being observed, when the caller has them. */
export interface ObserveContext {
  /** The job that ran (its actions drive per-action statistics). */
  readonly job?: ReplayJob;
  /** The solver was killed (timeout, lost lease, shutdown). */
  readonly killed?: boolean;
  readonly elapsedMs?: number;
}

export interface Lane {
  readonly name: LaneName;
  /**
   * True for a lane that asks a branch once in the campaign, on whichever input (it skips branches
   * the ledger knows answered on any input): its claims are refused for members answered on any
   * input anywhere in the campaign, not only on the job's own (docs/leases.md "Shared answers").
   */
  readonly asksOncePerCampaign?: boolean;
  /** Number of entries held (nodes, transitions, rows, records); used as the default backlog depth. */
  size(): number;
  /**
   * Ranked proposals, best first, at most `max(limit, proposalLimit)`. `limit` still shapes
   * quotas (Prefix high/low); `proposalLimit` only deepens the backlog. No side effects.
   * Candidates whose target is in `excluded` are not proposed.
   */
  propose(limit: number, proposalLimit: number, now: number, excluded: ReadonlySet<bigint>): readonly Proposal[];
  /**
   * Records that `accepted` (a subset of this lane's proposals, each fully admitted) were
   * dispatched: attempts, cooldowns, cursors move here and nowhere else.
   */
  commit(accepted: readonly Proposal[], now: number): void;
  /**
   * A committed job of this lane answered nothing and was rolled back (its dispatch failed on an
   * I/O error of the lease store, a stop dropped or aborted it, its target group was lost, its
   * set-up failed). A lane that dropped its branches at `commit` takes them back, as they
   * were before (absent: the lane's cooldown brings the entry back by itself).
   */
  reopen?(job: ReplayJob, now: number): void;
  /**
   * Feedback from a finished run on `seed`; `telemetry` null when the run brought none (an
   * untargeted run, or telemetry that was rejected): a lane that learns only from telemetry ignores it.
   */
  observe(seed: string, telemetry: Telemetry | null, reward: number, now: number, context?: ObserveContext): void;
  /**
   * JSON-safe state (ids as decimal strings, times as ages before `now`, so a snapshot survives a
   * restart with a new monotonic clock). Never contains leases.
   */
  toJSON(now: number): unknown;
  /** Replaces the state with a `toJSON()` snapshot taken "now"; throws `ERR_LANE_STATE` on bad input and then leaves the state unchanged. */
  restore(snapshot: unknown, now: number): void;
}

/** Options every lane shares. */
export interface LaneCommonOptions {
  /** Minimum time between two dispatches of the same entry. Default 30 000 ms. */
  readonly cooldownMs?: number;
  /** Is this seed still available? Candidates on dead seeds are skipped. Default: always. */
  readonly seedLive?: (seed: string) => boolean;
}

const DEFAULT_COOLDOWN_MS = 30_000;

/** Validated cooldown: a finite number of ms ≥ 0 (else `ERR_INVALID_OPTION`). */
export function resolveCooldownMs(value: number | undefined): number {
  if (value === undefined) return DEFAULT_COOLDOWN_MS;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw invalidOption('cooldownMs', 'a duration in ms ≥ 0', value);
  }
  return value;
}

/** Age term shared by several scorers: `min(1, (now − last)/max(1, cooldown))`, 1 when never scheduled. */
export function ageTerm(now: number, lastScheduledMs: number | null, cooldownMs: number): number {
  if (lastScheduledMs === null) return 1;
  return Math.min(1, Math.max(0, (now - lastScheduledMs) / Math.max(1, cooldownMs)));
}

export function cooledDown(now: number, lastScheduledMs: number | null, cooldownMs: number): boolean {
  return lastScheduledMs === null || now - lastScheduledMs >= cooldownMs;
}

/** Adds `seed` as the newest of at most `cap` distinct seeds. */
export function rememberSeed(seeds: string[], seed: string, cap = 4): void {
  const at = seeds.indexOf(seed);
  if (at >= 0) seeds.splice(at, 1);
  seeds.push(seed);
  while (seeds.length > cap) seeds.shift();
}

/** Newest seed that is still live, or undefined. */
export function newestLiveSeed(seeds: readonly string[], live: (seed: string) => boolean): string | undefined {
  for (let i = seeds.length - 1; i >= 0; i -= 1) {
    const seed = seeds[i]!;
    if (live(seed)) return seed;
  }
  return undefined;
}

export function effectiveOutputLimit(limit: number, proposalLimit: number): number {
  return limit <= 0 ? 0 : Math.max(limit, proposalLimit);
}
