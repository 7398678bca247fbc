/**
 * What the coordinator holds per job, shared by its protocols (docs/campaign.md "Lifecycle of a
 * job"): a pending job waiting for a slot, and an active job from dispatch until its result was
 * committed or rolled back. The coordinator owns the collections; each protocol file mutates only
 * the fields its contract names.
 */
import type { Logger } from 'pino';
import type { DispatchTransaction } from './dispatch-transaction.js';
import type { AdmittedWork, SolverRunTiming } from './ports.js';

/** Admitted work waiting for a solver slot. */
export interface PendingJob {
  readonly work: AdmittedWork;
  /** The shared target token claimed at admission; forgotten (undefined) once found lost. */
  targetToken: string | undefined;
  /** Taken over from an expired lease of another coordinator (counted as a steal at dispatch). */
  readonly recovered: boolean;
  /** When it entered the pending queue, ms (the start of `queuedMs` in jobs.jsonl). */
  readonly admittedMs?: number;
}

/** `active`: the dispatch's resources are still rolled back on failure; `committing`: never again. */
type ActivePhase = 'active' | 'committing';

/**
 * When a job passed each step on its way to a slot, ms on the coordinator's clock; jobs.jsonl's
 * time breakdown is computed from these (docs/campaign.md "Where slot time goes").
 */
interface JobMarks {
  /** Entered the pending queue. */
  admittedMs: number;
  /** Its dispatch (re-validation and claims) began, and ended with everything held. */
  claimStartMs: number;
  claimedMs: number;
  /** The slot it ran in (0 .. workers - 1); -1 while prefetched, before it started. */
  slot: number;
  /** When that slot's previous solver exited (undefined for the slot's first run). */
  slotFreeSinceMs: number | undefined;
  /** When the solver reported its exit (the slot became free), and when its result came back. */
  solverExitMs: number | undefined;
  resultMs: number | undefined;
}

export interface ActiveJob {
  readonly workId: string;
  readonly work: AdmittedWork;
  readonly targetToken: string | undefined;
  readonly workToken: string;
  /** Every acquisition of the dispatch, with its undo; committed (emptied) at beginCommit. */
  readonly tx: DispatchTransaction;
  readonly controller: AbortController;
  /** When the solver run was started (for a prefetched job: when it was claimed, until it starts). */
  startMs: number;
  readonly logger: Logger;
  phase: ActivePhase;
  /** True until the solver run settled: the job occupies a solver slot only while this holds. */
  solverRunning: boolean;
  /** Up to when this run's slot time is already in `counters.solverBusyMs`, ms (starts at `startMs`). */
  busyAccruedUntilMs: number;
  /** Set by lease renewal when a lease was definitely lost; the run is then aborted. */
  lost: 'work' | 'target' | undefined;
  /**
   * Work taken over from another coordinator's expired lease: no source handed it out, so none
   * takes it back; rolled back, its work record is left to expire so that a takeover scan finds
   * it again (dispatch.ts).
   */
  readonly recovered?: boolean;
  /**
   * Set by the commit path when it begins to end the job's leases itself (completing the work
   * record, publishing the result, releasing the group): a renewal that finds them gone from then
   * on found its own coordinator's doing, not a loss (lease-renewal.ts).
   */
  ending?: boolean;
  /** Set once the commit path released the target group (before the publication): not renewed from then on. */
  groupReleased?: boolean;
  done: Promise<void>;
  /** The time breakdown's marks (absent in jobs built outside the coordinator, e.g. tests). */
  marks?: JobMarks;
  /** The solver's own measurement of the run, once its result came back. */
  timing?: SolverRunTiming;
}

/** Targets as decimal strings, the form logs and jobs.jsonl use. */
export const decimal = (targets: readonly bigint[]): string[] => targets.map((t) => t.toString(10));
