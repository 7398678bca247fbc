/**
 * The scheduler (src/scheduler/) as the coordinator's `TargetScheduler`, plus the local
 * reservation routing both of them share.
 *
 * Seeds are registered under their SHA-256 (content identity: the same bytes reached through two
 * queue entries are one seed). Admitted `ReplayJob`s become `CoordinatorJob`s on the seed's file.
 *
 * Reservations: a job the scheduler admitted must be released through `Scheduler.release`, which
 * also forgets its targets in the admission's in-flight view (otherwise they would stay excluded
 * from proposals forever). Everything else (recovered work the coordinator reserves itself) goes
 * straight to the in-flight set. `releaseGroup` picks the route by the reservation's owner id.
 *
 * Hints (docs/scheduler.md "Hints"): every admitted job goes through `Scheduler.planDispatch`,
 * which applies the hint sources under the target contract (target-contract.ts). A job admitted
 * with targets keeps exactly its leased group. An untargeted job that a hint gives a target claims
 * that group here, at dispatch time, under the job's owner id (local reservation, then the shared
 * claim with a lease directory) before it is handed to the coordinator; the coordinator then
 * treats the claimed group and token like an admitted one. If the claim is refused the job runs
 * untargeted, as admitted, holding nothing.
 */
import { statSync } from 'node:fs';
import type { AdmittedJob } from '../../scheduler/admission.js';
import type { LocalReservations } from '../../scheduler/admission-ports.js';
import type { ReplayJob } from '../../scheduler/replay-job.js';
import type { Scheduler } from '../../scheduler/scheduler.js';
import type { ClaimAsk, SharedTargetClaims } from '../../scheduler/admission-ports.js';
import { claimDispatchGroup } from '../../scheduler/target-contract.js';
import { schedulerOrigin, type CampaignCounters } from '../../telemetry/counters.js';
import type { AdmittedWork, CoordinatorJob, JobFeedback, SeedInput, TargetScheduler } from '../ports.js';


export class SchedulerAdapter implements TargetScheduler, LocalReservations {
  readonly #scheduler: Scheduler;
  readonly #inflight: LocalReservations;
  readonly #seeds = new Map<string, SeedInput>();
  readonly #admitted = new Map<number, AdmittedJob>();

  readonly #counters: CampaignCounters | undefined;
  readonly #shared: SharedTargetClaims | undefined;
  /** Groups claimed at dispatch for hint-targeted untargeted jobs, by owner id. */
  readonly #hintGroups = new Map<number, readonly bigint[]>();
  #hintClaims = 0;
  #hintClaimsRefused = 0;
  /**
   * Inputs whose whole run — untargeted, no actions, not a trace — this coordinator committed.
   * A whole-run replay of such an input (the fallback lane's, once a record has no open branch
   * left) has that run's work id: the id is made of the input, target, actions and mode
   * (work-identity.ts), not of the lane. Its claim can only be refused `done`, again each time the
   * lane's cooldown lets it through, so it is dropped at admission instead of costing a claim's
   * round trip to the lease store and a dispatch rollback. The lane took the admission as it did
   * when the claim refused it.
   */
  readonly #wholeRunsDone = new Set<string>();
  #wholeRunReplaysDropped = 0;

  /**
   * `counters`, when given, receives the admission's conflicts and back-fills. `ports.shared`:
   * the shared target table (multi-coordinator), for the dispatch-time claims of hint targets.
   */
  constructor(scheduler: Scheduler, inflight: LocalReservations, counters?: CampaignCounters, ports: { readonly shared?: SharedTargetClaims } = {}) {
    this.#scheduler = scheduler;
    this.#inflight = inflight;
    this.#counters = counters;
    this.#shared = ports.shared;
  }

  /** Dispatch-time claims of hint targets: granted, and refused (the job then ran untargeted). */
  hintStats(): { readonly claims: number; readonly refused: number } {
    return { claims: this.#hintClaims, refused: this.#hintClaimsRefused };
  }

  /** Whole-run replays dropped at admission because that run was committed here already. */
  get wholeRunReplaysDropped(): number {
    return this.#wholeRunReplaysDropped;
  }

  wantedFor(inputSha256: string, limit: number): readonly bigint[] {
    return this.#scheduler.wantedFor(inputSha256, limit);
  }

  knowsInput(inputSha256: string): boolean {
    return this.#scheduler.knowsInput(inputSha256);
  }

  addSeed(seed: SeedInput, now: number): void {
    if (this.#seeds.has(seed.sha256)) return;
    let bytes = 0;
    try {
      bytes = statSync(seed.path).size;
    } catch {
      return; // gone already: nothing to schedule on it
    }
    this.#seeds.set(seed.sha256, seed);
    this.#scheduler.addSeed(seed.sha256, { bytes, sha256: seed.sha256, path: seed.path }, now);
  }

  async admit(limit: number, now: number): Promise<readonly AdmittedWork[]> {
    const before = this.#scheduler.admissionStats();
    const admitted = await this.#scheduler.admit(limit, now);
    if (this.#counters) {
      const after = this.#scheduler.admissionStats();
      this.#counters.conflicts += after.sharedConflicts - before.sharedConflicts;
      this.#counters.backFills += after.backFills - before.backFills;
      this.#counters.answeredElsewhere += after.sharedAnswered - before.sharedAnswered;
      this.#counters.openElsewhere += after.sharedBackoff - before.sharedBackoff;
    }
    const out: AdmittedWork[] = [];
    for (const a of admitted) {
      const seed = this.#seeds.get(a.job.seed);
      if (!seed) {
        // Cannot happen (seeds are only ever added here); never leak the reservation if it does.
        this.#scheduler.release(a);
        continue;
      }
      this.#admitted.set(a.owner, a);
      const dispatched = await this.#applyHints(a, now);
      if (dispatched.group.length === 0 && isWholeRun(dispatched.job) && this.#wholeRunsDone.has(seed.sha256)) {
        this.#wholeRunReplaysDropped += 1;
        this.releaseGroup([], a.owner);
        continue;
      }
      const job: CoordinatorJob = {
        inputPath: seed.path,
        inputSha256: seed.sha256,
        targetBranch: dispatched.job.targetBranch,
        actions: dispatched.job.actions,
        group: dispatched.group,
        origin: `scheduler:${a.lane}${dispatched.hinted ? '+hint' : ''}`,
        depth: seed.depth,
      };
      out.push({ job, owner: a.owner, ...(dispatched.token !== undefined ? { targetToken: dispatched.token } : {}) });
    }
    return out;
  }

  /**
   * What a claim of `job`'s group asks about answers: what the admission of its lane asked (the
   * lane is in its origin, `scheduler:<lane>`). Work taken over from an expired lease (origin
   * `recovered`) asks as a lane that may ask a branch again on another input: its input and the
   * campaign's back-off.
   */
  claimAsk(job: CoordinatorJob): ClaimAsk {
    const lane = /^scheduler:([^+]+)/.exec(job.origin)?.[1];
    return this.#scheduler.claimAsk(lane, job.inputSha256);
  }

  /**
   * The job as dispatched. Contract: a job admitted with a group leaves with exactly that group
   * and token (hints may only change focus and strategy, which the solver does not take yet). An
   * untargeted job whose hint names a target leaves with that group only if the claim at dispatch
   * time was granted; a refused or failed claim holds nothing and the job leaves untargeted.
   */
  async #applyHints(a: AdmittedJob, now: number): Promise<{ job: ReplayJob; group: readonly bigint[]; token?: string; hinted: boolean }> {
    const admitted = { job: a.job, group: a.group, ...(a.targetToken !== undefined ? { token: a.targetToken } : {}), hinted: false };
    const outcome = this.#scheduler.planDispatch(a);
    if (!outcome.needsClaim) return admitted;
    let claim;
    try {
      claim = await claimDispatchGroup(outcome.group, a.owner, { local: this.#inflight, ...(this.#shared ? { shared: this.#shared } : {}) }, now, this.#scheduler.claimAsk(a.lane, a.job.seed));
    } catch {
      claim = { ok: false as const };
    }
    if (!claim.ok) {
      this.#hintClaimsRefused += 1;
      return admitted;
    }
    this.#hintClaims += 1;
    this.#hintGroups.set(a.owner, outcome.group);
    return { job: outcome.plan.job, group: outcome.group, ...(claim.token !== undefined ? { token: claim.token } : {}), hinted: true };
  }

  observe(feedback: JobFeedback, now: number): void {
    const { job } = feedback;
    if (job.group.length === 0 && job.mode !== 'trace' && isWholeRun(job)) this.#wholeRunsDone.add(job.inputSha256);
    if (!this.#seeds.has(job.inputSha256)) {
      this.addSeed({ path: job.inputPath, sha256: job.inputSha256, depth: job.depth, origin: 'afl' }, now);
      if (!this.#seeds.has(job.inputSha256)) return;
    }
    // Parsed (strictly, once) by the solver pool; a refusal is logged and counted by the scheduler.
    const telemetry = feedback.telemetry ?? null;
    const telemetryError = feedback.telemetryError;
    const interesting = feedback.findings.filter((f) => f.kind === 'queue').length;
    const replay: ReplayJob | undefined = job.group.length > 0 ? { seed: job.inputSha256, targetBranch: job.targetBranch, actions: job.actions } : undefined;
    this.#scheduler.observe(
      {
        seed: job.inputSha256,
        telemetry,
        reward: interesting > 0 ? 1 : 0,
        ...(replay ? { job: replay } : {}),
        ...(telemetryError !== undefined ? { telemetryError } : {}),
        killed: feedback.status === 'timeout',
        ...((feedback.runMs ?? feedback.solverMs) !== undefined ? { elapsedMs: (feedback.runMs ?? feedback.solverMs)! } : {}),
      },
      now,
    );
  }

  /**
   * A job of ours that answered nothing (`WorkSource.giveBack`): back to the lane that proposed it. A job
   * whose target a hint gave it at dispatch goes nowhere: its lane proposed it untargeted, and its
   * cooldown brings it back.
   */
  reopen(job: CoordinatorJob, now: number): void {
    const origin = schedulerOrigin(job.origin);
    if (origin === undefined || origin.hinted || job.group.length === 0) return;
    this.#scheduler.reopen(origin.lane, { seed: job.inputSha256, targetBranch: job.targetBranch, actions: job.actions }, now);
  }

  tryReserveGroup(targets: readonly bigint[], owner: number): boolean {
    return this.#inflight.tryReserveGroup(targets, owner);
  }

  releaseGroup(targets: readonly bigint[], owner: number): number {
    const admitted = this.#admitted.get(owner);
    if (admitted !== undefined) {
      this.#admitted.delete(owner);
      this.#scheduler.release(admitted);
      const hinted = this.#hintGroups.get(owner);
      if (hinted === undefined) return admitted.group.length;
      // A group claimed at dispatch for a hint is a plain in-flight reservation under this owner.
      this.#hintGroups.delete(owner);
      return this.#inflight.releaseGroup(hinted, owner);
    }
    return this.#inflight.releaseGroup(targets, owner);
  }
}

/** A run of the whole input: no target and no actions (for a job, also not a trace: see `observe`). */
function isWholeRun(job: Pick<ReplayJob, 'targetBranch' | 'actions'>): boolean {
  return job.targetBranch === 0n && job.actions.length === 0;
}
