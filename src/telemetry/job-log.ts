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
import { CampaignStateError } from '../errors.js';
import { forEachLine } from '../fs/bounded-read.js';
import { nodeFsLayer, type FsLayer } from '../fs/fs-layer.js';

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
   * Committed jobs with targets: the members the run answered (sat or unsat) and those it left
   * open (`unknown`, a timeout, no telemetry), decimal, as its release recorded them in the target
   * table (docs/leases.md "Shared answers"); a member its path never reached before an early exit
   * is in neither.
   */
  readonly settled?: readonly string[];
  readonly open?: readonly string[];
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

/** Longest `jobs.jsonl` line read: a line is a few hundred bytes (a job's targets included). */
const MAX_JOB_LOG_LINE_BYTES = 1 << 20;

/**
 * Streams a `jobs.jsonl` to `onEntry`, in order, 1 MiB at a time through the bounded line reader
 * (src/fs/bounded-read.ts): memory is one chunk plus one line whatever the journal's size (a long
 * campaign's is hundreds of MB). A truncated last line (crash mid-write) is skipped; any other line
 * that is not a JSON object, a line over `MAX_JOB_LOG_LINE_BYTES`, or a path that is not a regular
 * file fails with `ERR_CAMPAIGN_STATE` naming the file (and line). Resolves the entries read; 0
 * when the file is absent.
 */
export async function forEachJobLogEntry(file: string, onEntry: (entry: JobLogEntry, lineNumber: number) => void, options: { readonly fsLayer?: FsLayer } = {}): Promise<number> {
  let entries = 0;
  const invalid = (reason: string, line?: number) => new CampaignStateError(`cannot read ${file}${line === undefined ? '' : ` line ${line}`}: ${reason}`, { file, ...(line === undefined ? {} : { line }) });
  let read;
  try {
    read = await forEachLine(options.fsLayer ?? nodeFsLayer, file, { maxBytes: Number.MAX_SAFE_INTEGER, maxLineBytes: MAX_JOB_LOG_LINE_BYTES }, (text, lineNumber, terminated) => {
      if (text === '') return;
      let entry: unknown;
      try {
        entry = JSON.parse(text);
      } catch (error) {
        if (!terminated) return;
        throw invalid((error as Error).message, lineNumber);
      }
      if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw invalid('not a JSON object', lineNumber);
      entries++;
      onEntry(entry as JobLogEntry, lineNumber);
    });
  } catch (error) {
    if (error instanceof CampaignStateError) throw error;
    throw invalid((error as Error).message);
  }
  if (read.state === 'refused') throw invalid(read.reason);
  return entries;
}

/**
 * Reads a whole `jobs.jsonl` into memory (tests, small journals; `forEachJobLogEntry` streams);
 * a truncated final line (crash mid-write) is skipped, any other bad line throws.
 */
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
