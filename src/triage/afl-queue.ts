/**
 * Reading an AFL++ instance: its queue (which inputs to run SymCC on next) and the target command
 * line it fuzzes (its `fuzzer_stats` `command_line`; docs/campaign.md "Commands").
 *
 * Ranking, best first: names ending in `+cov` (AFL found new coverage with them), then initial
 * seeds (`orig:`), then smaller files (cheaper to solve), then newer entries (higher name). A
 * reader never hands out the same path twice, nor the same content twice (AFL re-imports our own
 * findings as `sync:` entries; running them again would only repeat work already done).
 */
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

/** Lists the `id:` entries of a queue directory (regular files only; hidden and staging files skipped). */
export async function listAflQueue(queueDir: string): Promise<AflQueueEntry[]> {
  let names: string[];
  try {
    names = await readdir(queueDir);
  } catch (error) {
    throw new AflError(`cannot read AFL queue ${queueDir}: ${(error as Error).message}`, { queueDir });
  }
  const entries: AflQueueEntry[] = [];
  for (const name of names) {
    const parsed = parseAflEntryName(name);
    if (!parsed) continue;
    const full = path.join(queueDir, name);
    try {
      const info = await stat(full);
      if (!info.isFile()) continue;
      entries.push({ path: full, name, sizeBytes: info.size, parsed });
    } catch {
      // Vanished between readdir and stat (AFL trims nothing, but a peer may be mid-rename).
    }
  }
  return entries;
}

/** Compares two entries: negative when `a` should run before `b`. */
export function compareQueueEntries(a: AflQueueEntry, b: AflQueueEntry): number {
  if (a.parsed.cov !== b.parsed.cov) return a.parsed.cov ? -1 : 1;
  if (a.parsed.orig !== b.parsed.orig) return a.parsed.orig ? -1 : 1;
  if (a.sizeBytes !== b.sizeBytes) return a.sizeBytes - b.sizeBytes;
  return a.name < b.name ? 1 : a.name > b.name ? -1 : 0;
}

export function rankQueueEntries(entries: readonly AflQueueEntry[]): AflQueueEntry[] {
  return [...entries].sort(compareQueueEntries);
}

export interface PickedInput {
  readonly entry: AflQueueEntry;
  readonly bytes: Uint8Array;
  readonly sha256: string;
}

/** Hands out the best unseen inputs of one AFL queue directory, each path and content once. */
export class AflQueueReader {
  readonly #queueDir: string;
  readonly #seenPaths = new Set<string>();
  readonly #seenDigests = new Set<string>();

  constructor(queueDir: string) {
    this.#queueDir = queueDir;
  }

  get queueDir(): string {
    return this.#queueDir;
  }

  /** Marks content as already handled (e.g. our own published findings). */
  markSeenDigest(sha256: string): void {
    this.#seenDigests.add(sha256);
  }

  /** Up to `limit` best unseen inputs, read and hashed; each is marked seen. */
  async next(limit: number): Promise<PickedInput[]> {
    if (limit <= 0) return [];
    const unseen = (await listAflQueue(this.#queueDir)).filter((e) => !this.#seenPaths.has(e.path));
    const picked: PickedInput[] = [];
    for (const entry of rankQueueEntries(unseen)) {
      if (picked.length >= limit) break;
      let bytes: Uint8Array;
      try {
        bytes = await readFile(entry.path);
      } catch {
        continue;
      }
      this.#seenPaths.add(entry.path);
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      if (this.#seenDigests.has(sha256)) continue;
      this.#seenDigests.add(sha256);
      picked.push({ entry, bytes, sha256 });
    }
    return picked;
  }
}

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
