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
 */
import { statSync } from 'node:fs';
import type { AdmittedJob } from '../../scheduler/admission.js';
import type { LocalReservations } from '../../scheduler/admission-ports.js';
import type { ReplayJob } from '../../scheduler/replay-job.js';
import type { Scheduler } from '../../scheduler/scheduler.js';
import type { CampaignCounters } from '../../telemetry/counters.js';
import type { AdmittedWork, CoordinatorJob, JobFeedback, SeedInput, TargetScheduler } from '../ports.js';


export class SchedulerAdapter implements TargetScheduler, LocalReservations {
  readonly #scheduler: Scheduler;
  readonly #inflight: LocalReservations;
  readonly #seeds = new Map<string, SeedInput>();
  readonly #admitted = new Map<number, AdmittedJob>();

  readonly #counters: CampaignCounters | undefined;

  /** `counters`, when given, receives the admission's conflicts and back-fills. */
  constructor(scheduler: Scheduler, inflight: LocalReservations, counters?: CampaignCounters) {
    this.#scheduler = scheduler;
    this.#inflight = inflight;
    this.#counters = counters;
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
    const before = this.#scheduler.stats().admission;
    const admitted = await this.#scheduler.admit(limit, now);
    if (this.#counters) {
      const after = this.#scheduler.stats().admission;
      this.#counters.conflicts += after.sharedConflicts - before.sharedConflicts;
      this.#counters.backFills += after.backFills - before.backFills;
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
      const job: CoordinatorJob = {
        inputPath: seed.path,
        inputSha256: seed.sha256,
        targetBranch: a.job.targetBranch,
        actions: a.job.actions,
        group: a.group,
        origin: `scheduler:${a.lane}`,
        depth: seed.depth,
      };
      out.push({ job, owner: a.owner, ...(a.targetToken !== undefined ? { targetToken: a.targetToken } : {}) });
    }
    return out;
  }

  observe(feedback: JobFeedback, now: number): void {
    const { job } = feedback;
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
      },
      now,
    );
  }

  tryReserveGroup(targets: readonly bigint[], owner: number): boolean {
    return this.#inflight.tryReserveGroup(targets, owner);
  }

  releaseGroup(targets: readonly bigint[], owner: number): number {
    const admitted = this.#admitted.get(owner);
    if (admitted !== undefined) {
      this.#admitted.delete(owner);
      this.#scheduler.release(admitted);
      return admitted.group.length;
    }
    return this.#inflight.releaseGroup(targets, owner);
  }
}
