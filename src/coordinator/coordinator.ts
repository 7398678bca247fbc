/**
 * The coordinator: fills free solver slots with admitted work and moves every job through
 *
 *   pending ─▶ active ─▶ result ─▶ beginCommit ─▶ triage/publish ─▶ complete ─▶ release
 *
 * (DESIGN §5, reference/driver.md §3.3–3.5). What each state holds:
 *
 * - pending: the local reservation of G(job) and, with a shared target table, a target token
 *   claimed at admission. Tokens are heartbeated while the job waits.
 * - active: the target token was re-validated (or re-claimed) just before dispatch, and the
 *   exact-work lease was claimed. Every acquisition is registered in a `DispatchTransaction`; any
 *   failure rolls the whole dispatch back (shared tokens and local reservation), so a refused job
 *   holds nothing. Lane state is never touched here: it was committed at admission.
 * - result: accepted only when `beginCommit(workId, workToken)` succeeds. A stale result is dropped
 *   (warn log, counter, jobs.jsonl `stale`) and rolled back. A target token never authorises a
 *   result: it only says "nobody else should be solving this now"; the work fence says "this result
 *   is the one".
 * - after commit: triage publishes findings, the work record becomes `done`, and only then the
 *   target group is released. A failed release is left to the TTL and counted.
 * - crash safety (with a `ResultCommits` port): the findings are staged durably *before*
 *   `beginCommit`, which stores a manifest naming them; publication and `done` are then one fenced
 *   step under the record's lock. Committing records whose owner will not finish them (our own
 *   from a previous life; another's silent for a whole work TTL) are replayed from the staged
 *   copies by `recoverCommits`, exactly once whoever wins the lock (docs/campaign.md).
 *
 * The coordinator performs no I/O of its own: everything goes through the ports, and time comes
 * from the injected clock, so every transition is testable with in-memory fakes.
 */
import path from 'node:path';
import type { Logger } from 'pino';
import { manifestJson, type CommitStatus } from '../commit/commit-manifest.js';
import { codeOf, SetupFailuresError } from '../errors.js';
import { sourceIdOf } from '../triage/afl-names.js';
import { countCommittedJob, jobKindOf, type CampaignCounters } from '../telemetry/counters.js';
import type { Telemetry } from '../scheduler/telemetry.js';
import type { JobLogEntry, JobLogPort, JobLogStatus } from '../telemetry/job-log.js';
import { childLogger, componentLogger } from '../telemetry/logger.js';
import { DispatchTransaction } from './dispatch-transaction.js';
import { heartbeatIntervalMs } from './heartbeat-period.js';
import { DEFAULT_MAX_SETUP_FAILURES, isSetupFailure } from './setup-failures.js';
import type {
  AdmittedWork,
  Clock,
  CoordinatorJob,
  FindingItem,
  FindingSink,
  LocalReservations,
  PublishedEntry,
  RecoveredWork,
  ResultCommits,
  CommittingWork,
  StagedResult,
  SolverOutcome,
  SolverPort,
  TargetLeasePort,
  WorkLeasePort,
  WorkSource,
} from './ports.js';
import { jobFromWorkPayload, jobWorkId, workPayloadOf } from './work-identity.js';

export interface CoordinatorOptions {
  /** This coordinator's id, recorded in leases and jobs.jsonl. */
  readonly coordinatorId: string;
  /** Solver slots. */
  readonly workers: number;
  /** Exact-work lease TTL, ms. */
  readonly workLeaseTtlMs: number;
  /** Target lease TTL, ms; ignored without a shared target table. */
  readonly targetLeaseTtlMs?: number;
  /** Queue safety valve: pending jobs beyond this are dropped and their tokens released at once. */
  readonly maxPendingJobs: number;
  /** Take over other coordinators' expired work when slots are free. */
  readonly recoverExpiredWork: boolean;
  /** Owner number used for local reservations of recovered work. Default `RECOVERY_OWNER`. */
  readonly recoveryOwner?: number;
  /** How often committing records are scanned for replay, ms. Default: the work TTL. */
  readonly commitScanIntervalMs?: number;
  /**
   * Set-up failures in a row (solver cannot start, showmap set-up failed; see setup-failures.ts)
   * after which the coordinator stops with `ERR_SETUP_FAILURES`. Default 8.
   */
  readonly maxSetupFailures?: number;
}

/**
 * Test hooks: awaited at exact points of the lifecycle so a test can hold (or kill) a coordinator
 * there. Never needed in production.
 */
export interface CoordinatorHooks {
  /** After `beginCommit` accepted a result, before its findings are published. */
  afterBeginCommit?(info: { readonly workId: string; readonly findings: number }): Promise<void> | void;
}

export interface CoordinatorEvents {
  finding?(entry: PublishedEntry, job: CoordinatorJob): void;
  leaseLost?(info: { workId: string; lease: 'work' | 'target'; targets: readonly string[] }): void;
  jobFinished?(entry: JobLogEntry): void;
}

/** The parts the coordinator drives; a campaign builds them once its output directory exists. */
export interface CoordinatorPorts {
  readonly workLeases: WorkLeasePort;
  /** Absent in single-coordinator mode: target groups are then only reserved locally. */
  readonly targetLeases?: TargetLeasePort;
  readonly reservations: LocalReservations;
  readonly solver: SolverPort;
  readonly source: WorkSource;
  readonly findings: FindingSink;
  /** Whether a recovered work payload's input still exists; default: always. */
  readonly inputExists?: (path: string) => boolean;
  /**
   * Crash-safe commits: findings staged durably before `beginCommit`, published under the work
   * record's lock, committing records of dead owners replayed. Absent: findings are published
   * through `findings` after `beginCommit` (a crash in between loses them).
   */
  readonly commits?: ResultCommits;
}

export interface CoordinatorDeps extends CoordinatorPorts {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly counters: CampaignCounters;
  readonly jobLog?: JobLogPort;
  readonly events?: CoordinatorEvents;
  readonly hooks?: CoordinatorHooks;
}

export interface HeartbeatReport {
  readonly workOk: number;
  readonly workFailed: number;
  readonly targetOk: number;
  readonly targetFailed: number;
}

export interface ShutdownReport {
  readonly abortedRuns: number;
  readonly releasedPending: number;
  readonly releaseFailures: number;
}

interface PendingJob {
  readonly work: AdmittedWork;
  targetToken: string | undefined;
  readonly recovered: boolean;
}

type ActivePhase = 'active' | 'committing';

interface ActiveJob {
  readonly workId: string;
  readonly work: AdmittedWork;
  readonly targetToken: string | undefined;
  readonly workToken: string;
  readonly tx: DispatchTransaction;
  readonly controller: AbortController;
  readonly startMs: number;
  readonly logger: Logger;
  phase: ActivePhase;
  /** True until the solver run settled: the job occupies a solver slot only while this holds. */
  solverRunning: boolean;
  lost: 'work' | 'target' | undefined;
  done: Promise<void>;
}

/**
 * Owner id of the reservations the coordinator takes itself (taken-over work). The scheduler's
 * admission hands out owners below 2^31, so this one never collides with them.
 */
export const RECOVERY_OWNER = 0xffff_fff0;

const decimal = (targets: readonly bigint[]): string[] => targets.map((t) => t.toString(10));


export class Coordinator {
  readonly #options: CoordinatorOptions;
  readonly #deps: CoordinatorDeps;
  readonly #log: Logger;
  readonly #pending: PendingJob[] = [];
  readonly #active = new Map<string, ActiveJob>();
  readonly #dispatching = new Set<Promise<unknown>>();
  readonly #heartbeatIntervalMs: number;
  #lastHeartbeatMs: number;
  #lastRecoveryMs = Number.NEGATIVE_INFINITY;
  #lastCommitScanMs = Number.NEGATIVE_INFINITY;
  #stopping = false;
  #stopped: Promise<ShutdownReport> | undefined;
  #wake: (() => void) | undefined;
  /** A job finished while no one was waiting: the next wait returns at once (no lost wake-up). */
  #wakePending = false;
  /** `workId:token` of committing records whose manifest or staged bytes are bad: not retried. */
  readonly #unreplayable = new Set<string>();
  /** Set-up failures since the last result that was the input's own. */
  #setupFailureStreak = 0;
  #fatalError: InstanceType<typeof SetupFailuresError> | undefined;

  constructor(options: CoordinatorOptions, deps: CoordinatorDeps) {
    if (!Number.isSafeInteger(options.workers) || options.workers < 1) throw new RangeError(`workers must be a positive integer, got ${options.workers}`);
    this.#options = options;
    this.#deps = deps;
    this.#log = componentLogger(deps.logger, 'coordinator');
    this.#heartbeatIntervalMs = heartbeatIntervalMs(options.workLeaseTtlMs, deps.targetLeases ? options.targetLeaseTtlMs : undefined);
    this.#lastHeartbeatMs = deps.clock.now();
  }

  get heartbeatIntervalMs(): number {
    return this.#heartbeatIntervalMs;
  }

  get pendingCount(): number {
    return this.#pending.length;
  }

  get activeCount(): number {
    return this.#active.size;
  }

  /** Jobs whose solver process is still running (the rest of `activeCount` is committing). */
  get runningCount(): number {
    let running = 0;
    for (const job of this.#active.values()) if (job.solverRunning) running++;
    return running;
  }

  /**
   * Solver slots free for a new dispatch. A job gives its slot back when its solver run ends, not
   * when its result is committed: the commit's I/O (beginCommit, publication, complete — several
   * durable round trips) then overlaps the next run instead of idling a core between jobs. Jobs
   * still finishing are bounded by `workers` more, so a stalled commit path applies back-pressure.
   */
  #freeSlots(): number {
    const workers = this.#options.workers;
    return Math.max(0, Math.min(workers - this.runningCount, 2 * workers - this.#active.size));
  }

  get stopping(): boolean {
    return this.#stopping;
  }

  /** Why the coordinator stopped itself (`ERR_SETUP_FAILURES`), if it did. */
  get fatalError(): Error | undefined {
    return this.#fatalError;
  }

  /** Work ids of the running or committing jobs (for tests and status). */
  activeWorkIds(): string[] {
    return [...this.#active.keys()];
  }

  /**
   * One scheduling round: heartbeat when due, take over expired work, top up the pending queue,
   * dispatch into free slots. Resolves once every dispatch of the round has started its solver run
   * or rolled back (results are handled asynchronously; `settled()` waits for them).
   */
  async tick(): Promise<void> {
    if (this.#stopping) return;
    const now = this.#deps.clock.now();
    if (now - this.#lastHeartbeatMs >= this.#heartbeatIntervalMs) await this.heartbeat();
    if (this.#stopping) return;
    await this.#recoverCommitsWhenDue(now);
    if (this.#stopping) return;
    await this.#recoverExpired();
    await this.#topUp();
    await this.#dispatchFree();
    this.#deps.counters.fillRatio = this.runningCount / this.#options.workers;
  }

  /** Resolves when every running job has finished its lifecycle (result handled or rolled back). */
  async settled(): Promise<void> {
    while (this.#dispatching.size > 0 || this.#active.size > 0) {
      await Promise.all([...this.#dispatching, ...[...this.#active.values()].map((a) => a.done)]);
    }
  }

  /** Adds work from outside the regular source (e.g. an embedder). Subject to the safety valve. */
  async enqueue(works: readonly AdmittedWork[]): Promise<void> {
    for (const work of works) this.#pending.push({ work, targetToken: work.targetToken, recovered: false });
    await this.#applySafetyValve();
  }

  /**
   * Renews every lease this coordinator holds: the exact-work fences of running jobs in one batch,
   * then every active and pending target group one by one. Contract: each lease's failure is
   * isolated (an I/O error on one never skips the others) and counted; a definite loss (false, or
   * a work id reported lost) aborts the affected solver run — its result could never commit — and
   * a lost pending token is forgotten so the dispatch re-claims the group.
   */
  async heartbeat(): Promise<HeartbeatReport> {
    const now = this.#deps.clock.now();
    this.#lastHeartbeatMs = now;
    let workOk = 0;
    let workFailed = 0;
    let targetOk = 0;
    let targetFailed = 0;

    // Committing records are renewed too: their `updated` tells other coordinators the owner is
    // alive and will finish the result itself (they replay it only after a whole TTL of silence).
    const running = [...this.#active.values()].filter((a) => (a.phase === 'active' && a.lost === undefined) || a.phase === 'committing');
    if (running.length > 0) {
      const fences = new Map(running.map((a) => [a.workId, a.workToken]));
      try {
        const lost = await this.#deps.workLeases.heartbeatMany(fences, now);
        for (const job of running) {
          if (!lost.has(job.workId)) workOk++;
          else if (job.phase === 'committing') {
            // Finished by a replaying coordinator already (done), or gone: the fenced publication
            // will say which; there is no run left to abort.
            workFailed++;
            job.logger.info('committing record no longer renewable; the fenced publication decides');
          } else {
            workFailed++;
            this.#loseLease(job, 'work');
          }
        }
      } catch (error) {
        // Outcome unknown: keep running; beginCommit decides whether the result still counts.
        workFailed += running.length;
        this.#log.error({ err: error, leases: running.length }, 'work lease renewal failed');
      }
    }

    const targets = this.#deps.targetLeases;
    if (targets) {
      for (const job of [...this.#active.values()]) {
        // Committing jobs keep their group until triage released it: renew it too, so a slow
        // commit does not let it expire (a lost group there only costs a failed release later).
        if (job.targetToken === undefined || job.lost !== undefined) continue;
        const held = await this.#renewGroup(targets, job.work.job.group, job.targetToken, now);
        if (held === true) targetOk++;
        else {
          targetFailed++;
          if (held === false && job.phase === 'active') this.#loseLease(job, 'target');
        }
      }
      for (const pending of this.#pending) {
        if (pending.targetToken === undefined) continue;
        const held = await this.#renewGroup(targets, pending.work.job.group, pending.targetToken, now);
        if (held === true) targetOk++;
        else {
          targetFailed++;
          if (held === false) pending.targetToken = undefined;
        }
      }
    }
    this.#deps.counters.heartbeatsOk += workOk + targetOk;
    this.#deps.counters.heartbeatsFailed += workFailed + targetFailed;
    return { workOk, workFailed, targetOk, targetFailed };
  }

  /** true = renewed, false = definitely lost, undefined = I/O failure (unknown). */
  async #renewGroup(targets: TargetLeasePort, group: readonly bigint[], token: string, now: number): Promise<boolean | undefined> {
    try {
      return await targets.heartbeatGroup(group, token, now);
    } catch (error) {
      this.#log.error({ err: error, targets: decimal(group) }, 'target lease renewal failed');
      return undefined;
    }
  }

  #loseLease(job: ActiveJob, lease: 'work' | 'target'): void {
    job.lost = lease;
    this.#deps.counters.leaseExpiries++;
    job.logger.warn({ lease }, 'lease lost; aborting the solver run');
    this.#deps.events?.leaseLost?.({ workId: job.workId, lease, targets: decimal(job.work.job.group) });
    job.controller.abort();
  }

  /**
   * Takes over expired work when slots are free. An expiry scan reads the whole work table, so it
   * runs at most once per heartbeat period (a lease cannot expire much faster than that anyway).
   */
  async #recoverExpired(): Promise<void> {
    if (!this.#options.recoverExpiredWork) return;
    const free = this.#freeSlots() - this.#pending.length;
    if (free <= 0) return;
    const now = this.#deps.clock.now();
    if (now - this.#lastRecoveryMs < this.#heartbeatIntervalMs) return;
    this.#lastRecoveryMs = now;
    let recovered: readonly RecoveredWork[];
    try {
      recovered = await this.#deps.workLeases.recoverExpired(free, now);
    } catch (error) {
      this.#log.error({ err: error }, 'recovering expired work failed');
      return;
    }
    const owner = this.#options.recoveryOwner ?? RECOVERY_OWNER;
    for (const item of recovered) {
      let job: CoordinatorJob;
      try {
        job = jobFromWorkPayload(item.payload);
      } catch (error) {
        this.#log.warn({ err: error, workId: item.workId }, 'skipping expired work with a malformed payload');
        continue;
      }
      if (jobWorkId(job) !== item.workId) {
        this.#log.warn({ workId: item.workId }, 'skipping expired work whose payload does not match its id');
        continue;
      }
      if (this.#deps.inputExists && !this.#deps.inputExists(job.inputPath)) continue;
      if (this.#active.has(item.workId) || this.#pending.some((p) => jobWorkId(p.work.job) === item.workId)) continue;
      if (job.group.length > 0 && !this.#deps.reservations.tryReserveGroup(job.group, owner)) continue;
      this.#pending.push({ work: { job, owner }, targetToken: undefined, recovered: true });
    }
  }

  async #topUp(): Promise<void> {
    const wanted = this.#freeSlots() - this.#pending.length;
    if (wanted <= 0) return;
    let works: readonly AdmittedWork[];
    try {
      works = await this.#deps.source.take(wanted, this.#deps.clock.now());
    } catch (error) {
      this.#log.error({ err: error }, 'taking work from the source failed');
      return;
    }
    this.#deps.counters.admissions += works.length;
    for (const work of works) this.#pending.push({ work, targetToken: work.targetToken, recovered: false });
    await this.#applySafetyValve();
  }

  /**
   * Queue safety valve: keeps at most `maxPendingJobs` carried jobs. A dropped job's input is still
   * in its queue and comes back with a later scan, but its tokens must not linger until the TTL:
   * they would keep every other coordinator off those targets for nothing, so they are released
   * at once (shared token, then local reservation).
   */
  async #applySafetyValve(): Promise<void> {
    const excess = this.#pending.length - this.#options.maxPendingJobs;
    if (excess <= 0) return;
    const dropped = this.#pending.splice(this.#options.maxPendingJobs, excess);
    this.#deps.counters.safetyValveDrops += dropped.length;
    for (const pending of dropped) await this.#releasePending(pending);
  }

  /** Releases everything a pending job holds. Returns false when the shared release failed. */
  async #releasePending(pending: PendingJob): Promise<boolean> {
    const { job, owner } = pending.work;
    let ok = true;
    if (pending.targetToken !== undefined) ok = await this.#releaseShared(job.group, pending.targetToken);
    if (job.group.length > 0) this.#deps.reservations.releaseGroup(job.group, owner);
    return ok;
  }

  /** Shared release; a failure is left to TTL expiry and counted, never thrown. */
  async #releaseShared(group: readonly bigint[], token: string): Promise<boolean> {
    const targets = this.#deps.targetLeases;
    if (!targets || group.length === 0) return true;
    let released = false;
    try {
      released = await targets.releaseGroup(group, token, this.#deps.clock.now());
    } catch (error) {
      this.#log.warn({ err: error, targets: decimal(group) }, 'target release failed; left to TTL');
    }
    if (!released) this.#deps.counters.releaseFailures++;
    return released;
  }

  async #dispatchFree(): Promise<void> {
    while (!this.#stopping && this.#freeSlots() > 0 && this.#pending.length > 0) {
      const pending = this.#pending.shift()!;
      const attempt = this.#dispatch(pending);
      this.#dispatching.add(attempt);
      try {
        await attempt;
      } finally {
        this.#dispatching.delete(attempt);
      }
    }
  }

  /**
   * pending → active. Contract: on success the job runs holding its local reservation, a current
   * target token (if targeted and shared) and the exact-work fence; on any failure the dispatch is
   * rolled back completely — nothing stays held — and false is returned.
   */
  async #dispatch(pending: PendingJob): Promise<boolean> {
    const { job, owner } = pending.work;
    const counters = this.#deps.counters;
    const tx = new DispatchTransaction();
    if (job.group.length > 0) {
      tx.register('local-reservation', () => {
        this.#deps.reservations.releaseGroup(job.group, owner);
      });
    }
    const rollback = async (reason: string): Promise<false> => {
      const report = await tx.rollback();
      counters.dispatchRollbacks++;
      this.#log.debug({ reason, failedUndos: report.failed, targets: decimal(job.group) }, 'dispatch rolled back');
      return false;
    };

    let targetToken: string | undefined;
    const targets = this.#deps.targetLeases;
    if (targets && job.group.length > 0) {
      const now = this.#deps.clock.now();
      if (pending.targetToken !== undefined) {
        // Re-validate: a renewal with our token proves the group is still ours right now.
        const held = await this.#renewGroup(targets, job.group, pending.targetToken, now);
        if (held === true) targetToken = pending.targetToken;
      }
      if (targetToken === undefined) {
        let claim;
        try {
          claim = await targets.claimGroup(job.group, { path: job.inputPath, coordinator: this.#options.coordinatorId }, now);
        } catch (error) {
          this.#log.error({ err: error, targets: decimal(job.group) }, 'target re-claim failed');
          claim = { granted: false as const, reason: 'error' as const };
        }
        if (!claim.granted) {
          if (claim.reason === 'conflict') counters.conflicts++;
          return rollback(`target group ${claim.reason}`);
        }
        targetToken = claim.token;
      }
      const token = targetToken;
      tx.register('target-group', async () => {
        await this.#releaseShared(job.group, token);
      });
    }

    const workId = jobWorkId(job);
    let workClaim;
    try {
      workClaim = await this.#deps.workLeases.claim(workId, { ...workPayloadOf(job), coordinator: this.#options.coordinatorId }, this.#deps.clock.now());
    } catch (error) {
      this.#log.error({ err: error, workId }, 'work lease claim failed');
      workClaim = { granted: false as const, reason: 'error' as const };
    }
    if (!workClaim.granted) {
      if (workClaim.reason === 'conflict') counters.conflicts++;
      return rollback(`work lease ${workClaim.reason}`);
    }
    const workToken = workClaim.token;
    tx.register('work-lease', async () => {
      await this.#deps.workLeases.abandon(workId, workToken, this.#deps.clock.now());
    });

    if (this.#stopping) return rollback('shutting down');
    if (pending.recovered) counters.leaseSteals++;
    tx.markSent();
    counters.jobsStarted++;
    const active: ActiveJob = {
      workId,
      work: pending.work,
      targetToken,
      workToken,
      tx,
      controller: new AbortController(),
      startMs: this.#deps.clock.now(),
      logger: childLogger(this.#log, { workId, targets: decimal(job.group) }),
      phase: 'active',
      solverRunning: true,
      lost: undefined,
      done: Promise.resolve(),
    };
    this.#active.set(workId, active);
    active.done = this.#runAndFinish(active).finally(() => {
      this.#active.delete(workId);
      this.#signalWake();
    });
    return true;
  }

  async #runAndFinish(active: ActiveJob): Promise<void> {
    let outcome: SolverOutcome;
    try {
      outcome = await this.#deps.solver.run({ workId: active.workId, job: active.work.job }, { signal: active.controller.signal });
    } catch (error) {
      outcome = { status: 'error', generated: [], elapsedMs: 0, error: error instanceof Error ? error.message : String(error) };
    }
    // The slot is free for the next dispatch while this result commits.
    active.solverRunning = false;
    this.#signalWake();
    try {
      await this.#finish(active, outcome);
    } catch (error) {
      // Never leave a job half-finished without a trace; its leases fall to TTL.
      active.logger.error({ err: error }, 'job lifecycle failed after the solver run');
    }
  }

  /**
   * result → beginCommit → triage → complete → release. Contract: a result is published only after
   * `beginCommit` accepted its work fence; a refused or aborted result is rolled back (work lease
   * abandoned where still ours, target group and local reservation released). After commit the
   * target group is released only once triage is done.
   */
  async #finish(active: ActiveJob, outcome: SolverOutcome): Promise<void> {
    const endMs = this.#deps.clock.now();
    const counters = this.#deps.counters;
    const { job } = active.work;

    if (outcome.status === 'aborted' || active.lost !== undefined) {
      await active.tx.rollback();
      counters.jobsAborted++;
      this.#record(active, endMs, 'aborted', 0, 0);
      return;
    }

    if (isSetupFailure(outcome.status, outcome.errorCode)) {
      // Not the input's fault: the work must stay claimable (abandoned, never done) so a rerun with
      // a working set-up runs it; everything the dispatch took is given back.
      await active.tx.rollback();
      counters.jobsAbandoned++;
      this.#record(active, endMs, 'abandoned', 0, 0);
      this.#noteSetupFailure(active, outcome);
      return;
    }
    this.#setupFailureStreak = 0;

    const commits = this.#deps.commits;
    let staged: StagedResult | undefined;
    if (commits) {
      try {
        staged = await commits.stage(active.workId, this.#findingItems(active, outcome), {
          status: outcome.status as CommitStatus,
          source: sourceIdOf(path.basename(job.inputPath)),
        });
      } catch (error) {
        // No manifest exists, so nothing can point at missing bytes; the work can be done again.
        counters.stagingFailures++;
        active.logger.error({ err: error }, 'staging the result durably failed; result dropped and work released');
        await active.tx.rollback();
        this.#record(active, endMs, 'aborted', outcome.generated.length, 0);
        return;
      }
    }

    let committed = false;
    try {
      committed = await this.#deps.workLeases.beginCommit(active.workId, active.workToken, this.#deps.clock.now(), staged ? manifestJson(staged.manifest) : undefined);
    } catch (error) {
      active.logger.error({ err: error }, 'beginCommit failed');
    }
    if (!committed) {
      // Staged copies are left to the sweep: the work's new holder may have staged the very same
      // names (same work id and content), and removing them could strand its manifest.
      counters.staleResults++;
      active.logger.warn({ status: outcome.status }, 'stale result dropped: the work fence is no longer ours');
      await active.tx.rollback();
      this.#record(active, endMs, 'stale', outcome.generated.length, 0);
      return;
    }
    // From here on the work record is irreversibly ours to finish: nothing may be rolled back.
    active.phase = 'committing';
    active.tx.commit();
    try {
      await this.#deps.hooks?.afterBeginCommit?.({ workId: active.workId, findings: staged?.manifest.items.length ?? 0 });
    } catch (error) {
      active.logger.warn({ err: error }, 'afterBeginCommit hook failed');
    }

    let findings: PublishedEntry[];
    if (commits && staged) {
      findings = await this.#publishCommitted(active, commits, staged);
    } else {
      findings = await this.#triage(active, outcome);
      try {
        const completed = await this.#deps.workLeases.complete(active.workId, active.workToken, this.#deps.clock.now());
        if (!completed) active.logger.error('complete refused a committing work record');
      } catch (error) {
        active.logger.error({ err: error }, 'complete failed; the record stays committing');
      }
    }
    const interesting = findings.filter((f) => f.kind === 'queue').length;
    if (active.targetToken !== undefined) await this.#releaseShared(job.group, active.targetToken);
    if (job.group.length > 0) this.#deps.reservations.releaseGroup(job.group, active.work.owner);

    switch (outcome.status) {
      case 'ok':
        counters.jobsOk++;
        break;
      case 'timeout':
        counters.jobsTimeout++;
        break;
      case 'crash':
        counters.jobsCrash++;
        break;
      default:
        counters.jobsError++;
    }
    counters.solverTimeMs += outcome.solverTimeUs !== undefined ? outcome.solverTimeUs / 1000 : outcome.elapsedMs;
    countCommittedJob(counters, jobKindOf(job), outcome.telemetry);
    try {
      this.#deps.source.observe(
        {
          job,
          workId: active.workId,
          status: outcome.status,
          ...(outcome.telemetry !== undefined ? { telemetry: outcome.telemetry } : {}),
          ...(outcome.telemetryError !== undefined ? { telemetryError: outcome.telemetryError } : {}),
          findings,
        },
        this.#deps.clock.now(),
      );
    } catch (error) {
      active.logger.error({ err: error }, 'feedback to the work source failed');
    }
    this.#record(active, endMs, outcome.status, outcome.generated.length, interesting, outcome.telemetry);
  }

  /**
   * Publishes what the run found, in one batch (one durability barrier per directory). A failure
   * is logged and leaves the findings unpublished; it never blocks completion of the work record.
   */
  async #triage(active: ActiveJob, outcome: SolverOutcome): Promise<PublishedEntry[]> {
    const { job } = active.work;
    const items = this.#findingItems(active, outcome);
    if (items.length === 0) return [];
    let answers: ReadonlyArray<PublishedEntry | null>;
    try {
      answers = await this.#deps.findings.publish(items, job.inputPath);
    } catch (error) {
      active.logger.error({ err: error, findings: items.length }, 'publishing findings failed');
      return [];
    }
    const published = answers.filter((e): e is PublishedEntry => e !== null);
    this.#countPublished(published, job);
    return published;
  }

  /** What a result publishes: interesting, crashing and hanging inputs, and a crashing/hanging parent. */
  #findingItems(active: ActiveJob, outcome: SolverOutcome): FindingItem[] {
    const counters = this.#deps.counters;
    const { job } = active.work;
    const items: FindingItem[] = [];
    for (const input of outcome.generated) {
      counters.generated++;
      if (input.terminal === 'crash') items.push({ kind: 'crashes', content: input.bytes });
      else if (input.terminal === 'timeout') items.push({ kind: 'hangs', content: input.bytes });
      else if (input.interesting) items.push({ kind: 'queue', content: input.bytes });
    }
    if (outcome.status === 'crash') items.push({ kind: 'crashes', content: { path: job.inputPath } });
    else if (outcome.status === 'timeout') items.push({ kind: 'hangs', content: { path: job.inputPath } });
    return items;
  }

  #countPublished(entries: readonly PublishedEntry[], job: CoordinatorJob | undefined): void {
    const counters = this.#deps.counters;
    for (const entry of entries) {
      if (entry.kind === 'queue') counters.interesting++;
      else if (entry.kind === 'crashes') counters.crashes++;
      else counters.hangs++;
      if (job) this.#deps.events?.finding?.(entry, job);
    }
  }

  /**
   * committing → done for our own result: the staged findings are published into our queue and the
   * record marked done in one fenced step under the record's lock. Contract: `completed` = we
   * published (counted here); `already` = a coordinator replaying our record won the race and
   * published it (counted there, not here); a failure leaves the record committing for our own
   * recovery scan to replay. Staged copies are discarded once the record is done.
   */
  async #publishCommitted(active: ActiveJob, commits: ResultCommits, staged: StagedResult): Promise<PublishedEntry[]> {
    let outcome;
    try {
      outcome = await commits.publish(active.workId, active.workToken, staged.manifest, staged.findings, this.#deps.clock.now());
    } catch (error) {
      this.#deps.counters.commitPublishFailures++;
      active.logger.error({ err: error }, 'publishing the committed result failed; the record stays committing and is replayed later');
      return [];
    }
    if (outcome.outcome === 'stale' || outcome.outcome === 'corrupt') {
      this.#deps.counters.commitPublishFailures++;
      active.logger.error({ outcome: outcome.outcome }, 'the committing record refused its own token; findings not published');
      return [];
    }
    if (outcome.outcome === 'already') active.logger.info('another coordinator replayed this result first; not publishing it again');
    else this.#countPublished(outcome.entries, active.work.job);
    await this.#discardStaged(commits, staged, active.logger);
    return [...outcome.entries];
  }

  async #discardStaged(commits: ResultCommits, staged: StagedResult, logger: Logger): Promise<void> {
    try {
      await commits.discard(staged.manifest);
    } catch (error) {
      logger.warn({ err: error }, 'removing staged findings failed; the recovery sweep removes them later');
    }
  }

  async #recoverCommitsWhenDue(now: number): Promise<void> {
    if (!this.#deps.commits) return;
    if (now - this.#lastCommitScanMs < (this.#options.commitScanIntervalMs ?? this.#options.workLeaseTtlMs)) return;
    this.#lastCommitScanMs = now;
    await this.recoverCommits();
  }

  /**
   * Replays committing records whose owner will not finish them (reference/lease-tables.md §4.8):
   * our own from a previous life (same coordinator id, not running here), at once; another
   * coordinator's only once it has not renewed the record for a whole work TTL (and only when
   * `recoverExpiredWork`). Each replay reads the staged findings (verified), publishes them into
   * our queue and marks the record done under its lock. Contract: a bad manifest, a missing or
   * altered staged finding, or an unreadable table is counted (`commitReplayFailures`), logged
   * with its code, and leaves the record committing — fail closed, never thrown. Afterwards the
   * staged files of finished work, and leftover temps of writers provably gone, are swept. Each
   * replay that completes a record writes one `replay: true` jobs.jsonl line. Runs at the first tick and then every
   * `commitScanIntervalMs`. Resolves with the number of records replayed by this call.
   */
  async recoverCommits(): Promise<number> {
    const commits = this.#deps.commits;
    if (!commits || this.#stopping) return 0;
    const counters = this.#deps.counters;
    // Our own jobs running while the table is read may commit and finish (discarding their staged
    // copies) before the loop below looks at them: the snapshot would then be stale for them.
    const runningAtScan = new Set(this.#active.keys());
    let scan;
    try {
      scan = await commits.scan();
    } catch (error) {
      counters.commitReplayFailures++;
      this.#log.error({ err: error, code: codeOf(error) }, 'scanning committing work failed; replay skipped this round');
      return 0;
    }
    let replayed = 0;
    const now = this.#deps.clock.now();
    for (const record of scan.committing) {
      if (this.#stopping) break;
      if (runningAtScan.has(record.workId) || this.#active.has(record.workId)) continue;
      if (this.#unreplayable.has(`${record.workId}:${record.token}`)) continue;
      const mine = record.owner === this.#options.coordinatorId;
      if (!mine && (!this.#options.recoverExpiredWork || now - record.updatedMs < this.#options.workLeaseTtlMs)) continue;
      if (await this.#replay(commits, record)) replayed++;
    }
    try {
      // Only records done for a whole work TTL: the scan reads without locks, and a `done` just
      // written can still be rolled back to `committing` by its batch (a failed barrier), which
      // needs its staged files again. A rollback happens within its batch, long before a TTL.
      const settled = new Set<string>();
      for (const [workId, completedMs] of scan.done) if (now - completedMs >= this.#options.workLeaseTtlMs) settled.add(workId);
      counters.stagedSwept += await commits.sweep(settled);
    } catch (error) {
      this.#log.warn({ err: error }, 'sweeping staged findings failed');
    }
    try {
      // Temps of crashed writers (docs/leases.md "Leftover temp files"): never a live writer's.
      if (commits.sweepTemps) counters.tempsSwept += await commits.sweepTemps(now);
    } catch (error) {
      this.#log.warn({ err: error, code: codeOf(error) }, 'sweeping leftover temp files failed');
    }
    return replayed;
  }

  /** True when a fresh scan no longer shows `record` committing with the same token. */
  async #finishedSinceScan(commits: ResultCommits, record: CommittingWork): Promise<boolean> {
    try {
      const scan = await commits.scan();
      return !scan.committing.some((c) => c.workId === record.workId && c.token === record.token);
    } catch {
      return false;
    }
  }

  async #replay(commits: ResultCommits, record: CommittingWork): Promise<boolean> {
    const counters = this.#deps.counters;
    const log = childLogger(this.#log, { workId: record.workId, owner: record.owner });
    const startMs = this.#deps.clock.now();
    let staged: StagedResult;
    let outcome;
    try {
      staged = await commits.load(record.workId, record.commit);
    } catch (error) {
      // The owner or another replayer may have finished it (and removed the staged copies) since
      // the scan: that is not a failure.
      if (await this.#finishedSinceScan(commits, record)) return false;
      counters.commitReplayFailures++;
      const code = codeOf(error);
      // A bad manifest, or a staged finding that is gone or altered, stays bad: report that record
      // once, not every scan. Anything else (a read error, a full table …) may pass: retried.
      const reason = (error as { details?: { reason?: unknown } }).details?.reason;
      const permanent = code === 'ERR_COMMIT_MANIFEST' || (code === 'ERR_STAGED_FINDING' && (reason === 'missing' || reason === 'mismatch'));
      if (permanent) this.#unreplayable.add(`${record.workId}:${record.token}`);
      log.error({ err: error, code, retried: !permanent }, 'cannot replay committing work; left committing');
      return false;
    }
    try {
      // Another coordinator's result: its silence was judged from a lock-free scan; the table
      // re-checks it under the lock, so an owner that renewed meanwhile keeps its result.
      const minIdleMs = record.owner === this.#options.coordinatorId ? 0 : this.#options.workLeaseTtlMs;
      outcome = await commits.publish(record.workId, record.token, staged.manifest, staged.findings, this.#deps.clock.now(), minIdleMs);
    } catch (error) {
      counters.commitReplayFailures++;
      log.error({ err: error, code: codeOf(error) }, 'replaying committing work failed; left committing');
      return false;
    }
    if (outcome.outcome === 'live') {
      log.info('the owner renewed this committing work since the scan; left to it');
      return false;
    }
    if (outcome.outcome === 'stale' || outcome.outcome === 'corrupt') {
      counters.commitReplayFailures++;
      log.warn({ outcome: outcome.outcome }, 'committing work changed under the replay; left alone');
      return false;
    }
    let job: CoordinatorJob | undefined;
    try {
      job = jobFromWorkPayload(record.payload);
    } catch {
      job = undefined;
    }
    if (outcome.outcome === 'completed') {
      counters.commitsReplayed++;
      this.#countPublished(outcome.entries, job);
      log.info({ findings: outcome.entries.length }, 'replayed a committed result');
      this.#recordReplay(record, job, staged, outcome.entries, startMs, log);
      if (job) {
        try {
          this.#deps.source.observe({ job, workId: record.workId, status: staged.manifest.status, findings: outcome.entries }, this.#deps.clock.now());
        } catch (error) {
          log.error({ err: error }, 'feedback to the work source failed');
        }
      }
    }
    await this.#discardStaged(commits, staged, log);
    return outcome.outcome === 'completed';
  }

  /**
   * The `jobs.jsonl` line of a result this coordinator replayed (docs/campaign.md "jobs.jsonl"):
   * `replay: true`, `owner` the coordinator whose run produced it, `coordinator` us; the interval is
   * the replay's own (no solver ran here). Written only when the replay completed the record, so a
   * result gets one replay line however many coordinators tried.
   */
  #recordReplay(record: CommittingWork, job: CoordinatorJob | undefined, staged: StagedResult, entries: readonly PublishedEntry[], startMs: number, log: Logger): void {
    const entry: JobLogEntry = {
      workId: record.workId,
      targets: job ? decimal(job.group) : [],
      coordinator: this.#options.coordinatorId,
      owner: record.owner,
      replay: true,
      startMs,
      endMs: this.#deps.clock.now(),
      status: staged.manifest.status,
      generated: staged.manifest.items.length,
      interesting: entries.filter((e) => e.kind === 'queue').length,
    };
    try {
      this.#deps.jobLog?.append(entry);
    } catch (error) {
      log.error({ err: error }, 'writing jobs.jsonl failed');
    }
    this.#deps.events?.jobFinished?.(entry);
  }

  /** Counts a set-up failure; `maxSetupFailures` in a row stop the coordinator with the error. */
  #noteSetupFailure(active: ActiveJob, outcome: SolverOutcome): void {
    this.#setupFailureStreak++;
    const limit = this.#options.maxSetupFailures ?? DEFAULT_MAX_SETUP_FAILURES;
    active.logger.error({ code: outcome.errorCode, streak: this.#setupFailureStreak, limit }, `job abandoned: ${outcome.error ?? outcome.errorCode}`);
    if (this.#setupFailureStreak < limit || this.#fatalError !== undefined) return;
    this.#fatalError = new SetupFailuresError(
      `stopping: ${this.#setupFailureStreak} jobs in a row failed because of the set-up, not their input (last: ${outcome.errorCode}: ${outcome.error ?? 'no message'}); their work was abandoned, not done`,
      { failures: this.#setupFailureStreak, lastCode: outcome.errorCode ?? null, lastError: outcome.error ?? null },
    );
    this.#log.error({ err: this.#fatalError }, 'too many set-up failures in a row; stopping');
    void this.stop();
  }

  #record(active: ActiveJob, endMs: number, status: JobLogStatus, generated: number, interesting: number, telemetry?: Telemetry): void {
    const kind = jobKindOf(active.work.job);
    const entry: JobLogEntry = {
      workId: active.workId,
      targets: decimal(active.work.job.group),
      coordinator: this.#options.coordinatorId,
      startMs: active.startMs,
      endMs,
      status,
      generated,
      interesting,
      input: active.work.job.inputSha256,
      kind,
      ...(telemetry !== undefined
        ? {
            queries: telemetry.counters.queries,
            ...(telemetry.preload !== undefined ? { skipped: telemetry.preload.skipped } : {}),
            ...(kind === 'targeted' ? { targetReached: telemetry.targetReached, targetStatus: telemetry.targetStatus } : {}),
          }
        : {}),
    };
    try {
      this.#deps.jobLog?.append(entry);
    } catch (error) {
      active.logger.error({ err: error }, 'writing jobs.jsonl failed');
    }
    this.#deps.events?.jobFinished?.(entry);
  }

  /**
   * Drives `tick()` until `stop()` (or `signal`). Between rounds it sleeps until a job finishes,
   * the next heartbeat is due, or `idlePollMs` passed — whichever comes first.
   */
  async run(options: { idlePollMs: number; signal?: AbortSignal }): Promise<ShutdownReport> {
    const onAbort = (): void => void this.stop();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    if (options.signal?.aborted) void this.stop();
    try {
      while (!this.#stopping) {
        await this.tick();
        if (this.#stopping) break;
        const untilHeartbeatMs = this.#lastHeartbeatMs + this.#heartbeatIntervalMs - this.#deps.clock.now();
        const waitMs = Math.max(1, Math.min(options.idlePollMs, untilHeartbeatMs));
        // Woken early by a finished job (a slot is free) or by stop().
        if (this.#wakePending) {
          this.#wakePending = false;
          continue;
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, waitMs);
          function done(): void {
            clearTimeout(timer);
            resolve();
          }
          this.#wake = done;
        });
        this.#wake = undefined;
      }
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
    }
    return this.stop();
  }

  #signalWake(): void {
    if (this.#wake) this.#wake();
    else this.#wakePending = true;
  }

  /**
   * Shutdown. Contract: idempotent (every call returns the same promise); stops dispatching, waits
   * for dispatches in progress, aborts every running solver run (each rolls back: work lease
   * abandoned, target group and local reservation released), lets committing jobs finish, then
   * releases every pending job's tokens. A release that fails is counted and left to TTL.
   */
  stop(): Promise<ShutdownReport> {
    this.#stopped ??= this.#shutdown();
    return this.#stopped;
  }

  async #shutdown(): Promise<ShutdownReport> {
    this.#stopping = true;
    this.#signalWake();
    const failuresBefore = this.#deps.counters.releaseFailures;
    await Promise.allSettled([...this.#dispatching]);
    let abortedRuns = 0;
    for (const active of this.#active.values()) {
      // Jobs whose solver already ended go on to commit; only running solvers are aborted.
      if (active.phase === 'active' && active.solverRunning) {
        active.controller.abort();
        abortedRuns++;
      }
    }
    await this.settled();
    const pending = this.#pending.splice(0);
    for (const job of pending) await this.#releasePending(job);
    const report = {
      abortedRuns,
      releasedPending: pending.length,
      releaseFailures: this.#deps.counters.releaseFailures - failuresBefore,
    };
    this.#log.info(report, 'coordinator stopped');
    return report;
  }
}
