/**
 * The coordinator's `jobs.jsonl` lines (docs/campaign.md "jobs.jsonl"): one per job that ran here
 * (whatever its end: committed, stale, aborted, abandoned), and one per result this coordinator
 * replayed for a dead owner (`replay: true`). Each line also goes to the `jobFinished` event.
 * Writing never throws: a failed append is logged at error and the job's lifecycle carries on.
 */
import type { Logger } from 'pino';
import type { CommitManifest } from '../commit/commit-manifest.js';
import type { Telemetry } from '../scheduler/telemetry.js';
import { answerCost, jobKindOf } from '../telemetry/counters.js';
import type { JobLogEntry, JobLogPort, JobLogStatus } from '../telemetry/job-log.js';
import { decimal, type ActiveJob } from './job-state.js';
import type { Clock, CommittingWork, CoordinatorJob, PublishedEntry } from './ports.js';

interface JobJournalContext {
  readonly coordinatorId: string;
  readonly clock: Clock;
  readonly jobLog: JobLogPort | undefined;
  readonly jobFinished: ((entry: JobLogEntry) => void) | undefined;
}

export class JobJournal {
  readonly #ctx: JobJournalContext;

  constructor(ctx: JobJournalContext) {
    this.#ctx = ctx;
  }

  /**
   * The line of a job that ran here; `telemetry` adds the run's query and target fields, `members`
   * which of its group the run answered and left open (what its release told the target table).
   */
  recordRun(
    active: ActiveJob,
    endMs: number,
    status: JobLogStatus,
    generated: number,
    interesting: number,
    telemetry?: Telemetry,
    members?: { readonly settled: readonly bigint[]; readonly open: readonly bigint[] },
  ): void {
    const kind = jobKindOf(active.work.job);
    const entry: JobLogEntry = {
      workId: active.workId,
      targets: decimal(active.work.job.group),
      coordinator: this.#ctx.coordinatorId,
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
            ...(telemetry.preload !== undefined ? answerCost(telemetry) : {}),
          }
        : {}),
      ...(members !== undefined && active.work.job.group.length > 0 ? { settled: decimal(members.settled), open: decimal(members.open) } : {}),
      ...this.#breakdown(active),
    };
    this.#write(entry, () => active.logger);
  }

  /** The time-breakdown fields of a run whose solver measured its timing (see `JobLogEntry`). */
  #breakdown(active: ActiveJob): Partial<JobLogEntry> {
    const { marks, timing } = active;
    if (marks === undefined || timing === undefined) return {};
    const ms = (x: number): number => Math.round(Math.max(0, x) * 100) / 100;
    // The slot's own measure when it has one (exact for a staged run); else from this thread's marks.
    const gap = timing.idleMs !== undefined ? { gapMs: ms(timing.idleMs) } : marks.slotFreeSinceMs === undefined ? {} : { gapMs: ms(active.startMs - marks.slotFreeSinceMs + timing.spawnMs) };
    return {
      slot: marks.slot,
      queuedMs: ms(marks.claimStartMs - marks.admittedMs),
      claimMs: ms(marks.claimedMs - marks.claimStartMs),
      prefetchedMs: ms(active.startMs - marks.claimedMs),
      spawnMs: ms(timing.spawnMs),
      solverMs: ms(timing.solverMs),
      collectMs: ms(timing.collectMs),
      triageMs: ms(timing.triageMs),
      commitMs: ms(this.#ctx.clock.now() - (marks.resultMs ?? this.#ctx.clock.now())),
      ...gap,
      ...(timing.solverCpuMs !== undefined ? { solverCpuMs: ms(timing.solverCpuMs) } : {}),
    };
  }

  /**
   * The line of a result replayed here: `replay: true`, `owner` the coordinator whose run produced
   * it, `coordinator` us; the interval is the replay's own (no solver ran here). Called only when
   * the replay completed the record, so a result gets one replay line however many coordinators
   * tried. `job` is undefined when the record's payload no longer parses (targets then `[]`).
   */
  recordReplay(record: CommittingWork, job: CoordinatorJob | undefined, manifest: CommitManifest, entries: readonly PublishedEntry[], startMs: number, log: Logger): void {
    const entry: JobLogEntry = {
      workId: record.workId,
      targets: job ? decimal(job.group) : [],
      coordinator: this.#ctx.coordinatorId,
      owner: record.owner,
      replay: true,
      startMs,
      endMs: this.#ctx.clock.now(),
      status: manifest.status,
      generated: manifest.items.length,
      interesting: entries.filter((e) => e.kind === 'queue').length,
    };
    this.#write(entry, () => log);
  }

  /** `log`: the job's logger, asked for only when there is something to log (dispatch.ts makes it lazily). */
  #write(entry: JobLogEntry, log: () => Logger): void {
    try {
      this.#ctx.jobLog?.append(entry);
    } catch (error) {
      log().error({ err: error }, 'writing jobs.jsonl failed');
    }
    this.#ctx.jobFinished?.(entry);
  }
}
