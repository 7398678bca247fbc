/**
 * The scheduler facade the coordinator uses: it owns the lanes and the admission, learns from
 * seeds and solver results, and hands out admitted jobs. Small surface on purpose:
 *
 *   addSeed / removeSeed      which inputs exist (only live seeds are proposed)
 *   observe                   feedback from a finished run
 *   admit                     up to `limit` admitted jobs (async: one shared claim per pass)
 *   planDispatch              hints applied under the target contract
 *   release                   the job finished or was abandoned: drop its local reservation
 *   knowsInput                whether the lanes learnt an input's whole run (its trace)
 *   saveState / loadState     lane state as JSON (never leases)
 */
import { InvalidJobError, LaneStateError } from '../errors.js';
import { checkOptionsObject, describeValue, invalidOption } from '../config/values.js';
import type { Logger } from '../telemetry/logger.js';
import { Admission, checkAdmitArguments, checkNow, type AdmissionStats, type AdmittedJob } from './admission.js';
import type { ClaimAsk, LocalReservations, SharedTargetClaims } from './admission-ports.js';
import type { HintSource } from './hints.js';
import { readStateFile, SCHEDULER_STATE_SCHEMA, writeStateFile } from './lane-state-file.js';
import type { FsLayer } from '../fs/fs-layer.js';
import { ConcurrencyLane } from './lanes/concurrency-lane.js';
import { CstgLane } from './lanes/cstg-lane.js';
import { EdgeDependenceLane } from './lanes/edge-dependence-lane.js';
import { FallbackReplayLane } from './lanes/fallback-replay-lane.js';
import { FrontierLane } from './lanes/frontier-lane.js';
import type { Lane, LaneName } from './lanes/lane.js';
import { PrefixDagLane } from './lanes/prefix-dag-lane.js';
import type { ReplayJob } from './replay-job.js';
import { GUIDED_LANES, SCHEDULER_OPTIONS, type SchedulerOptions } from './scheduler-options.js';
import type { ScoringPolicy } from './scoring.js';
import { applyHints, type ContractOutcome, type DispatchPlan } from './target-contract.js';
import type { Telemetry } from './telemetry.js';
import { answeredBy, TargetLedger, type LedgerStats } from './target-ledger.js';
import { CoverageFrontier, type CoverageFrontierStats, type QuestionTier } from './coverage-frontier.js';
import type { BranchTraceEntry } from './telemetry.js';
import { targetGroup } from './replay-job.js';
import { TracedInputs } from './traced-inputs.js';

export interface SeedInfo {
  /** Input length in bytes. */
  readonly bytes: number;
  /** Lowercase hex SHA-256 of the input (hint lookup key). */
  readonly sha256: string;
  readonly path: string;
}

/** Feedback from one finished run. */
export interface RunFeedback {
  readonly seed: string;
  /** Parsed `symfence-telemetry/1`, or null when the run left none (only the fallback lane learns). */
  readonly telemetry: Telemetry | null;
  /** Coverage-derived reward in [0, 1] (computed by triage). */
  readonly reward: number;
  /** The job that ran, when it was a scheduled job. */
  readonly job?: ReplayJob;
  readonly killed?: boolean;
  readonly elapsedMs?: number;
  /**
   * Set when the run wrote telemetry that `parseTelemetry` rejected (pass `telemetry: null`):
   * counted in `stats().telemetryRejected` and logged with the offending field's path.
   */
  readonly telemetryError?: unknown;
}

export interface SchedulerInit {
  readonly local: LocalReservations;
  /** Omit for single-coordinator mode. */
  readonly shared?: SharedTargetClaims;
  /** Options input (defaults < this); resolved through `SCHEDULER_OPTIONS`. */
  readonly options?: object;
  /** Site → distance guidance: enables the concurrency lane and the directed terms. */
  readonly guidance?: ReadonlyMap<bigint, number>;
  /** Consulted in order by `planDispatch`. */
  readonly hints?: readonly HintSource[];
  readonly scoring?: ScoringPolicy;
  readonly logger?: Logger;
}

const LANE_NAMES: readonly LaneName[] = ['frontier', 'prefix', 'cstg', 'edge', 'concurrency', 'fallback'];

export class Scheduler {
  readonly options: SchedulerOptions;
  readonly #seeds = new Map<string, SeedInfo>();
  readonly #lanes: Lane[];
  readonly #admission: Admission;
  readonly #hints: readonly HintSource[];
  readonly #logger: Logger | undefined;
  readonly #ledger: TargetLedger;
  readonly #frontier: CoverageFrontier;
  readonly #traced: TracedInputs;
  #observations = 0;
  #telemetryRejected = 0;

  constructor(init: SchedulerInit) {
    checkOptionsObject(init, 'init');
    const input = (init.options ?? {}) as { lanes?: unknown };
    const guided = init.guidance !== undefined && init.guidance.size > 0;
    // Unset lanes + guidance: the concurrency lane joins (without guidance it proposes nothing).
    this.options = SCHEDULER_OPTIONS.resolve(input.lanes === undefined && guided ? { ...input, lanes: GUIDED_LANES } : input);
    const enabled = this.options.lanes.split(',').map((s) => s.trim()).filter((s) => s !== '');
    for (const name of enabled) {
      if (!(LANE_NAMES as readonly string[]).includes(name) || enabled.indexOf(name) !== enabled.lastIndexOf(name)) {
        throw invalidOption('lanes', `a comma-separated list of distinct ${LANE_NAMES.join('|')}`, this.options.lanes);
      }
    }
    this.#ledger = new TargetLedger({ maxAttempts: this.options.targetAttempts, retryBaseMs: this.options.cooldownMs });
    this.#frontier = new CoverageFrontier({ saturationAsks: this.options.frontierSaturation });
    // As many inputs as the lanes remember records of.
    this.#traced = new TracedInputs(this.options.replayRecords);
    const common = { cooldownMs: this.options.cooldownMs, seedLive: (seed: string) => this.#seeds.has(seed), ...(init.scoring ? { scoring: init.scoring } : {}) };
    const distances = init.guidance ?? new Map<bigint, number>();
    const build = (name: string): Lane => {
      switch (name) {
        case 'frontier':
          return new FrontierLane({
            seedLive: common.seedLive,
            ledger: this.#ledger,
            frontier: this.#frontier,
            order: this.options.frontierOrder,
            targetsPerJob: this.options.frontierTargets,
            maxRecords: this.options.replayRecords,
          });
        case 'prefix':
          return new PrefixDagLane({
            ...common,
            maxNodes: this.options.prefixNodes,
            actionCap: this.options.actionsPerSeed,
            highQueueFraction: this.options.highQueueFraction,
            samplingBudget: this.options.samplingBudget,
            distances,
          });
        case 'cstg':
          return new CstgLane({ ...common, maxTransitions: this.options.cstgTransitions, actionCap: this.options.actionsPerSeed });
        case 'edge':
          return new EdgeDependenceLane({ ...common, maxRows: this.options.edgeRows, distances });
        case 'concurrency':
          return new ConcurrencyLane({ ...common, guidance: distances, maxRecords: this.options.replayRecords });
        default:
          return new FallbackReplayLane({ ...common, maxRecords: this.options.replayRecords, targetsPerJob: this.options.frontierTargets, ledger: this.#ledger });
      }
    };
    this.#lanes = enabled.map(build);
    this.#hints = init.hints ?? [];
    this.#logger = init.logger;
    this.#admission = new Admission({
      lanes: this.#lanes,
      local: init.local,
      ledger: this.#ledger,
      ...(init.shared ? { shared: init.shared } : {}),
      ...(init.logger ? { logger: init.logger } : {}),
    });
  }

  /** Registers (or updates) an input that jobs may run on. `now` is reserved for seed-age features. */
  addSeed(seedId: string, info: SeedInfo, now: number): void {
    checkNow(now);
    if (typeof info !== 'object' || info === null) throw new InvalidJobError(`seed ${describeValue(seedId)}: info must be an object`, { seedId: describeValue(seedId) });
    if (typeof seedId !== 'string' || seedId.length === 0) throw new InvalidJobError('seed id must be a non-empty string', { seedId: String(seedId) });
    if (!Number.isSafeInteger(info.bytes) || info.bytes < 0) throw new InvalidJobError(`seed ${seedId}: bytes must be a non-negative integer`, { seedId, bytes: info.bytes });
    if (!/^[0-9a-f]{64}$/.test(info.sha256)) throw new InvalidJobError(`seed ${seedId}: sha256 must be 64 lowercase hex digits`, { seedId, sha256: info.sha256 });
    this.#seeds.set(seedId, Object.freeze({ bytes: info.bytes, sha256: info.sha256, path: info.path }));
  }

  /** The seed is gone (deleted, quarantined): no lane proposes it again. Its learned state stays. */
  removeSeed(seedId: string): boolean {
    return this.#seeds.delete(seedId);
  }

  seed(seedId: string): SeedInfo | undefined {
    return this.#seeds.get(seedId);
  }

  /** Enabled lanes in priority order. */
  lanes(): readonly Lane[] {
    return this.#lanes;
  }

  /** The frontier lane's wanted set for `seedId`'s trace run (`FrontierLane.wantedFor`); empty without that lane. */
  wantedFor(seedId: string, limit: number): readonly bigint[] {
    return this.lane('frontier')?.wantedFor(seedId, limit) ?? [];
  }

  lane<N extends LaneName>(name: N): LaneByName[N] | undefined {
    return this.#lanes.find((l) => l.name === name) as LaneByName[N] | undefined;
  }

  /**
   * Feeds a finished run to every lane. Without telemetry only the fallback lane learns (reward).
   * The seed must be registered (`ERR_INVALID_JOB` otherwise). Does not release reservations:
   * call `release` for the admitted job.
   */
  observe(feedback: RunFeedback, now: number): void {
    checkNow(now);
    if (typeof feedback !== 'object' || feedback === null) throw new InvalidJobError(`observe: feedback must be an object, received ${describeValue(feedback)}`, {});
    if (!this.#seeds.has(feedback.seed)) throw new InvalidJobError(`observe: unknown seed ${JSON.stringify(feedback.seed)}`, { seed: feedback.seed });
    if (!Number.isFinite(feedback.reward)) throw new InvalidJobError(`observe: reward must be a finite number, received ${feedback.reward}`, { reward: feedback.reward });
    const context = {
      ...(feedback.job ? { job: feedback.job } : {}),
      ...(feedback.killed !== undefined ? { killed: feedback.killed } : {}),
      ...(feedback.elapsedMs !== undefined ? { elapsedMs: feedback.elapsedMs } : {}),
    };
    if (feedback.telemetryError !== undefined) {
      this.#telemetryRejected += 1;
      const details = (feedback.telemetryError as { details?: unknown }).details;
      this.#logger?.warn({ seed: feedback.seed, err: feedback.telemetryError, details }, 'solver telemetry rejected; run treated as untargeted');
    }
    // The coverage frontier and the ledger first: lanes consult them while they learn.
    if (feedback.telemetry !== null) this.#frontier.learn(feedback.telemetry.branchTrace);
    if (feedback.telemetry !== null || feedback.job !== undefined) {
      const group = feedback.job ? targetGroup(feedback.job) : [];
      if (group.length > 0) this.#ledger.record(feedback.job!, group, feedback.telemetry, feedback.killed === true, now);
      else if (feedback.telemetry !== null && feedback.killed !== true) {
        this.#ledger.noteAnswered(feedback.seed, answeredBy(feedback.telemetry));
        this.#traced.add(feedback.seed);
      }
    }
    for (const lane of this.#lanes) lane.observe(feedback.seed, feedback.telemetry, feedback.reward, now, context);
    this.#observations += 1;
  }

  /**
   * True once the lanes learnt a whole run of `seedId` that was not killed (its trace, or a full
   * first run), in this life or in the one whose lane state was loaded (traced-inputs.ts).
   */
  knowsInput(seedId: string): boolean {
    return this.#traced.has(seedId);
  }

  /** Default backlog depth: the largest lane (every candidate may be needed for back-fill). */
  backlogDepth(): number {
    return Math.max(1, ...this.#lanes.map((l) => l.size()));
  }

  /**
   * Admits up to `limit` jobs (see `Admission.admit` for the transaction contract). The caller
   * owns the returned jobs: dispatch them, then `release` each (and release its shared token).
   */
  admit(limit: number, now: number, proposalLimit: number = this.backlogDepth()): Promise<AdmittedJob[]> {
    checkAdmitArguments(limit, proposalLimit, now);
    return this.#admission.admit(limit, proposalLimit, now);
  }

  /**
   * Drops the local reservation of a job returned by `admit`, or of a group obtained with
   * `claimDispatchGroup` (pass `{ group, owner }` from its result). Idempotent.
   */
  release(job: Pick<AdmittedJob, 'group' | 'owner'>): void {
    if (typeof job !== 'object' || job === null || !Array.isArray(job.group)) {
      throw new InvalidJobError(`release: expected { group, owner } from admit or claimDispatchGroup, received ${describeValue(job)}`, {});
    }
    this.#admission.release(job);
  }

  /**
   * An admitted job that answered nothing and was rolled back (release it too): its dispatch failed
   * on an I/O error of the lease store, a stop dropped or aborted it, its target group was lost, its
   * set-up failed. The lane that proposed it takes it back (`Lane.reopen`); an unknown lane name or
   * seed is ignored. docs/campaign.md "Lifecycle of a job".
   */
  reopen(lane: string, job: ReplayJob, now: number): void {
    checkNow(now);
    if (!(LANE_NAMES as readonly string[]).includes(lane) || !this.#seeds.has(job.seed)) return;
    const proposer: Lane | undefined = this.lane(lane as LaneName);
    proposer?.reopen?.(job, now);
  }

  /**
   * The dispatch plan for an admitted job: registered hint sources applied in order under the
   * target contract. When `needsClaim` is true, claim `group` with `claimDispatchGroup` first.
   */
  planDispatch(job: AdmittedJob | ReplayJob, base: Omit<DispatchPlan, 'job'> = {}): ContractOutcome {
    const replay = 'job' in job ? job.job : job;
    const info = this.#seeds.get(replay.seed);
    const hints = info === undefined ? [] : this.#hints.map((h) => h.hintFor({ seed: replay.seed, sha256: info.sha256, path: info.path }));
    return applyHints({ ...base, job: replay }, hints);
  }

  /**
   * The opposite branch ids of an input's trace whose question the campaign wants (coverage tier
   * ≤ `maxTier`, default 2; docs/scheduler.md "Coverage frontier"): where a directed run over that
   * input should fork.
   */
  wantedBranchesFor(trace: readonly BranchTraceEntry[], maxTier: 1 | 2 = 2): bigint[] {
    return this.#frontier.wantedBranchesFor(trace, maxTier);
  }

  /** The campaign's coverage frontier (shared with the frontier lane). */
  get coverageFrontier(): CoverageFrontier {
    return this.#frontier;
  }

  /** What a claim of a job of `lane` on `input` asks about answers (`Admission.askFor`); an unknown lane asks as a lane that may ask again. */
  claimAsk(lane: string | undefined, input: string): ClaimAsk {
    return this.#admission.askFor(lane, input);
  }

  /** The admission's counters alone (`stats().admission`, without the lanes', ledger's and frontier's figures). */
  admissionStats(): Readonly<AdmissionStats> {
    return this.#admission.stats();
  }

  stats(): SchedulerStats {
    const lane = this.lane('frontier');
    return {
      frontier: { ...this.#frontier.stats(), askedByTier: lane?.askedByTier() ?? { 1: 0, 2: 0, 3: 0 } },
      seeds: this.#seeds.size,
      observations: this.#observations,
      telemetryRejected: this.#telemetryRejected,
      laneSizes: Object.fromEntries(this.#lanes.map((l) => [l.name, l.size()])),
      inflightTargets: this.#admission.inflightTargets().size,
      admission: this.#admission.stats(),
      targets: this.#ledger.stats(),
    };
  }

  /**
   * Lane state, the target ledger and the inputs whose whole run the lanes learnt, as one JSON-safe
   * document (times as ages before `now`).
   */
  toJSON(now: number): unknown {
    checkNow(now);
    return {
      schema: SCHEDULER_STATE_SCHEMA,
      lanes: Object.fromEntries(this.#lanes.map((l) => [l.name, l.toJSON(now)])),
      ledger: this.#ledger.toJSON(now),
      traced: this.#traced.toJSON(),
    };
  }

  /**
   * Restores lanes, the target ledger and the traced inputs from a `toJSON` document. Lanes absent
   * from the document keep their state, and so do the ledger and the traced inputs; lanes in it
   * that are disabled here are ignored. Every present part is validated before any is replaced, so
   * a bad document changes nothing (`ERR_LANE_STATE`).
   */
  restore(document: unknown, now: number): void {
    checkNow(now);
    if (typeof document !== 'object' || document === null || (document as { schema?: unknown }).schema !== SCHEDULER_STATE_SCHEMA) {
      throw new LaneStateError(`scheduler state: expected schema ${SCHEDULER_STATE_SCHEMA}`, { path: 'schema' });
    }
    const lanes = (document as { lanes?: unknown }).lanes;
    if (typeof lanes !== 'object' || lanes === null) throw new LaneStateError('scheduler state: expected a lanes object', { path: 'lanes' });
    const present = this.#lanes.filter((l) => (lanes as Record<string, unknown>)[l.name] !== undefined);
    // A document written before the ledger was saved has none: the ledger keeps its state.
    const ledger = (document as { ledger?: unknown }).ledger;
    // Nor `traced`, one written before the traced inputs were: the set keeps its state (empty at start).
    const traced = (document as { traced?: unknown }).traced;
    // Dry run on scratch lanes and the ledger first: restore must be all-or-nothing.
    for (const lane of present) {
      const scratch = new (lane.constructor as new () => Lane)();
      scratch.restore((lanes as Record<string, unknown>)[lane.name], now);
    }
    if (ledger !== undefined) TargetLedger.check(ledger, now);
    if (traced !== undefined) TracedInputs.check(traced);
    for (const lane of present) lane.restore((lanes as Record<string, unknown>)[lane.name], now);
    if (ledger !== undefined) this.#ledger.restore(ledger, now);
    if (traced !== undefined) this.#traced.restore(traced);
  }

  /** Writes `toJSON(now)` to `file` durably: a failure at any step leaves the previous file whole. */
  async saveState(file: string, now: number, fsLayer?: FsLayer): Promise<void> {
    await writeStateFile(file, this.toJSON(now), this.options.maxStateBytes, fsLayer);
  }

  /** Loads a state file if it exists; returns false when there is none. */
  async loadState(file: string, now: number): Promise<boolean> {
    const document = await readStateFile(file, this.options.maxStateBytes);
    if (document === undefined) return false;
    this.restore(document, now);
    const stats = this.stats();
    this.#logger?.info(
      { file, lanes: stats.laneSizes, settledPairs: stats.targets.settledPairs, retryingPairs: stats.targets.retryingPairs, tracedInputs: this.#traced.size },
      'scheduler lane state loaded',
    );
    return true;
  }
}

export interface SchedulerStats {
  readonly seeds: number;
  readonly observations: number;
  readonly telemetryRejected: number;
  readonly laneSizes: Readonly<Record<string, number>>;
  readonly inflightTargets: number;
  readonly admission: Readonly<AdmissionStats>;
  /** What the target ledger knows: settled and retrying (input, branch) pairs, answered branches. */
  readonly targets: LedgerStats;
  /** The coverage frontier: taken (site, direction) pairs, buckets, saturated pairs; frontier questions dispatched by tier. */
  readonly frontier: CoverageFrontierStats & { readonly askedByTier: Readonly<Record<QuestionTier, number>> };
}

export interface LaneByName {
  frontier: FrontierLane;
  prefix: PrefixDagLane;
  cstg: CstgLane;
  edge: EdgeDependenceLane;
  concurrency: ConcurrencyLane;
  fallback: FallbackReplayLane;
}
