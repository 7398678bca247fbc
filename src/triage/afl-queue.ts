/**
 * Reading an AFL++ instance: its queue (which inputs to run SymCC on next) and the target command
 * line it fuzzes (its `fuzzer_stats` `command_line`; docs/campaign.md "Commands").
 *
 * Ranking, best first: names ending in `+cov` (AFL found new coverage with them), then initial
 * seeds (`orig:`), then smaller files (cheaper to solve), then newer entries (higher name). A
 * reader never hands out the same path twice, nor the same content twice (AFL re-imports our own
 * findings as `sync:` entries; running them again would only repeat work already done). The
 * reader scans incrementally; see `AflQueueReader`.
 */
import { invalidOption } from '../config/values.js';
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { AflError } from '../errors.js';
import { parseAflEntryName, type AflEntryName } from './afl-names.js';

export interface AflQueueEntry {
  readonly path: string;
  readonly name: string;
  readonly sizeBytes: number;
  readonly parsed: AflEntryName;
}

/** Compares two entries: negative when `a` should run before `b`. */
function compareQueueEntries(a: AflQueueEntry, b: AflQueueEntry): number {
  if (a.parsed.cov !== b.parsed.cov) return a.parsed.cov ? -1 : 1;
  if (a.parsed.orig !== b.parsed.orig) return a.parsed.orig ? -1 : 1;
  if (a.sizeBytes !== b.sizeBytes) return a.sizeBytes - b.sizeBytes;
  return a.name < b.name ? 1 : a.name > b.name ? -1 : 0;
}

interface PickedInput {
  readonly entry: AflQueueEntry;
  readonly bytes: Uint8Array;
  readonly sha256: string;
}

interface AflQueueReaderOptions {
  /** Most new directory entries stat'ed per scan; the rest wait for the next scans. Default 512. */
  readonly maxNewEntriesPerScan?: number;
}

/** Called with each batch of newly found queue entries, in the order they were found. */
type AflQueueListener = (entries: readonly AflQueueEntry[]) => void;

/**
 * Hands out the best unseen inputs of one AFL queue directory, each path and content once.
 *
 * Incremental (docs/campaign.md "AFL++ queue"): a queue only grows, so a scan lists the directory
 * only when its mtime moved (one `stat` otherwise), parses and stats only names it has not seen,
 * at most `maxNewEntriesPerScan` of them per scan, and keeps the unseen entries ranked between
 * scans instead of sorting the whole queue each time. Change detection is the directory's mtime
 * rather than inotify: it is deterministic (no event can be missed by a scan that follows a write),
 * needs no watcher descriptor, and also sees entries written by another host on a shared
 * filesystem, where inotify stays silent. An mtime within `RACY_MTIME_MS` of the last listing is
 * listed again next time (a write in the same timestamp tick as the listing would not move it).
 */
export class AflQueueReader {
  readonly #queueDir: string;
  readonly #maxNewPerScan: number;
  readonly #seenDigests = new Set<string>();
  /** Every name ever listed (parsed once; non-entries too, so they are never parsed again). */
  readonly #knownNames = new Set<string>();
  /** Listed names not stat'ed yet (over the per-scan bound), oldest first. */
  #backlog: string[] = [];
  /** Entries not handed out yet, best first (`compareQueueEntries`). */
  readonly #ranked: AflQueueEntry[] = [];
  readonly #listeners = new Set<AflQueueListener>();
  #listedMtimeMs = Number.NaN;
  #listedAtMs = Number.NEGATIVE_INFINITY;

  constructor(queueDir: string, options: AflQueueReaderOptions = {}) {
    this.#queueDir = queueDir;
    const bound = options.maxNewEntriesPerScan ?? 512;
    if (!Number.isSafeInteger(bound) || bound < 1) throw invalidOption('maxNewEntriesPerScan', 'a positive integer', bound);
    this.#maxNewPerScan = bound;
  }

  get queueDir(): string {
    return this.#queueDir;
  }

  /** Entries found and not handed out yet (for status and tests). */
  get unseenCount(): number {
    return this.#ranked.length;
  }

  /** Marks content as already handled (e.g. our own published findings). */
  markSeenDigest(sha256: string): void {
    this.#seenDigests.add(sha256);
  }

  /**
   * Calls `listener` with every batch of queue entries a scan finds from now on (each entry once,
   * whether or not it is ever handed out by `next`). Returns the unsubscribe function. A throwing
   * listener is ignored: it must not stop the scan.
   */
  onNewEntries(listener: AflQueueListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Up to `limit` best unseen inputs, read and hashed; each is marked seen. */
  async next(limit: number): Promise<PickedInput[]> {
    if (limit <= 0) return [];
    await this.scan();
    const picked: PickedInput[] = [];
    while (picked.length < limit && this.#ranked.length > 0) {
      const entry = this.#ranked.shift()!;
      let bytes: Uint8Array;
      try {
        bytes = await readFile(entry.path);
      } catch {
        continue; // vanished: AFL trims nothing, but a peer may be mid-rename
      }
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      if (this.#seenDigests.has(sha256)) continue;
      this.#seenDigests.add(sha256);
      picked.push({ entry, bytes, sha256 });
    }
    return picked;
  }

  /**
   * One bounded scan: lists the directory if it changed, then stats up to `maxNewEntriesPerScan`
   * new names. Resolves with the entries found by this call. Throws `ERR_AFL` when the queue
   * directory cannot be read.
   */
  async scan(nowMs: number = Date.now()): Promise<AflQueueEntry[]> {
    await this.#listIfChanged(nowMs);
    const batch = this.#backlog.length <= this.#maxNewPerScan ? this.#backlog.splice(0) : this.#backlog.splice(0, this.#maxNewPerScan);
    const found: AflQueueEntry[] = [];
    for (const name of batch) {
      const parsed = parseAflEntryName(name);
      if (!parsed) continue;
      const full = path.join(this.#queueDir, name);
      try {
        const info = await stat(full);
        if (!info.isFile()) continue;
        found.push({ path: full, name, sizeBytes: info.size, parsed });
      } catch {
        // Vanished between readdir and stat.
      }
    }
    for (const entry of found) this.#insertRanked(entry);
    if (found.length > 0) {
      for (const listener of this.#listeners) {
        try {
          listener(found);
        } catch {
          // A listener's failure is its own; the queue scan goes on.
        }
      }
    }
    return found;
  }

  async #listIfChanged(nowMs: number): Promise<void> {
    let mtimeMs: number;
    try {
      mtimeMs = (await stat(this.#queueDir)).mtimeMs;
    } catch (error) {
      throw new AflError(`cannot read AFL queue ${this.#queueDir}: ${(error as Error).message}`, { queueDir: this.#queueDir });
    }
    const racy = Math.abs(this.#listedAtMs - mtimeMs) < RACY_MTIME_MS;
    if (mtimeMs === this.#listedMtimeMs && !racy) return;
    let names: string[];
    try {
      names = await readdir(this.#queueDir);
    } catch (error) {
      throw new AflError(`cannot read AFL queue ${this.#queueDir}: ${(error as Error).message}`, { queueDir: this.#queueDir });
    }
    this.#listedMtimeMs = mtimeMs;
    this.#listedAtMs = nowMs;
    for (const name of names) {
      if (this.#knownNames.has(name)) continue;
      this.#knownNames.add(name);
      this.#backlog.push(name);
    }
  }

  #insertRanked(entry: AflQueueEntry): void {
    let lo = 0;
    let hi = this.#ranked.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareQueueEntries(this.#ranked[mid]!, entry) <= 0) lo = mid + 1;
      else hi = mid;
    }
    this.#ranked.splice(lo, 0, entry);
  }
}

/**
 * A directory mtime this close to the time it was listed may hide a later write in the same
 * timestamp tick (coarse kernel clocks): such a listing is repeated at the next scan.
 */
const RACY_MTIME_MS = 1_000;

export interface AflTargetCommand {
  /** The target argv as AFL runs it (after `--`); may contain `@@`. */
  readonly argv: readonly string[];
  /** The target reads a file (`@@` present) rather than stdin. */
  readonly fileInput: boolean;
  /** AFL ran in QEMU mode (`-Q`). */
  readonly qemu: boolean;
}

/**
 * The target command of an AFL instance, from `<instance>/fuzzer_stats` `command_line`. Everything
 * after the first `--` is the target; AFL's command line must therefore contain `--`. Splitting is
 * on whitespace (as AFL writes it): paths with spaces must be given explicitly instead.
 */
export function parseAflCommandLine(commandLine: string): AflTargetCommand {
  const words = commandLine.trim().split(/\s+/).filter((w) => w.length > 0);
  const separator = words.indexOf('--');
  if (separator < 0 || separator === words.length - 1) {
    throw new AflError(`AFL command line has no target after "--": ${commandLine}`, { commandLine });
  }
  const argv = words.slice(separator + 1);
  return { argv, fileInput: argv.some((w) => w.includes('@@')), qemu: words.slice(0, separator).includes('-Q') };
}

export async function readAflTargetCommand(instanceDir: string): Promise<AflTargetCommand> {
  const statsPath = path.join(instanceDir, 'fuzzer_stats');
  let text: string;
  try {
    text = await readFile(statsPath, 'utf8');
  } catch (error) {
    throw new AflError(`cannot read ${statsPath} (is afl-fuzz running there?): ${(error as Error).message}`, { statsPath });
  }
  const line = text.split('\n').find((l) => /^command_line\s*:/.test(l));
  if (!line) throw new AflError(`${statsPath} has no command_line entry`, { statsPath });
  return parseAflCommandLine(line.slice(line.indexOf(':') + 1));
}
