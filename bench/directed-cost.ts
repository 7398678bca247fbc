/**
 * Bench `directed-cost`: what one answer costs in CPU (docs/solver.md, "Fork at the target" and "In-place answers").
 * On the same inputs it compares
 *   - `full`: plain SymCC under the preload library (untargeted): CPU per solving call;
 *   - `one-per-run`: one directed run per target with forking off (the one-solve rule): CPU per answer;
 *   - `directed`: directed runs of up to 64 targets as they run by default (the first answer in a
 *     forked child, the rest in place): CPU per answer;
 *   - `fork_every`: the same runs with SYMFENCE_PRELOAD_IN_PLACE=0 (every answer forked),
 *     interleaved with them.
 * The full run's CPU is given per solving call and per event QSYM actually solved (its pruning
 * skips the others; the library counts QSYM's solving steps as preload.negations).
 * CPU is the run's user + system time as the preload library reports it (`preload.cpuUs`: the
 * process and every child it reaped). An answer is a solving call that settled its branch (sat or
 * unsat). Targets are the open branches of each input's trace run.
 *
 * Always on the fake SymCC runtime's QSYM-like build (its "solving" is nearly free, so it shows
 * the per-process and per-fork overheads alone). With SYMFENCE_SYMCC set, also on a real target
 * compiled with that SymCC: cJSON when `--cjson <dir with cJSON.c>` is given, otherwise a
 * built-in many-branch tokenizer. Never pass/fail; the last line is one JSON object.
 *
 *   npm run bench -- directed-cost [--runs 3] [--one-per-run 16] [--cjson <dir>]
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseTelemetry, type Telemetry } from '../src/scheduler/telemetry.js';
import { preloadLibraryPath } from '../src/solver/preload-library.js';
import { buildFakeSymcc, fakeSymccUnavailable } from '../test/helpers/fake-symcc.js';
import { flag } from './_stats.js';

const runs = Number(flag('runs', '3'));
const onePerRunSample = Number(flag('one-per-run', '16'));
const cjsonDir = flag('cjson', '');
const preload = preloadLibraryPath();
const unavailable = preload === null ? 'preload library not built (npm run build:native)' : fakeSymccUnavailable();
if (unavailable) {
  console.error(`directed-cost: ${unavailable}`);
  console.log(JSON.stringify({ bench: 'directed-cost', skipped: unavailable }));
  process.exit(0);
}
const scratch = mkdtempSync(path.join(os.tmpdir(), 'symfence-bench-directed-cost-'));

interface Target {
  readonly name: string;
  readonly program: string;
  readonly argv: readonly string[];
  /** stdin when no argv names the input */
  readonly stdin: boolean;
  readonly inputs: readonly Buffer[];
}

let runCounter = 0;
function once(target: Target, input: Buffer, env: Record<string, string>): Telemetry {
  const dir = path.join(scratch, `run-${++runCounter}`);
  mkdirSync(path.join(dir, 'out'), { recursive: true });
  const inputPath = path.join(dir, 'input');
  writeFileSync(inputPath, input);
  const telemetryPath = path.join(dir, 'telemetry.json');
  const fullEnv: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    ...env,
    SYMCC_OUTPUT_DIR: path.join(dir, 'out'),
    SYMCC_TELEMETRY_OUT: telemetryPath,
    LD_PRELOAD: preload!,
  };
  const argv = target.argv.map((a) => (a === '@@' ? inputPath : a));
  const child = spawnSync(target.program, argv, { env: fullEnv, input: target.stdin ? input : undefined, stdio: [target.stdin ? 'pipe' : 'ignore', 'ignore', 'ignore'], timeout: 300_000 });
  if (child.error) throw child.error;
  const telemetry = existsSync(telemetryPath) ? parseTelemetry(readFileSync(telemetryPath, 'utf8')) : null;
  rmSync(dir, { recursive: true, force: true });
  if (telemetry === null) throw new Error(`${target.name}: no telemetry (exit ${child.status}, signal ${child.signal})`);
  return telemetry;
}

const cpuMs = (t: Telemetry) => (t.preload?.cpuUs ?? 0) / 1000;
const answers = (t: Telemetry) => t.counters.sat + t.counters.unsat;

function directedEnv(group: readonly bigint[], fork: boolean, dir: string, inPlace = true): Record<string, string> {
  const actions = path.join(dir, `actions-${++runCounter}`);
  writeFileSync(actions, group.slice(1).map((b) => `${b} solve\n`).join(''));
  return {
    SYMCC_TARGET_BRANCH: group[0]!.toString(),
    SYMCC_S2F_ACTIONS: actions,
    ...(fork ? {} : { SYMFENCE_PRELOAD_FORK: '0' }),
    ...(inPlace ? {} : { SYMFENCE_PRELOAD_IN_PLACE: '0' }),
  };
}

/** QSYM's solving steps in a run (Solver::negatePath, counted by the library); null when not reported. */
const negations = (t: Telemetry) => t.preload?.negations ?? null;

interface Arm {
  runs: number;
  targets: number;
  cpu_ms: number;
  answers: number;
  unknown: number;
  cpu_ms_per_answer: number;
}

interface Figures {
  target: string;
  inputs: number;
  /** `solved`: the calls QSYM actually solved (its pruning skips the rest); null when not reported. */
  full: { cpu_ms: number; queries: number; solved: number | null; answers: number; cpu_ms_per_query: number; cpu_ms_per_solved: number; cpu_ms_per_answer: number };
  one_per_run: { runs: number; cpu_ms: number; answers: number; cpu_ms_per_answer: number };
  /** The default: the first answer of a run forked, the rest in place (docs/solver.md, "In-place answers"). */
  directed: Arm & { in_place: number };
  /** Every answer in a forked child (SYMFENCE_PRELOAD_IN_PLACE=0). */
  fork_every: Arm;
  ratio_directed_vs_full_per_query: number;
  ratio_directed_vs_full_per_solved: number;
  ratio_directed_vs_fork_every: number;
  ratio_fork_every_vs_full_per_query: number;
  ratio_one_per_run_vs_full_per_query: number;
}

function measure(target: Target): Figures {
  let fullCpu = 0;
  let fullQueries = 0;
  let fullSolved: number | null = 0;
  let fullAnswers = 0;
  let oneCpu = 0;
  let oneAnswers = 0;
  let oneRuns = 0;
  const arm = (): Arm & { in_place: number } => ({ runs: 0, targets: 0, cpu_ms: 0, answers: 0, unknown: 0, cpu_ms_per_answer: NaN, in_place: 0 });
  const directed = arm();
  const forkEvery = arm();
  const median = <T extends { cpu: number }>(xs: T[]) => xs.sort((a, b) => a.cpu - b.cpu)[xs.length >> 1]!;
  for (const input of target.inputs) {
    const trace = once(target, input, { SYMFENCE_TRACE_ONLY: '1' });
    const open = trace.openBranches;
    const groups: bigint[][] = [];
    for (let i = 0; i < open.length; i += 64) groups.push(open.slice(i, i + 64));
    const groupsOnce = (inPlace: boolean) => {
      let cpu = 0;
      let answered = 0;
      let unknown = 0;
      let inPlaceAnswers = 0;
      for (const group of groups) {
        const t = once(target, input, directedEnv(group, true, scratch, inPlace));
        cpu += cpuMs(t);
        answered += answers(t);
        unknown += t.counters.unknown;
        inPlaceAnswers += t.preload?.inPlace ?? 0;
      }
      return { cpu, answered, unknown, inPlaceAnswers };
    };
    // Medians over `runs` of each run shape, interleaved.
    const full: { cpu: number; t: Telemetry }[] = [];
    const inPlaceRuns: ReturnType<typeof groupsOnce>[] = [];
    const forkRuns: ReturnType<typeof groupsOnce>[] = [];
    for (let r = 0; r < runs; r++) {
      const t = once(target, input, {});
      full.push({ cpu: cpuMs(t), t });
      inPlaceRuns.push(groupsOnce(true));
      forkRuns.push(groupsOnce(false));
    }
    const f = median(full);
    fullCpu += f.cpu;
    fullQueries += f.t.counters.queries;
    const solvedHere = negations(f.t);
    fullSolved = fullSolved === null || solvedHere === null ? null : fullSolved + solvedHere;
    fullAnswers += answers(f.t);
    for (const [into, all] of [
      [directed, inPlaceRuns],
      [forkEvery, forkRuns],
    ] as const) {
      const m = median([...all]);
      into.cpu_ms += m.cpu;
      into.answers += m.answered;
      into.unknown += m.unknown;
      into.in_place += m.inPlaceAnswers;
      into.runs += groups.length;
      into.targets += open.length;
    }
    // One target per run: a sample spread over the open branches (every one would take minutes on a real target).
    const step = Math.max(1, Math.floor(open.length / onePerRunSample));
    for (let i = 0; i < open.length && oneRuns < onePerRunSample * target.inputs.length; i += step) {
      const t = once(target, input, directedEnv([open[i]!], false, scratch));
      oneCpu += cpuMs(t);
      oneAnswers += answers(t);
      oneRuns++;
    }
  }
  const per = (cpu: number, n: number | null) => (n === null || n === 0 ? NaN : cpu / n);
  const fullPerQuery = per(fullCpu, fullQueries);
  const fullPerSolved = per(fullCpu, fullSolved);
  directed.cpu_ms_per_answer = per(directed.cpu_ms, directed.answers);
  forkEvery.cpu_ms_per_answer = per(forkEvery.cpu_ms, forkEvery.answers);
  const onePerAnswer = per(oneCpu, oneAnswers);
  const { in_place: _unused, ...forkArm } = forkEvery;
  return {
    target: target.name,
    inputs: target.inputs.length,
    full: {
      cpu_ms: fullCpu,
      queries: fullQueries,
      solved: fullSolved,
      answers: fullAnswers,
      cpu_ms_per_query: fullPerQuery,
      cpu_ms_per_solved: fullPerSolved,
      cpu_ms_per_answer: per(fullCpu, fullAnswers),
    },
    one_per_run: { runs: oneRuns, cpu_ms: oneCpu, answers: oneAnswers, cpu_ms_per_answer: onePerAnswer },
    directed,
    fork_every: forkArm,
    ratio_directed_vs_full_per_query: directed.cpu_ms_per_answer / fullPerQuery,
    ratio_directed_vs_full_per_solved: directed.cpu_ms_per_answer / fullPerSolved,
    ratio_directed_vs_fork_every: directed.cpu_ms_per_answer / forkEvery.cpu_ms_per_answer,
    ratio_fork_every_vs_full_per_query: forkEvery.cpu_ms_per_answer / fullPerQuery,
    ratio_one_per_run_vs_full_per_query: onePerAnswer / fullPerQuery,
  };
}

function print(f: Figures): void {
  const n = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : 'n/a');
  const d = f.directed;
  const e = f.fork_every;
  console.log(`${f.target} (${f.inputs} inputs)`);
  console.log(
    `  full          ${n(f.full.cpu_ms)} ms CPU, ${f.full.queries} solving calls, ${f.full.solved ?? 'n/a'} solved by QSYM (${f.full.answers} sat/unsat): ${n(f.full.cpu_ms_per_query)} ms per call, ${n(f.full.cpu_ms_per_solved)} ms per event solved`,
  );
  console.log(`  one per run   ${f.one_per_run.runs} runs, ${n(f.one_per_run.cpu_ms)} ms CPU, ${f.one_per_run.answers} answers: ${n(f.one_per_run.cpu_ms_per_answer)} ms per answer`);
  console.log(`  directed      ${d.runs} runs for ${d.targets} targets, ${n(d.cpu_ms)} ms CPU, ${d.answers} answers (${d.in_place} in place, ${d.unknown} unknown): ${n(d.cpu_ms_per_answer)} ms per answer`);
  console.log(`  fork every    ${e.runs} runs, ${n(e.cpu_ms)} ms CPU, ${e.answers} answers (${e.unknown} unknown): ${n(e.cpu_ms_per_answer)} ms per answer`);
  console.log(
    `  directed / full: per call ${n(f.ratio_directed_vs_full_per_query)}, per event solved ${n(f.ratio_directed_vs_full_per_solved)}; directed / fork every ${n(f.ratio_directed_vs_fork_every)}; fork every / full per call ${n(f.ratio_fork_every_vs_full_per_query)}; one-per-run / full per call ${n(f.ratio_one_per_run_vs_full_per_query)}`,
  );
}

function loopInput(length: number, seed: number): Buffer {
  let x = seed;
  let text = 'MZ!A';
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    text += 'xyq'[(x >> 8) % 3];
  }
  return Buffer.from(text, 'latin1');
}

const fake = buildFakeSymcc();
const results: Record<string, Figures> = {};
results.fake = measure({ name: 'fake SymCC runtime (QSYM-like)', program: fake.qsymProgram, argv: ['@@'], stdin: false, inputs: [loopInput(200, 1), loopInput(400, 2)] });
print(results.fake);

/** A tokenizer with many distinct branch sites, for when no real library source is given. */
const TOKENIZER = `#include <stdio.h>
#include <string.h>
#include <unistd.h>
static int kind(unsigned char c) {
  if (c >= '0' && c <= '9') return 1;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return 2;
  switch (c) { case '{': return 3; case '}': return 4; case '[': return 5; case ']': return 6; case ':': return 7; case ',': return 8; case '"': return 9; case ' ': case '\\n': case '\\t': return 10; default: return 0; }
}
int main(void) {
  unsigned char b[256]; ssize_t n = read(0, b, sizeof b); if (n <= 0) return 0;
  int depth = 0, tokens = 0, keys = 0;
  for (ssize_t i = 0; i < n; i++) {
    int k = kind(b[i]);
    if (k == 3 || k == 5) depth++; else if (k == 4 || k == 6) depth--; else if (k == 7) keys++;
    if (k != 10) tokens++;
    if (depth > 8) return 1;
  }
  if (keys > 2 && depth == 0 && tokens > 10) puts("object");
  return 0;
}
`;

const CJSON_HARNESS = `#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "cJSON.h"
int main(void) {
  char buf[4096]; ssize_t n = read(0, buf, sizeof buf - 1); if (n <= 0) return 0; buf[n] = 0;
  cJSON *json = cJSON_Parse(buf);
  if (json) { char *out = cJSON_PrintUnformatted(json); free(out); cJSON_Delete(json); }
  return 0;
}
`;

const symcc = process.env.SYMFENCE_SYMCC;
if (symcc) {
  const build = path.join(scratch, 'real');
  mkdirSync(build);
  let target: Target;
  const seeds = ['{"a":1,"b":[true,false,null],"c":"x"}', '[1,2.5,-3e2,{"k":"v"}]', '{"name":"symfence","n":[0,1,2],"ok":true}'].map((s) => Buffer.from(s));
  if (cjsonDir) {
    writeFileSync(path.join(build, 'harness.c'), CJSON_HARNESS);
    execFileSync(symcc, ['-O1', '-I', cjsonDir, '-o', path.join(build, 'cjson'), path.join(build, 'harness.c'), path.join(cjsonDir, 'cJSON.c'), '-lm'], { stdio: 'pipe' });
    target = { name: 'cJSON (cJSON_Parse + print), real SymCC', program: path.join(build, 'cjson'), argv: [], stdin: true, inputs: seeds };
  } else {
    writeFileSync(path.join(build, 'tok.c'), TOKENIZER);
    execFileSync(symcc, ['-O0', '-o', path.join(build, 'tok'), path.join(build, 'tok.c')], { stdio: 'pipe' });
    target = { name: 'built-in tokenizer, real SymCC', program: path.join(build, 'tok'), argv: [], stdin: true, inputs: seeds };
  }
  results.real = measure(target);
  print(results.real);
}

rmSync(scratch, { recursive: true, force: true });
const headline = results.real ?? results.fake;
console.log(
  JSON.stringify({
    bench: 'directed-cost',
    target: headline.target,
    ratio_directed_vs_full_per_query: headline.ratio_directed_vs_full_per_query,
    ratio_directed_vs_full_per_solved: headline.ratio_directed_vs_full_per_solved,
    ratio_directed_vs_fork_every: headline.ratio_directed_vs_fork_every,
    ratio_fork_every_vs_full_per_query: headline.ratio_fork_every_vs_full_per_query,
    ratio_one_per_run_vs_full_per_query: headline.ratio_one_per_run_vs_full_per_query,
    results,
  }),
);

