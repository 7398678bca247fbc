/**
 * The coordinator: fills free solver slots with admitted work and moves every job through
 *
 *   pending ─▶ active ─▶ result ─▶ stage ─▶ beginCommit ─▶ publish + done ─▶ release
 *
 * (docs/campaign.md "Lifecycle of a job"). This file keeps the state (pending queue, active jobs,
 * timers of the periodic protocols), the loop (`tick`, `run`) and the shutdown. Each protocol
 * lives in its own file and gets a narrow context with only the collaborators it needs
 * (docs/campaign.md "Code map"): lease-renewal, work-takeover, dispatch, result-commit,
 * commit-recovery, job-journal, setup-failures.
 *
 * The coordinator performs no I/O of its own: everything goes through the ports, and time comes
 * from the injected clock, so every transition is testable with in-memory fakes.
 */
import type { Logger } from 'pino';
import { componentLogger } from '../telemetry/logger.js';
import { CommitRecovery } from './commit-recovery.js';
import { dispatch, type DispatchContext } from './dispatch.js';
import { releasePending, type GroupReleaseContext } from './group-release.js';
import { heartbeatIntervalMs } from './heartbeat-period.js';
import { JobJournal } from './job-journal.js';
import type { ActiveJob, PendingJob } from './job-state.js';
import { renewLeases, type HeartbeatReport, type LeaseRenewalContext } from './lease-renewal.js';
import type { AdmittedWork, SolverOutcome } from './ports.js';
import { commitResult, type ResultCommitContext } from './result-commit.js';
import { RECOVERY_OWNER, type CoordinatorDeps, type CoordinatorOptions, type ShutdownReport } from './coordinator-deps.js';
import { SetupFailureStreak } from './setup-failures.js';
import { jobWorkId } from './work-identity.js';
import { takeOverExpired, type WorkTakeoverContext } from './work-takeover.js';

export type { CoordinatorHooks } from './result-commit.js';
export type { HeartbeatReport } from './lease-renewal.js';

export { RECOVERY_OWNER } from './coordinator-deps.js';
export type { CoordinatorDeps, CoordinatorEvents, CoordinatorOptions, CoordinatorPorts, ShutdownReport } from './coordinator-deps.js';

export class Coordinator {
  readonly #options: CoordinatorOptions;
  readonly #deps: CoordinatorDeps;
  readonly #log: Logger;
  readonly #pending: PendingJob[] = [];
  readonly #active = new Map<string, ActiveJob>();
  readonly #dispatching = new Set<Promise<unknown>>();
  readonly #heartbeatIntervalMs: number;
  readonly #release: GroupReleaseContext;
  readonly #renewal: LeaseRenewalContext;
  readonly #takeover: WorkTakeoverContext;
  readonly #dispatchContext: DispatchContext;
  readonly #commit: ResultCommitContext;
  readonly #recovery: CommitRecovery;
  readonly #setupFailures: SetupFailureStreak;
  #lastHeartbeatMs: number;
  #lastTakeoverMs = Number.NEGATIVE_INFINITY;
  #lastCommitScanMs = Number.NEGATIVE_INFINITY;
  #stopping = false;
  #stopped: Promise<ShutdownReport> | undefined;
  #wake: (() => void) | undefined;
  /** A job finished while no one was waiting: the next wait returns at once (no lost wake-up). */
  #wakePending = false;

  constructor(options: CoordinatorOptions, deps: CoordinatorDeps) {
    if (!Number.isSafeInteger(options.workers) || options.workers < 1) throw new RangeError(`workers must be a positive integer, got ${options.workers}`);
    this.#options = options;
    this.#deps = deps;
    const log = componentLogger(deps.logger, 'coordinator');
    this.#log = log;
    this.#heartbeatIntervalMs = heartbeatIntervalMs(options.workLeaseTtlMs, deps.targetLeases ? options.targetLeaseTtlMs : undefined);
    this.#lastHeartbeatMs = deps.clock.now();
    this.#setupFailures = new SetupFailureStreak(options.maxSetupFailures);

    const { clock, counters, workLeases, reservations, commits, source } = deps;
    const targetLeases = deps.targetLeases;
    const release = { targetLeases, reservations, clock, counters, log };
    this.#release = release;
    const journal = new JobJournal({ coordinatorId: options.coordinatorId, clock, jobLog: deps.jobLog, jobFinished: deps.events?.jobFinished });
    const finding = deps.events?.finding;
    this.#renewal = { workLeases, targetLeases, counters, log, ...(deps.events?.leaseLost ? { leaseLost: deps.events.leaseLost } : {}) };
    this.#takeover = {
      workLeases,
      reservations,
      log,
      inputExists: deps.inputExists,
      known: (workId) => this.#active.has(workId) || this.#pending.some((p) => jobWorkId(p.work.job) === workId),
    };
    this.#dispatchContext = { ...release, coordinatorId: options.coordinatorId, workLeases, stopping: () => this.#stopping };
    this.#commit = {
      ...release,
      finding,
      workLeases,
      commits,
      source,
      journal,
      hooks: deps.hooks,
      setupFailed: (active, outcome) => this.#setupFailed(active, outcome),
      inputResult: () => this.#setupFailures.reset(),
    };
    this.#recovery = new CommitRecovery({
      coordinatorId: options.coordinatorId, commits, clock, log, counters, finding, source, journal,
      workLeaseTtlMs: options.workLeaseTtlMs, recoverExpiredWork: options.recoverExpiredWork,
      active: this.#active,
      stopping: () => this.#stopping,
    });
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

  get stopping(): boolean {
    return this.#stopping;
  }

  /** Why the coordinator stopped itself (`ERR_SETUP_FAILURES`), if it did. */
  get fatalError(): Error | undefined {
    return this.#setupFailures.fatalError;
  }

  /** Work ids of the running or committing jobs (for tests and status). */
  activeWorkIds(): string[] {
    return [...this.#active.keys()];
  }

  /**
   * Solver slots free for a new dispatch. A job gives its slot back when its solver run ends, not
   * when its result is committed: the commit's I/O (staging, beginCommit, publication — several
   * durable round trips) then overlaps the next run instead of idling a core between jobs. Jobs
   * still finishing are bounded by `workers` more, so a stalled commit path applies back-pressure.
   */
  #freeSlots(): number {
    const workers = this.#options.workers;
    return Math.max(0, Math.min(workers - this.runningCount, 2 * workers - this.#active.size));
  }

  /**
   * One scheduling round: heartbeat when due, replay committing records when due, take over
   * expired work, top up the pending queue, dispatch into free slots. Resolves once every dispatch
   * of the round has started its solver run or rolled back (results are handled asynchronously;
   * `settled()` waits for them).
   */
  async tick(): Promise<void> {
    if (this.#stopping) return;
    const now = this.#deps.clock.now();
    if (now - this.#lastHeartbeatMs >= this.#heartbeatIntervalMs) await this.heartbeat();
    if (this.#stopping) return;
    if (now - this.#lastCommitScanMs >= (this.#options.commitScanIntervalMs ?? this.#options.workLeaseTtlMs)) {
      this.#lastCommitScanMs = now;
      await this.recoverCommits();
    }
    if (this.#stopping) return;
    await this.#takeOverExpired();
    await this.#topUp();
    await this.#dispatchFree();
    this.#deps.counters.fillRatio = this.runningCount / this.#options.workers;
    this.accrueSolverBusy();
  }

  /**
   * Adds the slot time of running solvers since their last accrual to `counters.solverBusyMs`, so
   * a stats sample counts runs still in progress (a long run would otherwise show as idle until it
   * ended). Each run accrues up to when its solver settled, never twice.
   */
  accrueSolverBusy(nowMs: number = this.#deps.clock.now()): void {
    for (const job of this.#active.values()) if (job.solverRunning) this.#accrue(job, nowMs);
  }

  #accrue(job: ActiveJob, nowMs: number): void {
    if (nowMs <= job.busyAccruedUntilMs) return;
    this.#deps.counters.solverBusyMs += nowMs - job.busyAccruedUntilMs;
    job.busyAccruedUntilMs = nowMs;
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

  /** Renews every lease this coordinator holds (contract in `lease-renewal.ts`). */
  async heartbeat(): Promise<HeartbeatReport> {
    const now = this.#deps.clock.now();
    this.#lastHeartbeatMs = now;
    return renewLeases(this.#renewal, [...this.#active.values()], this.#pending, now);
  }

  /**
   * Replays committing records whose owner will not finish them (contract in
   * `commit-recovery.ts`). Runs at the first tick and then every `commitScanIntervalMs`.
   * Resolves with the number of records replayed by this call.
   */
  recoverCommits(): Promise<number> {
    return this.#recovery.recover();
  }

  /**
   * Takes over expired work when slots are free. An expiry scan reads the whole work table, so it
   * runs at most once per heartbeat period (a lease cannot expire much faster than that anyway).
   */
  async #takeOverExpired(): Promise<void> {
    if (!this.#options.recoverExpiredWork) return;
    const free = this.#freeSlots() - this.#pending.length;
    if (free <= 0) return;
    const now = this.#deps.clock.now();
    if (now - this.#lastTakeoverMs < this.#heartbeatIntervalMs) return;
    this.#lastTakeoverMs = now;
    this.#pending.push(...(await takeOverExpired(this.#takeover, free, this.#options.recoveryOwner ?? RECOVERY_OWNER, now)));
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
    for (const pending of dropped) await releasePending(this.#release, pending);
  }

  async #dispatchFree(): Promise<void> {
    while (!this.#stopping && this.#freeSlots() > 0 && this.#pending.length > 0) {
      const pending = this.#pending.shift()!;
      const attempt = this.#dispatchOne(pending);
      this.#dispatching.add(attempt);
      try {
        await attempt;
      } finally {
        this.#dispatching.delete(attempt);
      }
    }
  }

  /** pending → active (contract in `dispatch.ts`); a dispatched job runs and commits on its own. */
  async #dispatchOne(pending: PendingJob): Promise<void> {
    const active = await dispatch(this.#dispatchContext, pending);
    if (active === undefined) return;
    this.#active.set(active.workId, active);
    active.done = this.#runAndCommit(active).finally(() => {
      this.#active.delete(active.workId);
      this.#signalWake();
    });
  }

  async #runAndCommit(active: ActiveJob): Promise<void> {
    let outcome: SolverOutcome;
    try {
      outcome = await this.#deps.solver.run({ workId: active.workId, job: active.work.job }, { signal: active.controller.signal });
    } catch (error) {
      outcome = { status: 'error', generated: [], elapsedMs: 0, error: error instanceof Error ? error.message : String(error) };
    }
    // The slot is free for the next dispatch while this result commits.
    this.#accrue(active, this.#deps.clock.now());
    active.solverRunning = false;
    this.#signalWake();
    try {
      await commitResult(this.#commit, active, outcome);
    } catch (error) {
      // Never leave a job half-finished without a trace; its leases fall to TTL.
      active.logger.error({ err: error }, 'job lifecycle failed after the solver run');
    }
  }

  /** Counts a set-up failure; `maxSetupFailures` in a row stop the coordinator with the error. */
  #setupFailed(active: ActiveJob, outcome: SolverOutcome): void {
    const fatal = this.#setupFailures.fail(outcome, active.logger);
    if (fatal === undefined) return;
    this.#log.error({ err: fatal }, 'too many set-up failures in a row; stopping');
    void this.stop();
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
    for (const job of pending) await releasePending(this.#release, job);
    const report = {
      abortedRuns,
      releasedPending: pending.length,
      releaseFailures: this.#deps.counters.releaseFailures - failuresBefore,
    };
    this.#log.info(report, 'coordinator stopped');
    return report;
  }
}
