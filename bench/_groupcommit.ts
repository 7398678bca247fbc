/**
 * The `groupcommit` mode of lease-cycle (kept apart so lease-cycle.ts stays easy to merge):
 *
 * - `groupcommit`: K callers each send one 64-target claimGroup, then one releaseGroup, to the real
 *   I/O thread at the same time (K disjoint groups). Per group cycle = round time / K. Barriers
 *   come from the thread's own counters.
 * - `groupcommit` without the lock-fd cache (`lockFdCacheSize: 0`): every lock file opened, checked
 *   and closed per acquisition, as before the cache — the A/B for the cache in the same run.
 * - `sqlite`: the same K callers through the I/O thread on the SQLite store: one transaction per
 *   batch (`sqlite_groupcommit_ms`), and `ratio_sqlite_floor` = floor / sqlite, how far below the
 *   file design's floor it lands.
 * - `floor`: the physical floor of this design on this disk — the same K×64 record-sized files
 *   written as temps, ONE file barrier, renamed, one directory barrier per touched shard, then
 *   unlinked with one directory barrier per shard; no locks, no reads, no validation.
 */
import { mkdir, open, rename, unlink } from 'node:fs/promises';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { IoThread } from '../src/io/io-thread.js';
import { shardDirName, shardOf, targetRecordId } from '../src/lease/identity.js';
import { loadNative } from '../src/native/bindings.js';

export interface GroupCommitRunner {
  /** One round: K concurrent claims, then K concurrent releases. Returns ms per group cycle. */
  round(): Promise<number>;
  /** Barriers per group cycle of the last round. */
  lastBarriers(): { file: number; directory: number };
  close(): Promise<void>;
}

export async function groupCommitRunner(root: string, options: { shards: number; k: number; targetsPerGroup: number; coordination: string; fileBarrier: 'syncfs' | 'fsync'; lockFdCacheSize?: number; store?: 'files' | 'sqlite'; leaseOptions?: Readonly<Record<string, unknown>> }): Promise<GroupCommitRunner> {
  const io = await IoThread.start({
    coordinatorId: 'bench',
    targetRoot: root,
    leaseOptions: {
      store: options.store ?? 'files',
      shardCount: options.shards,
      coordination: options.coordination,
      leaseTtlMs: 3_600_000,
      verifyFilesystem: false,
      ...(options.lockFdCacheSize !== undefined ? { lockFdCacheSize: options.lockFdCacheSize } : {}),
      // Another store (bench/_etcd-store.ts): its selection and settings.
      ...options.leaseOptions,
    },
    ioOptions: { fileBarrier: options.fileBarrier },
  });
  const groups = Array.from({ length: options.k }, (_, g) => Array.from({ length: options.targetsPerGroup }, (_, i) => BigInt(1 + g * options.targetsPerGroup + i)));
  let now = 1_000_000;
  let barriers = { file: 0, directory: 0 };
  return {
    async round(): Promise<number> {
      now += 1;
      const before = await io.stats();
      const started = performance.now();
      const claims = await Promise.all(groups.map((targets, g) => io.claimGroup(targets, { bench: 'groupcommit' }, g + 1, now)));
      const releases = await Promise.all(
        claims.map((claim, g) => {
          if (!claim.ok) throw new Error(`groupcommit claim failed: ${claim.reason}`);
          return io.releaseGroup(groups[g]!, claim.token, now);
        }),
      );
      const elapsed = performance.now() - started;
      for (const release of releases) if (!release.ok) throw new Error(`groupcommit release failed: ${release.reason}`);
      const after = await io.stats();
      barriers = { file: (after.fileBarriers - before.fileBarriers) / options.k, directory: (after.directoryBarriers - before.directoryBarriers) / options.k };
      return elapsed / options.k;
    },
    lastBarriers: () => barriers,
    close: () => io.close(),
  };
}

/** Bytes of a target record of this size, roughly (content does not matter for the floor). */
const RECORD_BYTES = Buffer.alloc(520, 0x61);
const TEMP_FLAGS = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL;

export async function floorRunner(root: string, options: { shards: number; k: number; targetsPerGroup: number; fileBarrier: 'syncfs' | 'fsync' }): Promise<{ round(): Promise<number> }> {
  const native = loadNative();
  const ids = Array.from({ length: options.k * options.targetsPerGroup }, (_, i) => targetRecordId(BigInt(i + 1)));
  const dirOf = (id: string): string => path.join(root, shardDirName(shardOf(id, options.shards)));
  const dirs = [...new Set(ids.map(dirOf))].sort();
  for (const dir of dirs) await mkdir(dir, { recursive: true });
  const syncDir = async (dir: string): Promise<void> => {
    const handle = await open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  };
  let seq = 0;
  return {
    async round(): Promise<number> {
      const started = performance.now();
      const handles = await Promise.all(
        ids.map(async (id) => {
          const temp = path.join(dirOf(id), `${id}.json.${process.pid}.${++seq}.tmp`);
          const handle = await open(temp, TEMP_FLAGS, 0o644);
          await handle.write(RECORD_BYTES);
          return { id, temp, handle };
        }),
      );
      if (options.fileBarrier === 'syncfs' && native) native.syncfs(handles[0]!.handle.fd);
      else await Promise.all(handles.map((h) => h.handle.sync()));
      await Promise.all(handles.map((h) => h.handle.close()));
      for (const h of handles) await rename(h.temp, path.join(dirOf(h.id), `${h.id}.json`));
      await Promise.all(dirs.map(syncDir));
      await Promise.all(ids.map((id) => unlink(path.join(dirOf(id), `${id}.json`))));
      await Promise.all(dirs.map(syncDir));
      return (performance.now() - started) / options.k;
    },
  };
}

/** Untimed rounds of every mode before the measured ones. */
const WARM_UP_ROUNDS = 3;

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const round2 = (n: number): number => Math.round(n * 100) / 100;

/**
 * Runs groupcommit for every K (and the floor at each K), interleaving the modes per round, and
 * returns the JSON fields lease-cycle adds: top-level values are for the largest K.
 */
export async function runGroupCommitSection(base: string, config: { shards: number; rounds: number; targetsPerGroup: number; coordination: string; ks: readonly number[]; scalarMs: number | undefined }): Promise<Record<string, unknown>> {
  const fileBarrier: 'syncfs' | 'fsync' = loadNative() ? 'syncfs' : 'fsync';
  const byK: Record<string, number>[] = [];
  for (const k of config.ks) {
    const gc = await groupCommitRunner(path.join(base, `groupcommit-${k}`), { shards: config.shards, k, targetsPerGroup: config.targetsPerGroup, coordination: config.coordination, fileBarrier });
    const gcFsync = await groupCommitRunner(path.join(base, `groupcommit-fsync-${k}`), { shards: config.shards, k, targetsPerGroup: config.targetsPerGroup, coordination: config.coordination, fileBarrier: 'fsync' });
    // A/B for the lock-fd cache: the same syncfs group commit with every lock file opened, checked
    // and closed per acquisition (lockFdCacheSize 0).
    const gcNoCache = await groupCommitRunner(path.join(base, `groupcommit-nocache-${k}`), { shards: config.shards, k, targetsPerGroup: config.targetsPerGroup, coordination: config.coordination, fileBarrier, lockFdCacheSize: 0 });
    const gcSqlite = await groupCommitRunner(path.join(base, `groupcommit-sqlite-${k}`), { shards: config.shards, k, targetsPerGroup: config.targetsPerGroup, coordination: config.coordination, fileBarrier, store: 'sqlite' });
    const floor = await floorRunner(path.join(base, `floor-${k}`), { shards: config.shards, k, targetsPerGroup: config.targetsPerGroup, fileBarrier });
    try {
      // Warm-up, the same for every mode: shard directories and lock files, the database's
      // write-ahead log growing to its working size, and the I/O threads' compiled code. The
      // first rounds of a fresh runner measure start-up, not the steady state the figures are for.
      for (let round = 0; round < WARM_UP_ROUNDS; round += 1) {
        await gc.round();
        await gcFsync.round();
        await gcNoCache.round();
        await gcSqlite.round();
        await floor.round();
      }
      const runners = { gc, gcFsync, gcNoCache, gcSqlite, floor };
      const samples = { gc: [] as number[], gcFsync: [] as number[], gcNoCache: [] as number[], gcSqlite: [] as number[], floor: [] as number[] };
      for (let round = 0; round < config.rounds; round += 1) {
        const order = round % 2 === 0 ? (['gc', 'gcFsync', 'gcNoCache', 'gcSqlite', 'floor'] as const) : (['floor', 'gcSqlite', 'gcNoCache', 'gcFsync', 'gc'] as const);
        for (const mode of order) samples[mode].push(await runners[mode].round());
      }
      const barriers = gc.lastBarriers();
      const row = {
        k,
        groupcommit_ms: round2(median(samples.gc)),
        groupcommit_fsync_ms: round2(median(samples.gcFsync)),
        groupcommit_nocache_ms: round2(median(samples.gcNoCache)),
        sqlite_groupcommit_ms: round2(median(samples.gcSqlite)),
        floor_ms: round2(median(samples.floor)),
        barriers_groupcommit: round2(barriers.directory),
        file_barriers_groupcommit: round2(barriers.file),
      };
      byK.push(row);
      console.log(
        `  shards ${String(config.shards).padStart(2)}  groupcommit K=${String(k).padStart(2)} (${fileBarrier}) median ${String(row.groupcommit_ms).padStart(8)} ms/group cycle  ` +
          `fsync ${row.groupcommit_fsync_ms} ms  no fd cache ${row.groupcommit_nocache_ms} ms  sqlite ${row.sqlite_groupcommit_ms} ms  floor ${row.floor_ms} ms  dir barriers/cycle ${row.barriers_groupcommit}  file barriers/cycle ${row.file_barriers_groupcommit}  samples ${samples.gc.map(round2).join(' ')}  sqlite samples ${samples.gcSqlite.map(round2).join(' ')}`,
      );
    } finally {
      await gc.close();
      await gcFsync.close();
      await gcNoCache.close();
      await gcSqlite.close();
    }
  }
  const top = byK.at(-1)!;
  const fields: Record<string, unknown> = {
    groupcommit_k: top.k,
    groupcommit_ms: top.groupcommit_ms,
    groupcommit_fsync_ms: top.groupcommit_fsync_ms,
    groupcommit_nocache_ms: top.groupcommit_nocache_ms,
    ratio_nocache: round2(top.groupcommit_nocache_ms! / top.groupcommit_ms!),
    barriers_groupcommit: top.barriers_groupcommit,
    file_barriers_groupcommit: top.file_barriers_groupcommit,
    floor_ms: top.floor_ms,
    groupcommit_file_barrier: fileBarrier,
    ratio_floor: round2(top.groupcommit_ms! / top.floor_ms!),
    sqlite_groupcommit_ms: top.sqlite_groupcommit_ms,
    ratio_sqlite_floor: round2(top.floor_ms! / top.sqlite_groupcommit_ms!),
    groupcommit_by_k: byK,
  };
  if (config.scalarMs !== undefined) fields.ratio_groupcommit = round2(config.scalarMs / top.groupcommit_ms!);
  console.log(`  groupcommit K=${top.k}: scalar/groupcommit ${fields.ratio_groupcommit ?? 'n/a'}, groupcommit/floor ${fields.ratio_floor}, floor/sqlite ${fields.ratio_sqlite_floor}`);
  return fields;
}
