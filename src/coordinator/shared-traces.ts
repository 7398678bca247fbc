/**
 * Shared traces (docs/campaign.md "Shared traces"): one trace per input per campaign, not per
 * coordinator. A trace run's work identity names no coordinator, so every coordinator of a
 * campaign meets the same work id for an input's trace, and the work lease lets one of them run it.
 * Its result commit stores the trace beside the record (the manifest's `trace`, under
 * `<lease-root>/traces/`). What the others do when their trace claim is refused:
 *
 *   done, finished by another coordinator ──▶ load its trace (size and SHA-256 checked, telemetry
 *                                             parsed strictly) ──▶ the lanes learn it  (`tracesAdopted`)
 *   done, finished by us, and the lanes   ──▶ nothing: they learnt it when it ran, or from the
 *   know the input                            saved lane state
 *   done, finished by us, and the lanes   ──▶ load and learn our own trace          (`tracesRelearned`)
 *   do not know the input
 *   conflict (another coordinator is      ──▶ the input is offered again later, with a growing
 *   tracing it now, or died doing so)         delay, until the trace is done or its lease expires
 *                                             and the claim takes it over    (`tracesDeferred`)
 *
 * A trace run's committing record that a commit scan replays (its tracer died after `beginCommit`)
 * is learnt the same way once the replay completes it (`learnStoredTrace`): the replay takes the
 * input's deferral with it, so the input is not offered again to find the trace done.
 *
 * Why our own trace can be unknown to our lanes: the lane state is saved every
 * `--scheduler-state-interval` and at stop, the trace's done record at its commit. A coordinator
 * killed in between restarts (same `--coordinator-id`) from a save older than its trace; its trace
 * claim is refused `done`, so without the adoption it would never learn that input's branches.
 *
 * A trace that cannot be read or parsed is counted (`traceAdoptFailures`) and logged; one no
 * longer stored (evicted by the trace store's cap) is counted apart (`traceAdoptMissing`). Either
 * way the input is not traced again (its work is done), so its branches are learned only from the
 * runs that reach them. Nothing here throws.
 */
import type { Logger } from 'pino';
import type { ClaimRefused } from '../lease/claim-outcome.js';
import { parseTelemetry, type Telemetry } from '../scheduler/telemetry.js';
import type { CampaignCounters } from '../telemetry/counters.js';
import type { CoordinatorJob, ResultCommits } from './ports.js';
import { isTraceGone } from './trace-gone.js';

/** Where an adopted trace goes and where a deferred trace waits (the work source). */
export interface TraceSink {
  /** The lanes learn a stored trace of `job`'s input (another coordinator's, or ours from an earlier life), as if the run had been now. */
  adoptTrace(job: CoordinatorJob, workId: string, telemetry: Telemetry, now: number): void;
  /** `job`'s input is offered again later: its trace is being made elsewhere right now. */
  deferTrace(job: CoordinatorJob, now: number): void;
  /** Do the lanes know `job`'s input's trace already (learnt in this life, or loaded with the lane state)? */
  knowsTrace(job: CoordinatorJob): boolean;
}

export interface SharedTraceContext {
  readonly coordinatorId: string;
  readonly commits: Pick<ResultCommits, 'loadTrace'>;
  readonly sink: TraceSink;
  readonly counters: Pick<CampaignCounters, 'tracesAdopted' | 'traceAdoptFailures' | 'tracesDeferred' | 'tracesRelearned' | 'traceAdoptMissing'>;
  readonly log: Logger;
}

/** A refused trace claim (see the module comment). Resolves once the trace is adopted or put off. */
export async function traceClaimRefused(ctx: SharedTraceContext, job: CoordinatorJob, workId: string, refusal: ClaimRefused, now: number): Promise<void> {
  if (refusal.reason === 'conflict') {
    ctx.counters.tracesDeferred++;
    ctx.sink.deferTrace(job, now);
    return;
  }
  const finished = refusal.reason === 'done' ? refusal.finished : undefined;
  if (finished === undefined || finished.commit === undefined) return;
  await learnStoredTrace(ctx, job, workId, finished.commit, finished.owner, now);
}

/**
 * The lanes learn the trace `commit` (a trace run's stored manifest, `tracer` the coordinator that
 * ran it) stores, unless it is our own and they know it already: after a refused claim found the
 * trace done, and after a replay of a trace run's committing record (commit-recovery.ts), so that a
 * coordinator that put the input off while the tracer died mid-commit learns the trace it finished.
 */
export async function learnStoredTrace(ctx: SharedTraceContext, job: CoordinatorJob, workId: string, commit: unknown, tracer: string, now: number): Promise<void> {
  const ours = tracer === ctx.coordinatorId;
  if (ours && ctx.sink.knowsTrace(job)) return;
  let telemetry: Telemetry;
  try {
    const bytes = await ctx.commits.loadTrace(workId, commit);
    if (bytes === undefined) return; // the trace run crashed, timed out or wrote no telemetry
    telemetry = parseTelemetry(new TextDecoder().decode(bytes));
  } catch (error) {
    if (isTraceGone(error)) {
      ctx.counters.traceAdoptMissing++;
      ctx.log.debug({ workId, tracer }, ours ? 'our own stored trace was evicted; not learnt again' : 'the shared trace of another coordinator was evicted; not adopted');
      return;
    }
    ctx.counters.traceAdoptFailures++;
    ctx.log.warn({ err: error, workId, tracer }, ours ? 'our own stored trace is unreadable; not learnt again' : 'the shared trace of another coordinator is unreadable; not adopted');
    return;
  }
  try {
    ctx.sink.adoptTrace(job, workId, telemetry, now);
    if (ours) ctx.counters.tracesRelearned++;
    else ctx.counters.tracesAdopted++;
  } catch (error) {
    ctx.counters.traceAdoptFailures++;
    ctx.log.error({ err: error, workId }, 'feeding a shared trace to the lanes failed');
  }
}
