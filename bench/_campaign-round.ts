/**
 * One campaign round for the campaign benches: a fresh single-coordinator campaign of the demo maze
 * (reference solver, built-in maze coverage, I/O thread, scheduler, the default lease store) from
 * `jobs` distinct seeds, stopped once `jobs` jobs completed, measured from its own jobs.jsonl.
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
import type { OptionsInput } from '../src/config/schema.js';
import type { SOLVER_CAMPAIGN_OPTIONS } from '../src/solver/solver-options.js';
import { readJobLog, type JobLogEntry } from '../src/telemetry/job-log.js';
import { mazeSeeds } from './_maze-seeds.js';

export const COMMITTED = new Set(['ok', 'timeout', 'crash', 'error']);


export function duplicateSolves(jobs: readonly JobLogEntry[]): number {
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

/** Jobs per worker left out of the steady-state rate: a campaign's first runs overlap its start-up (threads loading, JIT). */
export const WARMUP_JOBS_PER_WORKER = 2;

export interface CampaignRound {
  readonly jobsPerSec: number;
  /** The same without the first `WARMUP_JOBS_PER_WORKER` jobs per worker. */
  readonly steadyJobsPerSec: number;
  /** Solver-process time over workers × the jobs' span. */
  readonly busyShare: number;
  readonly duplicates: number;
  readonly jobs: number;
  /** CPU of this process (the coordinator: all its threads) per job, start-up and shutdown included. */
  readonly selfCpuMsPerJob: number;
  /** CPU of the reaped solver processes per job. */
  readonly childCpuMsPerJob: number;
  /** The lease store the campaign's default lease options (`auto`) gave its lease directory. */
  readonly leaseStore: string;
}

export async function campaignRound(workers: number, jobBudget: number, solver: OptionsInput<typeof SOLVER_CAMPAIGN_OPTIONS.specs> = {}): Promise<CampaignRound> {
  const cpuBefore = cpuMs();
  const outDir = mkdtempSync(path.join(os.tmpdir(), 'symfence-bench-scaling-'));
  try {
    const seedDir = path.join(outDir, 'seeds');
    mkdirSync(seedDir, { recursive: true });
    const seeds = mazeSeeds(jobBudget).map((bytes, i) => {
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
            solver,
          }),
      },
    );
    // Counted from the event itself: `campaign.counters()` per job would add a pass over the
    // coverage map to every job the bench measures, work no campaign does on its own.
    let finished = 0;
    campaign.on('jobFinished', (entry) => {
      if (COMMITTED.has(entry.status) && ++finished >= jobBudget) void campaign.stop();
    });
    await campaign.done;
    // The store the campaign's default lease options (`auto`) gave its lease directory.
    const meta = JSON.parse(readFileSync(path.join(outDir, 'leases', 'work', 'lease-table.json'), 'utf8')) as { store?: string };
    const jobs = readJobLog(path.join(outDir, 'jobs.jsonl'));
    const committed = jobs.filter((j) => COMMITTED.has(j.status)).slice(0, jobBudget);
    const first = Math.min(...committed.map((j) => j.startMs));
    const last = Math.max(...committed.map((j) => j.endMs));
    const cpuAfter = cpuMs();
    const ran = Math.max(1, jobs.length);
    const spanMs = Math.max(1, last - first);
    const solverMs = jobs.reduce((sum, j) => sum + (j.solverMs ?? 0), 0);
    // Steady state: from the start of the first job after the warm-up ones to the last end.
    const byStart = [...committed].sort((a, b) => a.startMs - b.startMs);
    const warmup = Math.min(WARMUP_JOBS_PER_WORKER * workers, Math.max(0, byStart.length - 1));
    const steadyMs = byStart.length === 0 ? 1 : Math.max(1, last - byStart[warmup]!.startMs);
    return {
      jobsPerSec: committed.length / Math.max(0.001, spanMs / 1000),
      steadyJobsPerSec: (byStart.length - warmup) / Math.max(0.001, steadyMs / 1000),
      busyShare: solverMs / (workers * spanMs),
      duplicates: duplicateSolves(jobs),
      jobs: committed.length,
      selfCpuMsPerJob: (cpuAfter.self - cpuBefore.self) / ran,
      childCpuMsPerJob: (cpuAfter.children - cpuBefore.children) / ran,
      leaseStore: meta.store ?? 'files',
    };
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}
