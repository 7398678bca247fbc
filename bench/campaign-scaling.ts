/**
 * Campaign scaling: the demo maze with a fixed job budget, run with 1, 2 and all-cores solver workers
 * in the same process run (A/B), medians over repeated rounds.
 *
 *   npm run bench -- campaign-scaling [--jobs 24] [--rounds 11] [--solve-cpu-ms 0]
 *
 * Each round runs on the default lease store (`auto`: SQLite on a local disk), reported as
 * `lease_store`. Each round starts a fresh single-coordinator campaign (reference solver, built-in maze coverage,
 * I/O thread, scheduler) from `--jobs` distinct seeds and stops once `--jobs` jobs completed.
 * Throughput = completed jobs / (last job end − first job start), from jobs.jsonl. A duplicate
 * solve is a committed work id that ran twice, or two jobs sharing a target that overlapped in
 * time; it must stay 0. The reference solver is a node process per job, so absolute numbers
 * measure process start-up as much as the runtime; the ratio is what matters.
 *
 * `--solve-cpu-ms N` makes every reference-solver run spend N ms of CPU first, standing in for the
 * constraint solving that dominates a real SymCC job (without it, a job is mostly node start-up);
 * `--solve-cpu-ms 20` is the short directed job for which gaps between runs matter most.
 *
 * Busy share per worker: solver-process time (jobs.jsonl `solverMs`) over workers × the jobs' span,
 * i.e. the campaign's true `solverUtilisation` over the measured interval; `vs_raw_<n>` is the
 * campaign's throughput over the raw solver's at the same concurrency (the raw-spawn ceiling).
 * Every ratio against the raw solver is paired: each round's campaign over the raw run right after
 * it, the median over rounds (a busy machine drifts between rounds; both sides of a pair see the
 * same load). `scaling` and `raw_scaling` are the medians of the rates, for reading.
 * `scaling_vs_raw_q1`/`_q3` are the quartiles of the rounds' own ratios: on a shared 2-core VM one
 * round's ratio at `--solve-cpu-ms 20` spread from 0.84 to 1.09 around a median of 0.97, so a
 * median of three rounds moved by several hundredths from run to run; hence 11 rounds by default.
 * `steady_vs_raw_<n>` and `steady_scaling_vs_raw` are the same without each round's first
 * `WARMUP_JOBS_PER_WORKER` jobs per worker: those overlap the campaign's own start-up (solver and
 * I/O threads loading their modules, the JIT), a one-off cost that a 24-job round measures as much
 * as the per-job one; `bench/soak` measures the per-job cost over a long run.
 *
 * `coordinator_cpu_ms_per_job_<n>` is the CPU of the coordinator process (all its threads, start-up
 * and shutdown included) per job, the median over rounds: on a saturated host it is solver CPU lost.
 *
 * Machine baseline, in the same run: the same solver command on the same seeds, started directly
 * (no symfence) one at a time and two at a time. `raw_scaling` is what two cores of this machine
 * give this solver at all (process start-up contends for shared memory bandwidth and the kernel,
 * and on a VM the two vCPUs may share a physical core), and `scaling_vs_raw` is the share of it
 * the runtime keeps.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEMO_MAZE_SPEC } from '../src/coordinator/adapters/demo-campaign.js';
import { referenceSolverCommand } from '../src/reference/reference-commands.js';
import { mazeSeeds } from './_maze-seeds.js';
import { runInProcessGroup } from '../src/solver/process-group.js';
import { campaignRound, WARMUP_JOBS_PER_WORKER } from './_campaign-round.js';

function flag(name: string, fallback: number, min = 1): number {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value < min) {
    console.error(`bench campaign-scaling: --${name} expects an integer of at least ${min}, received ${JSON.stringify(process.argv[at + 1])}`);
    process.exit(2);
  }
  return value;
}

const jobBudget = flag('jobs', 24);
const rounds = flag('rounds', 11);
const solveCpuMs = flag('solve-cpu-ms', 0, 0);
// Inherited by every solver process, in the campaigns and in the raw baseline alike.
if (solveCpuMs > 0) process.env.SYMFENCE_REFSOLVER_SOLVE_CPU_MS = String(solveCpuMs);

/** Runs the solver command once per seed, `concurrency` at a time, with no runtime around it. */
async function rawRound(seeds: readonly Uint8Array[], concurrency: number): Promise<number> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-bench-raw-'));
  try {
    const command = referenceSolverCommand(DEMO_MAZE_SPEC, 'file');
    const inputs = seeds.map((bytes, i) => {
      const file = path.join(dir, `seed-${i}`);
      writeFileSync(file, bytes);
      mkdirSync(path.join(dir, `out-${i}`));
      return file;
    });
    let next = 0;
    // The cheapest start this process has (posix_spawn when the addon is built), so the baseline is
    // the solver itself rather than fork() of a large parent.
    const runOne = async (i: number): Promise<void> => {
      const outcome = await runInProcessGroup({
        binary: command.binary,
        argv: command.argv.map((a) => (a === '@@' ? inputs[i]! : a)),
        env: { ...process.env, SYMCC_OUTPUT_DIR: path.join(dir, `out-${i}`), SYMCC_INPUT_FILE: inputs[i]! },
        stdin: null,
        timeoutMs: 60_000,
        killGraceMs: 1_000,
        stderrCapBytes: 4096,
      });
      if (outcome.spawnError || outcome.code !== 0) throw new Error(`raw solver run failed: ${outcome.spawnError?.message ?? `exit ${outcome.code}`}`);
    };
    const stream = async (): Promise<void> => {
      while (next < inputs.length) await runOne(next++);
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: concurrency }, stream));
    return inputs.length / ((performance.now() - started) / 1000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const cores = os.availableParallelism();
const workerCounts = [...new Set([1, 2, cores])].sort((a, b) => a - b);
/** Lease stores the rounds ran on (one expected: the default for this machine's temp directory). */
const leaseStores = new Set<string>();
const results = new Map<number, number[]>(workerCounts.map((w) => [w, []]));
const coordinatorCpu = new Map<number, number[]>(workerCounts.map((w) => [w, []]));
const steady = new Map<number, number[]>(workerCounts.map((w) => [w, []]));
const busy = new Map<number, number[]>(workerCounts.map((w) => [w, []]));
const raw = new Map<number, number[]>(workerCounts.map((w) => [w, []]));
const rawSeeds = mazeSeeds(jobBudget);
let duplicates = 0;
console.log(`campaign-scaling: demo maze, ${jobBudget} jobs per round, ${rounds} rounds, solve cpu ${solveCpuMs} ms per job, cores ${cores}, workers ${workerCounts.join('/')}`);
for (let r = 0; r < rounds; r++) {
  for (const workers of workerCounts) {
    const res = await campaignRound(workers, jobBudget);
    leaseStores.add(res.leaseStore);
    results.get(workers)!.push(res.jobsPerSec);
    steady.get(workers)!.push(res.steadyJobsPerSec);
    busy.get(workers)!.push(res.busyShare);
    coordinatorCpu.get(workers)!.push(res.selfCpuMsPerJob);
    duplicates += res.duplicates;
    console.log(
      `round ${r + 1} workers ${workers}: ${res.jobs} jobs, ${res.jobsPerSec.toFixed(2)} jobs/s, busy ${(res.busyShare * 100).toFixed(1)}% per worker, duplicate solves ${res.duplicates}, ` +
        `cpu/job: coordinator process ${res.selfCpuMsPerJob.toFixed(1)} ms, solver processes ${res.childCpuMsPerJob.toFixed(1)} ms, load ${os.loadavg()[0]!.toFixed(2)}`,
    );
    const rawRate = await rawRound(rawSeeds, workers);
    raw.get(workers)!.push(rawRate);
    console.log(`round ${r + 1} raw solver, ${workers} at a time: ${rawRate.toFixed(2)} runs/s`);
  }
}
const one = median(results.get(1)!);
const two = median(results.get(2)!);
const rawOne = median(raw.get(1)!);
const rawTwo = median(raw.get(2)!);
const scaling = two / one;
const rawScaling = rawTwo / rawOne;
// Paired: each round's campaign against the raw solver run right after it, then the median over
// rounds, so a machine that slows down or speeds up between rounds moves both sides of a ratio.
const perRound = (f: (r: number) => number): number => median(Array.from({ length: rounds }, (_, r) => f(r)));
/** The lower and upper quartiles of the rounds' own values of `f` (nearest rank). */
const quartiles = (f: (r: number) => number): [number, number] => {
  const sorted = Array.from({ length: rounds }, (_, r) => f(r)).sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
  return [at(0.25), at(0.75)];
};
const at = (m: Map<number, number[]>, w: number, r: number): number => m.get(w)![r]!;
const roundScalingVsRaw = (r: number): number => at(results, 2, r) / at(results, 1, r) / (at(raw, 2, r) / at(raw, 1, r));
const scalingVsRaw = perRound(roundScalingVsRaw);
const [scalingVsRawQ1, scalingVsRawQ3] = quartiles(roundScalingVsRaw);
const steadyScalingVsRaw = perRound((r) => at(steady, 2, r) / at(steady, 1, r) / (at(raw, 2, r) / at(raw, 1, r)));
console.log(`lease store: ${[...leaseStores].join(', ')} (the default for a new lease directory in ${os.tmpdir()})`);
console.log(`median: 1 worker ${one.toFixed(2)} jobs/s, 2 workers ${two.toFixed(2)} jobs/s, scaling ${scaling.toFixed(2)}`);
console.log(
  `machine baseline: raw solver ${rawOne.toFixed(2)} → ${rawTwo.toFixed(2)} runs/s, scaling ${rawScaling.toFixed(2)}; runtime keeps ${(scalingVsRaw * 100).toFixed(0)}% of it ` +
    `(median of the rounds' own ratios; quartiles ${(scalingVsRawQ1 * 100).toFixed(0)}–${(scalingVsRawQ3 * 100).toFixed(0)}%)`,
);
console.log(`steady state (without the first ${WARMUP_JOBS_PER_WORKER} jobs per worker): ${(steadyScalingVsRaw * 100).toFixed(0)}% of the raw solver's scaling`);
const perWorkers: Record<string, number> = {};
for (const w of workerCounts) {
  const rate = median(results.get(w)!);
  const vsRaw = perRound((r) => at(results, w, r) / at(raw, w, r));
  perWorkers[`jobs_per_sec_${w}`] = Number(rate.toFixed(3));
  perWorkers[`busy_share_${w}`] = Number(median(busy.get(w)!).toFixed(3));
  perWorkers[`raw_runs_per_sec_${w}`] = Number(median(raw.get(w)!).toFixed(3));
  perWorkers[`vs_raw_${w}`] = Number(vsRaw.toFixed(3));
  perWorkers[`steady_vs_raw_${w}`] = Number(perRound((r) => at(steady, w, r) / at(raw, w, r)).toFixed(3));
  perWorkers[`coordinator_cpu_ms_per_job_${w}`] = Number(median(coordinatorCpu.get(w)!).toFixed(2));
  console.log(`${w} worker(s): ${rate.toFixed(2)} jobs/s, busy ${(median(busy.get(w)!) * 100).toFixed(1)}% per worker, ${(vsRaw * 100).toFixed(0)}% of the raw solver at ${w} at a time`);
}
console.log(
  JSON.stringify({
    bench: 'campaign-scaling',
    jobs: jobBudget,
    rounds,
    solve_cpu_ms: solveCpuMs,
    cores,
    ...perWorkers,
    scaling: Number(scaling.toFixed(3)),
    raw_scaling: Number(rawScaling.toFixed(3)),
    scaling_vs_raw: Number(scalingVsRaw.toFixed(3)),
    scaling_vs_raw_q1: Number(scalingVsRawQ1.toFixed(3)),
    scaling_vs_raw_q3: Number(scalingVsRawQ3.toFixed(3)),
    steady_scaling_vs_raw: Number(steadyScalingVsRaw.toFixed(3)),
    duplicate_solves: duplicates,
    lease_store: [...leaseStores].join(','),
    loadavg_1m: Number(os.loadavg()[0]!.toFixed(2)),
  }),
);
