/**
 * Edge-dependence lane (SYMCTS-style): one row per `(site, taken)` edge, holding the opposite
 * targets seen from that edge and a round-robin cursor over them. Rows that co-occur with many
 * others and were scheduled rarely come first. Row counters move only on commit, i.e. after the
 * whole target group was admitted.
 */
import type { Telemetry } from '../telemetry.js';
import { clamp01, isTerminalOutcome } from '../telemetry-metrics.js';
import { DEFAULT_SCORING, type ScoringPolicy } from '../scoring.js';
import {
  ageTerm,
  cooledDown,
  effectiveOutputLimit,
  rememberSeed,
  resolveCooldownMs,
  type Lane,
  type LaneCommonOptions,
  type ObserveContext,
  type Proposal,
} from './lane.js';
import { cursorPast, pickFromCursor } from './round-robin.js';
import { ageToTime, arr, bad, header, id, ids, int, num, numOrNull, obj, strings } from './state-codec.js';

const MASK64 = (1n << 64n) - 1n;
const GOLDEN = 11400714819323198485n;

/** 64-bit mix of `(site, taken)`; never 0. */
export function edgeId(site: bigint, taken: 0 | 1): bigint {
  const h = ((site & MASK64) * GOLDEN) & MASK64;
  const mixed = (h ^ (taken ? 0x9e3779b97f4a7c15n : 0xd1b54a32d192ed03n)) & MASK64;
  return mixed === 0n ? 1n : mixed;
}

interface EdgeRow {
  readonly edge: bigint;
  site: bigint;
  traced: number;
  /** Admitted dispatches from this row. */
  scheduled: number;
  lastSeenMs: number;
  lastScheduledMs: number | null;
  /** Last 4 distinct seeds, newest last. */
  corpus: string[];
  /** Opposite targets in first-seen order, at most 64. */
  targets: bigint[];
  /**
   * Per target, the seed whose trace last showed it: a branch id names a branch by its recent
   * history, so the target is on that seed's path, not necessarily on another corpus seed's
   * ('' = unknown, from an older snapshot: never proposed).
   */
  targetSeeds: string[];
  cursor: number;
  rewardEma: number;
  costEma: number;
  terminalFailures: number;
  successfulTargets: number;
  /** Distinct rows seen in the same trace, capped (the structural term). */
  coOccurring: number;
}

interface EdgeDependenceOptions extends LaneCommonOptions {
  /** Row budget, at least 128. Default 4096. */
  readonly maxRows?: number;
  /** Trace entries read per observation, at least 16. Default 128. */
  readonly traceCap?: number;
  readonly distances?: ReadonlyMap<bigint, number>;
  readonly scoring?: ScoringPolicy;
}

const MAX_ROW_TARGETS = 64;
const MAX_CO_OCCURRING = 4096;
const SCHEMA = 1;

export class EdgeDependenceLane implements Lane {
  readonly name = 'edge' as const;
  readonly #rows = new Map<bigint, EdgeRow>();
  readonly #maxRows: number;
  readonly #traceCap: number;
  readonly #cooldownMs: number;
  readonly #seedLive: (seed: string) => boolean;
  readonly #distances: ReadonlyMap<bigint, number>;
  readonly #scoring: ScoringPolicy;

  constructor(options: EdgeDependenceOptions = {}) {
    this.#maxRows = Math.max(128, Math.floor(options.maxRows ?? 4096));
    this.#traceCap = Math.max(16, Math.floor(options.traceCap ?? 128));
    this.#cooldownMs = resolveCooldownMs(options.cooldownMs);
    this.#seedLive = options.seedLive ?? (() => true);
    this.#distances = options.distances ?? new Map();
    this.#scoring = options.scoring ?? DEFAULT_SCORING;
  }

  size(): number {
    return this.#rows.size;
  }

  row(edge: bigint): Readonly<EdgeRow> | undefined {
    return this.#rows.get(edge);
  }

  rows(): readonly Readonly<EdgeRow>[] {
    return [...this.#rows.values()];
  }

  /**
   * One proposal per row: the target is the first one from the cursor that is not excluded and
   * whose seed (the one whose trace showed it) is live, proposed on that seed, so a directed run
   * reaches its target. A row whose targets are all excluded or without a live seed is skipped; a
   * row without targets proposes an untargeted replay of its corpus entry at
   * `scheduled mod |live corpus|` (newest first).
   * Ordered by score, each seed's best row first and the other rows behind as back-fill.
   */
  propose(limit: number, proposalLimit: number, now: number, excluded: ReadonlySet<bigint>): readonly Proposal[] {
    const outputLimit = effectiveOutputLimit(limit, proposalLimit);
    if (outputLimit === 0) return [];
    const candidates: { row: EdgeRow; seed: string; target: bigint; score: number }[] = [];
    for (const row of this.#rows.values()) {
      if (!cooledDown(now, row.lastScheduledMs, this.#cooldownMs)) continue;
      const live = [...row.corpus].reverse().filter(this.#seedLive);
      if (live.length === 0) continue;
      let target = 0n;
      let seed = live[row.scheduled % live.length]!;
      if (row.targets.length > 0) {
        const picked = pickFromCursor(row.targets, row.cursor, excluded, (i) => {
          const on = row.targetSeeds[i] ?? '';
          return on !== '' && this.#seedLive(on);
        });
        if (picked === undefined) continue;
        target = picked;
        seed = row.targetSeeds[row.targets.indexOf(picked)]!;
      }
      const d = this.#distances.get(row.site);
      const score = this.#scoring.edge({
        under: 1 / (1 + row.traced + 20 * row.scheduled),
        structural: Math.min(1, Math.log1p(row.coOccurring) / 8),
        directed: d === undefined ? 0 : 1 / (1 + d),
        utility: clamp01(row.rewardEma / Math.sqrt(Math.max(0.05, row.costEma))),
        hasTargets: row.targets.length > 0,
        success: Math.min(1, row.successfulTargets / 4),
        failurePenalty: Math.min(0.45, 0.08 * row.terminalFailures),
        age: ageTerm(now, row.lastScheduledMs, this.#cooldownMs),
      });
      candidates.push({ row, seed, target, score });
    }
    candidates.sort((a, b) => b.score - a.score);
    // Seed diversity first: the best row of each seed, then the remaining rows as back-fill.
    const firstOfSeed = new Set<string>();
    const diverse: typeof candidates = [];
    const rest: typeof candidates = [];
    for (const c of candidates) {
      if (firstOfSeed.has(c.seed)) rest.push(c);
      else {
        firstOfSeed.add(c.seed);
        diverse.push(c);
      }
    }
    return [...diverse, ...rest].slice(0, outputLimit).map((c) => ({
      lane: 'edge' as const,
      origin: c.row.edge.toString(),
      job: Object.freeze({ seed: c.seed, targetBranch: c.target, actions: Object.freeze([]) }),
    }));
  }

  /** Commit contract: the proposing row's `scheduled`, `lastScheduled` and cursor (past the dispatched target) move. */
  commit(accepted: readonly Proposal[], now: number): void {
    for (const proposal of accepted) {
      const row = this.#rows.get(BigInt(proposal.origin));
      if (row === undefined) continue;
      row.scheduled += 1;
      row.lastScheduledMs = now;
      row.cursor = cursorPast(row.targets, row.cursor, proposal.job.targetBranch);
    }
  }

  observe(seed: string, telemetry: Telemetry | null, reward: number, now: number, context: ObserveContext = {}): void {
    if (telemetry === null) return; // an untargeted run teaches this lane nothing
    const terminal = isTerminalOutcome(telemetry) ? telemetry.targetBranch : 0n;
    const failed =
      telemetry.targetBranch > 0n && (context.killed || telemetry.targetStatus === 'unknown' || !telemetry.targetReached)
        ? telemetry.targetBranch
        : 0n;
    const entries = telemetry.branchTrace.slice(0, this.#traceCap).filter((e) => e.site !== 0n);
    const edgesInRun = new Set<bigint>();
    for (const e of entries) edgesInRun.add(edgeId(e.site, e.taken));
    const r = context.killed ? 0 : clamp01(reward);
    const elapsedSec = Math.max(0, (context.elapsedMs ?? 0) / 1000);
    const touched = new Set<bigint>();
    for (const e of entries) {
      const edge = edgeId(e.site, e.taken);
      let row = this.#rows.get(edge);
      const first = row === undefined;
      if (row === undefined) {
        row = newRow(edge, e.site, now);
        this.#rows.set(edge, row);
      }
      const known = row.targets.indexOf(e.opposite);
      if (known >= 0) {
        // A repeated observation never moves the round-robin; it only names the latest seed the target is on.
        row.targetSeeds[known] = seed;
      } else if (e.opposite !== terminal) {
        row.targets.push(e.opposite);
        row.targetSeeds.push(seed);
        if (row.targets.length > MAX_ROW_TARGETS) {
          row.targets.shift();
          row.targetSeeds.shift();
          row.cursor = Math.max(0, row.cursor - 1);
        }
      }
      rememberSeed(row.corpus, seed);
      if (touched.has(edge)) continue;
      touched.add(edge);
      if (terminal > 0n && telemetry.targetStatus === 'sat' && row.targets.includes(terminal)) row.successfulTargets += 1;
      if ((failed > 0n && row.targets.includes(failed)) || (context.killed && telemetry.targetBranch === 0n)) row.terminalFailures += 1;
      const alpha = first ? 0.3 : 0.18;
      row.rewardEma = (1 - alpha) * row.rewardEma + alpha * r;
      if (elapsedSec > 0) row.costEma = (1 - alpha) * row.costEma + alpha * elapsedSec;
      row.coOccurring = Math.min(MAX_CO_OCCURRING, Math.max(row.coOccurring, edgesInRun.size - 1));
      row.traced += 1;
      row.lastSeenMs = now;
    }
    if (terminal > 0n) this.#retire(terminal);
    this.#prune();
  }

  toJSON(now: number): unknown {
    return {
      lane: 'edge',
      schema: SCHEMA,
      rows: [...this.#rows.values()].map((r) => ({
        edge: r.edge.toString(),
        site: r.site.toString(),
        traced: r.traced,
        scheduled: r.scheduled,
        lastSeenAgeMs: now - r.lastSeenMs,
        lastScheduledAgeMs: r.lastScheduledMs === null ? null : now - r.lastScheduledMs,
        corpus: [...r.corpus],
        targets: r.targets.map(String),
        targetSeeds: [...r.targetSeeds],
        cursor: r.cursor,
        rewardEma: r.rewardEma,
        costEma: r.costEma,
        terminalFailures: r.terminalFailures,
        successfulTargets: r.successfulTargets,
        coOccurring: r.coOccurring,
      })),
    };
  }

  restore(snapshot: unknown, now: number): void {
    const o = header(snapshot, 'edge', SCHEMA);
    const rows = arr(o.rows, 'rows').map((raw, i): EdgeRow => {
      const p = `rows[${i}]`;
      const r = obj(raw, p);
      const allTargets = ids(r.targets, `${p}.targets`);
      const targets = allTargets.slice(-MAX_ROW_TARGETS);
      // Older snapshots name no seed per target: '' (never proposed until a trace shows it again).
      const seeds = r.targetSeeds === undefined ? allTargets.map(() => '') : strings(r.targetSeeds, `${p}.targetSeeds`);
      if (seeds.length !== allTargets.length) bad(`${p}.targetSeeds`, `one seed per target (${allTargets.length})`);
      return {
        edge: id(r.edge, `${p}.edge`),
        site: id(r.site, `${p}.site`),
        traced: int(r.traced, `${p}.traced`),
        scheduled: int(r.scheduled, `${p}.scheduled`),
        lastSeenMs: now - num(r.lastSeenAgeMs, `${p}.lastSeenAgeMs`),
        lastScheduledMs: ageToTime(now, numOrNull(r.lastScheduledAgeMs, `${p}.lastScheduledAgeMs`)),
        corpus: strings(r.corpus, `${p}.corpus`).slice(-4),
        targets,
        targetSeeds: seeds.slice(-MAX_ROW_TARGETS),
        cursor: targets.length === 0 ? 0 : int(r.cursor, `${p}.cursor`) % targets.length,
        rewardEma: num(r.rewardEma, `${p}.rewardEma`),
        costEma: num(r.costEma, `${p}.costEma`),
        terminalFailures: int(r.terminalFailures, `${p}.terminalFailures`),
        successfulTargets: int(r.successfulTargets, `${p}.successfulTargets`),
        coOccurring: int(r.coOccurring, `${p}.coOccurring`),
      };
    });
    this.#rows.clear();
    for (const r of rows) this.#rows.set(r.edge, r);
    this.#prune();
  }

  /** A settled target leaves every row; cursors keep pointing at the same next target. */
  #retire(target: bigint): void {
    for (const row of this.#rows.values()) {
      const index = row.targets.indexOf(target);
      if (index < 0) continue;
      row.targets.splice(index, 1);
      row.targetSeeds.splice(index, 1);
      if (index < row.cursor) row.cursor -= 1;
      if (row.cursor >= row.targets.length) row.cursor = 0;
    }
  }

  #prune(): void {
    const excess = this.#rows.size - this.#maxRows;
    if (excess <= 0) return;
    const victims = [...this.#rows.values()]
      .sort(
        (a, b) =>
          Number(a.targets.length > 0) - Number(b.targets.length > 0) ||
          a.rewardEma - b.rewardEma ||
          a.lastSeenMs - b.lastSeenMs ||
          a.traced + 100 * a.scheduled - (b.traced + 100 * b.scheduled),
      )
      .slice(0, excess);
    for (const r of victims) this.#rows.delete(r.edge);
  }
}

function newRow(edge: bigint, site: bigint, now: number): EdgeRow {
  return {
    edge,
    site,
    traced: 0,
    scheduled: 0,
    lastSeenMs: now,
    lastScheduledMs: null,
    corpus: [],
    targets: [],
    targetSeeds: [],
    cursor: 0,
    rewardEma: 0,
    costEma: 0,
    terminalFailures: 0,
    successfulTargets: 0,
    coOccurring: 0,
  };
}
