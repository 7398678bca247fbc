/**
 * Bench `campaign-yield`: one short AFL++ campaign (`afl-fuzz -M main` on a target built with
 * afl-cc) and one peer beside it, at equal CPU (one AFL++ instance plus one peer process):
 *
 *   afl      a second plain AFL++ instance (`-S s1`): the floor to beat;
 *   old      symfence with the older frontier: `--first-run trace --frontier-order age
 *            --frontier-targets 1`;
 *   tiers    symfence with the coverage frontier and value order, one target per job
 *            (`--frontier-targets 1`; not in the default set);
 *   auto     today's defaults with the yield split choosing full or traced first runs
 *            (`--first-run auto`; not in the default set);
 *   new      symfence with today's defaults (every first run traced, coverage frontier, value
 *            order, up to 8 targets of one input per job);
 *   helper   SymCC's own fuzzing helper (only with SYMFENCE_SYMCC and SYMFENCE_SYMCC_HELPER or the
 *            helper found next to the SymCC build).
 *
 * Reported per configuration (medians over `--runs`): the campaign's final edges (main's
 * `edges_found`, which includes what it imported), edges at 25/50/75 % of the run and their mean
 * (main's fuzzer_stats sampled every second), how many of the peer's inputs main imported (`sync:<peer>` entries, distinct `src:`),
 * inputs the peer published, and for symfence the directed questions settled (sat or unsat, in
 * directed jobs and in traces' wanted sets) per edge gained over the `afl` floor. Rounds rotate the order of the configurations. Short runs on a shared machine are
 * noisy: the load average is printed with every row.
 *
 * Solver: SymCC when SYMFENCE_SYMCC names its compiler wrapper (the target compiled with it),
 * otherwise the fake SymCC runtime program of the test helpers (its afl-cc build for AFL++).
 *
 *   npm run bench -- campaign-yield [--duration 60] [--runs 1] [--configs afl,old,new,helper] (add tiers)
 *        [--target-src a.c,b.c --seeds <dir>]   (default target: a small built-in parser)
 *        [--target-afl <bin> --target-symcc <bin> --label <name> --seeds <dir>]
 *                                               (a library already built with afl-cc and with SymCC)
 *        [--record <file.jsonl>] [--first-round <n>]
 *
 * `--record` appends every campaign's outcome to a JSON-lines file and prints the medians over all
 * the file's outcomes for this target and duration, so the rounds of one comparison can run as
 * separate, shorter invocations (`--runs 1 --first-round 1`, then `--first-round 2`, ...);
 * `--first-round` also sets where the rotation of the configurations starts.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { preloadLibraryPath } from '../src/solver/preload-library.js';
import { aflToolEnv } from '../src/solver/solver-env.js';
import { countQueueNames } from '../src/triage/afl-peers.js';
import { PACKAGE_ROOT } from '../src/util/paths.js';
import { buildFakeSymcc, buildFakeSymccAflTarget, fakeSymccUnavailable } from '../test/helpers/fake-symcc.js';
import { flag, median } from './_stats.js';

type Config = 'afl' | 'old' | 'tiers' | 'auto' | 'new' | 'helper';

const durationS = Number(flag('duration', '60'));
const runs = Number(flag('runs', '1'));
const wanted = flag('configs', 'afl,old,new,helper').split(',') as Config[];
const targetSrc = flag('target-src', '');
const seedsDir = flag('seeds', '');
const prebuiltAfl = flag('target-afl', '');
const prebuiltSymcc = flag('target-symcc', '');
const labelFlag = flag('label', '');
const recordFile = flag('record', '');
const firstRound = Number(flag('first-round', '0'));
const CLI = path.join(PACKAGE_ROOT, 'dist', 'src', 'cli', 'main.js');
const AFL_ENV = { AFL_NO_UI: '1', AFL_SKIP_CPUFREQ: '1', AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES: '1', AFL_NO_AFFINITY: '1', AFL_SYNC_TIME: '1' };

function which(name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
}

const symcc = process.env.SYMFENCE_SYMCC;
if (Boolean(prebuiltAfl) !== Boolean(prebuiltSymcc) || (prebuiltAfl && (!symcc || !seedsDir || targetSrc))) {
  console.error('campaign-yield: --target-afl and --target-symcc go together, need SYMFENCE_SYMCC and --seeds, and replace --target-src');
  process.exit(2);
}
if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(firstRound) || firstRound < 0 || !(durationS > 0)) {
  console.error(`campaign-yield: --runs ${runs}, --first-round ${firstRound}, --duration ${durationS}: need integers >= 1, >= 0 and a positive duration`);
  process.exit(2);
}
const unavailable = !which('afl-fuzz') || !which('afl-cc') || !which('afl-showmap') ? 'afl-fuzz/afl-cc/afl-showmap missing' : !symcc && (preloadLibraryPath() === null ? 'preload library not built' : fakeSymccUnavailable());
if (unavailable) {
  console.error(`campaign-yield: ${unavailable}`);
  console.log(JSON.stringify({ bench: 'campaign-yield', skipped: unavailable }));
  process.exit(0);
}

const scratch = mkdtempSync(path.join(os.tmpdir(), 'symfence-bench-campaign-yield-'));

/** A small parser with nested magic, a length field and a loop: room for both AFL++ and SymCC. */
const BUILTIN_C = String.raw`
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
  unsigned char b[256] = {0}; FILE *f = fopen(argv[1], "rb"); if (!f) return 2;
  size_t n = fread(b, 1, sizeof b, f); fclose(f); int s = 0;
  if (n < 8) return 0;
  if (memcmp(b, "SYMF", 4) == 0) { s++; if (b[4] == 'v' && b[5] >= '1' && b[5] <= '3') { s += b[5] - '0';
    unsigned len = b[6] | (b[7] << 8); if (len == n - 8) { s += 10; if (b[8] == '{' && b[n - 1] == '}') s += 20; } } }
  for (size_t i = 8; i + 1 < n; i++) { if (b[i] == 'k' && b[i + 1] == '=') s += 2; else if (b[i] == '#' ) s += 3; else if (b[i] == '"' && b[i + 1] == '\\') s += 5; }
  printf("%d\n", s); return 0; }
`;

interface Built {
  readonly afl: string;
  readonly solver: readonly string[];
  readonly seeds: string;
  readonly label: string;
}

function build(): Built {
  const seeds = path.join(scratch, 'seeds');
  mkdirSync(seeds);
  if (seedsDir) for (const name of readdirSync(seedsDir)) copyFileSync(path.join(seedsDir, name), path.join(seeds, name));
  else {
    writeFileSync(path.join(seeds, 'a'), 'SYMFv1\u0004\u0000{k=}');
    writeFileSync(path.join(seeds, 'b'), 'AAAAAAAA#k=1');
  }
  if (prebuiltAfl) return { afl: path.resolve(prebuiltAfl), solver: [path.resolve(prebuiltSymcc), '@@'], seeds, label: labelFlag || path.basename(prebuiltAfl).replace(/\.[^.]*$/, '') };
  const sources = targetSrc ? targetSrc.split(',') : [path.join(scratch, 'target.c')];
  if (!targetSrc) writeFileSync(sources[0]!, BUILTIN_C);
  const label = labelFlag ? labelFlag : targetSrc ? path.basename(path.dirname(path.resolve(sources[sources.length - 1]!))) : 'builtin';
  if (symcc) {
    const afl = path.join(scratch, 'target.afl');
    const sym = path.join(scratch, 'target.symcc');
    execFileSync('afl-cc', ['-O2', '-o', afl, ...sources, '-lm'], { env: aflToolEnv(process.env, { AFL_QUIET: '1' }), stdio: 'pipe' });
    execFileSync(symcc, ['-O2', '-o', sym, ...sources, '-lm'], { stdio: 'pipe' });
    return { afl, solver: [sym, '@@'], seeds, label };
  }
  // Fake runtime: its own program (the test helpers' fake SymCC) and that program's afl-cc build.
  const fake = buildFakeSymcc();
  return { afl: buildFakeSymccAflTarget(scratch), solver: [fake.qsymProgram, '@@'], seeds, label: 'fake-symcc' };
}

function helperPath(): string | undefined {
  const explicit = process.env.SYMFENCE_SYMCC_HELPER;
  if (explicit && existsSync(explicit)) return explicit;
  if (!symcc) return undefined;
  const guess = path.join(path.dirname(path.dirname(symcc)), 'helper', 'symcc_fuzzing_helper');
  return existsSync(guess) ? guess : undefined;
}

function start(cmd: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv): ChildProcess {
  return spawn(cmd, args, { cwd, env, stdio: 'ignore', detached: true });
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));
}

async function waitFor(check: () => boolean, limitMs: number): Promise<void> {
  for (const end = Date.now() + limitMs; Date.now() < end; ) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface Outcome {
  readonly edges: number;
  readonly quartiles: readonly number[];
  readonly mean: number;
  readonly imported: number;
  readonly published: number;
  readonly questions: number;
  readonly load: number;
  /** symfence only: its stats.json sections that explain the figures (the split, the frontier, the counters). */
  readonly stats?: unknown;
}

function fuzzerStat(file: string, key: string): number {
  const line = readFileSync(file, 'utf8').split('\n').find((l) => l.startsWith(key));
  return Number(line?.split(':')[1]?.trim() ?? 0);
}

/** Main's `edges_found` (fuzzer_stats, rewritten by AFL++ every few seconds), sampled once a second. */
function sampleEdges(file: string, startedMs: number): { samples: [number, number][]; stop: () => void } {
  const samples: [number, number][] = [];
  const timer = setInterval(() => {
    try {
      samples.push([(Date.now() - startedMs) / 1000, fuzzerStat(file, 'edges_found')]);
    } catch {
      // not written yet
    }
  }, 1000);
  return { samples, stop: () => clearInterval(timer) };
}

/** Edges at 25/50/75 % of the run, and the mean over the run. */
function overTime(samples: readonly [number, number][]): { quartiles: number[]; mean: number } {
  const at = (q: number): number => {
    let best = 0;
    for (const [t, e] of samples) if (t <= q * durationS) best = e;
    return best;
  };
  const mean = samples.length === 0 ? 0 : samples.reduce((sum, [, e]) => sum + e, 0) / samples.length;
  return { quartiles: [at(0.25), at(0.5), at(0.75)], mean: Math.round(mean) };
}

async function campaign(config: Config, built: Built, round: number): Promise<Outcome> {
  const root = mkdtempSync(path.join(scratch, `${config}-${round}-`));
  const env = { ...aflToolEnv(process.env), ...AFL_ENV };
  const startedMs = Date.now();
  const main = start('afl-fuzz', ['-i', built.seeds, '-o', 'out', '-M', 'main', '-V', String(durationS), '--', built.afl, '@@'], root, env);
  const mainDir = path.join(root, 'out', 'main');
  await waitFor(() => existsSync(path.join(mainDir, 'fuzzer_stats')), 30_000);
  const sampler = sampleEdges(path.join(mainDir, 'fuzzer_stats'), startedMs);
  let peer: ChildProcess;
  let peerName: string;
  const peerArgs = ['--afl-out', 'out', '--afl-instance', 'main', '--name', 'symfence', '--workers', '1', '--duration', `${durationS}s`, '--log-level', 'error', '--json'];
  switch (config) {
    case 'afl':
      peerName = 's1';
      peer = start('afl-fuzz', ['-i', built.seeds, '-o', 'out', '-S', 's1', '-V', String(durationS), '--', built.afl, '@@'], root, env);
      break;
    case 'old':
      peerName = 'symfence';
      peer = start(process.execPath, [CLI, 'run', ...peerArgs, '--first-run', 'trace', '--frontier-order', 'age', '--frontier-targets', '1', '--', ...built.solver], root, process.env);
      break;
    case 'tiers':
      peerName = 'symfence';
      peer = start(process.execPath, [CLI, 'run', ...peerArgs, '--frontier-targets', '1', '--', ...built.solver], root, process.env);
      break;
    case 'auto':
      peerName = 'symfence';
      peer = start(process.execPath, [CLI, 'run', ...peerArgs, '--first-run', 'auto', '--', ...built.solver], root, process.env);
      break;
    case 'new':
      peerName = 'symfence';
      peer = start(process.execPath, [CLI, 'run', ...peerArgs, '--', ...built.solver], root, process.env);
      break;
    case 'helper':
      peerName = 'symcc';
      peer = start(helperPath()!, ['-a', 'main', '-o', 'out', '-n', 'symcc', '--', ...built.solver], root, env);
      break;
  }
  await exited(main);
  sampler.stop();
  // AFL++ is done: the peer stops too (symfence on its first SIGINT, cleanly).
  try {
    process.kill(-peer.pid!, 'SIGINT');
  } catch {
    // already gone
  }
  const killTimer = setTimeout(() => {
    try {
      process.kill(-peer.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  }, 15_000);
  await exited(peer);
  clearTimeout(killTimer);
  const edges = fuzzerStat(path.join(mainDir, 'fuzzer_stats'), 'edges_found');
  const imported = countQueueNames(readdirSync(path.join(mainDir, 'queue')), peerName).imported;
  const peerQueue = path.join(root, 'out', peerName, 'queue');
  const published = existsSync(peerQueue) ? readdirSync(peerQueue).filter((n) => n.startsWith('id:')).length : 0;
  let questions = 0;
  let stats: unknown;
  const statsFile = path.join(root, 'out', 'symfence', 'stats.json');
  if (existsSync(statsFile)) {
    const doc = JSON.parse(readFileSync(statsFile, 'utf8')) as { counters: { answersTargeted: number; answersTrace: number }; yield?: unknown; frontier?: unknown; afl?: unknown };
    // Directed questions settled (sat or unsat): in directed jobs and in traces' wanted sets.
    questions = doc.counters.answersTargeted + doc.counters.answersTrace;
    stats = { counters: doc.counters, yield: doc.yield, frontier: doc.frontier, afl: doc.afl };
  }
  const { quartiles, mean } = overTime(sampler.samples);
  const outcome = { edges, quartiles, mean, imported, published, questions, load: Number(os.loadavg()[0]!.toFixed(2)), ...(stats === undefined ? {} : { stats }) };
  rmSync(root, { recursive: true, force: true });
  return outcome;
}

const built = build();
const configs = wanted.filter((c) => c !== 'helper' || helperPath() !== undefined);
const results = new Map<Config, Outcome[]>(configs.map((c) => [c, []]));
const solverName = symcc ? 'symcc' : 'fake-symcc';
interface Recorded extends Outcome {
  readonly target: string;
  readonly solver: string;
  readonly duration_s: number;
  readonly config: Config;
  readonly round: number;
}
if (recordFile && existsSync(recordFile)) {
  for (const line of readFileSync(recordFile, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const r = JSON.parse(line) as Recorded;
    if (r.target === built.label && r.solver === solverName && r.duration_s === durationS && results.has(r.config)) results.get(r.config)!.push(r);
  }
}
for (let round = firstRound; round < firstRound + runs; round++) {
  const order = configs.map((_, i) => configs[(i + round) % configs.length]!);
  for (const config of order) {
    const o = await campaign(config, built, round);
    results.get(config)!.push(o);
    if (recordFile) {
      const recorded: Recorded = { target: built.label, solver: solverName, duration_s: durationS, config, round, ...o };
      appendFileSync(recordFile, `${JSON.stringify(recorded)}\n`);
    }
    console.log(
      `${built.label} run ${round + 1} ${config.padEnd(6)} edges ${o.edges} (25/50/75%: ${o.quartiles.join('/')}, mean ${o.mean}) imported ${o.imported} of ${o.published} published, directed questions ${o.questions}, load ${o.load}`,
    );
  }
}

const row: Record<string, unknown> = {
  bench: 'campaign-yield',
  target: built.label,
  solver: solverName,
  duration_s: durationS,
  runs: Math.min(...[...results.values()].map((list) => list.length)),
  loadavg: os.loadavg().map((x) => Number(x.toFixed(2))),
};
const floor = results.has('afl') ? median(results.get('afl')!.map((o) => o.edges)) : undefined;
for (const [config, list] of results) {
  const m = (f: (o: Outcome) => number) => median(list.map(f));
  row[`${config}_edges`] = m((o) => o.edges);
  row[`${config}_edges_over_time`] = [0, 1, 2].map((i) => m((o) => o.quartiles[i]!));
  row[`${config}_mean_edges`] = m((o) => o.mean);
  row[`${config}_imported`] = m((o) => o.imported);
  row[`${config}_published`] = m((o) => o.published);
  if (config !== 'afl' && config !== 'helper') {
    const questions = m((o) => o.questions);
    row[`${config}_questions`] = questions;
    row[`${config}_questions_per_new_edge`] = floor === undefined ? null : Number((questions / Math.max(1, m((o) => o.edges) - floor)).toFixed(2));
  }
}
if (results.has('old') && results.has('new')) {
  row.ratio_edges_new_old = Number(((row.new_edges as number) / Math.max(1, row.old_edges as number)).toFixed(4));
  row.ratio_imported_new_old = Number(((row.new_imported as number) / Math.max(1, row.old_imported as number)).toFixed(3));
}
rmSync(scratch, { recursive: true, force: true });
console.log(JSON.stringify(row));
