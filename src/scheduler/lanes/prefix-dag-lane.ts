/**
 * Prefix DAG lane: UCT-style selection over prefix-sensitive branch nodes.
 *
 * Nodes come from the branch trace: every `actual` outcome becomes an `observed` node, every
 * `opposite` that the run reported in `openBranches` becomes an `open` node (a candidate target).
 * Candidates are split into a high queue (productive or promising) and a low queue; one job per
 * seed carries that seed's high candidates as solve/sample actions and its low candidates as skip.
 */
import type { Telemetry } from '../telemetry.js';
import { clamp01, difficultyOf, solverCostOf, timeoutRatioOf } from '../telemetry-metrics.js';
import type { ActionKind, S2FAction } from '../replay-job.js';
import { DEFAULT_SCORING, type PrefixFeatures, type ScoringPolicy } from '../scoring.js';
import { ConstraintSummaryCache } from './constraint-summary-cache.js';
import {
  ageTerm,
  cooledDown,
  effectiveOutputLimit,
  newestLiveSeed,
  rememberSeed,
  resolveCooldownMs,
  type Lane,
  type LaneCommonOptions,
  type ObserveContext,
  type Proposal,
} from './lane.js';
import { ageToTime, arr, bad, header, id, int, num, numOrNull, obj, oneOf, strings } from './state-codec.js';

type PrefixNodeStatus = 'observed' | 'open' | 'timeout' | 'diverged' | 'sat' | 'unsat';
const STATUSES: readonly PrefixNodeStatus[] = ['observed', 'open', 'timeout', 'diverged', 'sat', 'unsat'];
const ACTIVE: ReadonlySet<PrefixNodeStatus> = new Set(['open', 'timeout', 'diverged']);

interface ActionStats {
  attempts: number;
  successes: number;
  rewardSum: number;
}

interface PrefixNode {
  readonly id: bigint;
  parent: bigint;
  site: bigint;
  status: PrefixNodeStatus;
  visits: number;
  /** Committed non-skip dispatches: feeds the UCT exploration term. */
  attempts: number;
  reward: number;
  difficulty: number;
  solverCost: number;
  timeoutPenalty: number;
  lastUpdateMs: number;
  lastScheduledMs: number | null;
  /** Last 4 distinct seeds that reached this prefix, newest last. */
  seeds: string[];
  exact: ActionStats;
  sampling: ActionStats;
}

interface PrefixDagOptions extends LaneCommonOptions {
  /** Node budget, clamped to [128, 65536]. Default 4096. */
  readonly maxNodes?: number;
  /** Actions per job, clamped to [1, 64]. Default 16. */
  readonly actionCap?: number;
  /** Share of `limit` reserved for the high queue. Default 0.75. */
  readonly highQueueFraction?: number;
  /** Sampling attempts per node before `sample` is no longer chosen. Default 2. */
  readonly samplingBudget?: number;
  /** Site → distance guidance; nearer sites score higher. */
  readonly distances?: ReadonlyMap<bigint, number>;
  readonly scoring?: ScoringPolicy;
}

interface Candidate {
  readonly node: PrefixNode;
  readonly seed: string;
  readonly score: number;
  readonly high: boolean;
  readonly action: Exclude<ActionKind, 'skip'>;
}

const SCHEMA = 1;

export class PrefixDagLane implements Lane {
  readonly name = 'prefix' as const;
  readonly #nodes = new Map<bigint, PrefixNode>();
  readonly #constraints: ConstraintSummaryCache;
  readonly #maxNodes: number;
  readonly #actionCap: number;
  readonly #highFraction: number;
  readonly #samplingBudget: number;
  readonly #cooldownMs: number;
  readonly #seedLive: (seed: string) => boolean;
  readonly #distances: ReadonlyMap<bigint, number>;
  readonly #scoring: ScoringPolicy;
  /** Jobs committed so far; drives the limit-1 high/low rotation. */
  #queueEpoch = 0;

  constructor(options: PrefixDagOptions = {}) {
    this.#maxNodes = Math.min(65536, Math.max(128, Math.floor(options.maxNodes ?? 4096)));
    this.#actionCap = Math.min(64, Math.max(1, Math.floor(options.actionCap ?? 16)));
    this.#highFraction = clamp01(options.highQueueFraction ?? 0.75);
    this.#samplingBudget = Math.max(0, Math.floor(options.samplingBudget ?? 2));
    this.#cooldownMs = resolveCooldownMs(options.cooldownMs);
    this.#seedLive = options.seedLive ?? (() => true);
    this.#distances = options.distances ?? new Map();
    this.#scoring = options.scoring ?? DEFAULT_SCORING;
    this.#constraints = new ConstraintSummaryCache(2 * this.#maxNodes);
  }

  size(): number {
    return this.#nodes.size;
  }

  get queueEpoch(): number {
    return this.#queueEpoch;
  }

  get constraints(): ConstraintSummaryCache {
    return this.#constraints;
  }

  /** Read-only view of one node (tests, diagnostics). */
  node(branch: bigint): Readonly<PrefixNode> | undefined {
    return this.#nodes.get(branch);
  }

  propose(limit: number, proposalLimit: number, now: number, excluded: ReadonlySet<bigint>): readonly Proposal[] {
    const outputLimit = effectiveOutputLimit(limit, proposalLimit);
    if (outputLimit === 0) return [];
    let totalAttempts = 1;
    const siblings = new Map<string, { visits: number; count: number }>();
    for (const node of this.#nodes.values()) {
      totalAttempts += node.attempts;
      const key = `${node.parent}:${node.site}`;
      const s = siblings.get(key) ?? { visits: 0, count: 0 };
      s.visits += node.visits;
      s.count += 1;
      siblings.set(key, s);
    }
    const high: Candidate[] = [];
    const low: Candidate[] = [];
    for (const node of this.#nodes.values()) {
      if (!ACTIVE.has(node.status) || excluded.has(node.id)) continue;
      if (!cooledDown(now, node.lastScheduledMs, this.#cooldownMs) || !this.#constraints.allows(node.id, now)) continue;
      const seed = newestLiveSeed(node.seeds, this.#seedLive);
      if (seed === undefined) continue;
      const sib = siblings.get(`${node.parent}:${node.site}`) ?? { visits: 0, count: 1 };
      const parent = this.#nodes.get(node.parent);
      const features: PrefixFeatures = {
        expected: Math.max(node.reward, 0.92 * (parent?.reward ?? 0)),
        exploration: Math.sqrt(Math.log1p(totalAttempts) / (1 + node.attempts)),
        difficulty: node.difficulty,
        rarity: clamp01(1 - (node.visits + 1) / Math.max(1, sib.visits + sib.count)),
        directed: this.#directed(node.site),
        age: ageTerm(now, node.lastScheduledMs, this.#cooldownMs),
        costPenalty: Math.min(1, 0.45 * node.solverCost + 0.55 * node.timeoutPenalty),
      };
      const isHigh = productive(node) >= 0.12 || features.expected >= 0.18 || features.directed >= 0.5;
      const sample =
        node.exact.attempts > 0 &&
        node.sampling.attempts < this.#samplingBudget &&
        node.difficulty >= 0.45 &&
        features.rarity >= 0.45 &&
        features.expected >= 0.1 &&
        features.costPenalty < 0.55;
      const candidate: Candidate = { node, seed, score: this.#scoring.prefix(features), high: isHigh, action: sample ? 'sample' : 'solve' };
      (isHigh ? high : low).push(candidate);
    }
    const byScore = (a: Candidate, b: Candidate): number => b.score - a.score;
    high.sort(byScore);
    low.sort(byScore);

    let highQuota: number;
    if (high.length > 0 && low.length > 0) {
      highQuota = limit === 1 ? (this.#queueEpoch % 4 === 3 ? 0 : 1) : Math.max(1, Math.min(limit - 1, Math.ceil(limit * this.#highFraction)));
    } else highQuota = high.length > 0 ? limit : 0;
    const lowQuota = Math.max(0, limit - highQuota);
    const ordered = [...high.slice(0, highQuota), ...low.slice(0, lowQuota), ...high.slice(highQuota), ...low.slice(lowQuota)];

    const highBySeed = groupBySeed(high);
    const lowBySeed = groupBySeed(low);
    const usedSeeds = new Set<string>();
    const out: Proposal[] = [];
    for (const candidate of ordered) {
      if (out.length >= outputLimit) break;
      if (usedSeeds.has(candidate.seed)) continue;
      usedSeeds.add(candidate.seed);
      const sources = candidate.high ? (highBySeed.get(candidate.seed) ?? [candidate]) : [candidate];
      const actions: S2FAction[] = [];
      const inPlan = new Set<bigint>();
      for (const c of sources) {
        if (actions.length >= this.#actionCap) break;
        if (inPlan.has(c.node.id)) continue;
        inPlan.add(c.node.id);
        actions.push({ branch: c.node.id, kind: c.action });
      }
      for (const c of lowBySeed.get(candidate.seed) ?? []) {
        if (actions.length >= this.#actionCap) break;
        if (inPlan.has(c.node.id)) continue;
        inPlan.add(c.node.id);
        actions.push({ branch: c.node.id, kind: 'skip' });
      }
      const primary = actions.find((a) => a.kind !== 'skip')?.branch ?? candidate.node.id;
      out.push({ lane: 'prefix', origin: candidate.node.id.toString(), job: Object.freeze({ seed: candidate.seed, targetBranch: primary, actions: Object.freeze(actions) }) });
    }
    return out;
  }

  /**
   * Commit contract: `queueEpoch` grows by the number of admitted jobs; every non-skip action's
   * node gains one attempt and starts its cooldown. Skip actions never count.
   */
  commit(accepted: readonly Proposal[], now: number): void {
    if (accepted.length === 0) return;
    this.#queueEpoch += accepted.length;
    for (const proposal of accepted) {
      for (const action of proposal.job.actions) {
        if (action.kind === 'skip') continue;
        const node = this.#nodes.get(action.branch);
        if (node === undefined) continue;
        node.attempts += 1;
        node.lastScheduledMs = now;
      }
    }
  }

  observe(seed: string, telemetry: Telemetry | null, reward: number, now: number, context: ObserveContext = {}): void {
    if (telemetry === null) return; // an untargeted run teaches this lane nothing
    const difficulty = difficultyOf(telemetry);
    const solverCost = solverCostOf(telemetry);
    const timeoutObs = timeoutRatioOf(telemetry);
    const open = new Set(telemetry.openBranches);
    const pathIds: bigint[] = [];
    const touch = (node: PrefixNode): void => {
      node.lastUpdateMs = now;
      node.solverCost = 0.8 * node.solverCost + 0.2 * solverCost;
      node.timeoutPenalty = 0.7 * node.timeoutPenalty + 0.3 * timeoutObs;
      rememberSeed(node.seeds, seed);
    };
    for (const entry of telemetry.branchTrace) {
      const actual = this.#getOrCreate(entry.actual, entry.parent, entry.site, 'observed', now);
      // An outcome that actually executed is no longer a frontier, whatever it was before.
      actual.status = 'observed';
      actual.visits += 1;
      actual.difficulty = Math.max(0.8 * actual.difficulty, difficulty);
      touch(actual);
      pathIds.push(actual.id);
      if (open.has(entry.opposite)) {
        const opposite = this.#getOrCreate(entry.opposite, entry.parent, entry.site, 'open', now);
        if (opposite.status !== 'sat' && opposite.status !== 'unsat') opposite.status = 'open';
        opposite.difficulty = Math.max(0.8 * opposite.difficulty, difficulty);
        touch(opposite);
      }
    }
    const r = clamp01(reward);
    pathIds.forEach((branch, index) => {
      const depth = pathIds.length - 1 - index;
      const node = this.#nodes.get(branch)!;
      node.reward = 0.75 * node.reward + 0.25 * r * 0.92 ** depth;
    });
    this.#constraints.observe(telemetry, now);
    const target = telemetry.targetBranch;
    const summary = target > 0n ? this.#constraints.get(target) : undefined;
    const targetNode = target > 0n ? this.#nodes.get(target) : undefined;
    if (targetNode !== undefined && summary !== undefined) {
      targetNode.status = summary.status;
      targetNode.lastUpdateMs = now;
    }
    const actions = context.job?.actions ?? (target > 0n ? [{ branch: target, kind: 'solve' as const }] : []);
    const success = !context.killed && (telemetry.counters.generated > 0 || telemetry.counters.sat > 0 || reward > 0.05);
    for (const action of actions) {
      if (action.kind === 'skip') continue;
      const node = this.#nodes.get(action.branch);
      if (node === undefined) continue;
      const stats = action.kind === 'sample' ? node.sampling : node.exact;
      stats.attempts += 1;
      stats.rewardSum += r;
      if (success && (action.branch !== target || telemetry.targetReached)) stats.successes += 1;
    }
    this.#prune();
  }

  toJSON(now: number): unknown {
    return {
      lane: 'prefix',
      schema: SCHEMA,
      queueEpoch: this.#queueEpoch,
      nodes: [...this.#nodes.values()].map((n) => ({
        id: n.id.toString(),
        parent: n.parent.toString(),
        site: n.site.toString(),
        status: n.status,
        visits: n.visits,
        attempts: n.attempts,
        reward: n.reward,
        difficulty: n.difficulty,
        solverCost: n.solverCost,
        timeoutPenalty: n.timeoutPenalty,
        lastUpdateAgeMs: now - n.lastUpdateMs,
        lastScheduledAgeMs: n.lastScheduledMs === null ? null : now - n.lastScheduledMs,
        seeds: [...n.seeds],
        exact: { ...n.exact },
        sampling: { ...n.sampling },
      })),
      constraints: this.#constraints.toJSON(now),
    };
  }

  restore(snapshot: unknown, now: number): void {
    const o = header(snapshot, 'prefix', SCHEMA);
    const queueEpoch = int(o.queueEpoch, 'queueEpoch');
    const nodes = arr(o.nodes, 'nodes').map((raw, i): PrefixNode => {
      const p = `nodes[${i}]`;
      const n = obj(raw, p);
      const stats = (v: unknown, q: string): ActionStats => {
        const s = obj(v, q);
        return { attempts: int(s.attempts, `${q}.attempts`), successes: int(s.successes, `${q}.successes`), rewardSum: num(s.rewardSum, `${q}.rewardSum`) };
      };
      return {
        id: id(n.id, `${p}.id`),
        parent: id(n.parent, `${p}.parent`),
        site: id(n.site, `${p}.site`),
        status: oneOf(n.status, STATUSES, `${p}.status`),
        visits: int(n.visits, `${p}.visits`),
        attempts: int(n.attempts, `${p}.attempts`),
        reward: num(n.reward, `${p}.reward`),
        difficulty: num(n.difficulty, `${p}.difficulty`),
        solverCost: num(n.solverCost, `${p}.solverCost`),
        timeoutPenalty: num(n.timeoutPenalty, `${p}.timeoutPenalty`),
        lastUpdateMs: now - num(n.lastUpdateAgeMs, `${p}.lastUpdateAgeMs`),
        lastScheduledMs: ageToTime(now, numOrNull(n.lastScheduledAgeMs, `${p}.lastScheduledAgeMs`)),
        seeds: strings(n.seeds, `${p}.seeds`).slice(-4),
        exact: stats(n.exact, `${p}.exact`),
        sampling: stats(n.sampling, `${p}.sampling`),
      };
    });
    if (nodes.some((n) => n.id === 0n)) bad('nodes[].id', 'a non-zero id');
    // Parse the constraint cache into a scratch instance first so a bad snapshot changes nothing.
    const scratch = new ConstraintSummaryCache(2 * this.#maxNodes);
    scratch.restore(o.constraints, 0);
    this.#queueEpoch = queueEpoch;
    this.#nodes.clear();
    for (const n of nodes) this.#nodes.set(n.id, n);
    this.#constraints.restore(o.constraints, now);
    this.#prune();
  }

  #directed(site: bigint): number {
    const d = this.#distances.get(site);
    return d === undefined ? 0 : 1 / (1 + d);
  }

  #getOrCreate(branch: bigint, parent: bigint, site: bigint, status: PrefixNodeStatus, now: number): PrefixNode {
    let node = this.#nodes.get(branch);
    if (node === undefined) {
      node = {
        id: branch,
        parent,
        site,
        status,
        visits: 0,
        attempts: 0,
        reward: 0,
        difficulty: 0,
        solverCost: 0,
        timeoutPenalty: 0,
        lastUpdateMs: now,
        lastScheduledMs: null,
        seeds: [],
        exact: { attempts: 0, successes: 0, rewardSum: 0 },
        sampling: { attempts: 0, successes: 0, rewardSum: 0 },
      };
      this.#nodes.set(branch, node);
    }
    return node;
  }

  /** Over budget: drop settled/observed nodes with the least reward first, then the weakest frontier. */
  #prune(): void {
    const excess = this.#nodes.size - this.#maxNodes;
    if (excess <= 0) return;
    const rank = (n: PrefixNode): [number, number, number, number] => [
      ACTIVE.has(n.status) ? 1 : 0,
      n.reward - 0.25 * Math.max(n.timeoutPenalty, n.solverCost),
      n.lastUpdateMs,
      n.visits,
    ];
    const victims = [...this.#nodes.values()]
      .map((n) => ({ n, k: rank(n) }))
      .sort((a, b) => a.k[0] - b.k[0] || a.k[1] - b.k[1] || a.k[2] - b.k[2] || a.k[3] - b.k[3])
      .slice(0, excess);
    for (const { n } of victims) this.#nodes.delete(n.id);
  }
}

function productive(node: PrefixNode): number {
  let best = 0;
  for (const s of [node.exact, node.sampling]) {
    if (s.attempts > 0) best = Math.max(best, s.rewardSum / s.attempts + (0.15 * s.successes) / s.attempts);
  }
  return best;
}

function groupBySeed(candidates: readonly Candidate[]): Map<string, Candidate[]> {
  const out = new Map<string, Candidate[]>();
  for (const c of candidates) {
    const list = out.get(c.seed);
    if (list) list.push(c);
    else out.set(c.seed, [c]);
  }
  return out;
}
