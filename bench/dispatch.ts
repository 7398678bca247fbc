/**
 * Bench `dispatch`: the per-run overhead of the solver pool. 2,000 runs of `/bin/true` as the
 * "solver" through `SolverPool` (workers = concurrency, `concurrency` runs in flight) against the
 * floor it approaches: raw `child_process.spawn('/bin/true')` at the same concurrency from one
 * thread. The pool pays for a fresh run directory with `output/`, a detached process group, a
 * stderr pipe, output collection, cleanup and the thread hop; the ratio says how much of the raw
 * spawn rate survives.
 *
 * The machine this runs on is shared and noisy (load drifts by 3x within a minute), so the runs
 * are split into paired chunks — `chunk` raw spawns, then `chunk` pool runs, alternating which
 * goes first — and the reported ratio is the median of the per-chunk ratios; the rates are the
 * medians of the per-chunk rates. Because wall-clock rates swing with other tenants' load, it also
 * reports this process's CPU time per run (user + system, all threads; the children's own exec is
 * not included) for both sides — a steadier view of the overhead the pool adds.
 *
 * A third column spawns `/bin/true` raw from `concurrency` plain worker threads. fork() of a
 * process whose other threads are busy costs more kernel time than from one thread (measured here:
 * about twice the system time per spawn), and the pool must spawn from its worker threads; the
 * `ratio_vs_thread_spawn` column isolates what the pool's own code adds on top of that. Never
 * pass/fail.
 *
 *   npm run bench -- dispatch [--runs 2000] [--chunk 200] [--concurrency 2,4]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { SolverPool } from '../src/solver/solver-pool.js';

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

const runs = Number(flag('runs', '2000'));
const chunk = Math.min(Number(flag('chunk', '200')), runs);
const rounds = Math.max(1, Math.floor(runs / chunk));
const concurrencies = flag('concurrency', '2,4').split(',').map(Number);

/** CPU (user + system, all threads of this process) spent by the last `withConcurrency` call. */
let lastCpuUs = 0;

async function withConcurrency(total: number, concurrency: number, one: () => Promise<void>): Promise<number> {
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        next++;
        await one();
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  lastCpuUs = cpu.user + cpu.system;
  return (total / (performance.now() - started)) * 1000;
}

function rawSpawn(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/true', [], { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', () => resolve());
  });
}

const threadSpawnerSource = `
const { spawn } = require('node:child_process');
const { parentPort } = require('node:worker_threads');
parentPort.on('message', async (n) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => spawn('/bin/true', [], { stdio: 'ignore' }).once('exit', resolve));
  parentPort.postMessage(n);
});
`;

/** Runs `total` raw spawns split across `workers` plain worker threads; returns runs per second. */
async function threadSpawns(workers: Worker[], total: number): Promise<number> {
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const share = Math.ceil(total / workers.length);
  await Promise.all(workers.map((w) => new Promise((resolve) => {
    w.once('message', resolve);
    w.postMessage(share);
  })));
  const cpu = process.cpuUsage(cpuBefore);
  lastCpuUs = cpu.user + cpu.system;
  return ((share * workers.length) / (performance.now() - started)) * 1000;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const scratch = mkdtempSync(path.join(os.tmpdir(), 'symfence-bench-dispatch-'));
const rows: {
  concurrency: number;
  pool_runs_per_sec: number;
  raw_spawn_per_sec: number;
  ratio: number;
  thread_spawn_per_sec: number;
  ratio_vs_thread_spawn: number;
  pool_cpu_us_per_run: number;
  raw_cpu_us_per_run: number;
}[] = [];
const input = { bytes: new Uint8Array(16) };
const command = { binary: '/bin/true', argv: [] as string[] };

try {
  for (const concurrency of concurrencies) {
    const pool = new SolverPool({ solver: { workers: concurrency }, scratchParent: scratch });
    const runPool = async (): Promise<void> => {
      const result = await pool.run({ input, command });
      if (result.status !== 'ok') throw new Error(`unexpected status ${result.status}`);
    };
    // Warm-up: start every worker thread and the spawn path once.
    await withConcurrency(concurrency * 20, concurrency, runPool);
    await withConcurrency(concurrency * 20, concurrency, rawSpawn);
    const poolRates: number[] = [];
    const rawRates: number[] = [];
    const ratios: number[] = [];
    const spawners = Array.from({ length: concurrency }, () => new Worker(threadSpawnerSource, { eval: true }));
    await threadSpawns(spawners, concurrency * 10);
    const threadRates: number[] = [];
    const threadRatios: number[] = [];
    const poolCpu: number[] = [];
    const rawCpu: number[] = [];
    for (let round = 0; round < rounds; round++) {
      let raw: number;
      let pooled: number;
      if (round % 2 === 0) {
        raw = await withConcurrency(chunk, concurrency, rawSpawn);
        rawCpu.push(lastCpuUs / chunk);
        pooled = await withConcurrency(chunk, concurrency, runPool);
        poolCpu.push(lastCpuUs / chunk);
      } else {
        pooled = await withConcurrency(chunk, concurrency, runPool);
        poolCpu.push(lastCpuUs / chunk);
        raw = await withConcurrency(chunk, concurrency, rawSpawn);
        rawCpu.push(lastCpuUs / chunk);
      }
      const threaded = await threadSpawns(spawners, chunk);
      rawRates.push(raw);
      poolRates.push(pooled);
      threadRates.push(threaded);
      ratios.push(pooled / raw);
      threadRatios.push(pooled / threaded);
    }
    await pool.close();
    await Promise.all(spawners.map((w) => w.terminate()));
    const row = {
      concurrency,
      pool_runs_per_sec: Math.round(median(poolRates)),
      raw_spawn_per_sec: Math.round(median(rawRates)),
      ratio: Number(median(ratios).toFixed(3)),
      thread_spawn_per_sec: Math.round(median(threadRates)),
      ratio_vs_thread_spawn: Number(median(threadRatios).toFixed(3)),
      pool_cpu_us_per_run: Math.round(median(poolCpu)),
      raw_cpu_us_per_run: Math.round(median(rawCpu)),
    };
    rows.push(row);
    console.log(
      `concurrency ${concurrency}: pool ${row.pool_runs_per_sec} runs/s  raw spawn ${row.raw_spawn_per_sec} runs/s  ratio ${row.ratio}  ` +
        `cpu/run pool ${row.pool_cpu_us_per_run} µs raw ${row.raw_cpu_us_per_run} µs  ` +
        `thread spawn ${row.thread_spawn_per_sec} runs/s (pool/thread ${row.ratio_vs_thread_spawn})  ` +
        `(${rounds} chunks of ${chunk}; per-chunk ratios ${ratios.map((r) => r.toFixed(2)).join(' ')})`,
    );
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

const last = rows.at(-1)!;
console.log(
  JSON.stringify({
    bench: 'dispatch',
    runs: rounds * chunk,
    chunk,
    pool_runs_per_sec: last.pool_runs_per_sec,
    raw_spawn_per_sec: last.raw_spawn_per_sec,
    ratio: last.ratio,
    ratio_vs_thread_spawn: last.ratio_vs_thread_spawn,
    concurrency: last.concurrency,
    by_concurrency: rows,
  }),
);
