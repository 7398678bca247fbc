/**
 * Bench: reserve + release of one 8-target group (one "op") in the SharedArrayBuffer in-flight set,
 * on one thread and on two threads sharing one set, against a `Map`-based registry doing the
 * same on one thread (the floor a non-shared design would give).
 *
 * `npm run bench -- inflight-set [--cycles N] [--rounds R]`. Within a round the Map baseline and
 * the 1-thread set run in alternating slices (A B B A …), so a change in machine load hits both
 * alike; the 2-thread mode follows. Ratios are computed per round and the median over rounds is
 * reported, as are the medians of the throughputs. Last line: one JSON object. `ops_per_sec`,
 * `ratio` and `threads` describe the faster of the 1- and 2-thread modes;
 * `ops_per_sec_1`/`ops_per_sec_2` and `ratio_1`/`ratio_2` give both.
 */
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { InflightTargetSet } from '../src/inflight/inflight-target-set.js';
import { builtFile } from '../src/util/paths.js';

const GROUP_SIZE = 8;
/** Slices per round in which baseline and 1-thread set alternate (even, for the A B B A order). */
const SLICES = 10;
const GROUP_COUNT = 4096;
const POOL_SIZE = 1 << 16;

function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value < 1) {
    console.error(`inflight-set bench: --${name} expects a positive integer, got ${JSON.stringify(process.argv[at + 1])}`);
    process.exit(2);
  }
  return value;
}

const cycles = flag('cycles', 200_000);
const rounds = flag('rounds', 7);

/** Deterministic random u64 targets and groups of 8 distinct ones (rarely overlapping). */
function makeGroups(seed: bigint): bigint[][] {
  let x = seed;
  const next = (): bigint => {
    x = (x * 6364136223846793005n + 1442695040888963407n) & ((1n << 64n) - 1n);
    return x;
  };
  const pool = Array.from({ length: POOL_SIZE }, () => (next() | 1n) & ((1n << 64n) - 1n));
  const groups: bigint[][] = [];
  for (let g = 0; g < GROUP_COUNT; g++) {
    const group: bigint[] = [];
    while (group.length < GROUP_SIZE) {
      const t = pool[Number(next() >> 48n) % POOL_SIZE]!;
      if (!group.includes(t)) group.push(t);
    }
    groups.push(group);
  }
  return groups;
}

/** The baseline: the same all-or-nothing semantics over a plain Map, one thread only. */
class MapRegistry {
  private readonly owners = new Map<bigint, number>();
  tryReserveGroup(targets: readonly bigint[], owner: number): boolean {
    for (const t of targets) if (this.owners.has(t)) return false;
    for (const t of targets) this.owners.set(t, owner);
    return true;
  }
  releaseGroup(targets: readonly bigint[], owner: number): number {
    let released = 0;
    for (const t of targets) {
      if (this.owners.get(t) === owner) {
        this.owners.delete(t);
        released++;
      }
    }
    return released;
  }
}

interface Registry {
  tryReserveGroup(targets: readonly bigint[], owner: number): boolean;
  releaseGroup(targets: readonly bigint[], owner: number): number;
}

function runLoop(registry: Registry, groups: readonly (readonly bigint[])[], count: number, from = 0): number {
  const begin = performance.now();
  for (let i = from; i < from + count; i++) {
    const group = groups[i % groups.length]!;
    if (registry.tryReserveGroup(group, 1)) registry.releaseGroup(group, 1);
  }
  return performance.now() - begin;
}

/** Baseline and 1-thread set over the same `count` cycles in alternating slices; total ms of each. */
function runInterleaved(count: number): { baselineMs: number; setMs: number } {
  const slice = Math.ceil(count / SLICES);
  let baselineMs = 0;
  let setMs = 0;
  for (let s = 0; s < SLICES; s++) {
    const from = s * slice;
    const n = Math.min(slice, count - from);
    if (n <= 0) break;
    if ((s & 3) === 0 || (s & 3) === 3) {
      baselineMs += runLoop(baseline, groupsMain, n, from);
      setMs += runLoop(set, groupsMain, n, from);
    } else {
      setMs += runLoop(set, groupsMain, n, from);
      baselineMs += runLoop(baseline, groupsMain, n, from);
    }
  }
  return { baselineMs, setMs };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const groupsMain = makeGroups(1n);
const set = InflightTargetSet.create(1024);
const baseline = new MapRegistry();
const start = new Int32Array(new SharedArrayBuffer(4));
const workers = [2n, 3n].map(
  (seed, i) =>
    new Worker(builtFile('bench/_inflight-set-worker.js'), {
      workerData: { setBuffer: set.buffer, startBuffer: start.buffer, owner: i + 2, groups: makeGroups(seed) },
    }),
);

let round = 0;
/** Both workers run `count` cycles at once on the shared set; returns wall time of the slower. */
async function runTwoThreads(count: number): Promise<{ elapsedMs: number; conflicts: number }> {
  round++;
  const armed = workers.map((w) => once(w, 'message'));
  for (const w of workers) w.postMessage({ type: 'run', round, cycles: count });
  await Promise.all(armed);
  const done = workers.map((w) => once(w, 'message') as Promise<[{ elapsedMs: number; conflicts: number }]>);
  Atomics.store(start, 0, round);
  Atomics.notify(start, 0);
  const results = (await Promise.all(done)).map(([r]) => r);
  return { elapsedMs: Math.max(...results.map((r) => r.elapsedMs)), conflicts: results.reduce((s, r) => s + r.conflicts, 0) };
}

try {
  // Warm-up: JIT all three paths.
  runLoop(baseline, groupsMain, cycles / 10);
  runLoop(set, groupsMain, cycles / 10);
  await runTwoThreads(cycles / 10);

  const perRound = { baseline: [] as number[], one: [] as number[], two: [] as number[], ratio1: [] as number[], ratio2: [] as number[] };
  let conflicts = 0;
  console.log(`inflight-set: ${cycles} reserve+release cycles of ${GROUP_SIZE}-target groups per mode and round, ${rounds} rounds`);
  console.log('round  baseline_map_1t  sab_set_1t  sab_set_2t   (ops/s)  ratio_1  ratio_2');
  for (let r = 0; r < rounds; r++) {
    const interleaved = runInterleaved(cycles);
    const baselineOps = cycles / (interleaved.baselineMs / 1000);
    const oneOps = cycles / (interleaved.setMs / 1000);
    const two = await runTwoThreads(cycles);
    const twoOps = (2 * cycles) / (two.elapsedMs / 1000);
    conflicts += two.conflicts;
    perRound.baseline.push(baselineOps);
    perRound.one.push(oneOps);
    perRound.two.push(twoOps);
    perRound.ratio1.push(oneOps / baselineOps);
    perRound.ratio2.push(twoOps / baselineOps);
    console.log(
      `${String(r + 1).padStart(5)}  ${baselineOps.toFixed(0).padStart(15)}  ${oneOps.toFixed(0).padStart(10)}  ${twoOps.toFixed(0).padStart(10)}           ${(oneOps / baselineOps).toFixed(3)}    ${(twoOps / baselineOps).toFixed(3)}`,
    );
  }
  const baselineOps = median(perRound.baseline);
  const one = median(perRound.one);
  const two = median(perRound.two);
  const ratio1 = median(perRound.ratio1);
  const ratio2 = median(perRound.ratio2);
  const best = ratio2 > ratio1 ? { threads: 2, ops: two, ratio: ratio2 } : { threads: 1, ops: one, ratio: ratio1 };
  console.log(`median: baseline ${baselineOps.toFixed(0)} ops/s, 1 thread ${one.toFixed(0)} ops/s (×${ratio1.toFixed(3)}), 2 threads ${two.toFixed(0)} ops/s (×${ratio2.toFixed(3)}), 2-thread conflicts ${conflicts}`);
  console.log(
    JSON.stringify({
      bench: 'inflight-set',
      group_size: GROUP_SIZE,
      cycles_per_round: cycles,
      rounds,
      threads: best.threads,
      ops_per_sec: Math.round(best.ops),
      baseline_ops_per_sec: Math.round(baselineOps),
      ratio: Number(best.ratio.toFixed(4)),
      ops_per_sec_1: Math.round(one),
      ops_per_sec_2: Math.round(two),
      ratio_1: Number(ratio1.toFixed(4)),
      ratio_2: Number(ratio2.toFixed(4)),
      conflicts_2: conflicts,
    }),
  );
} finally {
  await Promise.all(workers.map((w) => w.terminate()));
}
