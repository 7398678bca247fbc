/**
 * The AFL++ instances beside symfence in one `-o` directory: what they have covered, and how many
 * of symfence's published inputs each one imported (docs/campaign.md "AFL++ coverage and imports").
 *
 * - **Coverage.** Every AFL++ instance keeps `<instance>/fuzz_bitmap`: its "virgin bits", one byte
 *   per map edge with a bit cleared for each hit-count bucket any of its inputs produced (AFL++
 *   rewrites it with its stats, every few seconds). Its complement is exactly the union of the
 *   bucketed `afl-showmap -b` maps of the instance's whole queue, in the representation the global
 *   coverage map uses; so one 64 KiB read replaces a showmap run per queue entry. Merging it into
 *   the global map makes triage judge symfence's inputs against the campaign, AFL++ included: an
 *   input is published only when it is new to the campaign.
 * - **Imports.** AFL++ names an entry it imported from peer `P` `id:N,sync:P,src:M`, where `M` is
 *   the id of the entry in `P`'s queue; it keeps only imports that were new coverage for it. The
 *   distinct `src:` ids of `sync:<ourName>` entries in an instance's queue are how many of our
 *   inputs it took.
 *
 * Reads only; a missing or unreadable file counts as nothing yet (an instance starting up).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseAflEntryName } from './afl-names.js';

/** AFL++'s map file of an instance, and the largest we read (AFL++'s MAP_SIZE limit is 2^28; we stop well before). */
const AFL_FUZZ_BITMAP = 'fuzz_bitmap';
const MAX_FUZZ_BITMAP_BYTES = 8 << 20;

interface AflPeerState {
  /** Distinct inputs of ours the instance imported (`sync:<ourName>` entries). */
  readonly imported: number;
  /** Queue entries of the instance (every `id:` name). */
  readonly queue: number;
  /** Entries AFL++ marked `+cov`. */
  readonly cov: number;
  /** Map bytes the instance has covered (non-virgin bytes of its fuzz_bitmap); 0 before the file exists. */
  readonly edges: number;
}

export interface AflPeersSnapshot {
  readonly instances: Readonly<Record<string, AflPeerState>>;
  /** Sum of `imported` over the instances. */
  readonly imported: number;
  /** Map bytes the instances' coverage added to the global map when it was merged. */
  readonly mergedEdges: number;
}

/** Sink for an instance's covered map (the global coverage map's `claim`): returns new bytes. */
type CoverageSink = (covered: Uint8Array) => number;

/** The covered map of a `fuzz_bitmap` (virgin bits): each byte's complement. */
function coveredFromVirgin(virgin: Uint8Array): Uint8Array {
  const out = new Uint8Array(virgin.length);
  for (let i = 0; i < virgin.length; i++) out[i] = ~virgin[i]! & 0xff;
  return out;
}

/** Counts an instance's queue: entries, `+cov` ones, and distinct `src:` ids of `sync:<peer>` imports. */
export function countQueueNames(names: Iterable<string>, peer: string): Pick<AflPeerState, 'imported' | 'queue' | 'cov'> {
  const tag = `,sync:${peer},`;
  const sources = new Set<string>();
  let queue = 0;
  let cov = 0;
  for (const name of names) {
    const parsed = parseAflEntryName(name);
    if (parsed === null) continue;
    queue += 1;
    if (parsed.cov) cov += 1;
    // `sync:` names are exactly `id:N,sync:<peer>,src:M` (AFL++ sync_fuzzers); compare the whole field.
    if (name.includes(tag) && parsed.src !== undefined) sources.add(parsed.src);
  }
  return { imported: sources.size, queue, cov };
}

interface AflPeersOptions {
  /** The afl-fuzz `-o` directory. */
  readonly aflOut: string;
  /** symfence's own directory name under it (`--name`): never read as a peer. */
  readonly ourName: string;
  /** Where an instance's covered map goes (absent: coverage is counted, not merged). */
  readonly merge?: CoverageSink;
}

export class AflPeers {
  readonly #options: AflPeersOptions;
  #instances: Record<string, AflPeerState> = {};
  #mergedEdges = 0;
  #refreshing: Promise<void> | undefined;

  constructor(options: AflPeersOptions) {
    this.#options = options;
  }

  /**
   * Re-reads every instance (queue names, fuzz_bitmap) and merges new coverage. Concurrent calls
   * share one pass. Never throws: an unreadable instance keeps its last state.
   */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#refresh().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  snapshot(): AflPeersSnapshot {
    let imported = 0;
    for (const s of Object.values(this.#instances)) imported += s.imported;
    return { instances: { ...this.#instances }, imported, mergedEdges: this.#mergedEdges };
  }

  async #refresh(): Promise<void> {
    let names: string[];
    try {
      names = await readdir(this.#options.aflOut);
    } catch {
      return;
    }
    const next: Record<string, AflPeerState> = {};
    for (const instance of names.sort()) {
      if (instance === this.#options.ourName || instance.startsWith('.')) continue;
      const dir = path.join(this.#options.aflOut, instance);
      let queueNames: string[];
      try {
        queueNames = await readdir(path.join(dir, 'queue'));
      } catch {
        continue; // not an AFL++ instance (or not yet)
      }
      const counts = countQueueNames(queueNames, this.#options.ourName);
      let edges = this.#instances[instance]?.edges ?? 0;
      try {
        const virgin = new Uint8Array(await readFile(path.join(dir, AFL_FUZZ_BITMAP)));
        if (virgin.length > 0 && virgin.length <= MAX_FUZZ_BITMAP_BYTES) {
          const covered = coveredFromVirgin(virgin);
          edges = 0;
          for (const b of covered) if (b !== 0) edges += 1;
          if (this.#options.merge) this.#mergedEdges += this.#options.merge(covered);
        }
      } catch {
        // no fuzz_bitmap yet (AFL++ writes it with its first stats), or a map larger than ours
      }
      next[instance] = { ...counts, edges };
    }
    this.#instances = next;
  }
}
