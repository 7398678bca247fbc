/**
 * Collecting the files a solver run left in its output directory, under hard caps.
 *
 * The output directory is written by an untrusted, possibly buggy program. Rules:
 * - only regular files count; dot files (staging, `.hints` companions), symlinks (which could
 *   point anywhere, e.g. `/dev/zero`), directories, FIFOs and sockets are ignored and counted;
 * - the count cap is checked *while listing*: the directory is read one entry at a time (a `Dir`
 *   iterator, never the whole listing at once) and listing stops at the first entry over the cap —
 *   `maxOutputFiles + 1` regular files, or as many ignored entries — so a solver that left a million
 *   files costs a bounded read, not a million-entry array (`entriesRead` says how many were read);
 * - caps on per-file size and total bytes are checked before reading and enforced again while
 *   reading (a file may grow after listing): any cap exceeded refuses the whole result with
 *   `ERR_SOLVER_OUTPUT_BUDGET` (no truncation: a partial set would be silently biased);
 * - files are opened with `O_NOFOLLOW` and re-checked with `fstat`, so a name swapped for a
 *   symlink between listing and opening is refused;
 * - duplicates within one run are dropped by SHA-256;
 * - names are processed in sorted order so results are deterministic.
 * Synchronous on purpose: it runs on a solver worker thread between two runs (see solver-run.ts).
 */
import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, opendirSync, readSync, type Dir } from 'node:fs';
import path from 'node:path';
import { SolverOutputBudgetError } from '../errors.js';
import type { OutputCaps } from './solver-types.js';

interface CollectedFile {
  readonly name: string;
  readonly sha256: string;
  readonly bytes: Uint8Array;
}

export interface CollectedOutputs {
  readonly files: readonly CollectedFile[];
  /** Every regular file the listing found, read or not (sorted): what the run left in the directory. */
  readonly names: readonly string[];
  readonly totalGenerated: number;
  readonly duplicatesDropped: number;
  readonly ignoredEntries: number;
  /** Directory entries read while listing (bounded by the count cap, see the header). */
  readonly entriesRead: number;
}

interface CollectOptions {
  /** Polled between files: true stops collecting (the run was aborted; its result is dropped). */
  readonly stopRequested?: () => boolean;
}

function budgetError(
  resource: string,
  observed: number,
  limit: number,
  totalGenerated: number,
  entriesRead: number,
  name?: string,
): InstanceType<typeof SolverOutputBudgetError> {
  return new SolverOutputBudgetError(`solver output over budget: ${resource} ${observed} > ${limit}${name ? ` (${name})` : ''}`, {
    resource,
    observed,
    limit,
    totalGenerated,
    entriesRead,
    ...(name ? { name } : {}),
  });
}

/** Thrown by `collectOutputs` when `stopRequested` said stop; the caller drops the result. */
export class CollectionStopped extends Error {
  constructor(readonly entriesRead: number) {
    super('output collection stopped: run aborted');
  }
}

/**
 * Reads every acceptable file in `outputDir`. Throws `SolverOutputBudgetError` (with `details`
 * `{ resource: 'files'|'entries'|'fileBytes'|'totalBytes', observed, limit, totalGenerated,
 * entriesRead }`) when a cap is exceeded — for `files`, `totalGenerated` is then the cap + 1 at
 * which listing stopped, a lower bound — and `CollectionStopped` when `stopRequested` returned
 * true; a missing directory yields no files.
 */
export function collectOutputs(outputDir: string, caps: OutputCaps, options: CollectOptions = {}): CollectedOutputs {
  let dir: Dir;
  try {
    dir = opendirSync(outputDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { files: [], names: [], totalGenerated: 0, duplicatesDropped: 0, ignoredEntries: 0, entriesRead: 0 };
    throw error;
  }
  let ignoredEntries = 0;
  let entriesRead = 0;
  const names: string[] = [];
  try {
    for (let entry = dir.readSync(); entry !== null; entry = dir.readSync()) {
      entriesRead += 1;
      if (entry.name.startsWith('.') || !entry.isFile()) {
        ignoredEntries += 1;
        // Junk is no cheaper to list than outputs: the same bound applies to it.
        if (ignoredEntries > caps.maxOutputFiles) throw budgetError('entries', ignoredEntries, caps.maxOutputFiles, names.length, entriesRead);
        continue;
      }
      names.push(entry.name);
      // Stop at the first file over the cap: the result is refused whatever else is there.
      if (names.length > caps.maxOutputFiles) throw budgetError('files', names.length, caps.maxOutputFiles, names.length, entriesRead);
      if ((entriesRead & 1023) === 0 && options.stopRequested?.()) throw new CollectionStopped(entriesRead);
    }
  } finally {
    dir.closeSync();
  }
  names.sort();
  const totalGenerated = names.length;

  const files: CollectedFile[] = [];
  const seen = new Set<string>();
  let duplicatesDropped = 0;
  let totalBytes = 0;
  for (const name of names) {
    if (options.stopRequested?.()) throw new CollectionStopped(entriesRead);
    const bytes = readBounded(path.join(outputDir, name), name, caps.maxOutputFileBytes, totalGenerated, entriesRead);
    if (bytes === null) {
      ignoredEntries += 1;
      continue;
    }
    totalBytes += bytes.length;
    if (totalBytes > caps.maxOutputTotalBytes) throw budgetError('totalBytes', totalBytes, caps.maxOutputTotalBytes, totalGenerated, entriesRead);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    if (seen.has(sha256)) {
      duplicatesDropped += 1;
      continue;
    }
    seen.add(sha256);
    files.push({ name, sha256, bytes });
  }
  return { files, names, totalGenerated, duplicatesDropped, ignoredEntries, entriesRead };
}

/** Reads at most `limit + 1` bytes; null when the entry is not a regular file after all. */
function readBounded(file: string, name: string, limit: number, totalGenerated: number, entriesRead: number): Uint8Array | null {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'ENOENT' || code === 'ENXIO') return null;
    throw error;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return null;
    if (stat.size > limit) throw budgetError('fileBytes', stat.size, limit, totalGenerated, entriesRead, name);
    // One byte of slack detects a file that grew after fstat (a surviving grandchild writing).
    let buffer = Buffer.allocUnsafe(Math.min(stat.size, limit) + 1);
    let filled = 0;
    for (;;) {
      const bytesRead = readSync(fd, buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
      if (filled > limit) throw budgetError('fileBytes', filled, limit, totalGenerated, entriesRead, name);
      if (filled === buffer.length) {
        const grown = Buffer.allocUnsafe(Math.min(buffer.length * 2, limit + 1));
        buffer.copy(grown, 0, 0, filled);
        buffer = grown;
      }
    }
    return new Uint8Array(buffer.buffer, buffer.byteOffset, filled).slice();
  } finally {
    closeSync(fd);
  }
}
