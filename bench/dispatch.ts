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
 * about twice the system time per spawn); `ratio_vs_thread_spawn` compares the default pool with it.
 *
 * `ratio` is always the default pool (`new SolverPool()`: spawnThread worker, spawnMethod auto,
 * i.e. the addon's posix_spawn when it is built; `spawn_method` says which). Three more pools pin
 * the thread and the spawn method, each measured right after the same round's raw chunk, in an
 * order rotating per round: `ratio_main` (main thread, auto), `ratio_child_process` (worker
 * threads, child_process.spawn — the default before the native path) and
 * `ratio_main_child_process` (main thread, child_process.spawn), and `ratio_per_run_shim` (worker
 * threads, native, but one supervising shim process per run instead of the long-lived run
 * supervisors: `SYMFENCE_SPAWN_SHIM=per-run`). Never pass/fail.
 *
 *   npm run bench -- dispatch [--runs 2000] [--chunk 200] [--concurrency 2,4] [--variants main,child_process,main_child_process,per_run_shim|none]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { nativeSupervision } from '../src/native/bindings.js';
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
type Row = Record<string, number | string>;
const rows: Row[] = [];
const input = { bytes: new Uint8Array(16) };
const command = { binary: '/bin/true', argv: [] as string[] };

/**
 * The pool configurations measured against raw spawn. `default` is what `new SolverPool()` does
 * (spawnThread worker, spawnMethod auto); the others pin the thread and the spawn method.
 */
const ALL_VARIANTS: readonly { key: string; spawnThread: 'main' | 'worker'; spawnMethod: 'auto' | 'child-process'; env?: Record<string, string> }[] = [
  { key: 'main', spawnThread: 'main', spawnMethod: 'auto' },
  { key: 'child_process', spawnThread: 'worker', spawnMethod: 'child-process' },
  { key: 'main_child_process', spawnThread: 'main', spawnMethod: 'child-process' },
  // The default pool with one supervising shim process per run instead of the long-lived run
  // supervisors (docs/native.md, *Run supervisor*): what the supervisors save.
  { key: 'per_run_shim', spawnThread: 'worker', spawnMethod: 'auto', env: { SYMFENCE_SPAWN_SHIM: 'per-run' } },
];
/**
 * `--variants none` (or a comma list of keys) measures fewer pools: every extra pool's idle threads
 * make this process bigger, and a bigger process makes the raw fork() baseline slower.
 */
const variantKeys = flag('variants', ALL_VARIANTS.map((v) => v.key).join(',')).split(',');
const VARIANTS = ALL_VARIANTS.filter((v) => variantKeys.includes(v.key));

interface Series {
  rates: number[];
  ratios: number[];
  cpu: number[];
  totalCpu: number[];
}
const series = (): Series => ({ rates: [], ratios: [], cpu: [], totalCpu: [] });
function record(s: Series, rate: number, raw: number): void {
  s.rates.push(rate);
  s.ratios.push(rate / raw);
  s.cpu.push(lastCpuUs / chunk);
  s.totalCpu.push(lastTotalCpuUs / chunk);
}

let defaultSpawnMethod = '';
try {
  for (const concurrency of concurrencies) {
    const pool = new SolverPool({ solver: { workers: concurrency }, scratchParent: scratch });
    defaultSpawnMethod = pool.spawnMethod;
    const runOn = (p: SolverPool) => async (): Promise<void> => {
      const result = await p.run({ input, command });
      if (result.status !== 'ok') throw new Error(`unexpected status ${result.status}`);
    };
    const runPool = runOn(pool);
    const variants = VARIANTS.map((v) => {
      // A variant's env is in place while its pool starts its threads (each worker thread keeps
      // the copy of process.env it was started with; the pool starts them all at construction).
      const saved = Object.fromEntries(Object.keys(v.env ?? {}).map((key) => [key, process.env[key]]));
      Object.assign(process.env, v.env ?? {});
      try {
        const p = new SolverPool({ solver: { workers: concurrency, spawnThread: v.spawnThread, spawnMethod: v.spawnMethod }, scratchParent: scratch });
        return { ...v, pool: p, run: runOn(p), series: series() };
      } finally {
        for (const [key, value] of Object.entries(saved)) {
          if (value === undefined) delete process.env[key];
          else process.env[key] = value;
        }
      }
    });
    // Warm-up: start every worker thread and the spawn path once.
    await withConcurrency(concurrency * 20, concurrency, runPool);
    for (const v of variants) await withConcurrency(concurrency * 20, concurrency, v.run);
    await withConcurrency(concurrency * 20, concurrency, rawSpawn);
    const spawners = Array.from({ length: concurrency }, () => new Worker(threadSpawnerSource, { eval: true }));
    await threadSpawns(spawners, concurrency * 10);
    const pooled = series();
    const rawRates: number[] = [];
    const rawCpu: number[] = [];
    const rawTotalCpu: number[] = [];
    const threadRates: number[] = [];
    const threadRatios: number[] = [];
    for (let round = 0; round < rounds; round++) {
      let raw = 0;
      let pooledRate = 0;
      const measureRaw = async (): Promise<void> => {
        raw = await withConcurrency(chunk, concurrency, rawSpawn);
        rawCpu.push(lastCpuUs / chunk);
        rawTotalCpu.push(lastTotalCpuUs / chunk);
      };
      const measurePool = async (): Promise<void> => {
        pooledRate = await withConcurrency(chunk, concurrency, runPool);
      };
      if (round % 2 === 0) {
        await measureRaw();
        await measurePool();
      } else {
        await measurePool();
        const cpu = lastCpuUs;
        const totalCpu = lastTotalCpuUs;
        await measureRaw();
        lastCpuUs = cpu;
        lastTotalCpuUs = totalCpu;
      }
      record(pooled, pooledRate, raw);
      rawRates.push(raw);
      // The other variants in an order that rotates per round, so none always runs last.
      for (let i = 0; i < variants.length; i++) {
        const v = variants[(i + round) % variants.length]!;
        record(v.series, await withConcurrency(chunk, concurrency, v.run), raw);
      }
      const threaded = await threadSpawns(spawners, chunk);
      threadRates.push(threaded);
      threadRatios.push(pooledRate / threaded);
    }
    await pool.close();
    for (const v of variants) await v.pool.close();
    await Promise.all(spawners.map((w) => w.terminate()));
    const row: Row = {
      concurrency,
      spawn_method: pool.spawnMethod,
      pool_runs_per_sec: Math.round(median(pooled.rates)),
      raw_spawn_per_sec: Math.round(median(rawRates)),
      ratio: Number(median(pooled.ratios).toFixed(3)),
      thread_spawn_per_sec: Math.round(median(threadRates)),
      ratio_vs_thread_spawn: Number(median(threadRatios).toFixed(3)),
      pool_cpu_us_per_run: Math.round(median(pooled.cpu)),
      raw_cpu_us_per_run: Math.round(median(rawCpu)),
      pool_total_cpu_us_per_run: Math.round(median(pooled.totalCpu)),
      raw_total_cpu_us_per_run: Math.round(median(rawTotalCpu)),
    };
    for (const v of variants) {
      row[`${v.key}_pool_runs_per_sec`] = Math.round(median(v.series.rates));
      row[`ratio_${v.key}`] = Number(median(v.series.ratios).toFixed(3));
      row[`${v.key}_pool_cpu_us_per_run`] = Math.round(median(v.series.cpu));
      row[`${v.key}_pool_total_cpu_us_per_run`] = Math.round(median(v.series.totalCpu));
    }
    rows.push(row);
    console.log(
      `concurrency ${concurrency}: raw spawn ${row.raw_spawn_per_sec} runs/s, cpu/run ${row.raw_cpu_us_per_run} µs (incl. children ${row.raw_total_cpu_us_per_run} µs); ` +
        `thread spawn ${row.thread_spawn_per_sec} runs/s (default pool/thread ${row.ratio_vs_thread_spawn}); ${rounds} chunks of ${chunk}`,
    );
    console.log(
      `  default pool (worker, ${pool.spawnMethod}): ${row.pool_runs_per_sec} runs/s  ratio ${row.ratio}  cpu/run ${row.pool_cpu_us_per_run} µs (incl. children ${row.pool_total_cpu_us_per_run} µs)  ` +
        `per-chunk ratios ${pooled.ratios.map((r) => r.toFixed(2)).join(' ')}`,
    );
    for (const v of variants) {
      console.log(
        `  ${v.key.padEnd(20)} (${v.spawnThread}, ${v.pool.spawnMethod}): ${row[`${v.key}_pool_runs_per_sec`]} runs/s  ratio ${row[`ratio_${v.key}`]}  ` +
          `cpu/run ${row[`${v.key}_pool_cpu_us_per_run`]} µs (incl. children ${row[`${v.key}_pool_total_cpu_us_per_run`]} µs)`,
      );
    }
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
    ratio_child_process: last.ratio_child_process,
    ratio_main_child_process: last.ratio_main_child_process,
    ratio_per_run_shim: last.ratio_per_run_shim,
    spawn_method: defaultSpawnMethod,
    supervision: nativeSupervision(),
    concurrency: last.concurrency,
    loadavg_1m: Number(os.loadavg()[0]!.toFixed(2)),
    by_concurrency: rows,
  }),
);
