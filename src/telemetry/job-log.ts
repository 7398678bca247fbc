/**
 * `jobs.jsonl`: one JSON line per finished job, the campaign's audit trail. Two coordinators'
 * logs are merged by tests to prove that no exact work ran twice and that no two jobs sharing a
 * target overlapped in time, so every line carries the work id, the targets (decimal strings:
 * JSON numbers cannot hold 64-bit ids) and the wall-clock interval the solver ran in.
 *
 * A result finished by commit recovery gets one line too, marked `replay: true` and naming its
 * original `owner` (docs/campaign.md "jobs.jsonl").
 *
 * Lines are written with one `write` on an `O_APPEND` descriptor, so a crash leaves at most one
 * truncated last line, never an interleaved one; readers skip a truncated last line.
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';

export type JobLogStatus = 'ok' | 'timeout' | 'crash' | 'error' | 'aborted' | 'stale' | 'abandoned';

export interface JobLogEntry {
  readonly workId: string;
  readonly targets: readonly string[];
  /** The coordinator that wrote the line (for a replay: the one that replayed the result). */
  readonly coordinator: string;
  /**
   * Present only on replay lines: the result was computed by `owner` (the committing record's
   * owner, which died or stalled after `beginCommit`) and published by `coordinator` from its
   * staged findings. `startMs`..`endMs` is then the replay's interval, not a solver run, so checks
   * of "no work ran twice" or "no overlapping targets" skip these lines.
   */
  readonly replay?: true;
  readonly owner?: string;
  readonly startMs: number;
  readonly endMs: number;
  readonly status: JobLogStatus;
  /** Inputs the solver generated (replay: findings the result staged). */
  readonly generated: number;
  /** Interesting inputs published to the queue. */
  readonly interesting: number;
  /** SHA-256 of the input the job ran on. */
  readonly input?: string;
  /** `trace` (first run, solved nothing), `targeted` (directed at `targets`), `full` (solved every branch). */
  readonly kind?: 'trace' | 'targeted' | 'full';
  /** From the run's telemetry, when it wrote some: queries solved, symbolic branches passed over. */
  readonly queries?: number;
  readonly skipped?: number;
  /** Directed jobs: was the primary target on the path, and its status. */
  readonly targetReached?: boolean;
  readonly targetStatus?: string;
  /**
   * The run's time breakdown, ms (docs/campaign.md "Where slot time goes"), on lines of runs whose
   * solver measured its timing (the solver pool always does): the solver slot it ran in; waiting
   * in the pending queue (`queuedMs`), its dispatch's lease claims (`claimMs`), waiting claimed
   * for a slot (`prefetchedMs`), start-up until the solver process ran (`spawnMs`), the process's
   * lifetime (`solverMs`), output collection after its exit (`collectMs`), coverage triage
   * (`triageMs`, off the slot), staging + commit + publication until this line (`commitMs`), and
   * the slot's time without a solver process since its previous run exited (`gapMs`: the wait
   * plus `spawnMs`; absent on a slot's first run). `solverCpuMs`: the solver process's CPU time
   * (user + system), when its run supervisor measured it — below `solverMs` when the process
   * waited for a CPU (a loaded machine) or for I/O.
   */
  readonly slot?: number;
  readonly queuedMs?: number;
  readonly claimMs?: number;
  readonly prefetchedMs?: number;
  readonly spawnMs?: number;
  readonly solverMs?: number;
  readonly collectMs?: number;
  readonly triageMs?: number;
  readonly commitMs?: number;
  readonly gapMs?: number;
  readonly solverCpuMs?: number;
  /** From preload telemetry: branches the run settled (sat or unsat) and the run's CPU, ms (docs/solver.md "What an answer costs"). */
  readonly answers?: number;
  readonly answerCpuMs?: number;
}

/** Where the coordinator reports finished jobs. */
export interface JobLogPort {
  append(entry: JobLogEntry): void;
  close(): void;
}

export class JobLogFile implements JobLogPort {
  #fd: number | undefined;

  constructor(readonly path: string) {
    this.#fd = openSync(path, 'a');
  }

  append(entry: JobLogEntry): void {
    if (this.#fd === undefined) return;
    writeSync(this.#fd, JSON.stringify(entry) + '\n');
  }

  /** Idempotent. */
  close(): void {
    if (this.#fd === undefined) return;
    closeSync(this.#fd);
    this.#fd = undefined;
  }
}

/** Reads a `jobs.jsonl`; a truncated final line (crash mid-write) is skipped, any other bad line throws. */
export function readJobLog(path: string): JobLogEntry[] {
  const lines = readFileSync(path, 'utf8').split('\n');
  const out: JobLogEntry[] = [];
  lines.forEach((line, index) => {
    if (line === '') return;
    try {
      out.push(JSON.parse(line) as JobLogEntry);
    } catch (error) {
      if (index === lines.length - 1) return;
      throw error;
    }
  });
  return out;
}
