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
 * reports this process's CPU time per run (user + system, all threads) for both sides — a steadier
 * view of the overhead the pool adds — and the same including the reaped children's CPU
 * (`/proc/self/stat` cutime + cstime, 10 ms ticks: their fork-to-exec time and `/bin/true`).
 *
 * A third column spawns `/bin/true` raw from `concurrency` plain worker threads. fork() of a
 * process whose other threads are busy costs more kernel time than from one thread (measured here:
 * about twice the system time per spawn), and the pool must spawn from its worker threads; the
 * `ratio_vs_thread_spawn` column isolates what the pool's own code adds on top of that. A fourth
 * column runs the same pool with `spawnThread: 'main'` (the contract on the calling thread, no
 * solver threads; `ratio_main` = its rate over raw spawn, per chunk, right after the raw chunk).
 * Never pass/fail.
 *
 *   npm run bench -- dispatch [--runs 2000] [--chunk 200] [--concurrency 2,4]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
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

/** CPU (user + system, all threads of this process) spent by the last measured call. */
let lastCpuUs = 0;
/** The same plus the CPU of reaped children (their fork-to-exec time and `/bin/true` itself). */
let lastTotalCpuUs = 0;

const TICK_US = 10_000; // USER_HZ is 100 on Linux: /proc tick counts are 10 ms each.

/** CPU of this process's waited-for children, from `/proc/self/stat` (cutime + cstime), in µs. */
function childrenCpuUs(): number {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    // Fields after the `(comm)` — which may contain spaces — start at field 3 (state).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[13]) + Number(fields[14])) * TICK_US;
  } catch {
    return 0;
  }
}

function startCpu(): () => void {
  const before = process.cpuUsage();
  const childrenBefore = childrenCpuUs();
  return () => {
    const cpu = process.cpuUsage(before);
    lastCpuUs = cpu.user + cpu.system;
    lastTotalCpuUs = lastCpuUs + childrenCpuUs() - childrenBefore;
  };
}

async function withConcurrency(total: number, concurrency: number, one: () => Promise<void>): Promise<number> {
  let next = 0;
  const stopCpu = startCpu();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        next++;
        await one();
      }
    }),
  );
  stopCpu();
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
  const stopCpu = startCpu();
  const started = performance.now();
  const share = Math.ceil(total / workers.length);
  await Promise.all(workers.map((w) => new Promise((resolve) => {
    w.once('message', resolve);
    w.postMessage(share);
  })));
  stopCpu();
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
  pool_total_cpu_us_per_run: number;
  raw_total_cpu_us_per_run: number;
  main_pool_runs_per_sec: number;
  ratio_main: number;
  main_pool_cpu_us_per_run: number;
  main_pool_total_cpu_us_per_run: number;
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
    const mainPool = new SolverPool({ solver: { workers: concurrency, spawnThread: 'main' }, scratchParent: scratch });
    const runMainPool = async (): Promise<void> => {
      const result = await mainPool.run({ input, command });
      if (result.status !== 'ok') throw new Error(`unexpected status ${result.status}`);
    };
    // Warm-up: start every worker thread and the spawn path once.
    await withConcurrency(concurrency * 20, concurrency, runPool);
    await withConcurrency(concurrency * 20, concurrency, runMainPool);
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
    const poolTotalCpu: number[] = [];
    const mainRates: number[] = [];
    const mainRatios: number[] = [];
    const mainCpu: number[] = [];
    const mainTotalCpu: number[] = [];
    const rawTotalCpu: number[] = [];
    const recordRaw = (): void => {
      rawCpu.push(lastCpuUs / chunk);
      rawTotalCpu.push(lastTotalCpuUs / chunk);
    };
    const recordPool = (): void => {
      poolCpu.push(lastCpuUs / chunk);
      poolTotalCpu.push(lastTotalCpuUs / chunk);
    };
    for (let round = 0; round < rounds; round++) {
      let raw: number;
      let pooled: number;
      if (round % 2 === 0) {
        raw = await withConcurrency(chunk, concurrency, rawSpawn);
        recordRaw();
        pooled = await withConcurrency(chunk, concurrency, runPool);
        recordPool();
      } else {
        pooled = await withConcurrency(chunk, concurrency, runPool);
        recordPool();
        raw = await withConcurrency(chunk, concurrency, rawSpawn);
        recordRaw();
      }
      const mainPooled = await withConcurrency(chunk, concurrency, runMainPool);
      mainCpu.push(lastCpuUs / chunk);
      mainTotalCpu.push(lastTotalCpuUs / chunk);
      mainRates.push(mainPooled);
      mainRatios.push(mainPooled / raw);
      const threaded = await threadSpawns(spawners, chunk);
      rawRates.push(raw);
      poolRates.push(pooled);
      threadRates.push(threaded);
      ratios.push(pooled / raw);
      threadRatios.push(pooled / threaded);
    }
    await pool.close();
    await mainPool.close();
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
      pool_total_cpu_us_per_run: Math.round(median(poolTotalCpu)),
      raw_total_cpu_us_per_run: Math.round(median(rawTotalCpu)),
      main_pool_runs_per_sec: Math.round(median(mainRates)),
      ratio_main: Number(median(mainRatios).toFixed(3)),
      main_pool_cpu_us_per_run: Math.round(median(mainCpu)),
      main_pool_total_cpu_us_per_run: Math.round(median(mainTotalCpu)),
    };
    rows.push(row);
    console.log(
      `concurrency ${concurrency}: pool ${row.pool_runs_per_sec} runs/s  raw spawn ${row.raw_spawn_per_sec} runs/s  ratio ${row.ratio}  ` +
        `cpu/run pool ${row.pool_cpu_us_per_run} µs raw ${row.raw_cpu_us_per_run} µs  ` +
        `incl. children pool ${row.pool_total_cpu_us_per_run} µs raw ${row.raw_total_cpu_us_per_run} µs  ` +
        `main-thread pool ${row.main_pool_runs_per_sec} runs/s ratio ${row.ratio_main} cpu/run ${row.main_pool_cpu_us_per_run} µs (incl. children ${row.main_pool_total_cpu_us_per_run} µs)  ` +
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
    ratio_main: last.ratio_main,
    concurrency: last.concurrency,
    loadavg_1m: Number(os.loadavg()[0]!.toFixed(2)),
    by_concurrency: rows,
  }),
);
