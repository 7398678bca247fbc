/**
 * Solver threads: what serving the solver slots costs the coordinator, three ways, in the same run.
 *
 *   npm run bench -- solver-threads [--workers 2] [--jobs 48] [--rounds 5] [--solve-cpu-ms 20]
 *
 * - `per_slot`: a solver thread for every slot (`spawnThread: 'worker'`, `slotsPerThread: 1`);
 * - `shared`: solver threads of `slotsPerThread` slots (default 4: one thread for up to 4 slots),
 *   the default above `AUTO_MAIN_THREAD_SLOTS` workers;
 * - `main`: every slot on the calling thread (`spawnThread: 'main'`), no solver threads, the
 *   default up to `AUTO_MAIN_THREAD_SLOTS` workers.
 *
 * Each round runs one campaign of the demo maze per way (bench/_campaign-round.ts), in a rotating
 * order, and the ratios are paired per round (each way's figure over `per-slot`'s in the same
 * round), then the median over rounds. The figure that matters is `coordinator_cpu_ms_per_job`: the
 * CPU of the whole coordinator process per job, threads included. On a host whose cores all run
 * solvers, that CPU comes out of the solvers' share. Throughput (`jobs_per_sec`) is printed too,
 * but on a shared machine it moves by more than the difference being measured.
 */
import os from 'node:os';
import type { OptionsInput } from '../src/config/schema.js';
import type { SOLVER_CAMPAIGN_OPTIONS } from '../src/solver/solver-options.js';
import { campaignRound, type CampaignRound } from './_campaign-round.js';

function flag(name: string, fallback: number, min = 1): number {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value < min) {
    console.error(`bench solver-threads: --${name} expects an integer of at least ${min}, received ${JSON.stringify(process.argv[at + 1])}`);
    process.exit(2);
  }
  return value;
}

const workers = flag('workers', 2);
const jobBudget = flag('jobs', 48);
const rounds = flag('rounds', 5);
const solveCpuMs = flag('solve-cpu-ms', 20, 0);
if (solveCpuMs > 0) process.env.SYMFENCE_REFSOLVER_SOLVE_CPU_MS = String(solveCpuMs);

const WAYS: readonly { readonly name: string; readonly solver: OptionsInput<typeof SOLVER_CAMPAIGN_OPTIONS.specs> }[] = [
  { name: 'per_slot', solver: { spawnThread: 'worker', slotsPerThread: 1 } },
  { name: 'shared', solver: { spawnThread: 'worker' } },
  { name: 'main', solver: { spawnThread: 'main' } },
];

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const results = new Map<string, CampaignRound[]>(WAYS.map((w) => [w.name, []]));
let duplicates = 0;
console.log(`solver-threads: demo maze, ${workers} workers, ${jobBudget} jobs per campaign, ${rounds} rounds, solve cpu ${solveCpuMs} ms per job, cores ${os.availableParallelism()}`);
for (let r = 0; r < rounds; r++) {
  for (let i = 0; i < WAYS.length; i++) {
    const way = WAYS[(i + r) % WAYS.length]!;
    const res = await campaignRound(workers, jobBudget, way.solver);
    results.get(way.name)!.push(res);
    duplicates += res.duplicates;
    console.log(`round ${r + 1} ${way.name}: ${res.jobs} jobs, ${res.jobsPerSec.toFixed(2)} jobs/s, coordinator cpu ${res.selfCpuMsPerJob.toFixed(2)} ms/job, solver cpu ${res.childCpuMsPerJob.toFixed(1)} ms/job`);
  }
}
const summary: Record<string, number> = {};
const base = results.get('per_slot')!;
for (const way of WAYS) {
  const runs = results.get(way.name)!;
  summary[`${way.name}_coordinator_cpu_ms_per_job`] = Number(median(runs.map((x) => x.selfCpuMsPerJob)).toFixed(2));
  summary[`${way.name}_jobs_per_sec`] = Number(median(runs.map((x) => x.jobsPerSec)).toFixed(3));
  if (way.name === 'per_slot') continue;
  summary[`${way.name}_cpu_vs_per_slot`] = Number(median(runs.map((x, r) => x.selfCpuMsPerJob / base[r]!.selfCpuMsPerJob)).toFixed(3));
  summary[`${way.name}_rate_vs_per_slot`] = Number(median(runs.map((x, r) => x.jobsPerSec / base[r]!.jobsPerSec)).toFixed(3));
}
for (const way of WAYS) console.log(`${way.name}: coordinator ${summary[`${way.name}_coordinator_cpu_ms_per_job`]} ms cpu/job, ${summary[`${way.name}_jobs_per_sec`]} jobs/s`);
console.log(JSON.stringify({ bench: 'solver-threads', workers, jobs: jobBudget, rounds, solve_cpu_ms: solveCpuMs, ...summary, duplicate_solves: duplicates, loadavg_1m: Number(os.loadavg()[0]!.toFixed(2)) }));
