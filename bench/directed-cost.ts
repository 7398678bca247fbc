/**
 * Bench `directed-cost`: what one answer costs in CPU (docs/solver.md, "Fork at the target").
 * On the same inputs it compares
 *   - `full`: plain SymCC under the preload library (untargeted): CPU per solving call;
 *   - `one-per-run`: one directed run per target with forking off (the one-solve rule): CPU per answer;
 *   - `fork`: directed runs of up to 64 targets that fork at each target: CPU per answer;
 *   - `fork_no_huge`: the same runs with SYMFENCE_PRELOAD_HUGE=0 (no huge-page backing before the
 *     second fork), interleaved with them: what that step saves.
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
import { flag, median } from './_stats.js';

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

function directedEnv(group: readonly bigint[], fork: boolean, dir: string, huge = true): Record<string, string> {
  const actions = path.join(dir, `actions-${++runCounter}`);
  writeFileSync(actions, group.slice(1).map((b) => `${b} solve\n`).join(''));
  return {
    SYMCC_TARGET_BRANCH: group[0]!.toString(),
    SYMCC_S2F_ACTIONS: actions,
    ...(fork ? {} : { SYMFENCE_PRELOAD_FORK: '0' }),
    ...(huge ? {} : { SYMFENCE_PRELOAD_HUGE: '0' }),
  };
}

interface Figures {
  target: string;
  inputs: number;
  full: { cpu_ms: number; queries: number; answers: number; cpu_ms_per_query: number; cpu_ms_per_answer: number };
  one_per_run: { runs: number; cpu_ms: number; answers: number; cpu_ms_per_answer: number };
  fork: { runs: number; targets: number; cpu_ms: number; answers: number; unknown: number; cpu_ms_per_answer: number };
  fork_no_huge: { cpu_ms: number; answers: number; cpu_ms_per_answer: number };
  ratio_fork_vs_full_per_query: number;
  ratio_fork_vs_fork_no_huge: number;
  ratio_fork_vs_full_per_answer: number;
  ratio_one_per_run_vs_full_per_query: number;
}

function measure(target: Target): Figures {
  let fullCpu = 0;
  let fullQueries = 0;
  let fullAnswers = 0;
  let oneCpu = 0;
  let oneAnswers = 0;
  let oneRuns = 0;
  let forkCpu = 0;
  let forkAnswers = 0;
  let forkUnknown = 0;
  let forkRuns = 0;
  let forkTargets = 0;
  let plainCpu = 0;
  let plainAnswers = 0;
  for (const input of target.inputs) {
    // Medians over `runs` of each run shape, interleaved.
    const full: Telemetry[] = [];
    const forked: { cpu: number; answers: number; unknown: number }[] = [];
    const plain: { cpu: number; answers: number }[] = [];
    const trace = once(target, input, { SYMFENCE_TRACE_ONLY: '1' });
    const open = trace.openBranches;
    const groups: bigint[][] = [];
    for (let i = 0; i < open.length; i += 64) groups.push(open.slice(i, i + 64));
    for (let r = 0; r < runs; r++) {
      full.push(once(target, input, {}));
      let cpu = 0;
      let got = 0;
      let unknown = 0;
      for (const group of groups) {
        const t = once(target, input, directedEnv(group, true, scratch));
        cpu += cpuMs(t);
        got += answers(t);
        unknown += t.counters.unknown;
      }
      forked.push({ cpu, answers: got, unknown });
      let plainRunCpu = 0;
      let plainGot = 0;
      for (const group of groups) {
        const t = once(target, input, directedEnv(group, true, scratch, false));
        plainRunCpu += cpuMs(t);
        plainGot += answers(t);
      }
      plain.push({ cpu: plainRunCpu, answers: plainGot });
    }
    const fullMedian = full.map((t) => ({ cpu: cpuMs(t), t })).sort((a, b) => a.cpu - b.cpu)[full.length >> 1]!;
    fullCpu += fullMedian.cpu;
    fullQueries += fullMedian.t.counters.queries;
    fullAnswers += answers(fullMedian.t);
    const forkMedian = forked.sort((a, b) => a.cpu - b.cpu)[forked.length >> 1]!;
    forkCpu += forkMedian.cpu;
    forkAnswers += forkMedian.answers;
    forkUnknown += forkMedian.unknown;
    forkRuns += groups.length;
    forkTargets += open.length;
    const plainMedian = plain.sort((a, b) => a.cpu - b.cpu)[plain.length >> 1]!;
    plainCpu += plainMedian.cpu;
    plainAnswers += plainMedian.answers;
    // One target per run: a sample spread over the open branches (every one would take minutes on a real target).
    const step = Math.max(1, Math.floor(open.length / onePerRunSample));
    for (let i = 0; i < open.length && oneRuns < onePerRunSample * target.inputs.length; i += step) {
      const t = once(target, input, directedEnv([open[i]!], false, scratch));
      oneCpu += cpuMs(t);
      oneAnswers += answers(t);
      oneRuns++;
    }
  }
  const per = (cpu: number, n: number) => (n === 0 ? NaN : cpu / n);
  const fullPerQuery = per(fullCpu, fullQueries);
  const fullPerAnswer = per(fullCpu, fullAnswers);
  const forkPerAnswer = per(forkCpu, forkAnswers);
  const onePerAnswer = per(oneCpu, oneAnswers);
  const plainPerAnswer = per(plainCpu, plainAnswers);
  return {
    target: target.name,
    inputs: target.inputs.length,
    full: { cpu_ms: fullCpu, queries: fullQueries, answers: fullAnswers, cpu_ms_per_query: fullPerQuery, cpu_ms_per_answer: fullPerAnswer },
    one_per_run: { runs: oneRuns, cpu_ms: oneCpu, answers: oneAnswers, cpu_ms_per_answer: onePerAnswer },
    fork: { runs: forkRuns, targets: forkTargets, cpu_ms: forkCpu, answers: forkAnswers, unknown: forkUnknown, cpu_ms_per_answer: forkPerAnswer },
    fork_no_huge: { cpu_ms: plainCpu, answers: plainAnswers, cpu_ms_per_answer: plainPerAnswer },
    ratio_fork_vs_full_per_query: forkPerAnswer / fullPerQuery,
    ratio_fork_vs_fork_no_huge: forkPerAnswer / plainPerAnswer,
    ratio_fork_vs_full_per_answer: forkPerAnswer / fullPerAnswer,
    ratio_one_per_run_vs_full_per_query: onePerAnswer / fullPerQuery,
  };
}

function print(f: Figures): void {
  const n = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : 'n/a');
  console.log(`${f.target} (${f.inputs} inputs)`);
  console.log(`  full          ${n(f.full.cpu_ms)} ms CPU, ${f.full.queries} solving calls (${f.full.answers} sat/unsat): ${n(f.full.cpu_ms_per_query)} ms per call, ${n(f.full.cpu_ms_per_answer)} ms per answer`);
  console.log(`  one per run   ${f.one_per_run.runs} runs, ${n(f.one_per_run.cpu_ms)} ms CPU, ${f.one_per_run.answers} answers: ${n(f.one_per_run.cpu_ms_per_answer)} ms per answer`);
  console.log(`  fork          ${f.fork.runs} runs for ${f.fork.targets} targets, ${n(f.fork.cpu_ms)} ms CPU, ${f.fork.answers} answers (${f.fork.unknown} unknown): ${n(f.fork.cpu_ms_per_answer)} ms per answer`);
  console.log(`  fork, no huge  ${n(f.fork_no_huge.cpu_ms)} ms CPU, ${f.fork_no_huge.answers} answers: ${n(f.fork_no_huge.cpu_ms_per_answer)} ms per answer (fork / fork without huge pages ${n(f.ratio_fork_vs_fork_no_huge)})`);
  console.log(`  fork / full per call ${n(f.ratio_fork_vs_full_per_query)}, per answer ${n(f.ratio_fork_vs_full_per_answer)}; one-per-run / full per call ${n(f.ratio_one_per_run_vs_full_per_query)}`);
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
    ratio_fork_vs_full_per_query: headline.ratio_fork_vs_full_per_query,
    ratio_fork_vs_full_per_answer: headline.ratio_fork_vs_full_per_answer,
    ratio_one_per_run_vs_full_per_query: headline.ratio_one_per_run_vs_full_per_query,
    ratio_fork_vs_fork_no_huge: headline.ratio_fork_vs_fork_no_huge,
    results,
  }),
);

