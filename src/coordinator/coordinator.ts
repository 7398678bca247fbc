/**
 * The coordinator: fills free solver slots with admitted work and moves every job through
 *
 *   pending ─▶ active ─▶ result ─▶ stage ─▶ beginCommit ─▶ release ─▶ publish + done
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
import { codeOf } from '../errors.js';
import { componentLogger } from '../telemetry/logger.js';
import { CommitRecovery } from './commit-recovery.js';
import { dispatch, startRun, type DispatchContext } from './dispatch.js';
import type { SharedTraceContext } from './shared-traces.js';
import { releasePending, type GroupReleaseContext } from './group-release.js';
import { heartbeatIntervalMs } from './heartbeat-period.js';
import { JobJournal } from './job-journal.js';
import type { ActiveJob, PendingJob } from './job-state.js';
import { renewLeases, type HeartbeatReport, type LeaseRenewalContext } from './lease-renewal.js';
import type { AdmittedWork, SolverOutcome } from './ports.js';
import { commitResult, type ResultCommitContext } from './result-commit.js';
import { RECOVERY_OWNER, type CoordinatorDeps, type CoordinatorOptions, type ShutdownReport } from './coordinator-deps.js';
import { SetupFailureStreak } from './setup-failures.js';
import { StoreFaults, isTransientError } from './store-faults.js';
import { jobWorkId } from './work-identity.js';
import { takeOverExpired, type WorkTakeoverContext } from './work-takeover.js';

export type { CoordinatorHooks } from './result-commit.js';

export { RECOVERY_OWNER } from './coordinator-deps.js';
export type { CoordinatorOptions, CoordinatorPorts, ShutdownReport } from './coordinator-deps.js';

/**
 * Jobs per slot that may be finishing (triage, then commit) while the slot runs its next job. Two:
 * run N's commit may still be publishing when run N+1's triage starts, and on a loaded machine a
 * bound of one made run N+2 wait for run N's commit with a job ready (measured on SymCC + cJSON:
 * median gaps of 27–38 ms at load 20, docs/campaign.md "Solver slots").
 */
const FINISHING_PER_SLOT = 2;
/**
 * After our own publication failed: the first commit scan that replays it, ms later, doubled while
 * its record stays committing, up to the last (docs/campaign.md "When the lease store fails").
 */
const REPLAY_RETRY_FIRST_MS = 1000;
const REPLAY_RETRY_MAX_MS = 30_000;
/** The pause before a result's commit step is retried (result-commit.ts `untilAnswered`), the same way. */
const COMMIT_RETRY_FIRST_MS = REPLAY_RETRY_FIRST_MS;
const COMMIT_RETRY_MAX_MS = REPLAY_RETRY_MAX_MS;

/** Jobs per slot kept dispatched ahead unless `prefetchDepth` says (the campaign option's default). */
const DEFAULT_PREFETCH_DEPTH = 4;

export class Coordinator {
  readonly #options: CoordinatorOptions;
  readonly #deps: CoordinatorDeps;
  readonly #log: Logger;
  readonly #pending: PendingJob[] = [];
  readonly #active = new Map<string, ActiveJob>();
  /**
   * Prefetched jobs: dispatched (claimed, leases held and renewed) but not started, at most one per
   * slot, best first. A slot whose solver exits takes the first at once (`#solverExited`).
   */
  readonly #ready: ActiveJob[] = [];
  /** Per slot: whether a solver runs in it, and when its last solver exited (for `gapMs`). */
  readonly #slotBusy: boolean[];
  readonly #slotExitMs: (number | undefined)[];
  /**
   * Per slot: the job already handed to a staging solver port (`stagesRuns`) to start the moment
   * the slot's running solver exits — prepared in the slot while that one runs, so nothing between
   * the two runs waits on this thread (docs/campaign.md "Solver slots").
   */
  readonly #staged: (ActiveJob | undefined)[];
  /**
   * Prefetched jobs topped up to: `prefetchDepth` per slot (0 without prefetching). Better jobs may
   * be dispatched ahead past it, up to twice the limit (`#giveWayToBetter`).
   */
  readonly #readyLimit: number;
  readonly #dispatching = new Set<Promise<unknown>>();
  readonly #heartbeatIntervalMs: number;
  readonly #release: GroupReleaseContext;
  readonly #renewal: LeaseRenewalContext;
  readonly #takeover: WorkTakeoverContext;
  readonly #dispatchContext: DispatchContext;
  readonly #commit: ResultCommitContext;
  readonly #recovery: CommitRecovery;
  readonly #setupFailures: SetupFailureStreak;
  /** Lease-store I/O failures, logged once per spell (store-faults.ts). */
  readonly #storeFaults: StoreFaults;
  #storeLost: Error | undefined;
  #lastHeartbeatMs: number;
  #lastTakeoverMs = Number.NEGATIVE_INFINITY;
  #lastCommitScanMs = Number.NEGATIVE_INFINITY;
  /** An own publication failed: when the commit scan replays it, and the delay that gave it. */
  #replayRetry: { dueMs: number; delayMs: number } | undefined;
  /** Work ids of this life's results whose publication failed and that no scan has seen finished yet. */
  readonly #unpublished = new Set<string>();
  /** Results waiting to retry a commit step (`#pauseForRetry`): when, on the clock; resolved by `tick` (true) or stop (false). */
  readonly #pauses: { dueMs: number; resolve: (go: boolean) => void }[] = [];
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
    this.#slotBusy = new Array<boolean>(options.workers).fill(false);
    this.#slotExitMs = new Array<number | undefined>(options.workers).fill(undefined);
    this.#staged = new Array<ActiveJob | undefined>(options.workers).fill(undefined);
    this.#readyLimit = (options.prefetchJobs ?? true) ? options.workers * Math.max(1, Math.floor(options.prefetchDepth ?? DEFAULT_PREFETCH_DEPTH)) : 0;

    const { clock, counters, workLeases, reservations, commits, source } = deps;
    const targetLeases = deps.targetLeases;
    const storeFaults = new StoreFaults(log, clock);
    this.#storeFaults = storeFaults;
    const release = { targetLeases, reservations, clock, counters, log, storeFaults };
    this.#release = release;
    const journal = new JobJournal({ coordinatorId: options.coordinatorId, clock, jobLog: deps.jobLog, jobFinished: deps.events?.jobFinished });
    const finding = deps.events?.finding;
    // Work not run because the store failed goes back to its source (when it takes work back).
    const giveBack = source.giveBack ? { giveBack: (work: AdmittedWork) => source.giveBack!(work, clock.now()) } : {};
    this.#renewal = { workLeases, targetLeases, counters, storeFaults, ...(deps.events?.leaseLost ? { leaseLost: deps.events.leaseLost } : {}) };
    this.#takeover = {
      workLeases,
      reservations,
      log,
      inputExists: deps.inputExists,
      known: (workId) => this.#active.has(workId) || this.#ready.some((r) => r.workId === workId) || this.#pending.some((p) => jobWorkId(p.work.job) === workId),
    };
    // Shared traces (docs/campaign.md "Shared traces"): a refused trace claim, and a replayed trace run.
    const traces: SharedTraceContext | undefined =
      source.adoptTrace && source.deferTrace
        ? {
            coordinatorId: options.coordinatorId,
            commits,
            counters,
            log,
            sink: {
              adoptTrace: source.adoptTrace.bind(source),
              deferTrace: source.deferTrace.bind(source),
              knowsTrace: source.knowsTrace ? source.knowsTrace.bind(source) : () => true,
            },
          }
        : undefined;
    this.#dispatchContext = {
      ...release,
      coordinatorId: options.coordinatorId,
      workLeases,
      stopping: () => this.#stopping,
      claimFailed: (error) => this.#claimFailed(error),
      storeFaults,
      ...giveBack,
      ...(source.claimAsk ? { claimAsk: source.claimAsk.bind(source) } : {}),
      ...(traces !== undefined ? { traces } : {}),
    };
    this.#commit = {
      ...release,
      coordinatorId: options.coordinatorId,
      finding,
      workLeases,
      commits,
      source,
      journal,
      hooks: deps.hooks,
      setupFailed: (active, outcome) => this.#setupFailed(active, outcome),
      inputResult: () => this.#setupFailures.reset(),
      storeFaults,
      pauseForRetry: (attempt) => this.#pauseForRetry(attempt),
      publishFailed: (workId) => {
        this.#unpublished.add(workId);
        this.#replayRetry ??= { dueMs: clock.now() + REPLAY_RETRY_FIRST_MS, delayMs: REPLAY_RETRY_FIRST_MS };
      },
    };
    this.#recovery = new CommitRecovery({
      coordinatorId: options.coordinatorId, commits, clock, log, counters, finding, source, journal,
      workLeaseTtlMs: options.workLeaseTtlMs, recoverExpiredWork: options.recoverExpiredWork,
      active: this.#active,
      stopping: () => this.#stopping,
      storeFaults,
      ...(targetLeases !== undefined ? { targetLeases } : {}),
      ...(traces !== undefined ? { traces } : {}),
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

  /** Prefetched jobs: claimed, waiting for a slot. */
  get readyCount(): number {
    return this.#ready.length;
  }

  /** Work ids of the prefetched jobs, next to start first (for tests and status). */
  readyWorkIds(): string[] {
    return this.#ready.map((r) => r.workId);
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

  /** Why the coordinator stopped itself (`ERR_SETUP_FAILURES`, `ERR_LEASE_STORE_REPLACED`), if it did. */
  get fatalError(): Error | undefined {
    return this.#setupFailures.fatalError ?? this.#storeLost;
  }

  /** Work ids of the running or committing jobs (for tests and status). */
  activeWorkIds(): string[] {
    return [...this.#active.keys()];
  }

  /**
   * Solver slots free for a new dispatch. A job gives its slot back when its solver process
   * exits, not when its result is committed: its coverage triage and the commit's I/O (staging,
   * beginCommit, publication — several durable round trips) then overlap the next run instead of
   * idling a core between jobs. Jobs still finishing are bounded by `FINISHING_PER_SLOT × workers`,
   * so a stalled commit path applies back-pressure.
   */
  #freeSlots(): number {
    const workers = this.#options.workers;
    return Math.max(0, Math.min(workers - this.runningCount, (1 + FINISHING_PER_SLOT) * workers - this.#active.size));
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
    this.#resumeDue(now);
    if (now - this.#lastHeartbeatMs >= this.#heartbeatIntervalMs) await this.heartbeat();
    if (this.#stopping) return;
    await this.#scanCommitsWhenDue(now);
    if (this.#stopping) return;
    await this.#rollBackLostReady();
    // Tracked, as dispatches are: a stop waits for work being taken, so that work admitted as it
    // began reaches the pending queue before the stop releases that queue and gives it back.
    await this.#track(this.#takeOverExpired());
    if (this.#stopping) return;
    await this.#track(this.#topUp());
    await this.#giveWayToBetter();
    await this.#dispatchFree();
    await this.#prefetchReady();
    this.#deps.counters.fillRatio = this.runningCount / this.#options.workers;
    this.accrueSolverBusy();
  }

  /**
   * The commit scan (`recoverCommits`): every `commitScanIntervalMs`, and sooner while one of this
   * life's publications failed and its record is still committing (`#replayRetry`: 1 s after the
   * failure, doubled at each scan that still finds it so, up to 30 s; back to 1 s when another
   * publication fails during a scan).
   */
  async #scanCommitsWhenDue(now: number): Promise<void> {
    const retry = this.#replayRetry;
    const regular = now - this.#lastCommitScanMs >= (this.#options.commitScanIntervalMs ?? this.#options.workLeaseTtlMs);
    if (!regular && (retry === undefined || now < retry.dueMs)) return;
    this.#lastCommitScanMs = now;
    const before = new Set(this.#unpublished);
    await this.recoverCommits();
    const left = this.#recovery.leftCommitting;
    // Finished (replayed here or elsewhere): no longer waited for. Unread table: all still are.
    if (left !== undefined) for (const workId of before) if (!left.has(workId)) this.#unpublished.delete(workId);
    const retrying = this.#replayRetry;
    if (retrying === undefined) return;
    if (this.#unpublished.size === 0) this.#replayRetry = undefined;
    else if ([...this.#unpublished].some((workId) => !before.has(workId))) {
      // A publication failed during the scan, after its read: the next scan replays it.
      retrying.delayMs = REPLAY_RETRY_FIRST_MS;
      retrying.dueMs = this.#deps.clock.now() + REPLAY_RETRY_FIRST_MS;
    } else {
      retrying.delayMs = Math.min(retrying.delayMs * 2, REPLAY_RETRY_MAX_MS);
      retrying.dueMs = now + retrying.delayMs;
    }
  }

  /** Resolves true, after `attempt`'s delay on the injected clock (a tick finds it due), or false at stop. */
  #pauseForRetry(attempt: number): Promise<boolean> {
    if (this.#stopping) return Promise.resolve(false);
    const delayMs = Math.min(COMMIT_RETRY_FIRST_MS * 2 ** Math.min(attempt, 30), COMMIT_RETRY_MAX_MS);
    return new Promise((resolve) => this.#pauses.push({ dueMs: this.#deps.clock.now() + delayMs, resolve }));
  }

  #resumeDue(now: number): void {
    for (let i = this.#pauses.length - 1; i >= 0; i--) {
      if (this.#pauses[i]!.dueMs > now) continue;
      const [due] = this.#pauses.splice(i, 1);
      due!.resolve(true);
    }
  }

  /** Results waiting to retry a step of their commit after an I/O error (for tests and status). */
  get heldResults(): number {
    return this.#pauses.length;
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
    const now = this.#deps.clock.now();
    for (const work of works) this.#pending.push({ work, targetToken: work.targetToken, recovered: false, admittedMs: now });
    await this.#applySafetyValve();
  }

  /** Renews every lease this coordinator holds (contract in `lease-renewal.ts`). */
  async heartbeat(): Promise<HeartbeatReport> {
    const now = this.#deps.clock.now();
    this.#lastHeartbeatMs = now;
    // Prefetched jobs hold leases too; one lost there marks the job and `#rollBackLostReady` (or the
    // slot that would have started it) gives everything back.
    return renewLeases(this.#renewal, [...this.#active.values(), ...this.#ready], this.#pending, now);
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
    const free = this.#wanted();
    if (free <= 0) return;
    const now = this.#deps.clock.now();
    if (now - this.#lastTakeoverMs < this.#heartbeatIntervalMs) return;
    this.#lastTakeoverMs = now;
    this.#pending.push(...(await takeOverExpired(this.#takeover, free, this.#options.recoveryOwner ?? RECOVERY_OWNER, now)));
  }

  /** Jobs to take in now: one per free slot, plus (prefetching) `prefetchDepth` per slot ahead, minus those held. */
  #wanted(): number {
    const ahead = this.#readyLimit - this.#ready.length;
    return this.#freeSlots() + ahead - this.#pending.length;
  }

  async #topUp(): Promise<void> {
    const wanted = this.#wanted();
    if (wanted <= 0) return;
    let works: readonly AdmittedWork[];
    try {
      works = await this.#deps.source.take(wanted, this.#deps.clock.now());
    } catch (error) {
      // The admission's claims in the shared target table fail when the store does.
      if (isTransientError(error)) this.#storeFaults.failed(error, 'taking work from the source failed');
      else this.#log.error({ err: error }, 'taking work from the source failed');
      this.#claimFailed(error);
      return;
    }
    this.#deps.counters.admissions += works.length;
    const now = this.#deps.clock.now();
    for (const work of works) this.#pending.push({ work, targetToken: work.targetToken, recovered: false, admittedMs: now });
    await this.#applySafetyValve();
  }

  /**
   * Queue safety valve: keeps at most `maxPendingJobs` carried jobs. A dropped job's tokens must
   * not linger until the TTL: they would keep every other coordinator off those targets for
   * nothing, so they are released at once (shared token, then local reservation), and its work
   * goes back to its source, which offers it again later.
   */
  async #applySafetyValve(): Promise<void> {
    const excess = this.#pending.length - this.#options.maxPendingJobs;
    if (excess <= 0) return;
    const dropped = this.#pending.splice(this.#options.maxPendingJobs, excess);
    this.#deps.counters.safetyValveDrops += dropped.length;
    for (const pending of dropped) {
      await releasePending(this.#release, pending);
      this.#giveBack(pending.work, pending.recovered);
    }
  }

  /**
   * Work that never ran, its question still open, goes back to its source (`WorkSource.giveBack`):
   * a directed job's questions to the lane that proposed it, an input's own run offered again later.
   * Not work taken over: no source handed it out, and its expired record is found again.
   */
  #giveBack(work: AdmittedWork, recovered = false): void {
    if (!recovered) this.#deps.source.giveBack?.(work, this.#deps.clock.now());
  }

  /** Starts prefetched jobs, then freshly dispatched pending ones, in every free slot. */
  async #dispatchFree(): Promise<void> {
    while (!this.#stopping && this.#freeSlots() > 0) {
      const ready = this.#takeReady();
      if (ready !== undefined) {
        this.#start(ready);
        continue;
      }
      if (this.#pending.length === 0) return;
      await this.#track(this.#dispatchAndPlace(this.#pending.shift()!));
    }
  }

  /** Dispatches pending jobs ahead, until every slot has `prefetchDepth` waiting (see `#ready`). */
  async #prefetchReady(): Promise<void> {
    while (!this.#stopping && this.#ready.length < this.#readyLimit && this.#pending.length > 0) {
      await this.#track(this.#dispatchAndPlace(this.#pending.shift()!));
    }
  }

  /**
   * pending → dispatched (contract in `dispatch.ts`), then started if a slot is free, else
   * prefetched (a slot may have been taken meanwhile by a prefetched job). One tracked step, so a
   * `stop()` racing it waits for the placement too, and a job dispatched as the stop began is
   * rolled back before the stop goes on.
   */
  async #dispatchAndPlace(pending: PendingJob): Promise<void> {
    const active = await dispatch(this.#dispatchContext, pending);
    if (active === undefined) return;
    if (this.#stopping) {
      await this.#rollBackReady(active, 'shutting down');
      return;
    }
    this.#insertReady(active);
    this.#startReadyInFreeSlots();
  }

  /** Keeps `#ready` ordered by priority, highest first; FIFO among equals. */
  #insertReady(active: ActiveJob): void {
    const priority = active.work.priority ?? 0;
    let at = this.#ready.length;
    while (at > 0 && (this.#ready[at - 1]!.work.priority ?? 0) < priority) at--;
    this.#ready.splice(at, 0, active);
  }

  /** The next prefetched job fit to start; ones that lost a lease meanwhile are rolled back. */
  #takeReady(): ActiveJob | undefined {
    for (;;) {
      const next = this.#ready.shift();
      if (next === undefined) return undefined;
      if (next.lost === undefined && !next.controller.signal.aborted) return next;
      void this.#track(this.#rollBackReady(next, `${next.lost ?? 'unknown'} lease lost while prefetched`));
    }
  }

  /**
   * Rollback of a prefetched job (contract as a failed dispatch, `dispatch.ts`): work lease
   * abandoned, target group and local reservation released, nothing left held; counted as a
   * dispatch rollback and a prefetch rollback. The job never ran, so it gets no jobs.jsonl line,
   * and its work goes back to its source — unless its work fence was taken over: the work's new
   * holder runs it.
   */
  async #rollBackReady(active: ActiveJob, reason: string): Promise<void> {
    const report = await active.tx.rollback();
    this.#deps.counters.dispatchRollbacks++;
    this.#deps.counters.prefetchRollbacks++;
    active.logger.debug({ reason, failedUndos: report.failed }, 'prefetched job rolled back');
    if (active.lost !== 'work') this.#giveBack(active.work, active.recovered);
  }

  /** Prefetched jobs whose lease a heartbeat found lost give everything back now, not at their turn. */
  async #rollBackLostReady(): Promise<void> {
    // Taken out in one synchronous step: during each rollback's await, a stop or a starting slot
    // may take prefetched jobs too, so no index into the list survives an await.
    const lost: ActiveJob[] = [];
    for (let i = this.#ready.length - 1; i >= 0; i--) {
      const job = this.#ready[i]!;
      if (job.lost === undefined && !job.controller.signal.aborted) continue;
      this.#ready.splice(i, 1);
      lost.push(job);
    }
    for (const job of lost) await this.#track(this.#rollBackReady(job, `${job.lost ?? 'unknown'} lease lost while prefetched`));
  }

  /**
   * A pending job of higher priority than a prefetched one goes ahead of it. While the prefetched
   * jobs number fewer than twice `#readyLimit`, the better job is simply dispatched ahead of the
   * worse (one claim, the one it needs anyway): nothing is given back, and no top-up follows until
   * slots have taken the list back under the limit. Past that, the worst prefetched job gives way:
   * its exact-work lease is abandoned and it goes back to the front of the pending queue, behind
   * the better job, with what it held there before (local reservation, target token), so nothing is
   * lost and nothing leaks.
   * Work taken over is never the one that gives way (its work lease is left to expire, not
   * abandoned: dispatch.ts).
   * Contract: the demoted job's work lease is abandoned or, if abandoning fails, left to TTL (its
   * next dispatch re-claims it; a stale lease of our own then shows as a conflict and the job is
   * rolled back by that dispatch like any refused claim).
   */
  async #giveWayToBetter(): Promise<void> {
    for (let guard = this.#ready.length; guard > 0 && this.#ready.length > 0 && this.#pending.length > 0 && !this.#stopping; guard--) {
      const best = Math.max(...this.#pending.map((p) => p.work.priority ?? 0));
      if ((this.#ready[this.#ready.length - 1]!.work.priority ?? 0) >= best) return;
      const bestAt = this.#pending.findIndex((p) => (p.work.priority ?? 0) === best);
      if (this.#ready.length < 2 * this.#readyLimit) {
        const [ahead] = this.#pending.splice(bestAt, 1);
        await this.#track(this.#dispatchAndPlace(ahead!));
        continue;
      }
      // Work taken over never gives way: its work lease is not abandoned (dispatch.ts), so it
      // could not be claimed again before it expires. The worst other prefetched job does.
      let worstAt = this.#ready.length - 1;
      while (worstAt >= 0 && this.#ready[worstAt]!.recovered === true) worstAt--;
      const worst = this.#ready[worstAt];
      if (worst === undefined || (worst.work.priority ?? 0) >= best) return;
      const [better] = this.#pending.splice(bestAt, 1);
      this.#ready.splice(worstAt, 1);
      try {
        await worst.tx.undoNewest('work-lease');
      } catch (error) {
        worst.logger.warn({ err: error }, 'abandoning a displaced prefetched work lease failed; left to TTL');
      }
      this.#deps.counters.prefetchRollbacks++;
      this.#pending.unshift(better!, {
        work: worst.work,
        targetToken: worst.targetToken,
        recovered: false,
        ...(worst.marks ? { admittedMs: worst.marks.admittedMs } : {}),
      });
      worst.logger.debug('prefetched job gave way to a better one');
    }
  }

  /** Runs `work` as a tracked dispatch step (`stop()` and `settled()` wait for it). */
  async #track<T>(work: Promise<T>): Promise<T> {
    this.#dispatching.add(work);
    try {
      return await work;
    } finally {
      this.#dispatching.delete(work);
    }
  }

  /** A dispatched job goes to the lowest free slot and its solver run starts now (synchronously). */
  #start(active: ActiveJob): void {
    const slot = this.#slotBusy.indexOf(false);
    // #freeSlots() > 0 was checked by every caller; a slot index is free whenever that holds.
    const at = slot < 0 ? 0 : slot;
    this.#slotBusy[at] = true;
    startRun(this.#deps.counters, active, at, this.#slotExitMs[at], this.#deps.clock.now());
    this.#launch(active, at);
  }

  /**
   * A prefetched job goes to the solver port now, staged in busy slot `slot`: the port prepares it
   * there and starts it when the slot's solver exits. Until the coordinator hears of that exit the
   * job runs no solver here (`solverRunning` false: not counted running, no slot time accrued); a
   * stop or a lost lease aborts it like a running one, and it rolls back through the commit path.
   */
  #stage(active: ActiveJob, slot: number): void {
    this.#staged[slot] = active;
    startRun(this.#deps.counters, active, slot, undefined, this.#deps.clock.now());
    active.solverRunning = false;
    this.#launch(active, slot);
  }

  #launch(active: ActiveJob, slot: number): void {
    this.#active.set(active.workId, active);
    active.done = this.#runAndCommit(active, slot).finally(() => {
      this.#active.delete(active.workId);
      // A finished commit can unblock a slot held back by the bound on jobs still finishing.
      this.#startReadyInFreeSlots();
      this.#signalWake();
    });
  }

  /** Fills free slots from the prefetched jobs, then stages one behind each busy slot. */
  #startReadyInFreeSlots(): void {
    if (this.#stopping) return;
    for (let next; this.#freeSlots() > 0 && (next = this.#takeReady()) !== undefined; ) this.#start(next);
    this.#stageReady();
  }

  /**
   * With a staging solver port: each busy slot with nothing staged takes the best prefetched job
   * (within the bound on jobs still finishing, which counts staged jobs like running ones).
   */
  #stageReady(): void {
    if (this.#stopping || this.#deps.solver.stagesRuns !== true) return;
    const workers = this.#options.workers;
    for (let slot = 0; slot < workers; slot++) {
      if (!this.#slotBusy[slot] || this.#staged[slot] !== undefined) continue;
      if (this.#active.size >= (1 + FINISHING_PER_SLOT) * workers) return;
      const next = this.#takeReady();
      if (next === undefined) return;
      this.#stage(next, slot);
    }
  }

  async #runAndCommit(active: ActiveJob, slot: number): Promise<void> {
    let outcome: SolverOutcome;
    const staging = this.#deps.solver.stagesRuns === true;
    try {
      outcome = await this.#deps.solver.run(
        { workId: active.workId, job: active.work.job },
        { signal: active.controller.signal, onSolverExit: () => this.#solverExited(active), ...(staging ? { slot } : {}) },
      );
    } catch (error) {
      outcome = { status: 'error', generated: [], elapsedMs: 0, error: error instanceof Error ? error.message : String(error) };
    }
    // Still staged: it never started (aborted, or its set-up failed); the slot's next exit finds no successor.
    if (this.#staged[slot] === active) this.#staged[slot] = undefined;
    // A solver port that does not report the exit frees the slot now.
    this.#solverExited(active);
    if (active.marks) active.marks.resultMs = this.#deps.clock.now();
    if (outcome.timing !== undefined) active.timing = outcome.timing;
    this.#countSlotTime(active, outcome);
    try {
      await commitResult(this.#commit, active, outcome);
    } catch (error) {
      // Never leave a job half-finished without a trace; its leases fall to TTL.
      active.logger.error({ err: error }, 'job lifecycle failed after the solver run');
    }
  }

  /**
   * The solver process of `active` exited: its slot is free. Idempotent. The slot's prefetched
   * successor starts here, in the same turn — before this run's triage and commit, and with no
   * admission, lease I/O or queue scan in between.
   */
  #solverExited(active: ActiveJob): void {
    if (!active.solverRunning) return;
    const now = this.#deps.clock.now();
    this.#accrue(active, now);
    active.solverRunning = false;
    const slot = active.marks?.slot ?? -1;
    if (active.marks) active.marks.solverExitMs = now;
    if (slot >= 0) {
      const next = this.#staged[slot];
      if (next !== undefined) {
        // Its solver started in the slot when this one exited: the slot stays busy with it.
        this.#staged[slot] = undefined;
        next.solverRunning = true;
        next.startMs = now;
        next.busyAccruedUntilMs = now;
        if (next.marks) next.marks.slotFreeSinceMs = now;
      } else {
        this.#slotBusy[slot] = false;
      }
      this.#slotExitMs[slot] = now;
    } else {
      const busy = this.#slotBusy.indexOf(true);
      if (busy >= 0) this.#slotBusy[busy] = false;
    }
    this.#startReadyInFreeSlots();
    this.#signalWake();
  }

  /** Adds the run's measured slot time to the counters (docs/campaign.md "Where slot time goes"). */
  #countSlotTime(active: ActiveJob, outcome: SolverOutcome): void {
    const c = this.#deps.counters;
    const timing = outcome.timing;
    c.solverProcessMs += timing?.solverMs ?? outcome.elapsedMs;
    if (timing === undefined) return;
    c.slotSpawnMs += timing.spawnMs;
    c.slotCollectMs += timing.collectMs;
    c.triageMs += timing.triageMs;
    const since = active.marks?.slotFreeSinceMs;
    if (timing.idleMs !== undefined) c.slotGapMs += Math.max(0, timing.idleMs - timing.spawnMs);
    else if (since !== undefined) c.slotGapMs += Math.max(0, active.startMs - since);
  }

  /**
   * A lease table whose database was deleted or replaced under it (docs/leases.md "SQLite
   * identity") has lost every lease for good: no claim can succeed again, so instead of retrying
   * every round the coordinator stops (rolling back and releasing like any stop) and the campaign
   * fails with that code. Other claim errors (I/O, a lock timeout) stay per-round and retried.
   */
  #claimFailed(error: unknown): void {
    if (codeOf(error) !== 'ERR_LEASE_STORE_REPLACED' || this.#storeLost !== undefined) return;
    this.#storeLost = error as Error;
    this.#log.error({ err: error }, 'the lease store was replaced under this coordinator; stopping');
    void this.stop();
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
    // Results waiting to retry their commit give up: rolled back like an aborted run.
    for (const held of this.#pauses.splice(0)) held.resolve(false);
    const failuresBefore = this.#deps.counters.releaseFailures;
    await Promise.allSettled([...this.#dispatching]);
    // Prefetched jobs never started: everything they hold is given back (counted with the pending).
    const prefetched = this.#ready.splice(0);
    for (const job of prefetched) await this.#rollBackReady(job, 'shutting down');
    await Promise.allSettled([...this.#dispatching]);
    let abortedRuns = 0;
    for (const active of this.#active.values()) {
      // Jobs whose solver already ended go on to commit; only running (or staged) solvers are aborted.
      if (active.phase === 'active' && (active.solverRunning || this.#staged.includes(active))) {
        active.controller.abort();
        abortedRuns++;
      }
    }
    await this.settled();
    // Jobs that never ran go back to their source (a scheduler job to the lane that proposed it),
    // so the lane state saved at stop keeps their questions for the next life (prefetched and
    // aborted ones went back as they were rolled back).
    const pending = this.#pending.splice(0);
    for (const job of pending) {
      await releasePending(this.#release, job);
      this.#giveBack(job.work, job.recovered);
    }
    const report = {
      abortedRuns,
      releasedPending: pending.length + prefetched.length,
      releaseFailures: this.#deps.counters.releaseFailures - failuresBefore,
    };
    this.#log.info(report, 'coordinator stopped');
    return report;
  }
}
