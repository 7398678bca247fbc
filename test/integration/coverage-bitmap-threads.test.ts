import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { expect, it } from 'vitest';
import { CoverageBitmap } from '../../src/solver/coverage-bitmap.js';
import { builtFile } from '../../src/util/paths.js';

const THREADS = 4;
const MAP_BYTES = 4096;
const MAPS = 40;

// Each thread merges the same overlapping maps (in its own order) once the shared start flag flips,
// so claims genuinely race; it reports how many bits it was first to set.
const threadSource = `
const { workerData, parentPort } = require('node:worker_threads');
import(workerData.moduleUrl).then(({ CoverageBitmap }) => {
  const bitmap = new CoverageBitmap(workerData.buffer);
  const start = new Int32Array(workerData.start);
  Atomics.add(start, 1, 1);
  Atomics.notify(start, 1);
  Atomics.wait(start, 0, 0);
  let claimed = 0;
  for (const map of workerData.maps) claimed += bitmap.claim(map).newBits;
  parentPort.postMessage(claimed);
});
`;

function deterministicMaps(seed: number): Uint8Array[] {
  let state = seed >>> 0 || 1;
  const next = (): number => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
  return Array.from({ length: MAPS }, () => {
    const map = new Uint8Array(MAP_BYTES);
    for (let k = 0; k < 300; k++) map[next() % 512]! |= 1 << (next() % 8); // dense overlap in the first 512 bytes
    return map;
  });
}

it('claims each new bit exactly once when several threads merge overlapping maps concurrently', async () => {
  const bitmap = new CoverageBitmap(MAP_BYTES);
  const start = new Int32Array(new SharedArrayBuffer(8));
  const maps = deterministicMaps(12345);
  const moduleUrl = pathToFileURL(builtFile('src/solver/coverage-bitmap.js')).href;
  const workers = Array.from({ length: THREADS }, (_, t) => {
    const order = t % 2 === 0 ? maps : [...maps].reverse();
    return new Worker(threadSource, { eval: true, workerData: { moduleUrl, buffer: bitmap.buffer, start: start.buffer, maps: order } });
  });
  const claimed = workers.map((worker) => new Promise<number>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  }));
  // Handshake: wait until every thread is parked on the start flag, then release them together.
  while (Atomics.load(start, 1) < THREADS) await Atomics.waitAsync(start, 1, Atomics.load(start, 1)).value;
  Atomics.store(start, 0, 1);
  Atomics.notify(start, 0);
  const perThread = await Promise.all(claimed);
  await Promise.all(workers.map((w) => w.terminate()));

  const union = new Uint8Array(MAP_BYTES);
  for (const map of maps) for (let i = 0; i < MAP_BYTES; i++) union[i]! |= map[i]!;
  const unionBits = union.reduce((sum, byte) => sum + popcount(byte), 0);
  expect(perThread.reduce((a, b) => a + b, 0)).toBe(unionBits);
  expect(Buffer.from(bitmap.snapshot()).equals(Buffer.from(union))).toBe(true);
});

function popcount(byte: number): number {
  let n = 0;
  for (let b = byte; b; b &= b - 1) n++;
  return n;
}
