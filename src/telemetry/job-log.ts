/**
 * `jobs.jsonl`: one JSON line per finished job, the campaign's audit trail. Two coordinators'
 * logs are merged by tests to prove that no exact work ran twice and that no two jobs sharing a
 * target overlapped in time, so every line carries the work id, the targets (decimal strings:
 * JSON numbers cannot hold 64-bit ids) and the wall-clock interval the solver ran in.
 *
 * Lines are written with one `write` on an `O_APPEND` descriptor, so a crash leaves at most one
 * truncated last line, never an interleaved one; readers skip a truncated last line.
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';

export type JobLogStatus = 'ok' | 'timeout' | 'crash' | 'error' | 'aborted' | 'stale' | 'abandoned';

export interface JobLogEntry {
  readonly workId: string;
  readonly targets: readonly string[];
  readonly coordinator: string;
  readonly startMs: number;
  readonly endMs: number;
  readonly status: JobLogStatus;
  readonly generated: number;
  readonly interesting: number;
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
