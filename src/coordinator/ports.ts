/**
 * The narrow interfaces the coordinator drives. Each is shaped after the component that implements
 * it (lease tables, in-flight set, scheduler, solver pool, I/O thread) but says only what the job
 * lifecycle needs, so the lifecycle is unit-tested against in-memory fakes and the real components
 * plug in through thin adapters (`src/coordinator/adapters/`).
 *
 * Conventions: `now` is milliseconds on the coordinator's injected clock; targets are `bigint`;
 * tokens are opaque strings compared by exact equality. A method that "returns false" reports a
 * definite refusal (stale token, conflict); a thrown error reports an I/O failure whose outcome is
 * unknown — callers treat both as "not held" but count them apart.
 */
import type { ErrorData } from '../errors.js';
import type { ClaimOutcome } from '../lease/claim-outcome.js';
import type { AnswerWriter, GroupAnswers } from '../lease/table-contract.js';
import type { Telemetry } from '../scheduler/telemetry.js';
import type { ClaimAsk } from '../scheduler/admission-ports.js';
import type { CommitManifest } from '../commit/commit-manifest.js';
import type { StagedResult, StageInfo } from '../commit/staged-findings.js';
import type { CommitFinding, FindingItem, PublishedEntry } from '../core/findings.js';

// Defined below the coordinator so the layers that implement or share them (commit/, triage/,
// telemetry/) need not import this file; re-exported so the ports stay one import for the lifecycle.
export { systemClock } from '../core/clock.js';
export type { Clock } from '../core/clock.js';
export type { CommitFinding, FindingItem, PublishedEntry } from '../core/findings.js';
export type { StagedResult, StageInfo } from '../commit/staged-findings.js';

/** One solver action of a directed job (docs/scheduler.md "Jobs and target groups"). */
export interface JobAction {
  readonly branch: bigint;
  readonly kind: 'solve' | 'sample' | 'skip';
}

/**
 * A unit of solver work as the coordinator sees it: one input file, optionally directed at a
 * primary target with actions. `group` is the job's target group G(job) — empty for an untargeted
 * job, which takes no target lease.
 */
export interface CoordinatorJob {
  /** Path of the input to run (an AFL queue entry or one of our own findings). */
  readonly inputPath: string;
  /** Lowercase hex SHA-256 of the input bytes; part of the exact work identity. */
  readonly inputSha256: string;
  /** Primary target, 0n for none. */
  readonly targetBranch: bigint;
  readonly actions: readonly JobAction[];
  /** G(job): primary target then every non-skip action branch, de-duplicated, ≤ 64. */
  readonly group: readonly bigint[];
  /** Where the job came from, for logs and jobs.jsonl: `afl`, `feedback`, `scheduler`, `recovered`. */
  readonly origin: string;
  /** Generation depth (0 for AFL seeds, parent + 1 for our own findings). */
  readonly depth: number;
  /**
   * `trace`: a trace-only run (solve nothing, learn the input's branches) — the first run of an
   * input under the `trace` first-run strategy. Absent: a solving run. Part of the work identity.
   */
  readonly mode?: 'trace';
  /**
   * Trace runs of older versions only: the coordinator whose lanes the run was for, part of their
   * work identity, kept so such work taken over or replayed keeps its id. A trace run made now
   * names no coordinator: one trace per input serves the whole campaign (docs/campaign.md "Shared
   * traces").
   */
  readonly tracer?: string;
  /**
   * Trace runs only: branches the run also answers where its path reaches them (the frontier's
   * open branches, docs/solver.md "A first run that answers the frontier"). Advisory, so not part
   * of the work identity or the stored payload: a recovered trace job traces without it.
   */
  readonly wanted?: readonly bigint[];
}

/**
 * A job handed to the coordinator with its admission side effects already taken: the local
 * reservation of `group` under `owner`, and (multi-coordinator) a pending shared target token.
 */
export interface AdmittedWork {
  readonly job: CoordinatorJob;
  /** Shared target-group token claimed at admission (docs/scheduler.md "Admission", step 3), if any. */
  readonly targetToken?: string;
  /** Local reservation owner id (the in-flight set's owner number). */
  readonly owner: number;
  /**
   * Higher runs first; default 0. A job waiting prefetched for a slot gives its place to a pending
   * job of higher priority (docs/campaign.md "Prefetching").
   */
  readonly priority?: number;
}

/** Outcome of a claim: a token, or why not (`error` = I/O failure, outcome unknown). */
export type { ClaimOutcome } from '../lease/claim-outcome.js';

/** Exact-work lease table (FencedWorkLeaseTable). */
export interface WorkLeasePort {
  /**
   * Claims `workId`; refused while another holder's lease is live, committing or done. A `done`
   * refusal names who finished the work (`finished`), with its commit manifest when asked.
   */
  claim(workId: string, payload: Readonly<Record<string, unknown>>, now: number, options?: WorkClaimAsk): Promise<ClaimOutcome>;
  /** Renews several fences at once; returns the work ids that are no longer held. */
  heartbeatMany(fences: ReadonlyMap<string, string>, now: number): Promise<ReadonlySet<string>>;
  /** Deletes a pre-commit lease held with `token`. False when the token is stale. */
  abandon(workId: string, token: string, now: number): Promise<boolean>;
  /**
   * Irreversible `leased → committing` with the current token. False when stale. With `manifest`
   * (the coordinator always passes one), the durable result manifest is stored with the
   * transition (replayable after a crash; see `ResultCommits`). Without it an existing manifest
   * is kept.
   */
  beginCommit(workId: string, token: string, now: number, manifest?: Readonly<Record<string, unknown>>): Promise<boolean>;
  /**
   * `leased | committing → done`, permanent. False when stale. The coordinator completes a record
   * alone only for a result with nothing to publish; any other goes through `beginCommit` and
   * `ResultCommits.publish` (publication and `done` in one fenced step).
   */
  complete(workId: string, token: string, now: number): Promise<boolean>;
  /** Payloads of expired `leased` records, up to `limit`, for another coordinator to take over. */
  recoverExpired(limit: number, now: number): Promise<readonly RecoveredWork[]>;
}

/** What a work claim asks beyond the lease: `doneCommit`, a done record's manifest with the refusal. */
export interface WorkClaimAsk {
  readonly doneCommit?: boolean;
}

export interface RecoveredWork {
  readonly workId: string;
  readonly payload: Readonly<Record<string, unknown>>;
}

/** Shared target-group lease table (FencedTargetLeaseTable), group ≤ 64 targets. */
export interface TargetLeasePort {
  /**
   * `ask` (what the job's admission asked, `WorkSource.claimAsk`): members answered on its input
   * (or on any input, `anyInput`) refuse the claim with `answered`, and members whose question is
   * backing off under its policy with `backoff`.
   */
  claimGroup(group: readonly bigint[], payload: Readonly<Record<string, unknown>>, now: number, ask?: ClaimAsk): Promise<ClaimOutcome>;
  /** True when every member still carries `token` and was renewed. */
  heartbeatGroup(group: readonly bigint[], token: string, now: number): Promise<boolean>;
  /**
   * Releases the members carrying `token`, keeping with them what the run answered on its input
   * (`answers`, docs/leases.md "Shared answers"). False when any member was re-claimed by someone else.
   */
  releaseGroup(group: readonly bigint[], token: string, now: number, answers?: GroupAnswers): Promise<boolean>;
  /**
   * Writes what a committed run answered into the members' answer records without their leases
   * (`writer`: the lease that asked): for a result whose release could not carry its answers, and
   * for a result replayed from its commit manifest. False when refused (a corrupt answer record).
   * Optional: a port without it leaves those answers unwritten.
   */
  recordAnswers?(answers: GroupAnswers, writer: AnswerWriter, now: number): Promise<boolean>;
}

/** The process-local in-flight target set (InflightTargetSet), declared with the scheduler's ports. */
export type { LocalReservations } from '../scheduler/admission-ports.js';

/** A generated input as the solver pool reports it after coverage triage. */
export interface TriagedInput {
  readonly bytes: Uint8Array;
  readonly sha256: string;
  /** The input added coverage to the shared bitmap (novelty). */
  readonly interesting: boolean;
  /** Map bytes it was first to set in the shared bitmap (absent from in-process classifiers). */
  readonly newEdges?: number;
  /** Set when replaying the input itself crashed or hung the target. */
  readonly terminal?: 'crash' | 'timeout';
}

export type SolverPortStatus = 'ok' | 'timeout' | 'crash' | 'error' | 'aborted';

/**
 * Where a run's time went on its solver slot, ms, as the solver measured it (docs/campaign.md
 * "Where slot time goes"): start-up until the solver process ran, the process's lifetime, what
 * still held the slot after its exit (output collection), and coverage triage (off the slot).
 */
export interface SolverRunTiming {
  readonly spawnMs: number;
  readonly solverMs: number;
  readonly collectMs: number;
  readonly triageMs: number;
  /** The solver process's CPU time (user + system), when the solver measured it. */
  readonly solverCpuMs?: number;
  /** The slot's time without a solver process before this one started, measured by the slot itself. */
  readonly idleMs?: number;
}

export interface SolverOutcome {
  readonly status: SolverPortStatus;
  readonly generated: readonly TriagedInput[];
  /** The run's `symfence-telemetry/1`, parsed strictly once by the solver pool. */
  readonly telemetry?: Telemetry;
  /** Why the telemetry the solver wrote was refused (the run then counts as untargeted). */
  readonly telemetryError?: ErrorData;
  /** Solver CPU time reported by the backend, in microseconds. */
  readonly solverTimeUs?: number;
  readonly elapsedMs: number;
  /** Message for `error` outcomes. */
  readonly error?: string;
  /** Stable code of an `error` outcome (`ERR_SOLVER_SPAWN`, `ERR_SHOWMAP_SETUP` …), when known. */
  readonly errorCode?: string;
  /** Absent when the solver cannot tell (no process ran, or a solver port that does not measure). */
  readonly timing?: SolverRunTiming;
}

export interface SolverPortTask {
  readonly workId: string;
  readonly job: CoordinatorJob;
}

export interface SolverRunOptions {
  readonly signal: AbortSignal;
  /**
   * Called at most once, when the run's solver process has exited and its slot can take the next
   * run, possibly well before `run` resolves (triage still to come). Optional for the port: one
   * that never calls it frees the slot when `run` resolves.
   */
  readonly onSolverExit?: () => void;
  /** The solver slot (0 .. workers - 1) the coordinator gives the run; a port with `stagesRuns` runs it there. */
  readonly slot?: number;
}

/** The solver pool. Aborting `signal` kills the run's process group and resolves `aborted`. */
export interface SolverPort {
  run(task: SolverPortTask, options: SolverRunOptions): Promise<SolverOutcome>;
  /**
   * True when the port runs each run in the slot it is given, one solver process per slot at a
   * time, and starts a run given to a busy slot the moment that slot's process exits (docs/solver.md
   * "Staged runs"). The coordinator then hands each busy slot its next job ahead.
   */
  readonly stagesRuns?: boolean;
}

/**
 * Where candidate work comes from: AFL's queue, our own findings, the scheduler's admissions.
 * `take` returns already-admitted work (reservations held); `observe` feeds a finished job back.
 */
export interface WorkSource {
  take(limit: number, now: number): Promise<readonly AdmittedWork[]>;
  /** Feedback after a committed job: telemetry for the lanes, new inputs for the seed pool. */
  observe(feedback: JobFeedback, now: number): void;
  /**
   * Shared traces (docs/campaign.md "Shared traces"), for a source that makes trace runs: the lanes
   * learn a stored trace of the job's input, another coordinator's or an earlier life's of ours
   * (no run now, so no yield to count)...
   */
  adoptTrace?(job: CoordinatorJob, workId: string, telemetry: Telemetry, now: number): void;
  /** ...and an input whose trace another coordinator is making right now is offered again later. */
  deferTrace?(job: CoordinatorJob, now: number): void;
  /**
   * Do the lanes know the trace of `job`'s input already? Asked when a trace of our own is met
   * again: a restarted coordinator whose saved lane state predates that trace adopts it. Absent:
   * they do (nothing is adopted).
   */
  knowsTrace?(job: CoordinatorJob): boolean;
  /**
   * `work` was taken but answered nothing, and was rolled back (nothing held): its dispatch failed
   * on an I/O error of the lease store, a stop or the safety valve dropped it, its target group was
   * lost, its set-up failed (docs/campaign.md "Lifecycle of a job"). Offer it again later. Never
   * called for work another coordinator holds or took over, nor for work the campaign settled.
   * Absent: the work is dropped, as a refused one is.
   */
  giveBack?(work: AdmittedWork, now: number): void;
  /**
   * What a claim of `job`'s target group asks the shared table about answers, the same as its
   * admission asked (its input, any input for a lane that asks a branch once per campaign, the
   * campaign's back-off): a re-claim at dispatch (a token that could not be renewed, work taken
   * over from an expired lease) is refused what the admission would refuse. Absent: the input alone.
   */
  claimAsk?(job: CoordinatorJob): ClaimAsk;
}

export interface JobFeedback {
  readonly job: CoordinatorJob;
  readonly workId: string;
  readonly status: SolverPortStatus;
  readonly telemetry?: Telemetry;
  readonly telemetryError?: ErrorData;
  /** Paths of our own interesting findings, as published. */
  readonly findings: readonly PublishedEntry[];
  /** Edges the run's inputs added to the campaign's map (an interesting input without a count counts 1). */
  readonly newEdges?: number;
  /** The run's solver time, ms (the backend's CPU time when it reports one, else wall time). */
  readonly solverMs?: number;
  /**
   * What the run cost the machine, ms: its time on the solver slot (start-up, the solver process,
   * output collection) plus the coverage triage of its outputs; its wall time when the solver
   * measured none. The yield split and the frontier's run costs use this (docs/scheduler.md).
   */
  readonly runMs?: number;
}

/** An input known to the campaign: an AFL queue entry, an initial seed or one of our findings. */
export interface SeedInput {
  readonly path: string;
  readonly sha256: string;
  /** 0 for AFL entries and initial seeds, parent + 1 for our own findings. */
  readonly depth: number;
  readonly origin: 'afl' | 'seed' | 'feedback';
}

/**
 * The scheduler as the work source drives it (docs/scheduler.md "Admission"): it learns seeds and results, and admits
 * targeted jobs transactionally — local reservation and shared claim taken, lane state committed
 * only for what was admitted.
 */
export interface TargetScheduler {
  addSeed(seed: SeedInput, now: number): void;
  /** Up to `limit` admitted targeted jobs; never more. */
  admit(limit: number, now: number): Promise<readonly AdmittedWork[]>;
  observe(feedback: JobFeedback, now: number): void;
  /** Branches a trace run of the input should also answer (at most `limit`); absent or empty: a plain trace run. */
  wantedFor?(inputSha256: string, limit: number): readonly bigint[];
  /** Did the lanes learn a whole run of the input (its trace), in this life or from the saved lane state? */
  knowsInput?(inputSha256: string): boolean;
  /** An admitted job that answered nothing (`WorkSource.giveBack`): the lane that proposed it takes it back. */
  reopen?(job: CoordinatorJob, now: number): void;
  /** What a claim of `job`'s target group asks about answers: what its admission asked (`WorkSource.claimAsk`). */
  claimAsk?(job: CoordinatorJob): ClaimAsk;
}

/** A `committing` work record as a recovering coordinator sees it. */
export interface CommittingWork {
  readonly workId: string;
  readonly token: string;
  /** Coordinator id that committed it. */
  readonly owner: string;
  /** Last beginCommit or heartbeat, ms. */
  readonly updatedMs: number;
  readonly payload: Readonly<Record<string, unknown>>;
  /** The stored manifest, unvalidated (`load` validates it). */
  readonly commit: unknown;
}

/** One scan of the work table for recovery: committing records, and the ids already done. */
export interface CommitScan {
  readonly committing: readonly CommittingWork[];
  /** Work id → when it was completed (ms, injected clock), for records read as `done`. */
  readonly done: ReadonlyMap<string, number>;
  /**
   * Work id → the trace file (`<workId>.<sha256>`) a `done` record's manifest keeps, or null when
   * it names none; absent when the scan cannot tell (its trace files are then never swept).
   */
  readonly traces?: ReadonlyMap<string, string | null>;
  /** Work id → the size, bytes, of the trace file in `traces`, as its manifest names it (the trace store's cap). */
  readonly traceBytes?: ReadonlyMap<string, number>;
}

/** `completed`: published now by this call; `already`: someone else finished it; else refused. */
export type CommitOutcome = 'completed' | 'already' | 'stale' | 'corrupt' | 'live';

export interface CommitPublication {
  readonly outcome: CommitOutcome;
  /** Entries published by this call (`completed` only); content already there is left out. */
  readonly entries: readonly PublishedEntry[];
}

/**
 * Crash-safe result commits (docs/campaign.md "Commit recovery"): findings are staged durably
 * under the lease root before `beginCommit`, the manifest naming them is stored with it, and
 * publication + completion happen together under the work record's lock, so whoever gets there
 * first — the owner, or a coordinator replaying a dead owner's record — publishes exactly once.
 */
export interface ResultCommits {
  /**
   * Stages a result's findings durably (reading file items, such as a crashing parent input) and
   * resolves with the manifest to store with `beginCommit` and the findings' bytes. Throws on
   * failure; then no manifest exists.
   */
  stage(workId: string, items: readonly FindingItem[], info: StageInfo): Promise<StagedResult>;
  /**
   * Publishes into this coordinator's queue and marks the record done, iff it is committing with
   * `token` (`completed`); `already` when it is done with `token`, `stale` / `corrupt` otherwise.
   * `minIdleMs` > 0 (replaying another coordinator's result): only if the record was not renewed
   * for that long, checked under its lock; otherwise `live` and nothing is published.
   */
  publish(workId: string, token: string, manifest: CommitManifest, findings: readonly CommitFinding[], now: number, minIdleMs?: number): Promise<CommitPublication>;
  /** Reads the work table. Throws (e.g. `ERR_LEASE_CORRUPT`) when it cannot be read whole. */
  scan(): Promise<CommitScan>;
  /**
   * Validates a stored manifest and reads its staged findings, verifying size and SHA-256.
   * Throws `ERR_COMMIT_MANIFEST` or `ERR_STAGED_FINDING`.
   */
  load(workId: string, commit: unknown): Promise<StagedResult>;
  /**
   * The trace a done trace run's stored manifest names (docs/campaign.md "Shared traces"), its size
   * and SHA-256 verified; `undefined` when the manifest names none. Throws `ERR_COMMIT_MANIFEST` or
   * `ERR_STAGED_FINDING`.
   */
  loadTrace(workId: string, commit: unknown): Promise<Uint8Array | undefined>;
  /** Removes a finished result's staged files (best effort: leftovers are swept). */
  discard(manifest: CommitManifest): Promise<void>;
  /**
   * Removes staged files of work that is `done`, and the trace files of such work that its record
   * does not keep (`keptTraces`, as `CommitScan.traces`: a work id absent there keeps all of its
   * traces); resolves with how many.
   */
  sweep(done: ReadonlySet<string>, keptTraces?: ReadonlyMap<string, string | null>): Promise<number>;
  /**
   * Evicts the least recently used traces kept by `scan`'s done records while they take more than
   * the trace store's cap, only traces of work in `settled` (docs/campaign.md "Shared traces");
   * resolves with how many. Optional: fakes may omit it.
   */
  evictTraces?(scan: CommitScan, settled: ReadonlySet<string>): Promise<number>;
  /**
   * Removes leftover temp files whose writer is provably gone (docs/leases.md "Leftover temp
   * files"); resolves with how many. Optional: fakes may omit it.
   */
  sweepTemps?(nowMs: number): Promise<number>;
}
