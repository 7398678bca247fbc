/**
 * The shared traces' size cap (docs/campaign.md "Shared traces", "Bounded growth"): when the traces
 * that `done` records keep take more than the cap, the least recently used ones are removed. A
 * trace is used when it is written and each time a coordinator adopts it. The `done` records stay:
 * their work is done whether or not its trace is still there, and a coordinator that meets an
 * evicted trace neither traces the input again nor counts a failure (`traceAdoptMissing`).
 *
 * One pass, run by the commit-recovery scan beside the sweep of staged files:
 *
 *   sizes the done records' manifests name ──▶ ≤ cap: done, no I/O
 *   list the stored names ──▶ stored kept traces ≤ cap: done
 *   last use of each evictable one (files: mtime; etcd: revision) ──▶ oldest first, down to
 *   `TRACE_EVICTION_LOW_WATER` of the cap, at most `MAX_TRACE_EVICTIONS_PER_PASS` removals
 *
 * Evictable: kept by a record `done` for a whole work TTL (the caller's `settled`). A trace of work
 * that is leased or committing is named by no `done` record, so a run that may still commit it
 * never loses it; a `done` just written may still be rolled back by its batch, hence the TTL.
 * Eviction goes below the cap (to the low-water mark) so that the listing of last uses, one stat
 * per stored trace on disk, is paid once per tenth of the cap of new traces, not at every scan.
 */
import path from 'node:path';
import { errnoCode, type FsLayer } from '../fs/fs-layer.js';
import { MAX_TRACE_BYTES } from './commit-manifest.js';
import type { StagingClient } from './staged-findings.js';

/**
 * Default cap, bytes: 512 MiB. A trace is tens of KiB (commit-manifest.ts `MAX_TRACE_BYTES`), so
 * this keeps every trace of a campaign of about 25,000 queue entries at 20 KiB each, and the
 * most recently used ones beyond that; on the etcd store it is a quarter of etcd's default 2 GiB
 * backend quota.
 */
export const DEFAULT_TRACE_STORE_MAX_BYTES = 512 * 1024 * 1024;
/** Smallest cap, bytes: one trace of the largest size. */
export const MIN_TRACE_STORE_MAX_BYTES = MAX_TRACE_BYTES;
/** Largest cap, bytes (1 TiB). */
export const MAX_TRACE_STORE_MAX_BYTES = 1024 ** 4;
/** A pass over the cap evicts down to this share of it. */
export const TRACE_EVICTION_LOW_WATER = 0.9;
/** Most traces one pass removes: the rest waits for the next scan. */
export const MAX_TRACE_EVICTIONS_PER_PASS = 1024;

/** Where a store keeps the last use of each stored trace. */
export interface TraceUse {
  /**
   * The last use of each of `names` still stored in `dir`, as a number that orders uses in time
   * (files: mtime, ms; etcd: the revision of the last write or adoption). Names not stored are
   * left out.
   */
  lastUse(dir: string, names: readonly string[]): Promise<Map<string, number>>;
  /** Marks trace `name` of `dir` used at `nowMs` (an adoption). Resolves quietly when it is gone. */
  touch(dir: string, name: string, nowMs: number): Promise<void>;
}

/** A trace file a `done` record keeps. */
export interface KeptTrace {
  readonly workId: string;
  /** `<workId>.<sha256>`, in the traces directory. */
  readonly name: string;
  /** Its size as the manifest names it. */
  readonly bytes: number;
}

export interface TraceEvictionPlan {
  /** Kept traces still stored, and their bytes, before the eviction. */
  readonly storedBytes: number;
  /** Names to remove, least recently used first. */
  readonly evict: readonly string[];
}

/**
 * Which stored traces to evict (pure). `stored`: the kept traces present in the store;
 * `lastUse`: the last use of the evictable ones (one absent there is gone already: it frees its
 * bytes without a removal). Oldest first, ties by name; nothing when `stored` fits in the cap.
 */
export function planTraceEviction(
  stored: readonly KeptTrace[],
  evictable: ReadonlySet<string>,
  lastUse: ReadonlyMap<string, number>,
  capBytes: number,
  maxEvictions = MAX_TRACE_EVICTIONS_PER_PASS,
): TraceEvictionPlan {
  const storedBytes = stored.reduce((sum, t) => sum + t.bytes, 0);
  if (storedBytes <= capBytes) return { storedBytes, evict: [] };
  const target = Math.floor(capBytes * TRACE_EVICTION_LOW_WATER);
  let remaining = storedBytes;
  const candidates: KeptTrace[] = [];
  for (const trace of stored) {
    if (!evictable.has(trace.workId)) continue;
    if (lastUse.has(trace.name)) candidates.push(trace);
    else remaining -= trace.bytes; // removed since the listing
  }
  candidates.sort((a, b) => lastUse.get(a.name)! - lastUse.get(b.name)! || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const evict: string[] = [];
  for (const trace of candidates) {
    if (remaining <= target || evict.length >= maxEvictions) break;
    evict.push(trace.name);
    remaining -= trace.bytes;
  }
  return { storedBytes, evict };
}

export interface TraceEvictionContext {
  readonly client: Pick<StagingClient, 'listDir' | 'removeFiles'>;
  readonly use: TraceUse;
  /** `<leaseRoot>/traces`. */
  readonly dir: string;
  readonly capBytes: number;
}

/**
 * One eviction pass (see the module comment): `kept` = the traces `done` records keep, by work id;
 * `settled` = work ids done for a whole work TTL. Resolves with how many traces were removed.
 * Rejects on a listing or removal failure; what was removed before stays removed.
 */
export async function evictLeastRecentlyUsedTraces(ctx: TraceEvictionContext, kept: readonly KeptTrace[], settled: ReadonlySet<string>): Promise<number> {
  let named = 0;
  for (const trace of kept) named += trace.bytes;
  if (named <= ctx.capBytes) return 0;
  const present = new Set(await ctx.client.listDir(ctx.dir));
  const stored = kept.filter((t) => present.has(t.name));
  if (stored.reduce((sum, t) => sum + t.bytes, 0) <= ctx.capBytes) return 0;
  const evictable = stored.filter((t) => settled.has(t.workId));
  if (evictable.length === 0) return 0;
  const lastUse = await ctx.use.lastUse(ctx.dir, evictable.map((t) => t.name));
  const plan = planTraceEviction(stored, settled, lastUse, ctx.capBytes);
  return plan.evict.length === 0 ? 0 : ctx.client.removeFiles(ctx.dir, plan.evict);
}

/** Stats run at once while reading last uses from disk. */
const STAT_PARALLELISM = 32;

/**
 * Last use on disk (files and SQLite stores): the file's mtime. A write sets it; an adoption sets
 * it to the adopting coordinator's clock through the fs layer. Direct calls, not I/O-thread
 * requests: a use time needs no barrier (a lost one only makes the trace look older).
 */
export function fileTraceUse(fsLayer: FsLayer): TraceUse {
  return {
    async lastUse(dir, names) {
      const out = new Map<string, number>();
      for (let start = 0; start < names.length; start += STAT_PARALLELISM) {
        await Promise.all(
          names.slice(start, start + STAT_PARALLELISM).map(async (name) => {
            try {
              const stat = await fsLayer.lstat(path.join(dir, name));
              if (stat.isFile) out.set(name, stat.mtimeMs);
            } catch (error) {
              if (errnoCode(error) !== 'ENOENT') throw error;
            }
          }),
        );
      }
      return out;
    },
    async touch(dir, name, nowMs) {
      try {
        await fsLayer.utimes(path.join(dir, name), nowMs, nowMs);
      } catch (error) {
        if (errnoCode(error) !== 'ENOENT') throw error;
      }
    },
  };
}
