/**
 * Commit recovery: replays `committing` work records whose owner will not finish them
 * (docs/campaign.md "Commit recovery"):
 *
 *   scan ──▶ for each committing record not running here:
 *              ours from a previous life (same coordinator id)      → replay at once
 *              another's, silent for a whole work TTL (and takeover on) → replay
 *            replay = load staged findings (verified) ──▶ record the answers it kept ──▶ fenced publish + done ──▶ discard staged
 *        ──▶ sweep staged files of work done for a TTL ──▶ evict traces over the cap (least
 *            recently used, of work done for a TTL) ──▶ sweep temps of writers provably gone
 *
 * Contract: a record is published exactly once whoever claims its publication first — the owner,
 * or any replaying coordinator — because a publication is claimed in the record before anything
 * is published and finished only by its claimant (docs/leases.md "Publishing a committed
 * result"), and the owner's silence is re-checked in the claim (`minIdleMs`), so an owner that
 * renewed since the lock-free scan keeps its result (`live`). Every failure fails closed and is never thrown: a bad
 * manifest, a missing or altered staged finding, an unreadable table or a refused publication is
 * counted (`commitReplayFailures`), logged with its code, and leaves the record committing. A
 * record that stays bad (bad manifest, staged finding missing or altered) is reported once per
 * token, not at every scan. The answers a manifest kept (what the run settled; not what it left
 * open) are written into the shared answers before the publication, once per record in this
 * process, whether or not the owner's release wrote them already (writing one twice leaves it as
 * it was; docs/leases.md "Shared answers"): an I/O failure there leaves the record committing for
 * the next scan; answers that name another input or targets outside the work's group fail closed
 * like a bad manifest; a refusal (a corrupt answer record) is logged and the result published.
 * A staged copy gone because someone finished the record since the scan
 * is not a failure. Each replay that completed a record is counted (`commitsReplayed`), its
 * findings counted and emitted, fed back to the work source and journalled (`replay: true`).
 */
import type { Logger } from 'pino';
import { codeOf } from '../errors.js';
import { isStaleSince } from '../lease/lease-record.js';
import { childLogger } from '../telemetry/logger.js';
import type { JobJournal } from './job-journal.js';
import type { Clock, CommittingWork, CoordinatorJob, ResultCommits, StagedResult, TargetLeasePort, WorkSource } from './ports.js';
import { countPublished, discardStaged, type PublicationContext } from './result-commit.js';
import { isTransientError, type StoreFaultSink } from './store-faults.js';
import { learnStoredTrace, type SharedTraceContext } from './shared-traces.js';
import { jobFromWorkPayload } from './work-identity.js';

interface CommitRecoveryContext extends PublicationContext {
  readonly coordinatorId: string;
  readonly commits: ResultCommits;
  readonly clock: Clock;
  readonly log: Logger;
  readonly source: WorkSource;
  readonly journal: JobJournal;
  /** Work TTL, ms: another owner's silence before a replay, and the age of `done` before a sweep. */
  readonly workLeaseTtlMs: number;
  /** Replay other coordinators' records at all (our own from a previous life are always replayed). */
  readonly recoverExpiredWork: boolean;
  /** The jobs running or committing here, by work id: never replayed (their owner is alive — us). */
  readonly active: ReadonlyMap<string, unknown>;
  readonly stopping: () => boolean;
  /** Where transient I/O failures of scans and replays go (store-faults.ts). */
  readonly storeFaults: StoreFaultSink;
  /** The shared target table: a replayed result's answers are written there. Absent: no shared answers. */
  readonly targetLeases?: TargetLeasePort;
  /** Shared traces: a replayed trace run's stored trace is learnt (shared-traces.ts); absent: only its findings are fed back. */
  readonly traces?: SharedTraceContext;
}

export class CommitRecovery {
  readonly #ctx: CommitRecoveryContext;
  /** `workId:token` of committing records whose manifest or staged bytes are bad: not retried. */
  readonly #unreplayable = new Set<string>();
  /** `workId:token` of committing records whose kept answers this process wrote (bounded by the records it replays). */
  readonly #answersWritten = new Set<string>();
  /** After the last scan: the work ids it left committing (undefined: the table could not be read). */
  #leftCommitting: ReadonlySet<string> | undefined;

  constructor(ctx: CommitRecoveryContext) {
    this.#ctx = ctx;
  }

  /**
   * The records the last scan read as committing and did not finish (records it found bad, which
   * are never retried, left out); undefined when the table could not be read.
   */
  get leftCommitting(): ReadonlySet<string> | undefined {
    return this.#leftCommitting;
  }

  /** One scan (see the file contract). Resolves with the number of records replayed by this call. */
  async recover(): Promise<number> {
    const ctx = this.#ctx;
    this.#leftCommitting = undefined;
    if (ctx.stopping()) return 0;
    const counters = ctx.counters;
    // Our own jobs running while the table is read may commit and finish (discarding their staged
    // copies) before the loop below looks at them: the snapshot would then be stale for them.
    const runningAtScan = new Set(ctx.active.keys());
    let scan;
    try {
      scan = await ctx.commits.scan();
    } catch (error) {
      counters.commitReplayFailures++;
      if (isTransientError(error)) ctx.storeFaults.failed(error, 'scanning committing work failed; replay skipped this round');
      else ctx.log.error({ err: error, code: codeOf(error) }, 'scanning committing work failed; replay skipped this round');
      return 0;
    }
    let replayed = 0;
    const now = ctx.clock.now();
    const left = new Set(scan.committing.map((record) => record.workId));
    for (const record of scan.committing) {
      if (ctx.stopping()) break;
      if (runningAtScan.has(record.workId) || ctx.active.has(record.workId)) continue;
      const mine = record.owner === ctx.coordinatorId;
      if (this.#unreplayable.has(`${record.workId}:${record.token}`)) {
        left.delete(record.workId);
        continue;
      }
      if (!mine && (!ctx.recoverExpiredWork || !isStaleSince(record.updatedMs, ctx.workLeaseTtlMs, now))) continue;
      if (await this.#replay(record)) {
        replayed++;
        left.delete(record.workId);
      } else if (this.#unreplayable.has(`${record.workId}:${record.token}`)) left.delete(record.workId);
    }
    this.#leftCommitting = left;
    // Only records done for a whole work TTL: the scan reads without locks, and a `done` just
    // written can still be rolled back to `committing` by its batch (a failed barrier), which
    // needs its staged files again. A rollback happens within its batch, long before a TTL.
    const settled = new Set<string>();
    for (const [workId, completedMs] of scan.done) if (isStaleSince(completedMs, ctx.workLeaseTtlMs, now)) settled.add(workId);
    try {
      counters.stagedSwept += await ctx.commits.sweep(settled, scan.traces);
    } catch (error) {
      ctx.log.warn({ err: error }, 'sweeping staged findings failed');
    }
    try {
      // The trace store's cap (docs/campaign.md "Shared traces"): the same settled records only.
      if (ctx.commits.evictTraces) counters.tracesEvicted += await ctx.commits.evictTraces(scan, settled);
    } catch (error) {
      ctx.log.warn({ err: error, code: codeOf(error) }, 'evicting shared traces over the cap failed');
    }
    try {
      // Temps of crashed writers (docs/leases.md "Leftover temp files"): never a live writer's.
      if (ctx.commits.sweepTemps) counters.tempsSwept += await ctx.commits.sweepTemps(now);
    } catch (error) {
      ctx.log.warn({ err: error, code: codeOf(error) }, 'sweeping leftover temp files failed');
    }
    return replayed;
  }

  /** Resolves true when this call completed the record. */
  async #replay(record: CommittingWork): Promise<boolean> {
    const ctx = this.#ctx;
    const counters = ctx.counters;
    const log = childLogger(ctx.log, { workId: record.workId, owner: record.owner });
    const startMs = ctx.clock.now();
    let staged: StagedResult;
    try {
      staged = await ctx.commits.load(record.workId, record.commit);
    } catch (error) {
      // The owner or another replayer may have finished it (and removed the staged copies) since
      // the scan: that is not a failure.
      if (await this.#finishedSinceScan(record)) return false;
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
    let job: CoordinatorJob | undefined;
    try {
      job = jobFromWorkPayload(record.payload);
    } catch {
      job = undefined;
    }
    if (!(await this.#recordAnswers(record, job, staged, log))) return false;
    let outcome;
    try {
      // Another coordinator's result: its silence was judged from a lock-free scan; the table
      // re-checks it in the claim, so an owner that renewed meanwhile keeps its result.
      const minIdleMs = record.owner === ctx.coordinatorId ? 0 : ctx.workLeaseTtlMs;
      outcome = await ctx.commits.publish(record.workId, record.token, staged.manifest, staged.findings, ctx.clock.now(), minIdleMs);
    } catch (error) {
      counters.commitReplayFailures++;
      if (isTransientError(error)) ctx.storeFaults.failed(error, 'replaying committing work failed; left committing', { workId: record.workId });
      else log.error({ err: error, code: codeOf(error) }, 'replaying committing work failed; left committing');
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
    if (outcome.outcome === 'completed') {
      counters.commitsReplayed++;
      countPublished(ctx, outcome.entries, job);
      log.info({ findings: outcome.entries.length }, 'replayed a committed result');
      ctx.journal.recordReplay(record, job, staged.manifest, outcome.entries, startMs, log);
      if (job) {
        try {
          ctx.source.observe({ job, workId: record.workId, status: staged.manifest.status, findings: outcome.entries }, ctx.clock.now());
        } catch (error) {
          log.error({ err: error }, 'feedback to the work source failed');
        }
        // A trace run: the lanes learn its trace (the input's deferral went with the feedback above).
        if (job.mode === 'trace' && ctx.traces !== undefined) await learnStoredTrace(ctx.traces, job, record.workId, record.commit, record.owner, ctx.clock.now());
      }
    }
    await discardStaged(ctx.commits, staged, log);
    this.#answersWritten.delete(`${record.workId}:${record.token}`);
    return outcome.outcome === 'completed';
  }

  /**
   * Writes the answers `staged`'s manifest kept into the shared answers (`job`: the record's work, as
   * its payload says), once per record and token
   * in this process (a publication retried does not write them again). False when they must not be
   * published yet: the table could not be reached (left committing, retried at the next scan), or
   * the answers do not belong to the work (its input, its group: the record is then reported once
   * as unreplayable, as a bad manifest is). A refusal (a corrupt answer record) is logged and passed.
   */
  async #recordAnswers(record: CommittingWork, job: CoordinatorJob | undefined, staged: StagedResult, log: Logger): Promise<boolean> {
    const ctx = this.#ctx;
    const kept = staged.manifest.answers;
    const targets = ctx.targetLeases;
    const key = `${record.workId}:${record.token}`;
    if (kept === undefined || targets?.recordAnswers === undefined || this.#answersWritten.has(key)) return true;
    if (job === undefined || kept.input !== job.inputSha256 || !kept.settled.every((t) => job.group.includes(t))) {
      ctx.counters.commitReplayFailures++;
      this.#unreplayable.add(key);
      log.error({ code: 'ERR_COMMIT_MANIFEST' }, 'the answers of a committing record name another input or targets outside its group; left committing');
      return false;
    }
    try {
      if (await targets.recordAnswers({ input: kept.input, settled: kept.settled }, { owner: record.owner, token: kept.token, worker: kept.worker }, ctx.clock.now())) ctx.counters.answersRecorded++;
      else log.error('the answers of a replayed result were refused (a corrupt answer record); those questions may be asked again');
      this.#answersWritten.add(key);
      return true;
    } catch (error) {
      ctx.counters.commitReplayFailures++;
      if (isTransientError(error)) {
        ctx.storeFaults.failed(error, 'recording the answers of committing work failed; left committing', { workId: record.workId });
        return false;
      }
      log.error({ err: error, code: codeOf(error) }, 'recording the answers of a replayed result failed; those questions may be asked again');
      return true;
    }
  }

  /** True when a fresh scan no longer shows `record` committing with the same token. */
  async #finishedSinceScan(record: CommittingWork): Promise<boolean> {
    try {
      const scan = await this.#ctx.commits.scan();
      return !scan.committing.some((c) => c.workId === record.workId && c.token === record.token);
    } catch {
      return false;
    }
  }
}
