/**
 * soak: one long campaign on the reference solver (demo maze, `--seeds` distinct seeds, every core),
 * sampled as it runs, to show that memory and per-job overhead stay flat. Not a CI test: it runs
 * for `--minutes` (default 30).
 *
 *   npm run bench -- soak [--minutes 30] [--seeds 10000] [--solve-cpu-ms 0] [--sample-s 30] [--workers 0]
 *
 * The campaign must not run out of work before the end: each seed is one job, so 10,000 seeds
 * last 30 minutes on two workers at about 300 ms per job (`--solve-cpu-ms 300`). `idle_samples`
 * counts samples in which no job completed; above 0 the figures describe an idle coordinator.
 *
 * Every `--sample-s` seconds a row: the coordinator's RSS, its main thread's live V8 heap (used
 * bytes right after a full collection, so garbage waiting for the collector does not count), external + array buffers,
 * jobs completed, and over the interval the coordinator's own CPU per job (this process, all its
 * threads: main, I/O and solver threads; the solver processes are children and not counted). At the
 * end the campaign's jobs.jsonl gives each tenth of the run its median per-run overhead (the slot
 * time that is not the solver process: `spawnMs + collectMs` plus the gap before the run).
 *
 * Flatness is judged from the second tenth on (the first holds start-up: seed import, JIT): the
 * last JSON line has the first and last sampled RSS and heap after start-up and their ratio, and
 * the last tenth's overhead and CPU per job over the second tenth's.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { buildCampaignComponents } from '../src/coordinator/adapters/campaign-components.js';
import { DEMO_MAZE_SPEC, mazeClassifier } from '../src/coordinator/adapters/demo-campaign.js';
import { Campaign } from '../src/coordinator/campaign.js';
import { DEMO_MAZE } from '../src/reference/demo-maze.js';
import { referenceSolverCommand } from '../src/reference/reference-commands.js';
import { readJobLog } from '../src/telemetry/job-log.js';
import { mazeSeeds } from './_maze-seeds.js';
import { median } from './_stats.js';

function intFlag(name: string, fallback: number, min: number): number {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value < min) {
    console.error(`bench soak: --${name} expects an integer of at least ${min}, received ${JSON.stringify(process.argv[at + 1])}`);
    process.exit(2);
  }
  return value;
}

const minutes = intFlag('minutes', 30, 1);
const seedCount = intFlag('seeds', 10_000, 1);
const solveCpuMs = intFlag('solve-cpu-ms', 0, 0);
const sampleSec = intFlag('sample-s', 30, 1);
const workers = intFlag('workers', 0, 0) || os.availableParallelism();
if (solveCpuMs > 0) process.env.SYMFENCE_REFSOLVER_SOLVE_CPU_MS = String(solveCpuMs);


/** CPU ms of this process, all threads (/proc/self/stat utime + stime; USER_HZ 100). */
function selfCpuMs(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

interface Sample {
  readonly atSec: number;
  readonly rssMb: number;
  readonly heapMb: number;
  readonly externalMb: number;
  readonly jobs: number;
  readonly cpuMsPerJob: number | null;
}

const mb = (bytes: number): number => Math.round((bytes / 1048576) * 10) / 10;
const outDir = mkdtempSync(path.join(os.tmpdir(), 'symfence-bench-soak-'));
try {
  const seedDir = path.join(outDir, 'seeds');
  mkdirSync(seedDir, { recursive: true });
  const seeds = mazeSeeds(seedCount, 0x2545f491).map((bytes, i) => {
    const file = path.join(seedDir, `seed-${i}`);
    writeFileSync(file, bytes);
    return { path: file, sha256: createHash('sha256').update(bytes).digest('hex'), depth: 0, origin: 'seed' as const };
  });
  console.log(`soak: demo maze, ${seedCount} seeds, ${workers} workers, ${minutes} min, solve cpu ${solveCpuMs} ms per job, sample every ${sampleSec} s`);
  const campaign = await Campaign.start(
    { outDir, workers, name: 'soak', statsIntervalMs: '5s', durationMs: `${minutes}m` },
    {
      components: (context) =>
        buildCampaignComponents(context, {
          command: referenceSolverCommand(DEMO_MAZE_SPEC, 'file'),
          classify: (bitmap) => mazeClassifier(DEMO_MAZE, bitmap),
          initialSeeds: seeds,
        }),
    },
  );
  const startedMs = performance.now();
  const samples: Sample[] = [];
  let last = { jobs: 0, cpu: selfCpuMs() };
  // A full collection before each sample: `heapUsed` then counts what the coordinator keeps, not
  // the garbage a sample happens to find (which alone moved the figure by half between samples).
  v8.setFlagsFromString('--expose-gc');
  const collect = vm.runInNewContext('gc') as () => void;
  const sample = (): void => {
    const c = campaign.counters();
    const jobs = c.jobsOk + c.jobsCrash + c.jobsTimeout + c.jobsError;
    const cpu = selfCpuMs();
    collect();
    const memory = process.memoryUsage();
    const row: Sample = {
      atSec: Math.round((performance.now() - startedMs) / 1000),
      rssMb: mb(memory.rss),
      heapMb: mb(memory.heapUsed),
      externalMb: mb(memory.external + memory.arrayBuffers),
      jobs,
      cpuMsPerJob: jobs > last.jobs ? Math.round(((cpu - last.cpu) / (jobs - last.jobs)) * 100) / 100 : null,
    };
    last = { jobs, cpu };
    samples.push(row);
    console.log(`t ${String(row.atSec).padStart(5)} s  rss ${row.rssMb} MB  heap ${row.heapMb} MB  external ${row.externalMb} MB  jobs ${jobs}  coordinator cpu/job ${row.cpuMsPerJob ?? '-'} ms`);
  };
  const timer = setInterval(sample, sampleSec * 1000);
  await campaign.done;
  clearInterval(timer);
  sample();

  const jobs = readJobLog(path.join(outDir, 'jobs.jsonl')).filter((j) => j.solverMs !== undefined);
  const t0 = Math.min(...jobs.map((j) => j.startMs));
  const t1 = Math.max(...jobs.map((j) => j.startMs));
  const tenths = Array.from({ length: 10 }, () => [] as number[]);
  for (const j of jobs) {
    const overhead = (j.spawnMs ?? 0) + (j.collectMs ?? 0) + (j.gapMs !== undefined ? j.gapMs - (j.spawnMs ?? 0) : 0);
    tenths[Math.min(9, Math.floor(((j.startMs - t0) / Math.max(1, t1 - t0)) * 10))]!.push(overhead);
  }
  const overheads = tenths.map((xs) => (xs.length > 0 ? Math.round(median(xs) * 100) / 100 : null));
  tenths.forEach((xs, i) => console.log(`tenth ${i + 1}: ${xs.length} runs, median per-run overhead ${overheads[i] ?? '-'} ms`));
  const settled = samples.filter((s) => s.atSec >= (minutes * 60) / 10);
  const first = settled[0] ?? samples[0]!;
  const lastSample = settled.at(-1) ?? samples.at(-1)!;
  const cpuOf = (rows: readonly Sample[]): number | null => {
    const xs = rows.map((s) => s.cpuMsPerJob).filter((x): x is number => x !== null);
    return xs.length > 0 ? median(xs) : null;
  };
  // A soak that ran out of work measures an idle coordinator, not per-job overhead: say so.
  // Samples of the stop itself (the last interval and the one after `done`) do not count.
  const idle = samples.filter((s, i) => i > 0 && s.atSec <= minutes * 60 - sampleSec && s.jobs === samples[i - 1]!.jobs);
  const idleSamples = idle.length;
  if (idleSamples > 0) {
    const dryAt = idle[0]!.atSec;
    console.log(`warning: no job completed in the interval ending at ${dryAt} s (${idleSamples} such samples): the campaign ran out of work or a job outlasts --sample-s; give it more --seeds, a larger --solve-cpu-ms or a longer --sample-s`);
  }
  const tenth = Math.max(1, Math.floor(settled.length / 10));
  const cpuSecond = cpuOf(settled.slice(0, tenth));
  const cpuLast = cpuOf(settled.slice(-tenth));
  const ratio = (a: number | null | undefined, b: number | null | undefined): number | null => (a != null && b != null && b > 0 ? Math.round((a / b) * 1000) / 1000 : null);
  console.log(
    JSON.stringify({
      bench: 'soak',
      minutes,
      seeds: seedCount,
      workers,
      solve_cpu_ms: solveCpuMs,
      jobs: jobs.length,
      rss_mb_first: first.rssMb,
      rss_mb_last: lastSample.rssMb,
      rss_ratio: ratio(lastSample.rssMb, first.rssMb),
      rss_mb_max: Math.max(...settled.map((s) => s.rssMb)),
      heap_mb_first: first.heapMb,
      heap_mb_last: lastSample.heapMb,
      heap_ratio: ratio(lastSample.heapMb, first.heapMb),
      overhead_ms_second_tenth: overheads[1],
      overhead_ms_last_tenth: overheads[9],
      overhead_ratio: ratio(overheads[9], overheads[1]),
      coordinator_cpu_ms_per_job_second_tenth: cpuSecond,
      coordinator_cpu_ms_per_job_last_tenth: cpuLast,
      cpu_per_job_ratio: ratio(cpuLast, cpuSecond),
      idle_samples: idleSamples,
      loadavg_1m: Number(os.loadavg()[0]!.toFixed(2)),
    }),
  );
} finally {
  rmSync(outDir, { recursive: true, force: true });
}
