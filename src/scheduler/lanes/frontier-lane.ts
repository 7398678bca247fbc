/**
 * Frontier lane: the branches an input's run left open that no run in the campaign has answered
 * yet, solved by directed jobs. It is what the `trace` first-run strategy leans on: a cheap
 * trace-only run lists every branch of an input, and this lane then asks only the questions the
 * campaign has not answered (the target ledger knows which; the target leases fence the ones
 * another worker or coordinator is solving right now).
 *
 * One record per input, in arrival order (older inputs first, as the work source ranks them):
 * the open branches still to ask. A proposal targets up to `targetsPerJob` branches (default 1:
 * see docs/solver.md, "Directed runs on QSYM", for why one target per run is the safe default on
 * stock SymCC). `commit` takes dispatched branches off the record; a branch its run left open
 * comes back through `observe` and is proposed again once the ledger's back-off allows it.
 */
import type { Telemetry } from '../telemetry.js';
import { MAX_OPEN_BRANCHES } from '../telemetry.js';
import type { TargetLedger } from '../target-ledger.js';
import { targetGroup } from '../replay-job.js';
import { evictOldest } from './round-robin.js';
import { effectiveOutputLimit, type Lane, type LaneCommonOptions, type ObserveContext, type Proposal } from './lane.js';
import { arr, header, ids, obj, str } from './state-codec.js';

export interface FrontierLaneOptions extends Pick<LaneCommonOptions, 'seedLive'> {
  /** Shared with the admission filter; a private one when absent (tests, state dry runs). */
  readonly ledger?: TargetLedger;
  /** Branches per directed job, 1..64. Default 1. */
  readonly targetsPerJob?: number;
  /** Inputs remembered (LRU). Default 65 536. */
  readonly maxRecords?: number;
}

interface FrontierRecord {
  readonly seed: string;
  /** Still to ask, first seen first. */
  open: bigint[];
}

const SCHEMA = 1;

export class FrontierLane implements Lane {
  readonly name = 'frontier' as const;
  readonly #records = new Map<string, FrontierRecord>();
  readonly #ledger: TargetLedger | undefined;
  readonly #targetsPerJob: number;
  readonly #maxRecords: number;
  readonly #seedLive: (seed: string) => boolean;

  constructor(options: FrontierLaneOptions = {}) {
    this.#ledger = options.ledger;
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

  propose(limit: number, proposalLimit: number, now: number, excluded: ReadonlySet<bigint>): readonly Proposal[] {
    const outputLimit = effectiveOutputLimit(limit, proposalLimit);
    const out: Proposal[] = [];
    // A branch open on several inputs is proposed once per round: the first (oldest) input asks it.
    const taken = new Set<bigint>();
    for (const r of this.#records.values()) {
      if (out.length >= outputLimit) break;
      if (!this.#seedLive(r.seed)) continue;
      let batch: bigint[] = [];
      for (const branch of r.open) {
        if (excluded.has(branch) || taken.has(branch)) continue;
        if (this.#ledger && (this.#ledger.answered(branch) || !this.#ledger.allowed(r.seed, branch, now))) continue;
        batch.push(branch);
        taken.add(branch);
        if (batch.length === this.#targetsPerJob) {
          out.push(proposalOf(r.seed, batch));
          batch = [];
          if (out.length >= outputLimit) break;
        }
      }
      if (batch.length > 0 && out.length < outputLimit) out.push(proposalOf(r.seed, batch));
    }
    return out;
  }

  /** Commit contract: the dispatched branches leave their record (a record left empty goes). */
  commit(accepted: readonly Proposal[], _now: number): void {
    for (const proposal of accepted) {
      const r = this.#records.get(proposal.origin);
      if (r === undefined) continue;
      const sent = new Set(targetGroup(proposal.job));
      r.open = r.open.filter((b) => !sent.has(b));
      if (r.open.length === 0) this.#records.delete(r.seed);
    }
  }

  /**
   * Learns an input's open branches. A run directed at some of them puts back those it left open
   * (they are retried when the ledger allows); branches answered anywhere are not recorded.
   */
  observe(seed: string, telemetry: Telemetry | null, _reward: number, _now: number, context?: ObserveContext): void {
    if (telemetry === null) return; // an untargeted run teaches this lane nothing
    const answered = (b: bigint): boolean => this.#ledger?.answered(b) === true || this.#ledger?.isSettled(seed, b) === true;
    const directedAt = context?.job ? new Set(targetGroup(context.job)) : undefined;
    const incoming = directedAt === undefined ? telemetry.openBranches : telemetry.openBranches.filter((b) => directedAt.has(b));
    const existing = this.#records.get(seed);
    const open = existing?.open ?? [];
    const known = new Set(open);
    for (const b of incoming) {
      if (known.has(b) || answered(b) || open.length >= MAX_OPEN_BRANCHES) continue;
      open.push(b);
      known.add(b);
    }
    if (open.length === 0) {
      this.#records.delete(seed);
      return;
    }
    if (existing === undefined) this.#records.set(seed, { seed, open });
    evictOldest(this.#records, this.#maxRecords);
  }

  toJSON(_now: number): unknown {
    return { lane: 'frontier', schema: SCHEMA, records: [...this.#records.values()].map((r) => ({ seed: r.seed, open: r.open.map(String) })) };
  }

  restore(snapshot: unknown, _now: number): void {
    const o = header(snapshot, 'frontier', SCHEMA);
    const records = arr(o.records, 'records').map((raw, i): FrontierRecord => {
      const r = obj(raw, `records[${i}]`);
      return { seed: str(r.seed, `records[${i}].seed`), open: ids(r.open, `records[${i}].open`).slice(0, MAX_OPEN_BRANCHES) };
    });
    this.#records.clear();
    for (const r of records.slice(-this.#maxRecords)) if (r.open.length > 0) this.#records.set(r.seed, r);
  }
}

function proposalOf(seed: string, batch: readonly bigint[]): Proposal {
  const [first, ...rest] = batch;
  return {
    lane: 'frontier',
    origin: seed,
    job: Object.freeze({ seed, targetBranch: first!, actions: Object.freeze(rest.map((branch) => Object.freeze({ branch, kind: 'solve' as const }))) }),
  };
}
