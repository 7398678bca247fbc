/**
 * Bench `first-run`: the two first-run strategies of `symfence run` on the same queue —
 * `full` (an input's first run solves every branch, plain SymCC) against `trace` (a trace-only
 * first run, then directed runs at the branches no run has answered; docs/solver.md, "Directed
 * campaigns on stock SymCC"). Each campaign is the real CLI beside a fake AFL++ instance: the
 * fake SymCC program (QSYM-like build, through the preload library) as the solver, and the same
 * program built with afl-cc for afl-showmap triage. Rounds alternate the strategies.
 *
 * Reported per strategy (medians over rounds): solver queries, generated inputs, interesting
 * inputs, edges covered, jobs by kind, and per AFL input the queries and generated inputs. The
 * comparison that matters is queries spent for the coverage reached: `ratio_queries` =
 * full / trace (> 1: trace asks fewer questions), `edges_trace` vs `edges_full`.
 *
 * With SYMFENCE_SYMCC set to a SymCC compiler wrapper, the same comparison also runs on a small C
 * program compiled with it (`real_*` fields); otherwise those are null.
 *
 *   npm run bench -- first-run [--rounds 2] [--inputs 24] [--duration 12s]
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { preloadLibraryPath } from '../src/solver/preload-library.js';
import { aflToolEnv } from '../src/solver/solver-env.js';
import { PACKAGE_ROOT } from '../src/util/paths.js';
import { buildFakeSymcc, buildFakeSymccAflTarget, fakeSymccUnavailable } from '../test/helpers/fake-symcc.js';
import { flag, median } from './_stats.js';

const rounds = Number(flag('rounds', '2'));
const inputs = Number(flag('inputs', '24'));
const duration = flag('duration', '12s');
const CLI = path.join(PACKAGE_ROOT, 'dist', 'src', 'cli', 'main.js');

function which(name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
}

const unavailable = preloadLibraryPath() === null ? 'preload library not built' : (fakeSymccUnavailable() ?? (which('afl-cc') && which('afl-showmap') ? null : 'afl-cc/afl-showmap missing'));
if (unavailable) {
  console.error(`first-run: ${unavailable}`);
  console.log(JSON.stringify({ bench: 'first-run', skipped: unavailable }));
  process.exit(0);
}

const scratch = mkdtempSync(path.join(os.tmpdir(), 'symfence-bench-first-run-'));

let seed = 4242;
function random(): number {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x7fffffff;
}

/** Inputs that share prefixes (the program's header sites), like an AFL++ queue does. */
function queueInputs(alphabet: string, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const length = 6 + Math.floor(random() * 6);
    let s = '';
    for (let j = 0; j < length; j++) s += alphabet[Math.floor(random() * alphabet.length)];
    // Never 'Z' first: the fake program's site-0 branch sits behind it, and QSYM solves a site-0
    // branch only by inheriting the verdict of the call before it (which directed runs prevent on
    // purpose), so it would measure that artefact of the fixture rather than the strategies.
    if (s[0] === 'Z') s = `A${s.slice(1)}`;
    out.push(s);
  }
  return out;
}

interface Outcome {
  readonly queries: number;
  readonly generated: number;
  readonly interesting: number;
  readonly edges: number;
  readonly jobsTrace: number;
  readonly jobsTargeted: number;
  readonly jobsFull: number;
}

function campaign(strategy: 'trace' | 'full', solver: readonly string[], aflTarget: string, queue: readonly string[], tag: string): Outcome {
  const root = mkdtempSync(path.join(scratch, `${tag}-${strategy}-`));
  const q = path.join(root, 'out', 'main', 'queue');
  mkdirSync(q, { recursive: true });
  queue.forEach((text, i) => writeFileSync(path.join(q, `id:${String(i).padStart(6, '0')},time:0,orig:in${i}`), text));
  writeFileSync(path.join(root, 'out', 'main', 'fuzzer_stats'), `command_line      : afl-fuzz -i in -o out -M main -- ${aflTarget} @@\n`);
  const run = spawnSync(
    process.execPath,
    [CLI, 'run', '--afl-out', path.join(root, 'out'), '--afl-instance', 'main', '--workers', '1', '--duration', duration, '--first-run', strategy, '--log-level', 'error', '--json', '--', ...solver],
    { encoding: 'utf8', maxBuffer: 64 << 20 },
  );
  if (run.status !== 0) throw new Error(`symfence run (${strategy}) exited ${run.status}: ${run.stderr.slice(-2000)}`);
  const summary = JSON.parse(run.stdout.trim().split('\n').pop()!) as { counters: Record<string, number> };
  const c = summary.counters;
  rmSync(root, { recursive: true, force: true });
  return { queries: c.queriesSolved!, generated: c.generated!, interesting: c.interesting!, edges: c.edgesCovered!, jobsTrace: c.jobsTrace!, jobsTargeted: c.jobsTargeted!, jobsFull: c.jobsFull! };
}

function compare(solver: readonly string[], aflTarget: string, queue: readonly string[], tag: string): Record<string, unknown> {
  const results: Record<'trace' | 'full', Outcome[]> = { trace: [], full: [] };
  for (let r = 0; r < rounds; r++) {
    const order: ('trace' | 'full')[] = r % 2 === 0 ? ['full', 'trace'] : ['trace', 'full'];
    for (const strategy of order) {
      const o = campaign(strategy, solver, aflTarget, queue, tag);
      results[strategy].push(o);
      console.log(`${tag} round ${r + 1} ${strategy.padEnd(5)} queries ${o.queries} generated ${o.generated} interesting ${o.interesting} edges ${o.edges} jobs trace/targeted/full ${o.jobsTrace}/${o.jobsTargeted}/${o.jobsFull}`);
    }
  }
  const m = (s: 'trace' | 'full', k: keyof Outcome) => median(results[s].map((o) => o[k]));
  const perInput = (s: 'trace' | 'full', k: keyof Outcome) => Number((m(s, k) / queue.length).toFixed(2));
  return {
    [`${tag}queries_full`]: m('full', 'queries'),
    [`${tag}queries_trace`]: m('trace', 'queries'),
    [`${tag}generated_full`]: m('full', 'generated'),
    [`${tag}generated_trace`]: m('trace', 'generated'),
    [`${tag}interesting_full`]: m('full', 'interesting'),
    [`${tag}interesting_trace`]: m('trace', 'interesting'),
    [`${tag}edges_full`]: m('full', 'edges'),
    [`${tag}edges_trace`]: m('trace', 'edges'),
    [`${tag}queries_per_input_full`]: perInput('full', 'queries'),
    [`${tag}queries_per_input_trace`]: perInput('trace', 'queries'),
    [`${tag}generated_per_input_full`]: perInput('full', 'generated'),
    [`${tag}generated_per_input_trace`]: perInput('trace', 'generated'),
    [`${tag}jobs_targeted_trace`]: m('trace', 'jobsTargeted'),
    [`${tag}ratio_queries`]: Number((m('full', 'queries') / Math.max(1, m('trace', 'queries'))).toFixed(3)),
  };
}

const fake = buildFakeSymcc();
const aflTarget = buildFakeSymccAflTarget(scratch);
const fakeQueue = queueInputs('MZ!Axyq', inputs);
const row: Record<string, unknown> = { bench: 'first-run', rounds, inputs, duration, loadavg_1m: Number(os.loadavg()[0]!.toFixed(2)) };
Object.assign(row, compare([fake.qsymProgram, '@@'], aflTarget, fakeQueue, ''));

const symcc = process.env.SYMFENCE_SYMCC;
if (symcc) {
  // A small parser-like program: a header of byte tests and a loop, as a real target would branch.
  const source = path.join(scratch, 'real.c');
  writeFileSync(
    source,
    [
      '#include <stdio.h>',
      '#include <stdlib.h>',
      'int main(int argc, char **argv) {',
      '  unsigned char b[64] = {0}; FILE *f = fopen(argv[1], "rb"); if (!f) return 2;',
      '  size_t n = fread(b, 1, sizeof b, f); fclose(f); int s = 0;',
      '  if (n > 3 && b[0] == \'M\') { if (b[1] == \'Z\') { if (b[2] == \'!\') s += 4; } }',
      '  if (n > 4 && b[3] < 0x80) s++;',
      '  for (size_t i = 4; i < n; i++) { if (b[i] == \'x\') s += 2; else if (b[i] == \'y\') s += 3; }',
      '  printf("%d\\n", s); return 0; }',
    ].join('\n'),
  );
  const realSymcc = path.join(scratch, 'real.symcc');
  const realAfl = path.join(scratch, 'real.afl');
  execFileSync(symcc, ['-O1', '-o', realSymcc, source], { stdio: 'pipe' });
  execFileSync('afl-cc', ['-O0', '-o', realAfl, source], { env: aflToolEnv(process.env, { AFL_QUIET: '1' }), stdio: 'pipe' });
  Object.assign(row, compare([realSymcc, '@@'], realAfl, queueInputs('MZ!Axyq', inputs), 'real_'));
} else {
  row.real_skipped = 'SYMFENCE_SYMCC is not set';
}
rmSync(scratch, { recursive: true, force: true });
console.log(JSON.stringify(row));
