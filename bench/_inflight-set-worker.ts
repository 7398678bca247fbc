/**
 * Thread side of `bench/inflight-set.ts`: attaches the shared set, and for every `run` message
 * reports `armed`, waits for the start word to reach the round number, runs reserve+release
 * cycles over its groups and posts the elapsed time.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { InflightTargetSet } from '../src/inflight/inflight-target-set.js';

interface BenchWorkerData {
  readonly setBuffer: SharedArrayBuffer;
  readonly startBuffer: SharedArrayBuffer;
  readonly owner: number;
  readonly groups: readonly (readonly bigint[])[];
}

const data = workerData as BenchWorkerData;
const set = InflightTargetSet.attach(data.setBuffer);
const start = new Int32Array(data.startBuffer);

parentPort!.on('message', (message: { type: 'run'; round: number; cycles: number }) => {
  parentPort!.postMessage({ type: 'armed' });
  while (Atomics.load(start, 0) < message.round) Atomics.wait(start, 0, message.round - 1);
  const begin = performance.now();
  let conflicts = 0;
  for (let i = 0; i < message.cycles; i++) {
    const group = data.groups[i % data.groups.length]!;
    if (set.tryReserveGroup(group, data.owner)) set.releaseGroup(group, data.owner);
    else conflicts++;
  }
  parentPort!.postMessage({ type: 'done', elapsedMs: performance.now() - begin, conflicts });
});
