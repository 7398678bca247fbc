/**
 * Frontier lane: the branches an input's run left open that no run in the campaign has answered
 * yet, solved by directed jobs. It is what the `trace` first-run strategy leans on: a cheap
 * trace-only run lists every branch of an input, and this lane then asks only the questions the
 * campaign has not answered (the target ledger knows which; the target leases fence the ones
 * another worker or coordinator is solving right now).
 *
 * One record per input: the open branches still to ask, each with the question its trace row
 * poses to the campaign's coverage frontier (coverage-frontier.ts). Order (`order: 'value'`, the
 * default; docs/scheduler.md "Coverage frontier"): every tier-1 question of the campaign before
 * any tier-2 one, tier 2 before tier 3; within a tier, inputs with the most weighted questions per
 * expected run-second first; one question per (site, direction) per round in tiers 1 and 2 (the
 * next input asking it again waits for tier 3). `order: 'age'` is the older rule: inputs in
 * arrival order, every open branch alike. A proposal targets up to `targetsPerJob` branches
 * (default 1: see docs/solver.md, "Directed runs on QSYM", for why one target per run is the safe
 * default on stock SymCC). `commit` takes dispatched branches off the record and counts an ask of
 * their (site, direction); a branch its run left open comes back through `observe` and is
 * proposed again once the ledger's back-off allows it.
 */
import type { Telemetry } from '../telemetry.js';
import { MAX_OPEN_BRANCHES } from '../telemetry.js';
import type { TargetLedger } from '../target-ledger.js';
import { CoverageFrontier, type FrontierQuestion, type QuestionTier } from '../coverage-frontier.js';
import { targetGroup, type ReplayJob } from '../replay-job.js';
import { evictOldest } from './round-robin.js';
import { effectiveOutputLimit, type Lane, type LaneCommonOptions, type ObserveContext, type Proposal } from './lane.js';
import { arr, bad, header, id, ids, int, num, obj, str } from './state-codec.js';

type FrontierOrder = 'value' | 'age';

interface FrontierLaneOptions extends Pick<LaneCommonOptions, 'seedLive'> {
  /** Shared with the admission filter; a private one when absent (tests, state dry runs). */
  readonly ledger?: TargetLedger;
  /**
   * The campaign's coverage frontier, fed by the owner (the scheduler learns every trace before
   * the lanes observe). Absent: a private one this lane feeds itself.
   */
  readonly frontier?: CoverageFrontier;
  /** `value` (tiers, then questions per expected run-second) or `age` (arrival order). Default `value`. */
  readonly order?: FrontierOrder;
  /** Branches per directed job, 1..64. Default 1. */
  readonly targetsPerJob?: number;
  /** Inputs remembered (LRU). Default 65 536. */
  readonly maxRecords?: number;
}

/**
 * Weights of a question by tier in an input's value. From one cJSON input's 156 open branches:
 * the 45 whose (site, opposite direction) its trace never took reached 189 edges when asked one by
 * one, the other 111 only 14 more (4.2 against 0.13 edges a question, 1 : 0.03). Tier 2 sits
 * between; 0.1 is a choice, not a measurement.
 */
export const TIER_WEIGHTS: Readonly<Record<QuestionTier, number>> = Object.freeze({ 1: 1, 2: 0.1, 3: 0.03 });
/** Expected cost of a directed run before any has been measured, ms. */
const DEFAULT_RUN_MS = 1000;
/** EMA weight of a new measured run time. */
const COST_ALPHA = 0.3;

interface FrontierRecord {
  readonly seed: string;
  /** Still to ask, first seen first. */
  open: bigint[];
  /** The question each open branch poses (absent when its trace row was not in the telemetry). */
  readonly questions: Map<bigint, FrontierQuestion>;
  /** Trace rows of the input's first run (cost proxy before any directed run on it). */
  traceRows: number;
  /** EMA of measured directed-run times on this input, ms (null until one finished). */
  costMs: number | null;
  /**
   * Upper bounds, as of the last look at this record, on its unanswered open questions of tier ≤ 1,
   * ≤ 2 and ≤ 3, and on their tier-weighted sum (see #rankByValue for why they stay bounds).
   */
  upTo: [number, number, number];
  weighted: number;
}

/** A record in one propose's ranking: its key is a bound until `exact` is set. */
interface RankEntry {
  readonly r: FrontierRecord;
  readonly order: number;
  key: number;
  exact: { readonly tiers: [Candidate[], Candidate[], Candidate[]] } | null;
}

interface Candidate {
  readonly branch: bigint;
  readonly question: FrontierQuestion | undefined;
}

const SCHEMA = 1;
/** Dispatched jobs whose questions are kept until their run is observed, for `reopen` (oldest dropped first). */
const MAX_DISPATCHED = 4096;

/** What a dispatched job took from its record: enough to put it back as it was (`reopen`). */
interface Dispatched {
  readonly questions: ReadonlyMap<bigint, { readonly question: FrontierQuestion | undefined; readonly tier: QuestionTier }>;
  readonly traceRows: number;
  readonly costMs: number | null;
}

const dispatchedKey = (seed: string, targetBranch: bigint): string => `${seed}/${targetBranch}`;

export class FrontierLane implements Lane {
  readonly name = 'frontier' as const;
  /** A branch answered on any input is not asked again (the ledger's `answered`). */
  readonly asksOncePerCampaign = true;
  readonly #records = new Map<string, FrontierRecord>();
  readonly #ledger: TargetLedger | undefined;
  readonly #frontier: CoverageFrontier;
  readonly #ownsFrontier: boolean;
  readonly #order: FrontierOrder;
  readonly #targetsPerJob: number;
  readonly #maxRecords: number;
  readonly #seedLive: (seed: string) => boolean;
  /** Campaign-wide EMAs: directed-run time (ms) and first-run trace rows. */
  #runMs: number | null = null;
  #traceRows: number | null = null;
  readonly #asked: Record<QuestionTier, number> = { 1: 0, 2: 0, 3: 0 };
  /** The frontier's `revivals` when every record's bounds were last recomputed. */
  #boundsRevision = -1;
  /** Rotating refresh of a few records' bounds per propose (the ledger may forget answers). */
  #refreshCursor = 0;
  /** By seed and primary target: the dispatched jobs whose run was not observed yet. */
  readonly #dispatched = new Map<string, Dispatched>();

  constructor(options: FrontierLaneOptions = {}) {
    this.#ledger = options.ledger;
    this.#ownsFrontier = options.frontier === undefined;
    this.#frontier = options.frontier ?? new CoverageFrontier();
    this.#order = options.order ?? 'value';
    this.#targetsPerJob = Math.min(64, Math.max(1, Math.floor(options.targetsPerJob ?? 1)));
    this.#maxRecords = Math.max(128, Math.floor(options.maxRecords ?? 65_536));
    this.#seedLive = options.seedLive ?? (() => true);
  }

  size(): number {
    let n = 0;
    for (const r of this.#records.values()) n += r.open.length;
    return n;
  }

  /** The branches still to ask on `seed` (a copy). */
  openOf(seed: string): readonly bigint[] {
    return [...(this.#records.get(seed)?.open ?? [])];
  }

  /** The coverage frontier this lane tiers its questions with. */
  get frontier(): CoverageFrontier {
    return this.#frontier;
  }

  /** Dispatched questions by the tier they had when dispatched. */
  askedByTier(): Readonly<Record<QuestionTier, number>> {
    return { ...this.#asked };
  }

  /** Expected run-seconds (slot plus triage) of one directed run on `r`: measured on it, else the campaign's mean scaled by its trace length. */
  #expectedSeconds(r: FrontierRecord): number {
    if (r.costMs !== null) return Math.max(0.01, r.costMs / 1000);
    const base = this.#runMs ?? DEFAULT_RUN_MS;
    const scale = this.#traceRows === null ? 1 : Math.min(4, Math.max(0.25, (r.traceRows + 1) / (this.#traceRows + 1)));
    return Math.max(0.01, (base * scale) / 1000);
  }

  propose(limit: number, proposalLimit: number, now: number, excluded: ReadonlySet<bigint>): readonly Proposal[] {
    const outputLimit = effectiveOutputLimit(limit, proposalLimit);
    if (outputLimit === 0) return [];
    const usable = (r: FrontierRecord, branch: bigint): boolean =>
      !excluded.has(branch) && !(this.#ledger && (this.#ledger.answered(branch) || !this.#ledger.allowed(r.seed, branch, now)));
    return this.#order === 'age' ? this.#proposeByAge(outputLimit, usable) : this.#proposeByValue(outputLimit, usable);
  }

  #proposeByAge(outputLimit: number, usable: (r: FrontierRecord, b: bigint) => boolean): Proposal[] {
    const out: Proposal[] = [];
    // A branch open on several inputs is proposed once per round: the first (oldest) input asks it.
    const taken = new Set<bigint>();
    for (const r of this.#records.values()) {
      if (out.length >= outputLimit) break;
      if (!this.#seedLive(r.seed)) continue;
      const picked: bigint[] = [];
      for (const branch of r.open) {
        if (taken.has(branch) || !usable(r, branch)) continue;
        picked.push(branch);
        taken.add(branch);
      }
      this.#emit(out, r.seed, picked, outputLimit);
    }
    return out;
  }

  /**
   * A wanted set for `seed`'s trace run (docs/solver.md "A first run that answers the frontier"):
   * the campaign's open questions by coverage tier (docs/scheduler.md "Coverage frontier"), and
   * within a tier `seed`'s own open branches first, then the other inputs' (oldest first); none the
   * ledger knows as answered, at most `limit`. Branch ids name a branch by its recent history, not
   * by input, so a fresh input whose path passes a branch another input left open can answer it.
   * Empty when the frontier is.
   */
  wantedFor(seed: string, limit: number): readonly bigint[] {
    const byTier: [bigint[], bigint[], bigint[]] = [[], [], []];
    const seen = new Set<bigint>();
    const own = this.#records.get(seed);
    const records = own === undefined ? this.#records.values() : [own, ...this.#records.values()];
    for (const r of records) {
      for (const branch of r.open) {
        if (seen.has(branch) || this.#ledger?.answered(branch) === true) continue;
        seen.add(branch);
        const question = r.questions.get(branch);
        byTier[(question === undefined ? 3 : this.#frontier.tierOf(question)) - 1]!.push(branch);
      }
    }
    return [...byTier[0], ...byTier[1], ...byTier[2]].slice(0, limit);
  }

  /**
   * Value order with bounded work: the inputs are ranked lazily. Each record keeps upper bounds on
   * its questions per tier and on its weighted value; a question's tier only stays or rises while
   * the frontier's `revivals` stays put, and answered branches only go, so the bounds hold until
   * then (a revival recomputes them all). A pass over tier t pops records by bound and scans only
   * the popped ones exactly (usable branches, tiers now); a scanned record whose value fell below
   * the next bound goes back in. So the result equals ranking every record exactly, and the work
   * follows what is emitted, not every open branch of the campaign.
   */
  #proposeByValue(outputLimit: number, usable: (r: FrontierRecord, b: bigint) => boolean): Proposal[] {
    if (this.#frontier.revivals !== this.#boundsRevision) {
      for (const r of this.#records.values()) this.#refreshBounds(r);
      this.#boundsRevision = this.#frontier.revivals;
    } else this.#refreshSome(BOUNDS_REFRESHED_PER_PROPOSE);
    const entries: RankEntry[] = [];
    let order = 0;
    for (const r of this.#records.values()) {
      order += 1;
      if (r.weighted <= 0 || !this.#seedLive(r.seed)) continue;
      entries.push({ r, order, key: r.weighted / this.#expectedSeconds(r), exact: null });
    }
    const out: Proposal[] = [];
    const taken = new Set<bigint>();
    const keysTaken = new Set<bigint>();
    for (let t = 0; t < 3 && out.length < outputLimit; t += 1) {
      const heap = new RankHeap(entries.filter((e) => (e.exact === null ? e.r.upTo[t]! > 0 : e.exact.tiers[t]!.length > 0)));
      while (out.length < outputLimit) {
        const entry = heap.pop();
        if (entry === undefined) break;
        if (entry.exact === null) {
          this.#scan(entry, usable);
          if (entry.exact!.tiers[t]!.length > 0) heap.push(entry);
          continue;
        }
        const picked: bigint[] = [];
        for (const c of entry.exact.tiers[t]!) {
          if (taken.has(c.branch)) continue;
          const key = c.question?.key;
          if (t < 2 && key !== undefined) {
            // The same coverage question on another input: asked once per round, the rest wait in tier 3.
            if (keysTaken.has(key)) {
              entry.exact.tiers[2]!.push(c);
              continue;
            }
            keysTaken.add(key);
          }
          picked.push(c.branch);
          taken.add(c.branch);
        }
        this.#emit(out, entry.r.seed, picked, outputLimit);
      }
    }
    return out;
  }

  /** Exact usable candidates of `entry` by tier now, its exact value as key; refreshes its bounds on the way. */
  #scan(entry: RankEntry, usable: (r: FrontierRecord, b: bigint) => boolean): void {
    const r = entry.r;
    const tiers: [Candidate[], Candidate[], Candidate[]] = [[], [], []];
    const counts = [0, 0, 0];
    for (const branch of r.open) {
      if (this.#ledger?.answered(branch) === true) continue;
      const question = r.questions.get(branch);
      const tier = question === undefined ? 3 : this.#frontier.tierOf(question);
      counts[tier - 1]! += 1;
      if (usable(r, branch)) tiers[tier - 1]!.push({ branch, question });
    }
    this.#setBounds(r, counts);
    const weighted = TIER_WEIGHTS[1] * tiers[0].length + TIER_WEIGHTS[2] * tiers[1].length + TIER_WEIGHTS[3] * tiers[2].length;
    entry.exact = { tiers };
    entry.key = weighted / this.#expectedSeconds(r);
  }

  #refreshBounds(r: FrontierRecord): void {
    const counts = [0, 0, 0];
    for (const branch of r.open) {
      if (this.#ledger?.answered(branch) === true) continue;
      const question = r.questions.get(branch);
      counts[(question === undefined ? 3 : this.#frontier.tierOf(question)) - 1]! += 1;
    }
    this.#setBounds(r, counts);
  }

  #setBounds(r: FrontierRecord, counts: readonly number[]): void {
    const [n1, n2, n3] = counts as [number, number, number];
    r.upTo = [n1, n1 + n2, n1 + n2 + n3];
    r.weighted = TIER_WEIGHTS[1] * n1 + TIER_WEIGHTS[2] * n2 + TIER_WEIGHTS[3] * n3;
  }

  /** Recomputes the bounds of `n` records, the next ones in insertion order after the last call's, wrapping around. */
  #refreshSome(n: number): void {
    const size = this.#records.size;
    if (size === 0) return;
    const count = Math.min(n, size);
    const from = this.#refreshCursor % size;
    let i = 0;
    for (const r of this.#records.values()) {
      if ((i - from + size) % size < count) this.#refreshBounds(r);
      i += 1;
    }
    this.#refreshCursor = (from + count) % size;
  }

  #emit(out: Proposal[], seed: string, picked: readonly bigint[], outputLimit: number): void {
    for (let i = 0; i < picked.length && out.length < outputLimit; i += this.#targetsPerJob) {
      out.push(proposalOf(seed, picked.slice(i, i + this.#targetsPerJob)));
    }
  }

  /**
   * Commit contract: the dispatched branches leave their record (a record left empty goes) and
   * each one's (site, direction) is counted as asked once (saturation).
   */
  commit(accepted: readonly Proposal[], _now: number): void {
    for (const proposal of accepted) {
      const r = this.#records.get(proposal.origin);
      if (r === undefined) continue;
      const sent = new Set(targetGroup(proposal.job));
      const taken = new Map<bigint, { question: FrontierQuestion | undefined; tier: QuestionTier }>();
      for (const b of sent) {
        const question = r.questions.get(b);
        if (!r.open.includes(b)) continue;
        const tier = question === undefined ? 3 : this.#frontier.tierOf(question);
        this.#asked[tier] += 1;
        this.#frontier.noteAsked(question?.key);
        r.questions.delete(b);
        taken.set(b, { question, tier });
      }
      this.#dispatched.set(dispatchedKey(r.seed, proposal.job.targetBranch), { questions: taken, traceRows: r.traceRows, costMs: r.costMs });
      evictOldest(this.#dispatched, MAX_DISPATCHED);
      r.open = r.open.filter((b) => !sent.has(b));
      if (r.open.length === 0) this.#records.delete(r.seed);
      else this.#refreshBounds(r);
    }
  }

  /**
   * Reopen contract (`Lane.reopen`): the job's branches go back to the front of their input's
   * record with the questions they posed, its asks are taken back (tier counts, saturation), as if
   * it had never been dispatched. Branches answered meanwhile stay out. A job whose commit is no
   * longer remembered (over `MAX_DISPATCHED` dispatched since) comes back with no question (tier 3).
   */
  reopen(job: ReplayJob, _now: number): void {
    const key = dispatchedKey(job.seed, job.targetBranch);
    const dispatched = this.#dispatched.get(key);
    this.#dispatched.delete(key);
    const seed = job.seed;
    const existing = this.#records.get(seed);
    const record: FrontierRecord = existing ?? {
      seed,
      open: [],
      questions: new Map(),
      traceRows: dispatched?.traceRows ?? this.#traceRows ?? 0,
      costMs: dispatched?.costMs ?? null,
      upTo: [0, 0, 0],
      weighted: 0,
    };
    const known = new Set(record.open);
    const back: bigint[] = [];
    for (const b of targetGroup(job)) {
      const taken = dispatched?.questions.get(b);
      if (taken !== undefined) {
        this.#asked[taken.tier] -= 1;
        this.#frontier.noteUnasked(taken.question?.key);
      }
      // Only what the commit took from the record goes back (all of the group, when forgotten).
      if ((dispatched !== undefined && taken === undefined) || known.has(b) || this.#answered(seed, b) || !this.#seedLive(seed)) continue;
      back.push(b);
      known.add(b);
      if (taken?.question !== undefined) record.questions.set(b, taken.question);
    }
    if (back.length === 0) return;
    record.open = [...back, ...record.open];
    // Past the cap, the branches seen last go, as `observe` would not have taken them.
    for (const b of record.open.splice(MAX_OPEN_BRANCHES)) record.questions.delete(b);
    this.#refreshBounds(record);
    if (existing === undefined) {
      this.#records.set(seed, record);
      evictOldest(this.#records, this.#maxRecords);
    }
  }

  #answered(seed: string, b: bigint): boolean {
    return this.#ledger?.answered(b) === true || this.#ledger?.isSettled(seed, b) === true;
  }

  /**
   * Learns an input's open branches and the questions they pose. A run directed at some of them
   * puts back those it left open (they are retried when the ledger allows); branches answered
   * anywhere are not recorded. A directed run's elapsed time is the input's measured cost.
   */
  observe(seed: string, telemetry: Telemetry | null, _reward: number, _now: number, context?: ObserveContext): void {
    if (telemetry === null) return; // an untargeted run teaches this lane nothing
    if (this.#ownsFrontier) this.#frontier.learn(telemetry.branchTrace);
    const answered = (b: bigint): boolean => this.#answered(seed, b);
    if (context?.job !== undefined) this.#dispatched.delete(dispatchedKey(seed, context.job.targetBranch));
    const directedAt = context?.job ? new Set(targetGroup(context.job)) : undefined;
    const directed = directedAt !== undefined && directedAt.size > 0;
    const incoming = directedAt === undefined ? telemetry.openBranches : telemetry.openBranches.filter((b) => directedAt.has(b));
    const existing = this.#records.get(seed);
    if (directed && context?.elapsedMs !== undefined && Number.isFinite(context.elapsedMs) && context.elapsedMs >= 0) {
      this.#runMs = ema(this.#runMs, context.elapsedMs);
      if (existing) existing.costMs = ema(existing.costMs, context.elapsedMs);
    }
    if (!directed) this.#traceRows = ema(this.#traceRows, telemetry.branchTrace.length);
    const record: FrontierRecord = existing ?? { seed, open: [], questions: new Map(), traceRows: telemetry.branchTrace.length, costMs: null, upTo: [0, 0, 0], weighted: 0 };
    const known = new Set(record.open);
    const questions = this.#frontier.questionsOf(telemetry.branchTrace);
    for (const b of incoming) {
      if (known.has(b) || answered(b) || record.open.length >= MAX_OPEN_BRANCHES) continue;
      record.open.push(b);
      known.add(b);
      const q = questions.get(b);
      if (q !== undefined) record.questions.set(b, q);
    }
    if (record.open.length === 0) {
      this.#records.delete(seed);
      return;
    }
    this.#refreshBounds(record);
    if (existing === undefined) this.#records.set(seed, record);
    evictOldest(this.#records, this.#maxRecords);
  }

  toJSON(_now: number): unknown {
    return {
      lane: 'frontier',
      schema: SCHEMA,
      records: [...this.#records.values()].map((r) => ({
        seed: r.seed,
        open: r.open.map(String),
        questions: [...r.questions.values()].map((q) => [q.branch.toString(), q.key === undefined ? null : q.key.toString(), q.pathHits]),
        traceRows: r.traceRows,
        costMs: r.costMs,
      })),
      runMs: this.#runMs,
      traceRows: this.#traceRows,
      coverage: this.#frontier.toJSON(),
    };
  }

  /** Older snapshots (no questions, costs or coverage) restore with every question as tier 3 until re-traced. */
  restore(snapshot: unknown, _now: number): void {
    const o = header(snapshot, 'frontier', SCHEMA);
    const records = arr(o.records, 'records').map((raw, i): FrontierRecord => {
      const r = obj(raw, `records[${i}]`);
      const at = `records[${i}]`;
      const questions = new Map<bigint, FrontierQuestion>();
      if (r.questions !== undefined) {
        arr(r.questions, `${at}.questions`).forEach((row, j) => {
          const q = arr(row, `${at}.questions[${j}]`);
          const branch = id(q[0], `${at}.questions[${j}][0]`);
          const key = q[1] === null ? undefined : BigInt(str(q[1], `${at}.questions[${j}][1]`).match(/^(0|[1-9][0-9]{0,20})$/)?.[0] ?? bad(`${at}.questions[${j}][1]`, 'a decimal key or null'));
          questions.set(branch, { branch, key, pathHits: int(q[2], `${at}.questions[${j}][2]`) });
        });
      }
      return {
        seed: str(r.seed, `${at}.seed`),
        open: ids(r.open, `${at}.open`).slice(0, MAX_OPEN_BRANCHES),
        questions,
        traceRows: r.traceRows === undefined ? 0 : int(r.traceRows, `${at}.traceRows`),
        costMs: r.costMs === undefined || r.costMs === null ? null : num(r.costMs, `${at}.costMs`),
        upTo: [0, 0, 0],
        weighted: 0,
      };
    });
    const runMs = o.runMs === undefined || o.runMs === null ? null : num(o.runMs, 'runMs');
    const traceRows = o.traceRows === undefined || o.traceRows === null ? null : num(o.traceRows, 'traceRows');
    if (o.coverage !== undefined) this.#frontier.restore(o.coverage);
    this.#records.clear();
    for (const r of records.slice(-this.#maxRecords)) if (r.open.length > 0) this.#records.set(r.seed, r);
    this.#runMs = runMs;
    this.#traceRows = traceRows;
    this.#boundsRevision = -1;
  }
}

/** Records whose bounds a propose recomputes besides the ones it scans (a ledger may forget answers). */
const BOUNDS_REFRESHED_PER_PROPOSE = 64;

/** Max-heap of rank entries: higher key first, then earlier insertion (lower `order`). */
class RankHeap {
  readonly #a: RankEntry[];
  constructor(entries: RankEntry[]) {
    this.#a = entries;
    for (let i = (entries.length >> 1) - 1; i >= 0; i -= 1) this.#down(i);
  }
  push(e: RankEntry): void {
    const a = this.#a;
    a.push(e);
    for (let i = a.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (!before(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }
  pop(): RankEntry | undefined {
    const a = this.#a;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last !== undefined) {
      a[0] = last;
      this.#down(0);
    }
    return top;
  }
  #down(i: number): void {
    const a = this.#a;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < a.length && before(a[l]!, a[m]!)) m = l;
      if (r < a.length && before(a[r]!, a[m]!)) m = r;
      if (m === i) return;
      [a[i], a[m]] = [a[m]!, a[i]!];
      i = m;
    }
  }
}

function before(x: RankEntry, y: RankEntry): boolean {
  return x.key > y.key || (x.key === y.key && x.order < y.order);
}

function ema(previous: number | null, value: number): number {
  return previous === null ? value : (1 - COST_ALPHA) * previous + COST_ALPHA * value;
}

function proposalOf(seed: string, batch: readonly bigint[]): Proposal {
  const [first, ...rest] = batch;
  return {
    lane: 'frontier',
    origin: seed,
    job: Object.freeze({ seed, targetBranch: first!, actions: Object.freeze(rest.map((branch) => Object.freeze({ branch, kind: 'solve' as const }))) }),
  };
}
