/** Builders shared by the scheduler tests: telemetry from plain numbers, lane states from partials. */
import { parseTelemetry, type Telemetry } from '../../src/scheduler/telemetry.js';
import type { LocalReservations, ClaimOutcome, SharedTargetClaims } from '../../src/scheduler/admission-ports.js';
import { MapLocalReservations } from '../../src/scheduler/map-local-reservations.js';
import { Scheduler, type SchedulerInit } from '../../src/scheduler/scheduler.js';

export type TraceRow = [number, number, number, number, 0 | 1, 0 | 1];

export interface TelemetrySpec {
  target?: number;
  reached?: boolean;
  status?: 'sat' | 'unsat' | 'unknown' | 'none';
  trace?: TraceRow[];
  open?: number[];
  counters?: Partial<Record<'queries' | 'sat' | 'unsat' | 'unknown' | 'solverTimeUs' | 'generated', number>>;
}

export function telemetryJson(spec: TelemetrySpec = {}): Record<string, unknown> {
  return {
    schema: 'symfence-telemetry/1',
    targetBranch: String(spec.target ?? 0),
    targetReached: spec.reached ?? false,
    targetStatus: spec.status ?? 'none',
    branchTrace: (spec.trace ?? []).map(([p, a, o, s, t, i]) => [String(p), String(a), String(o), String(s), t, i]),
    openBranches: (spec.open ?? []).map(String),
    counters: { queries: 0, sat: 0, unsat: 0, unknown: 0, solverTimeUs: 0, generated: 0, ...spec.counters },
  };
}

export function tel(spec: TelemetrySpec = {}): Telemetry {
  return parseTelemetry(telemetryJson(spec));
}

export function sha(n: number): string {
  return n.toString(16).padStart(64, '0');
}

export interface PrefixNodeSpec {
  id: number;
  parent?: number;
  site?: number;
  status?: 'observed' | 'open' | 'timeout' | 'diverged' | 'sat' | 'unsat';
  visits?: number;
  attempts?: number;
  reward?: number;
  difficulty?: number;
  solverCost?: number;
  timeoutPenalty?: number;
  lastScheduledAgeMs?: number | null;
  seeds: string[];
  exactAttempts?: number;
  samplingAttempts?: number;
}

export function prefixSnapshot(nodes: PrefixNodeSpec[], queueEpoch = 0): unknown {
  return {
    lane: 'prefix',
    schema: 1,
    queueEpoch,
    nodes: nodes.map((n) => ({
      id: String(n.id),
      parent: String(n.parent ?? 0),
      site: String(n.site ?? 0),
      status: n.status ?? 'open',
      visits: n.visits ?? 0,
      attempts: n.attempts ?? 0,
      reward: n.reward ?? 0,
      difficulty: n.difficulty ?? 0,
      solverCost: n.solverCost ?? 0,
      timeoutPenalty: n.timeoutPenalty ?? 0,
      lastUpdateAgeMs: 0,
      lastScheduledAgeMs: n.lastScheduledAgeMs ?? null,
      seeds: n.seeds,
      exact: { attempts: n.exactAttempts ?? 0, successes: 0, rewardSum: 0 },
      sampling: { attempts: n.samplingAttempts ?? 0, successes: 0, rewardSum: 0 },
    })),
    constraints: [],
  };
}

export interface TransitionSpec {
  id: number;
  source?: number;
  site?: number;
  status?: 'open' | 'diverged' | 'timeout' | 'sat' | 'unsat';
  attempts?: number;
  reward?: number;
  difficulty?: number;
  seeds: string[];
}

export function cstgSnapshot(transitions: TransitionSpec[]): unknown {
  return {
    lane: 'cstg',
    schema: 1,
    scheduled: 0,
    nodeVisits: [],
    transitions: transitions.map((t) => ({
      id: String(t.id),
      source: String(t.source ?? 0),
      site: String(t.site ?? 0),
      status: t.status ?? 'open',
      observations: 1,
      attempts: t.attempts ?? 0,
      arrivals: 0,
      divergences: 0,
      reward: t.reward ?? 0,
      costMs: 0,
      difficulty: t.difficulty ?? 0,
      lastSeenAgeMs: 0,
      lastScheduledAgeMs: null,
      seeds: t.seeds,
    })),
  };
}

/** A scripted shared table: `decide(group, callIndex)` per group; records every call. */
export class ScriptedSharedClaims implements SharedTargetClaims {
  readonly calls: bigint[][][] = [];
  readonly released: { targets: readonly bigint[]; token: string }[][] = [];
  #tokens = 0;

  constructor(private readonly decide: (group: readonly bigint[], call: number) => ClaimOutcome | 'grant' | 'throw' = () => 'grant') {}

  async claimGroups(groups: readonly (readonly bigint[])[], _now: number): Promise<readonly ClaimOutcome[]> {
    const call = this.calls.length;
    this.calls.push(groups.map((g) => [...g]));
    const out: ClaimOutcome[] = [];
    for (const g of groups) {
      const d = this.decide(g, call);
      if (d === 'throw') throw Object.assign(new Error('shared table unavailable'), { code: 'EIO' });
      out.push(d === 'grant' ? { ok: true, token: `tok-${++this.#tokens}` } : d);
    }
    return out;
  }

  async releaseGroups(claims: readonly { targets: readonly bigint[]; token: string }[], _now: number): Promise<void> {
    this.released.push([...claims]);
  }

  /** Every group this table was asked for, in order, flattened to primaries. */
  primaries(): bigint[] {
    return this.calls.flat().map((g) => g[0]!);
  }
}

export const REJECT: ClaimOutcome = { ok: false, reason: 'conflict' };

/** A scheduler with registered seeds and the given lanes. */
export function scheduler(
  seeds: string[],
  init: Partial<SchedulerInit> & { lanes?: string; cooldownMs?: number } = {},
): { s: Scheduler; local: MapLocalReservations } {
  const local = (init.local as MapLocalReservations | undefined) ?? new MapLocalReservations();
  const s = new Scheduler({
    ...init,
    local: local as LocalReservations,
    options: { lanes: init.lanes ?? 'prefix,cstg,concurrency,edge,fallback', cooldownMs: init.cooldownMs ?? 0 },
  });
  seeds.forEach((seed, i) => s.addSeed(seed, { bytes: 16, sha256: sha(i + 1), path: `/queue/${seed}` }, 0));
  return { s, local };
}
