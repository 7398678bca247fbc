/**
 * Spawning the built CLI (`dist/src/cli/main.js`) as a child process, and waiting on files the
 * child writes (the handshake: no sleeps for synchronisation, only polling of the child's output).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { afterEach } from 'vitest';
import path from 'node:path';
import { builtFile } from '../../src/util/paths.js';

export const CLI = builtFile('src/cli/main.js');
export const REFERENCE_SOLVER = builtFile('src/reference/reference-solver.js');

export interface CliRun {
  readonly child: ChildProcess;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
  /** What the child has written to stderr so far. */
  stderrSoFar(): string;
}

export function runCliProcess(args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): CliRun {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += String(d)));
  child.stderr!.on('data', (d) => (stderr += String(d)));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { child, exit, stderrSoFar: () => stderr };
}

/**
 * Polls `check` until it returns a value (not undefined) or `timeoutMs` passes. On a timeout the
 * error carries what `diagnose` says (the children's stats, logs), so a CI failure can be read.
 */
export async function waitFor<T>(check: () => T | undefined, timeoutMs: number, what: string, diagnose?: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${diagnose === undefined ? '' : `\n${diagnose()}`}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What a campaign's out-dir says of it: its stats.json counters and the last lines of jobs.jsonl. */
export function campaignDiagnosis(instanceDir: string, stderr = ''): string {
  const tail = (file: string, n: number): string => (existsSync(file) ? readFileSync(file, 'utf8').trimEnd().split('\n').slice(-n).join('\n') : '(none)');
  const stats = readJsonIfExists(path.join(instanceDir, 'stats.json'));
  return [
    `stats.json: ${stats === undefined ? '(none)' : JSON.stringify(stats).slice(0, 6000)}`,
    `jobs.jsonl (last 5):\n${tail(path.join(instanceDir, 'jobs.jsonl'), 5)}`,
    `stderr (last 20 lines):\n${stderr.trimEnd().split('\n').slice(-20).join('\n')}`,
  ].join('\n');
}

export function lastJsonLine(stdout: string): Record<string, unknown> {
  const lines = stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]!) as Record<string, unknown>;
}

/** A fake AFL++ output dir: `<out>/main/queue/id:…,orig:…` seeds and a fuzzer_stats command line. */
export function fakeAflOut(root: string, seeds: readonly string[], targetCommand: string): string {
  const out = path.join(root, 'out');
  mkdirSync(path.join(out, 'main', 'queue'), { recursive: true });
  seeds.forEach((seed, i) => writeFileSync(path.join(out, 'main', 'queue', `id:${String(i).padStart(6, '0')},time:0,execs:0,orig:seed${i}`), seed));
  writeFileSync(path.join(out, 'main', 'fuzzer_stats'), `start_time        : 0\ncommand_line      : afl-fuzz -i in -o out -M main -- ${targetCommand}\n`);
  return out;
}

export function readJsonIfExists(file: string): Record<string, unknown> | undefined {
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/** jobs.jsonl statuses of a job whose result was committed. */
export const COMMITTED_STATUSES: ReadonlySet<string> = new Set(['ok', 'timeout', 'crash', 'error']);

/**
 * Temp directories and child processes of a test file, cleaned after every test: children still
 * running are SIGKILLed, directories removed. Call once at the top of the file.
 */
export function cleanedAfterEach(): { dirs: string[]; children: Array<{ kill(signal: NodeJS.Signals): boolean; exitCode: number | null }> } {
  const dirs: string[] = [];
  const children: Array<{ kill(signal: NodeJS.Signals): boolean; exitCode: number | null }> = [];
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  return { dirs, children };
}
