/**
 * Campaign scaling: the demo maze with a fixed job budget, run with 1 and then 2 solver workers in
 * the same process run (A/B), medians over repeated rounds.
 *
 *   npm run bench -- campaign-scaling [--jobs 24] [--rounds 3]
 *
 * Each round starts a fresh single-coordinator campaign (reference solver, built-in maze coverage,
 * I/O thread, scheduler) from `--jobs` distinct seeds and stops once `--jobs` jobs completed.
 * Throughput = completed jobs / (last job end − first job start), from jobs.jsonl. A duplicate
 * solve is a committed work id that ran twice, or two jobs sharing a target that overlapped in
 * time; it must stay 0. The reference solver is a node process per job, so absolute numbers
 * measure process start-up as much as the runtime; the ratio is what matters.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildCampaignComponents } from '../src/coordinator/adapters/campaign-components.js';
import { DEMO_MAZE_SPEC, mazeClassifier } from '../src/coordinator/adapters/demo-campaign.js';
import { Campaign } from '../src/coordinator/campaign.js';
import { DEMO_MAZE } from '../src/reference/demo-maze.js';
import { referenceSolverCommand } from '../src/reference/reference-commands.js';
import { readJobLog, type JobLogEntry } from '../src/telemetry/job-log.js';

function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value < 1) {
    console.error(`bench campaign-scaling: --${name} expects a positive integer, received ${JSON.stringify(process.argv[at + 1])}`);
    process.exit(2);
  }
  return value;
}

const jobBudget = flag('jobs', 24);
const rounds = flag('rounds', 3);

const COMMITTED = new Set(['ok', 'timeout', 'crash', 'error']);

/** Deterministic distinct seeds of the maze's length (xorshift32). */
function seedInputs(count: number): Uint8Array[] {
  let x = 0x9e3779b9;
  return Array.from({ length: count }, () => {
    const bytes = new Uint8Array(DEMO_MAZE.inputLength);
    for (let i = 0; i < bytes.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      bytes[i] = 0x20 + ((x >>> 0) % 0x5f);
    }
    return bytes;
  });
}

function duplicateSolves(jobs: readonly JobLogEntry[]): number {
  const committed = jobs.filter((j) => COMMITTED.has(j.status));
  let duplicates = committed.length - new Set(committed.map((j) => j.workId)).size;
  for (let i = 0; i < jobs.length; i++) {
    for (let j = i + 1; j < jobs.length; j++) {
      const a = jobs[i]!;
      const b = jobs[j]!;
      if (a.targets.some((t) => b.targets.includes(t)) && a.startMs < b.endMs && b.startMs < a.endMs) duplicates++;
    }
  }
  return duplicates;
}

/** CPU ms of this process (all threads) and of its reaped children, from /proc (Linux). */
function cpuMs(): { self: number; children: number } {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  const tick = 10; // USER_HZ is 100 on Linux
  return { self: (Number(fields[11]) + Number(fields[12])) * tick, children: (Number(fields[13]) + Number(fields[14])) * tick };
}

async function round(workers: number): Promise<{ jobsPerSec: number; duplicates: number; jobs: number; selfCpuMsPerJob: number; childCpuMsPerJob: number }> {
  const cpuBefore = cpuMs();
  const outDir = mkdtempSync(path.join(os.tmpdir(), 'symfence-bench-scaling-'));
  try {
    const seedDir = path.join(outDir, 'seeds');
    mkdirSync(seedDir, { recursive: true });
    const seeds = seedInputs(jobBudget).map((bytes, i) => {
      const file = path.join(seedDir, `seed-${i}`);
      writeFileSync(file, bytes);
      return { path: file, sha256: createHash('sha256').update(bytes).digest('hex'), depth: 0, origin: 'seed' as const };
    });
    const campaign = await Campaign.start(
      { outDir, workers, name: 'bench', statsIntervalMs: '1s' },
      {
        components: (context) =>
          buildCampaignComponents(context, {
            command: referenceSolverCommand(DEMO_MAZE_SPEC, 'file'),
            classify: (bitmap) => mazeClassifier(DEMO_MAZE, bitmap),
            initialSeeds: seeds,
          }),
      },
    );
    campaign.on('jobFinished', () => {
      const c = campaign.counters();
      if (c.jobsOk + c.jobsCrash + c.jobsTimeout + c.jobsError >= jobBudget) void campaign.stop();
    });
    await campaign.done;
    const jobs = readJobLog(path.join(outDir, 'jobs.jsonl'));
    const committed = jobs.filter((j) => COMMITTED.has(j.status)).slice(0, jobBudget);
    const first = Math.min(...committed.map((j) => j.startMs));
    const last = Math.max(...committed.map((j) => j.endMs));
    const cpuAfter = cpuMs();
    const ran = Math.max(1, jobs.length);
    return {
      jobsPerSec: committed.length / Math.max(0.001, (last - first) / 1000),
      duplicates: duplicateSolves(jobs),
      jobs: committed.length,
      selfCpuMsPerJob: (cpuAfter.self - cpuBefore.self) / ran,
      childCpuMsPerJob: (cpuAfter.children - cpuBefore.children) / ran,
    };
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

const results: Record<1 | 2, number[]> = { 1: [], 2: [] };
let duplicates = 0;
console.log(`campaign-scaling: demo maze, ${jobBudget} jobs per round, ${rounds} rounds, cores ${os.availableParallelism()}`);
for (let r = 0; r < rounds; r++) {
  for (const workers of [1, 2] as const) {
    const res = await round(workers);
    results[workers].push(res.jobsPerSec);
    duplicates += res.duplicates;
    console.log(
      `round ${r + 1} workers ${workers}: ${res.jobs} jobs, ${res.jobsPerSec.toFixed(2)} jobs/s, duplicate solves ${res.duplicates}, ` +
        `cpu/job: coordinator process ${res.selfCpuMsPerJob.toFixed(1)} ms, solver processes ${res.childCpuMsPerJob.toFixed(1)} ms`,
    );
  }
}
const one = median(results[1]);
const two = median(results[2]);
console.log(`median: 1 worker ${one.toFixed(2)} jobs/s, 2 workers ${two.toFixed(2)} jobs/s, scaling ${(two / one).toFixed(2)}`);
console.log(JSON.stringify({ bench: 'campaign-scaling', jobs: jobBudget, rounds, jobs_per_sec_1: Number(one.toFixed(3)), jobs_per_sec_2: Number(two.toFixed(3)), scaling: Number((two / one).toFixed(3)), duplicate_solves: duplicates }));
