/**
 * Transactional admission (docs/scheduler.md "Admission"): lanes propose without side effects; a proposal becomes a
 * job only when its whole target group is reserved locally (in-flight set) and claimed in the
 * shared target table; only then is it committed to its lane.
 *
 * One `admit()` call runs one or more passes. A pass walks the ranked backlog and locally reserves
 * up to the number of still-missing jobs, then asks the shared table for all of them in ONE
 * batched `claimGroups` request (the I/O thread's group-commit unit). Granted jobs are admitted;
 * the rest release their local reservation and the next pass back-fills from the backlog, until
 * `limit` jobs are admitted or every proposal has been tried (work-conserving back-fill).
 */
import { AdmissionProtocolError } from '../errors.js';
import { invalidOption } from '../config/values.js';
import type { Logger } from '../telemetry/logger.js';
import type { ClaimAsk, LocalReservations, ClaimOutcome, SharedTargetClaims } from './admission-ports.js';
import { effectiveOutputLimit, type Lane, type LaneName, type Proposal } from './lanes/lane.js';
import { seedTargetKey, targetGroup, type ReplayJob } from './replay-job.js';
import type { TargetLedger } from './target-ledger.js';

/** The result of admission: a job whose group is held locally (and, multi-coordinator, shared). */
export interface AdmittedJob {
  readonly job: ReplayJob;
  /** `targetGroup(job)`; empty for untargeted jobs. */
  readonly group: readonly bigint[];
  readonly lane: LaneName;
  /** Shared-table token for `group`; absent for untargeted jobs and in single-coordinator mode. */
  readonly targetToken?: string;
  /** Owner id under which `group` is reserved in the local in-flight set. */
  readonly owner: number;
  /** The lane entry that proposed the job (opaque; used for commit). */
  readonly origin: string;
}

export interface AdmissionStats {
  admitted: number;
  proposals: number;
  passes: number;
  sharedClaimCalls: number;
  localConflicts: number;
  sharedConflicts: number;
  sharedCorrupt: number;
  sharedErrors: number;
  /**
   * Shared claims refused because another coordinator (or an earlier life of this one) answered
   * a member on the same input: the ledger settles those pairs, so they are not proposed again.
   */
  sharedAnswered: number;
  /**
   * Shared claims refused because runs (of any coordinator) left a member's question open on the
   * same input and the ledger's back-off policy says wait or give up: the ledger takes the
   * campaign's attempts and back-off for those pairs.
   */
  sharedBackoff: number;
  /** Shared claims given back after a failed round whose release itself failed (left to TTL). */
  releaseFailures: number;
  /**
   * Admitted jobs ranked below the first `limit` proposals of their call: each filled a slot that a
   * refused (or duplicate) proposal left, which an admitter without back-fill would have left idle.
   */
  backFills: number;
}

/**
 * How admission ranks the lanes' proposals of one round (docs/scheduler.md "Admission"): the
 * `tiers` in order; within a tier the lanes' lists are interleaved (first of each, then second of
 * each …, in the tier's order) so no lane of a tier starves another; every lane in no tier follows,
 * in the order of `AdmissionOptions.lanes`. A lane named in a tier but not enabled is skipped.
 */
export interface LaneOrder {
  readonly tiers: readonly (readonly LaneName[])[];
}

/**
 * The default order: the frontier lane's questions first (branches nobody has answered yet), then
 * Prefix and CSTG interleaved for fairness, then the rest.
 */
export const DEFAULT_LANE_ORDER: LaneOrder = Object.freeze({ tiers: Object.freeze([Object.freeze(['frontier'] as const), Object.freeze(['prefix', 'cstg'] as const)]) });

export interface AdmissionOptions {
  /** The enabled lanes; ranked by `order`. */
  readonly lanes: readonly Lane[];
  /** How proposals of the lanes are ranked; default `DEFAULT_LANE_ORDER`. */
  readonly order?: LaneOrder;
  readonly local: LocalReservations;
  /** Absent in single-coordinator mode: step 3 (shared claim) is skipped. */
  readonly shared?: SharedTargetClaims;
  /** Pairs already answered are never proposed again; settled actions are stripped. */
  readonly ledger?: TargetLedger;
  readonly logger?: Logger;
  /** First owner id handed to the local set; ids increase per reservation attempt, wrapping below 2^31. */
  readonly firstOwner?: number;
}

interface Ranked {
  readonly proposal: Proposal;
  /** Position in the call's ranked backlog. */
  readonly rank: number;
}

interface Pending {
  readonly proposal: Proposal;
  readonly rank: number;
  readonly group: readonly bigint[];
  readonly owner: number;
}

const OWNER_LIMIT = 0x7fff_ffff;
/** First backlog of a round: this many candidates per slot to fill, and at least this many. */
const INITIAL_BACKLOG_PER_SLOT = 4;
const INITIAL_BACKLOG_MIN = 32;

export class Admission {
  readonly #lanes: readonly Lane[];
  readonly #order: LaneOrder;
  readonly #byName: ReadonlyMap<LaneName, Lane>;
  readonly #local: LocalReservations;
  readonly #shared: SharedTargetClaims | undefined;
  readonly #ledger: TargetLedger | undefined;
  readonly #logger: Logger | undefined;
  /** Targets of admitted jobs not yet released: excluded from proposals. */
  readonly #inflight = new Map<bigint, number>();
  #nextOwner: number;
  readonly #stats: AdmissionStats = {
    admitted: 0,
    proposals: 0,
    passes: 0,
    sharedClaimCalls: 0,
    localConflicts: 0,
    sharedConflicts: 0,
    sharedCorrupt: 0,
    sharedErrors: 0,
    sharedAnswered: 0,
    sharedBackoff: 0,
    releaseFailures: 0,
    backFills: 0,
  };

  constructor(options: AdmissionOptions) {
    const names = options.lanes.map((l) => l.name);
    if (new Set(names).size !== names.length) {
      throw invalidOption('lanes', 'distinct lanes', names.join(','));
    }
    this.#lanes = options.lanes;
    this.#order = options.order ?? DEFAULT_LANE_ORDER;
    this.#byName = new Map(options.lanes.map((l) => [l.name, l]));
    this.#local = options.local;
    this.#shared = options.shared;
    this.#ledger = options.ledger;
    this.#logger = options.logger;
    this.#nextOwner = Math.max(1, Math.floor(options.firstOwner ?? 1));
  }

  stats(): Readonly<AdmissionStats> {
    return { ...this.#stats };
  }

  /**
   * What a claim of a job of `lane` on `input` asks the shared table about answers: the input, any
   * input at all for a lane that asks a branch once per campaign, and the ledger's back-off. The
   * admission's claims ask this, and so does every later claim of the same job's group (a
   * re-claim at dispatch, a hint's group), so no path asks what the admission would refuse.
   */
  askFor(lane: string | undefined, input: string): ClaimAsk {
    const backoff = this.#ledger?.backoff;
    return {
      input,
      ...(lane !== undefined && this.#byName.get(lane as LaneName)?.asksOncePerCampaign === true ? { anyInput: true } : {}),
      ...(backoff !== undefined ? { backoff } : {}),
    };
  }

  /** Targets this admission has handed out and not yet seen released. */
  inflightTargets(): ReadonlySet<bigint> {
    return new Set(this.#inflight.keys());
  }

  /**
   * Ranked backlog for one round, in the admission's lane order (`LaneOrder`; by default the
   * frontier lane's questions, then Prefix and CSTG interleaved P0, C0, P1, C1 …, then every other
   * lane's proposals in lane order). Each proposal passes the target ledger: a pair already
   * answered (or backing off) is dropped, settled actions are stripped. No lane state changes.
   */
  proposals(limit: number, proposalLimit: number, now: number): Proposal[] {
    return this.#backlog(limit, proposalLimit, now).proposals;
  }

  /** `proposals`, and whether some lane filled its output limit (a deeper call may give more). */
  #backlog(limit: number, proposalLimit: number, now: number): { proposals: Proposal[]; truncated: boolean } {
    const excluded = this.inflightTargets();
    const outputLimit = effectiveOutputLimit(limit, proposalLimit);
    const lists = new Map(this.#lanes.map((lane) => [lane.name, lane.propose(limit, proposalLimit, now, excluded)] as const));
    const truncated = [...lists.values()].some((list) => list.length >= outputLimit);
    const ordered: Proposal[] = [];
    const placed = new Set<LaneName>();
    for (const tier of this.#order.tiers) {
      const tierLists = tier.filter((name) => lists.has(name) && !placed.has(name)).map((name) => (placed.add(name), lists.get(name)!));
      const depth = Math.max(0, ...tierLists.map((list) => list.length));
      for (let i = 0; i < depth; i += 1) for (const list of tierLists) if (i < list.length) ordered.push(list[i]!);
    }
    for (const [name, list] of lists) if (!placed.has(name)) ordered.push(...list);
    const ledger = this.#ledger;
    if (ledger === undefined) return { proposals: ordered, truncated };
    const out: Proposal[] = [];
    for (const proposal of ordered) {
      const job = ledger.filter(proposal.job, now);
      if (job !== undefined) out.push(job === proposal.job ? proposal : { ...proposal, job });
    }
    return { proposals: out, truncated };
  }

  /**
   * Admits up to `limit` jobs.
   *
   * Contract:
   * - Returns the admitted jobs in admission order; each one's group is reserved locally under its
   *   `owner` and (with a shared table) claimed under `targetToken`. Only these jobs are committed
   *   to their lanes, once, at the end of the call; `(seed, target)` counts as seen only for them.
   * - A rejected proposal (local conflict, shared conflict/corrupt/error) changes no lane state and
   *   holds no reservation. One refused `answered` holds none either, but its answered pairs are
   *   settled in the ledger at once: they are facts about the campaign, kept even when the round
   *   is later rolled back.
   * - If `claimGroups` throws (or answers with the wrong number of outcomes), every local
   *   reservation of this call is released, shared claims already granted in earlier passes are
   *   given back through `releaseGroups` (a failing give-back is left to TTL and counted), nothing
   *   is committed, and the error propagates: zero mutation of lane state.
   */
  async admit(limit: number, proposalLimit: number, now: number): Promise<AdmittedJob[]> {
    checkAdmitArguments(limit, proposalLimit, now);
    if (limit === 0) return [];
    // Bounded work per round: the lanes first propose a shallow backlog (a few candidates per
    // slot); only a round that runs out of candidates before filling `limit` asks again, four
    // times deeper, up to `proposalLimit` (docs/scheduler.md "Admission").
    const maxDepth = Math.max(limit, proposalLimit);
    let depth = Math.min(maxDepth, Math.max(INITIAL_BACKLOG_MIN, INITIAL_BACKLOG_PER_SLOT * limit));
    let { proposals: backlog, truncated } = this.#backlog(limit, depth, now);
    this.#stats.proposals += backlog.length;
    const admitted: AdmittedJob[] = [];
    const seen = new Set<string>();
    /** (seed, target) pairs refused in this call (conflicts): a deeper backlog does not retry them. */
    const refused = new Set<string>();
    let cursor = 0;
    let rankOffset = 0;
    let deferred: Ranked[] = [];

    let pending: Pending[] = [];
    let backFills = 0;
    /** Has a refusal of this round moved the ledger since the backlog was filtered? */
    let ledgerMoved = false;
    try {
      while (admitted.length < limit) {
        const need = limit - admitted.length;
        pending = [];
        const pendingTargets = new Set<bigint>();
        const pendingKeys = new Set<string>();
        const nextDeferred: Ranked[] = [];
        const take = (ranked: Ranked): void => {
          const { rank } = ranked;
          let { proposal } = ranked;
          const key = seedTargetKey(proposal.job);
          if (seen.has(key) || refused.has(key)) return;
          if (ledgerMoved) {
            // A refusal of an earlier pass settled pairs (or backed them off) in the ledger after
            // the backlog was filtered: a proposal it now rules out is not claimed only to be refused.
            const checked = this.#recheck(proposal, now);
            if (checked === undefined) {
              refused.add(key);
              return;
            }
            proposal = checked;
          }
          const group = targetGroup(proposal.job);
          // A clash with a job still pending in this pass is not a verdict yet: that job may be
          // rejected by the shared table, so retry this one next pass (sequential equivalence).
          if (pendingKeys.has(key) || group.some((t) => pendingTargets.has(t))) {
            nextDeferred.push(ranked);
            return;
          }
          const owner = this.#takeOwner();
          if (group.length > 0 && !this.#local.tryReserveGroup(group, owner)) {
            this.#stats.localConflicts += 1;
            refused.add(key);
            return;
          }
          pending.push({ proposal, rank, group, owner });
          pendingKeys.add(key);
          for (const t of group) pendingTargets.add(t);
        };
        for (const ranked of deferred) {
          if (pending.length >= need) nextDeferred.push(ranked);
          else take(ranked);
        }
        while (pending.length < need && cursor < backlog.length) {
          take({ proposal: backlog[cursor]!, rank: rankOffset + cursor });
          cursor += 1;
        }
        if (pending.length === 0 && deferred.length === 0 && nextDeferred.length === 0 && truncated && depth < maxDepth) {
          // Every candidate of this backlog is placed or refused and slots are left: look deeper.
          // Ranks continue past the old backlog so back-fills still count.
          depth = Math.min(maxDepth, depth * 4);
          const offset = cursor;
          ({ proposals: backlog, truncated } = this.#backlog(limit, depth, now));
          this.#stats.proposals += backlog.length;
          rankOffset = offset;
          cursor = 0;
          continue;
        }
        if (pending.length === 0) break;
        deferred = nextDeferred;
        this.#stats.passes += 1;

        const outcomes = await this.#claim(pending, now);
        pending.forEach((p, i) => {
          const outcome = outcomes[i];
          if (outcome === undefined || outcome.ok) {
            seen.add(seedTargetKey(p.proposal.job));
            if (p.rank >= limit) backFills += 1;
            admitted.push({
              job: p.proposal.job,
              group: p.group,
              lane: p.proposal.lane,
              owner: p.owner,
              origin: p.proposal.origin,
              ...(outcome?.ok ? { targetToken: outcome.token } : {}),
            });
            return;
          }
          refused.add(seedTargetKey(p.proposal.job));
          if (outcome.reason === 'conflict') this.#stats.sharedConflicts += 1;
          else if (outcome.reason === 'corrupt') this.#stats.sharedCorrupt += 1;
          else if (outcome.reason === 'answered') {
            this.#stats.sharedAnswered += 1;
            // Answered elsewhere: settled here too, so no lane proposes these pairs again.
            this.#ledger?.noteAnswered(p.proposal.job.seed, outcome.answered ?? []);
            ledgerMoved = true;
          } else if (outcome.reason === 'backoff') {
            this.#stats.sharedBackoff += 1;
            // Left open elsewhere: this ledger backs off (or gives up) as the campaign does.
            this.#ledger?.noteOpen(p.proposal.job.seed, outcome.open ?? [], now);
            ledgerMoved = true;
          } else this.#stats.sharedErrors += 1;
          this.#local.releaseGroup(p.group, p.owner);
        });
      }
    } catch (error) {
      await this.#rollBack(pending, admitted, now, error);
      throw error;
    }

    this.#commit(admitted, now);
    for (const job of admitted) for (const t of job.group) this.#inflight.set(t, job.owner);
    this.#stats.admitted += admitted.length;
    this.#stats.backFills += backFills;
    return admitted;
  }

  /**
   * Gives back the local reservation of a finished (or abandoned) job. Shared tokens are the
   * coordinator's to release (it may hold them through dispatch and triage).
   */
  release(job: Pick<AdmittedJob, 'group' | 'owner'>): void {
    if (job.group.length === 0) return;
    this.#local.releaseGroup(job.group, job.owner);
    for (const t of job.group) if (this.#inflight.get(t) === job.owner) this.#inflight.delete(t);
  }

  /**
   * `proposal` checked again against the ledger, as the backlog was: the job as it may run now, or
   * undefined when the shared table would refuse its claim for what the ledger now knows — a pair
   * settled or backing off, or, for a lane that asks a branch once per campaign, a member answered
   * on any input.
   */
  #recheck(proposal: Proposal, now: number): Proposal | undefined {
    const ledger = this.#ledger;
    if (ledger === undefined) return proposal;
    const job = ledger.filter(proposal.job, now);
    if (job === undefined) return undefined;
    if (this.askFor(proposal.lane, job.seed).anyInput === true && targetGroup(job).some((t) => ledger.answered(t))) return undefined;
    return job === proposal.job ? proposal : { ...proposal, job };
  }

  /** Shared-claim step for one pass: outcome per pending job (`undefined` = no claim needed). */
  async #claim(pending: readonly Pending[], now: number): Promise<(ClaimOutcome | undefined)[]> {
    const targeted = pending.map((p, i) => ({ p, i })).filter(({ p }) => p.group.length > 0);
    const outcomes: (ClaimOutcome | undefined)[] = pending.map(() => undefined);
    if (this.#shared === undefined || targeted.length === 0) return outcomes;
    this.#stats.sharedClaimCalls += 1;
    const answer = await this.#shared.claimGroups(
      targeted.map(({ p }) => p.group),
      now,
      targeted.map(({ p }) => this.askFor(p.proposal.lane, p.proposal.job.seed)),
    );
    if (!Array.isArray(answer) || answer.length !== targeted.length) {
      throw new AdmissionProtocolError(`claimGroups answered ${Array.isArray(answer) ? answer.length : typeof answer} outcomes for ${targeted.length} groups`, {
        expected: targeted.length,
      });
    }
    targeted.forEach(({ i }, k) => {
      outcomes[i] = answer[k];
    });
    return outcomes;
  }

  /** Failure path of a round: drop every local reservation of the call and give back shared claims. */
  async #rollBack(pending: readonly Pending[], admittedSoFar: readonly AdmittedJob[], now: number, cause: unknown): Promise<void> {
    for (const p of pending) if (p.group.length > 0) this.#local.releaseGroup(p.group, p.owner);
    for (const job of admittedSoFar) if (job.group.length > 0) this.#local.releaseGroup(job.group, job.owner);
    const claims = admittedSoFar.filter((j) => j.targetToken !== undefined).map((j) => ({ targets: j.group, token: j.targetToken! }));
    this.#logger?.warn({ err: cause, released: pending.length + admittedSoFar.length }, 'shared target claim failed; admission round rolled back');
    if (claims.length === 0 || this.#shared === undefined) return;
    try {
      await this.#shared.releaseGroups(claims, now);
    } catch (error) {
      this.#stats.releaseFailures += claims.length;
      this.#logger?.error({ err: error, claims: claims.length }, 'giving back shared target claims failed; left to TTL expiry');
    }
  }

  #commit(admitted: readonly AdmittedJob[], now: number): void {
    const byLane = new Map<LaneName, Proposal[]>();
    for (const a of admitted) {
      const list = byLane.get(a.lane) ?? [];
      list.push({ lane: a.lane, job: a.job, origin: a.origin });
      byLane.set(a.lane, list);
    }
    for (const [name, accepted] of byLane) this.#byName.get(name)?.commit(accepted, now);
  }

  #takeOwner(): number {
    const owner = this.#nextOwner;
    this.#nextOwner = owner >= OWNER_LIMIT ? 1 : owner + 1;
    return owner;
  }
}

/**
 * Every scheduler time is the caller's clock reading in ms. A NaN or infinite `now` would be
 * stored as a lane's lastScheduled/lastSeen time, poisoning cooldowns and the saved state (ages
 * serialise as null), so it is refused up front (`ERR_INVALID_OPTION`).
 */
export function checkNow(now: unknown): asserts now is number {
  if (typeof now !== 'number' || !Number.isFinite(now)) throw invalidOption('now', 'a finite number of milliseconds', now);
}

/** `admit` arguments: integer limits ≥ 0 and a finite `now` (`ERR_INVALID_OPTION`). */
export function checkAdmitArguments(limit: unknown, proposalLimit: unknown, now: unknown): void {
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 0) throw invalidOption('limit', 'an integer ≥ 0', limit);
  if (typeof proposalLimit !== 'number' || !Number.isSafeInteger(proposalLimit) || proposalLimit < 0) throw invalidOption('proposalLimit', 'an integer ≥ 0', proposalLimit);
  checkNow(now);
}
