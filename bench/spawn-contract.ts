/**
 * Bench `spawn-contract`: where the CPU of one solver run goes, piece by piece, on one thread.
 * Each variant spawns `/bin/true` `runs` times at `concurrency` and adds one more piece of the
 * SymCC contract (docs/solver.md "The SymCC contract") to the previous variant; the column that matters is this process's CPU
 * (user + system) per run, because wall time on the shared development machine is mostly other
 * tenants' load. The baseline is the first row (bare `spawn`, stdio ignored); every other row is
 * reported as the CPU it adds over the row before it. Variants are interleaved round by round and
 * the medians are reported. Never pass/fail.
 *
 *   npm run bench -- spawn-contract [--runs 300] [--rounds 5] [--concurrency 2]
 */
import { spawn, type StdioOptions } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultScratchParent } from '../src/solver/solver-pool.js';

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}

const runs = Number(flag('runs', '300'));
const rounds = Number(flag('rounds', '5'));
const concurrency = Number(flag('concurrency', '2'));
const scratch = mkdtempSync(path.join(defaultScratchParent(), 'symfence-bench-contract-'));
const env = { ...process.env };
let runCounter = 0;

interface Variant {
  readonly name: string;
  readonly detached: boolean;
  readonly stderrPipe: boolean;
  readonly groupKill: boolean;
  readonly runDir: boolean;
}

const VARIANTS: readonly Variant[] = [
  { name: 'spawn, stdio ignore', detached: false, stderrPipe: false, groupKill: false, runDir: false },
  { name: '+ detached (own process group)', detached: true, stderrPipe: false, groupKill: false, runDir: false },
  { name: '+ stderr pipe, wait for close', detached: true, stderrPipe: true, groupKill: false, runDir: false },
  { name: '+ final group SIGKILL (ESRCH)', detached: true, stderrPipe: true, groupKill: true, runDir: false },
  { name: '+ run dir, output dir, stdin file', detached: true, stderrPipe: true, groupKill: true, runDir: true },
];

function killGroupQuietly(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // ESRCH: the group is already empty.
  }
}

function one(variant: Variant): Promise<void> {
  let stdin: number | 'ignore' = 'ignore';
  let dir: string | null = null;
  if (variant.runDir) {
    dir = path.join(scratch, `run-${++runCounter}`);
    mkdirSync(dir);
    mkdirSync(path.join(dir, 'output'));
    const stdinPath = path.join(dir, 'stdin');
    writeFileSync(stdinPath, new Uint8Array(16));
    stdin = openSync(stdinPath, 'r');
    unlinkSync(stdinPath);
  }
  const stdio: StdioOptions = [stdin, 'ignore', variant.stderrPipe ? 'pipe' : 'ignore'];
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/true', [], { stdio, env, detached: variant.detached, cwd: dir ?? undefined });
    child.once('error', reject);
    child.stderr?.on('data', () => {});
    child.once('exit', () => {
      if (variant.groupKill && child.pid !== undefined) killGroupQuietly(child.pid);
    });
    child.once(variant.stderrPipe ? 'close' : 'exit', () => {
      if (typeof stdin === 'number') closeSync(stdin);
      if (dir !== null) {
        rmdirSync(path.join(dir, 'output'));
        rmdirSync(dir);
      }
      resolve();
    });
  });
}

async function measure(variant: Variant): Promise<{ cpuUsPerRun: number; runsPerSec: number }> {
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < runs) {
        next++;
        await one(variant);
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  return { cpuUsPerRun: (cpu.user + cpu.system) / runs, runsPerSec: (runs / (performance.now() - started)) * 1000 };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

try {
  for (const variant of VARIANTS) await measure(variant); // warm-up
  const cpu = VARIANTS.map(() => [] as number[]);
  const rate = VARIANTS.map(() => [] as number[]);
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? VARIANTS.map((_, i) => i) : VARIANTS.map((_, i) => VARIANTS.length - 1 - i);
    for (const i of order) {
      const m = await measure(VARIANTS[i]!);
      cpu[i]!.push(m.cpuUsPerRun);
      rate[i]!.push(m.runsPerSec);
    }
  }
  const rows = VARIANTS.map((variant, i) => ({
    variant: variant.name,
    cpu_us_per_run: Math.round(median(cpu[i]!)),
    runs_per_sec: Math.round(median(rate[i]!)),
  }));
  rows.forEach((row, i) => {
    const added = i === 0 ? '' : `  (+${row.cpu_us_per_run - rows[i - 1]!.cpu_us_per_run} µs)`;
    console.log(`${row.variant.padEnd(36)} cpu/run ${String(row.cpu_us_per_run).padStart(6)} µs${added}  ${row.runs_per_sec} runs/s`);
  });
  const full = rows.at(-1)!.cpu_us_per_run;
  const bare = rows[0]!.cpu_us_per_run;
  console.log(
    JSON.stringify({
      bench: 'spawn-contract',
      runs,
      rounds,
      concurrency,
      loadavg_1m: Number(os.loadavg()[0]!.toFixed(2)),
      contract_over_bare_cpu_ratio: Number((full / bare).toFixed(3)),
      rows,
    }),
  );
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
