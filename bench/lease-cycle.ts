/**
 * lease-cycle: one 64-target claimGroup + releaseGroup per cycle on the local disk.
 *
 * A/B in the same run: `scalar` (a directory barrier after every rename/unlink, no batching)
 * against `batched` (one directory barrier per touched shard), for 1 and 8 shards. Warm-up cycle per mode, then interleaved rounds (the order alternates per round),
 * medians. Barrier counts come from the counting fs layer (same wrapper in every mode).
 *
 * Beside them, `sqlite`: the same cycle on the SQLite store (one transaction per claim and per
 * release), `sqlite_ms`, in the same run.
 *
 * Usage: npm run bench -- lease-cycle [--rounds 7] [--targets 64] [--shards 1,8] [--modes scalar,batched] [--k 1,4,16] [--no-groupcommit] [--store etcd] [--dir <tmp>]
 * `--store etcd` adds the etcd store's figures (bench/_etcd-store.ts) beside the file ones.
 * The groupcommit mode (K concurrent callers through the I/O thread, and the floor) lives in
 * bench/_groupcommit.ts and runs on the last shard configuration.
 * Last line: one JSON object. Top-level fields are the 8-shard (last configured) results;
 * `by_shards` has every configuration.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { FaultInjectingFsLayer } from '../src/fs/fault-fs-layer.js';
import { FencedTargetLeaseTable } from '../src/lease/target-lease-table.js';
import { loadNative } from '../src/native/bindings.js';
import { runEtcdSection } from './_etcd-store.js';
import { claimReleaseCycle } from './_claim-release.js';
import { runGroupCommitSection } from './_groupcommit.js';

type Mode = 'scalar' | 'batched';
const MODES: readonly Mode[] = ['scalar', 'batched'];

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '7' },
    targets: { type: 'string', default: '64' },
    shards: { type: 'string', default: '1,8' },
    modes: { type: 'string', default: MODES.join(',') },
    dir: { type: 'string', default: os.tmpdir() },
    // groupcommit mode (bench/_groupcommit.ts): K concurrent callers through the I/O thread.
    k: { type: 'string', default: '1,4,16' },
    'no-groupcommit': { type: 'boolean', default: false },
    // Other lease stores measured beside the file store (files only by default).
    store: { type: 'string', default: 'files' },
  },
});

function positiveInt(name: string, text: string, max: number): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1 || n > max) {
    console.error(`lease-cycle: --${name} must be an integer in 1..${max}, got ${JSON.stringify(text)}`);
    process.exit(2);
  }
  return n;
}

const rounds = positiveInt('rounds', values.rounds!, 1000);
const targetCount = positiveInt('targets', values.targets!, 64);
const shardConfigs = values.shards!.split(',').map((s) => positiveInt('shards', s, 4096));
const modes = values.modes!.split(',') as Mode[];
for (const mode of modes) {
  if (!MODES.includes(mode)) {
    console.error(`lease-cycle: unknown mode ${JSON.stringify(mode)}; known: ${MODES.join(', ')}`);
    process.exit(2);
  }
}
const coordination = loadNative() ? 'multi' : 'single';
const stores = values.store!.split(',');
for (const store of stores) {
  if (store !== 'files' && store !== 'etcd') {
    console.error(`lease-cycle: unknown store ${JSON.stringify(store)}; known: files, etcd`);
    process.exit(2);
  }
}
const targets = Array.from({ length: targetCount }, (_, i) => BigInt(i + 1));

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const round2 = (n: number): number => Math.round(n * 100) / 100;

interface Runner {
  readonly fsLayer: FaultInjectingFsLayer;
  cycle(): Promise<number>;
}

async function runner(root: string, shards: number, mode: Mode | 'sqlite'): Promise<Runner> {
  const fsLayer = new FaultInjectingFsLayer();
  const storeOptions = mode === 'sqlite' ? { store: 'sqlite' } : { store: 'files', shardCount: shards, directoryBarrier: mode };
  const table = await FencedTargetLeaseTable.open(root, { ...storeOptions, coordination, leaseTtlMs: 3_600_000 }, { fsLayer });
  let now = 1_000_000;
  return {
    fsLayer,
    cycle: () => claimReleaseCycle(table, targets, (now += 1)),
  };
}

const base = await mkdtemp(path.join(values.dir!, 'symfence-bench-lease-cycle-'));
const results: Record<string, number | string>[] = [];
let groupCommitFields: Record<string, unknown> = {};
let sqliteMs: number | undefined;
let storeFields: Record<string, unknown> = {};
try {
  console.log(`lease-cycle: ${targetCount}-target claimGroup + releaseGroup per cycle, ${rounds} rounds, locker ${coordination === 'multi' ? 'flock' : 'in-process'}, dir ${base}`);
  for (const shards of shardConfigs) {
    const runners = new Map<Mode, Runner>();
    for (const mode of modes) runners.set(mode, await runner(path.join(base, `${mode}-${shards}`), shards, mode));
    const barriers = new Map<Mode, { directory: number; file: number }>();
    for (const [mode, r] of runners) {
      await r.cycle(); // warm-up: creates shard directories and lock files
      r.fsLayer.resetCounts();
      await r.cycle(); // counted cycle
      barriers.set(mode, r.fsLayer.barriers());
    }
    const samples = new Map<Mode, number[]>(modes.map((m) => [m, []]));
    for (let round = 0; round < rounds; round += 1) {
      const order = round % 2 === 0 ? modes : [...modes].reverse();
      for (const mode of order) samples.get(mode)!.push(await runners.get(mode)!.cycle());
    }
    const row: Record<string, number | string> = { shards };
    for (const mode of modes) {
      row[`${mode}_ms`] = round2(median(samples.get(mode)!));
      row[`barriers_${mode}`] = barriers.get(mode)!.directory;
      row[`file_barriers_${mode}`] = barriers.get(mode)!.file;
    }
    if (typeof row.scalar_ms === 'number' && typeof row.batched_ms === 'number') row.ratio = round2(row.scalar_ms / row.batched_ms);
    results.push(row);
    for (const mode of modes) {
      console.log(
        `  shards ${String(shards).padStart(2)}  ${mode.padEnd(8)} median ${String(row[`${mode}_ms`]).padStart(9)} ms/cycle  ` +
          `dir barriers ${String(row[`barriers_${mode}`]).padStart(4)}  file barriers ${row[`file_barriers_${mode}`]}  samples ${samples.get(mode)!.map(round2).join(' ')}`,
      );
    }
    if (row.ratio !== undefined) console.log(`  shards ${String(shards).padStart(2)}  ratio scalar/batched ${row.ratio}`);
  }
  {
    // The SQLite store, direct: one transaction per claim and per release.
    const sqlite = await runner(path.join(base, 'sqlite'), 1, 'sqlite');
    await sqlite.cycle(); // warm-up: creates the database
    const samples: number[] = [];
    for (let round = 0; round < rounds; round += 1) samples.push(await sqlite.cycle());
    sqliteMs = round2(median(samples));
    console.log(`  sqlite            median ${String(sqliteMs).padStart(9)} ms/cycle  samples ${samples.map(round2).join(' ')}`);
  }
  if (!values['no-groupcommit']) {
    const ks = values.k!.split(',').map((s) => positiveInt('k', s, 64));
    const shards = shardConfigs.at(-1)!;
    const scalarMs = results.at(-1)?.scalar_ms;
    groupCommitFields = await runGroupCommitSection(base, { shards, rounds, targetsPerGroup: targetCount, coordination, ks, scalarMs: typeof scalarMs === 'number' ? scalarMs : undefined });
  }
  if (stores.includes('etcd')) {
    storeFields = await runEtcdSection(base, { shards: shardConfigs.at(-1)!, rounds, targetsPerGroup: targetCount, coordination, ks: values.k!.split(',').map((s) => positiveInt('k', s, 64)) });
  }
} finally {
  await rm(base, { recursive: true, force: true });
}
const last = results.at(-1) ?? {};
console.log(JSON.stringify({ bench: 'lease-cycle', targets: targetCount, rounds, locker: coordination === 'multi' ? 'flock' : 'in-process', ...last, sqlite_ms: sqliteMs, ...groupCommitFields, ...storeFields, by_shards: results }));
