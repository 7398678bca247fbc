import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { InflightTargetSet } from '../../src/inflight/inflight-target-set.js';
import { builtFile } from '../../src/util/paths.js';
import { runStressLoop, type StressConfig, type StressResult } from '../fixtures/inflight-stress-loop.js';

const WORKERS = 2;
const OPERATIONS_PER_THREAD = 34_000;

/** `size` targets spread over the whole u64 range, some sharing their low or high half. */
function targetPool(size: number): bigint[] {
  const pool = new Set<bigint>([1n, 2n, (1n << 64n) - 1n, 1n << 32n, (1n << 32n) + 1n, (7n << 32n) + 2n]);
  let x = 0x9e3779b97f4a7c15n;
  while (pool.size < size) {
    x = (x * 6364136223846793005n + 1442695040888963407n) & ((1n << 64n) - 1n);
    if (x !== 0n) pool.add(x);
  }
  return [...pool];
}

interface Race {
  readonly set: InflightTargetSet;
  readonly pool: readonly bigint[];
  readonly holders: Int32Array;
  readonly results: readonly StressResult[];
}

/**
 * The main thread and WORKERS worker threads run `runStressLoop` on one set at the same time.
 * Workers attach, report ready and block on a start word; the main thread releases them all at
 * once and runs its own loop while they run theirs.
 */
async function race(poolSize: number, capacity: number, maxGroupSize: number, maxHeldGroups: number): Promise<Race> {
  const pool = targetPool(poolSize);
  const set = InflightTargetSet.create(capacity);
  const holders = new Int32Array(new SharedArrayBuffer(pool.length * 4));
  const start = new Int32Array(new SharedArrayBuffer(4));
  const config = (owner: number): StressConfig => ({
    owner,
    operations: OPERATIONS_PER_THREAD,
    seed: 0x1234 * owner + 17,
    pool,
    maxGroupSize,
    maxHeldGroups,
  });
  const workers = Array.from(
    { length: WORKERS },
    (_, i) =>
      new Worker(builtFile('test/fixtures/inflight-stress-worker.js'), {
        workerData: { setBuffer: set.buffer, holdersBuffer: holders.buffer, startBuffer: start.buffer, config: config(i + 2) },
      }),
  );
  try {
    const done = workers.map(
      (worker) =>
        new Promise<StressResult>((resolve, reject) => {
          worker.on('message', (message: { type: string; result?: StressResult }) => {
            if (message.type === 'done') resolve(message.result!);
          });
          worker.once('error', reject);
          worker.once('exit', (code) => reject(new Error(`stress worker exited with ${code} before reporting`)));
        }),
    );
    await Promise.all(workers.map((worker) => once(worker, 'message')));
    Atomics.store(start, 0, 1);
    Atomics.notify(start, 0);
    const mine = runStressLoop(set, holders, config(1));
    return { set, pool, holders, results: [mine, ...(await Promise.all(done))] };
  } finally {
    await Promise.all(workers.map((worker) => worker.terminate()));
  }
}

function expectNoDoubleAdmissionAndNoLeak({ set, pool, holders, results }: Race): void {
  const total = results.reduce((sum, r) => sum + r.operations, 0);
  expect(total).toBeGreaterThanOrEqual(100_000);
  for (const r of results) {
    expect(r.doubleAdmissions).toBe(0);
    expect(r.anomalies).toBe(0);
    expect(r.reserved).toBeGreaterThan(0);
    expect(r.released).toBe(r.reserved);
  }
  expect(results.reduce((sum, r) => sum + r.conflicts, 0)).toBeGreaterThan(0);
  expect(Array.from(holders)).toEqual(new Array(pool.length).fill(0));
  expect(set.size()).toBe(0);
  for (const t of pool) expect(set.has(t)).toBe(false);
}

describe('InflightTargetSet under concurrent threads', () => {
  it('admits no target twice and leaks no entry when the main thread and two workers race on overlapping groups', async () => {
    // Capacity = pool size: a full table is impossible, so every refusal is a real conflict.
    const outcome = await race(48, 48, 8, 3);
    expectNoDoubleAdmissionAndNoLeak(outcome);
    expect(outcome.results.reduce((sum, r) => sum + r.full, 0)).toBe(0);
  });

  it('stays exact while the table runs full and is rebuilt under concurrent readers and writers', async () => {
    // A tiny table (capacity 6 → 8 slots) and more targets than capacity: reserves hit
    // ERR_INFLIGHT_FULL, and live entries plus tombstones keep crossing the rebuild line while
    // the other threads probe (every release is preceded by ownerOf checks).
    const outcome = await race(16, 6, 3, 2);
    expectNoDoubleAdmissionAndNoLeak(outcome);
    expect(outcome.results.reduce((sum, r) => sum + r.full, 0)).toBeGreaterThan(0);
    expect(outcome.set.stats().rebuilds).toBeGreaterThan(0);
  });
});
