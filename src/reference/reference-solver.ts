/**
 * TEST AND DEMO FIXTURE — NOT A SOLVER FOR REAL PROGRAMS.
 *
 * The reference solver: a small program that behaves like a SymCC-instrumented binary (with the
 * symfence directed extension) over a declarative maze, so the runtime, its tests and
 * `symfence demo` can run without SymCC. Spawned as `node reference-solver.js …`.
 *
 *   reference-solver.js <maze.json|builtin:demo> [input-file]
 *       SymCC mode. Input from SYMCC_INPUT_FILE, else the input-file argument, else stdin.
 *       Writes solutions to SYMCC_OUTPUT_DIR as 000000, 000001, … (exit 255 if it does not exist,
 *       like QSYM); honours SYMCC_TARGET_BRANCH, SYMCC_S2F_ACTIONS, SYMCC_TELEMETRY_OUT;
 *       stderr: "[STAT] SMT: {...}" per query and "[INFO] New testcase: <path>" per output.
 *   reference-solver.js showmap [-t ms] [-m none] [-b] [-q] -o <map> -- <maze> [input-file]
 *       afl-showmap-compatible: writes the maze's bucketed coverage map (AFL_MAP_SIZE bytes,
 *       default 65536); exit 0, or 2 when the input reaches an abort node.
 *   reference-solver.js showmap [-Z] -i <dir> -o <dir> [-t ms] [-m none] [-b] [-q] -- <maze>
 *       afl-showmap's directory mode, with afl-cmin's -Z (and AFL_CMIN_CRASHES_ONLY).
 *
 * Knobs (environment): SYMFENCE_REFSOLVER_DELAY_MS (sleep before exiting), SYMFENCE_REFSOLVER_SOLVE_CPU_MS
 * (burn this much CPU first, standing in for constraint solving), SYMFENCE_REFSOLVER_CRASH
 * (signal name to die by after writing outputs), SYMFENCE_REFSOLVER_HANG=1 (never exit),
 * SYMFENCE_REFSOLVER_IGNORE_SIGTERM=1, SYMFENCE_REFSOLVER_FLOOD=<n> (write n extra outputs),
 * SYMFENCE_REFSOLVER_FLOOD_BYTES=<size of each, default input length>.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DEMO_MAZE } from './demo-maze.js';
import { mazeCoverageMap, parseMaze, walkMaze, type Maze } from './maze.js';
import { parseActionsText, runReference, type ReferenceJob } from './reference-run.js';

const USAGE = `reference-solver (symfence TEST AND DEMO FIXTURE: behaves like a SymCC binary over a maze)
usage: reference-solver <maze.json|builtin:demo> [input-file]
       reference-solver showmap [-t ms] [-m none] [-b] [-q] -o <map-file> -- <maze.json|builtin:demo> [input-file]
       reference-solver showmap [-Z] -i <dir> -o <dir> [-t ms] [-m none] [-b] [-q] -- <maze.json|builtin:demo>
env knobs: SYMFENCE_REFSOLVER_DELAY_MS, SYMFENCE_REFSOLVER_SOLVE_CPU_MS, SYMFENCE_REFSOLVER_CRASH=<signal>, SYMFENCE_REFSOLVER_HANG=1,
           SYMFENCE_REFSOLVER_IGNORE_SIGTERM=1, SYMFENCE_REFSOLVER_FLOOD=<n>, SYMFENCE_REFSOLVER_FLOOD_BYTES=<n>
`;

function loadMaze(spec: string): Maze {
  if (spec === 'builtin:demo') return DEMO_MAZE;
  return parseMaze(JSON.parse(readFileSync(spec, 'utf8')));
}

function readInput(inputArg: string | undefined): Uint8Array {
  const file = process.env.SYMCC_INPUT_FILE || inputArg;
  return new Uint8Array(file ? readFileSync(file) : readFileSync(0));
}

function die(message: string, code: number): never {
  process.stderr.write(`reference-solver: ${message}\n`);
  process.exit(code);
}

function showmapMode(args: string[]): void {
  const split = args.indexOf('--');
  if (split < 0) die('showmap mode needs "-- <maze> [input-file]"', 1);
  const flags = args.slice(0, split);
  const target = args.slice(split + 1);
  let mapFile: string | undefined;
  let inDir: string | undefined;
  let cminMode = false;
  for (let i = 0; i < flags.length; i++) {
    const flag = flags[i];
    if (flag === '-o') mapFile = flags[++i];
    else if (flag === '-i') inDir = flags[++i];
    else if (flag === '-Z') cminMode = true;
    else if (flag === '-t' || flag === '-m') i++;
    else if (flag !== '-b' && flag !== '-q' && flag !== '-e') die(`unknown showmap flag ${flag}`, 1);
  }
  if (!mapFile || target.length === 0) die('showmap mode needs -o <map-file> and a maze', 1);
  const maze = loadMaze(target[0]!);
  const mapSizeBytes = Number(process.env.AFL_MAP_SIZE ?? 65_536);
  if (!Number.isSafeInteger(mapSizeBytes) || mapSizeBytes <= 0) die('AFL_MAP_SIZE must be a positive integer', 1);
  if (inDir !== undefined) {
    showmapDirectory(maze, inDir, mapFile, mapSizeBytes, cminMode);
    return;
  }
  const input = new Uint8Array(target[1] ? readFileSync(target[1]) : readFileSync(0));
  const walk = walkMaze(maze, input);
  writeFileSync(mapFile, mazeCoverageMap(walk, mapSizeBytes));
  process.exit(walk.aborted ? 2 : 0);
}

/**
 * afl-showmap's directory mode: a map file per non-empty input, named as the input, in
 * `outDir`. With `-Z` (afl-cmin's mode) an input that reached an abort node gets an empty file,
 * or with `AFL_CMIN_CRASHES_ONLY=1` the crashes get maps and the rest empty files. Exit: the
 * verdict of the last input, as afl-showmap's.
 */
function showmapDirectory(maze: Maze, inDir: string, outDir: string, mapSizeBytes: number, cminMode: boolean): void {
  mkdirSync(outDir, { recursive: true });
  const crashesOnly = cminMode && process.env.AFL_CMIN_CRASHES_ONLY === '1';
  let lastAborted = false;
  for (const name of readdirSync(inDir).sort()) {
    const input = new Uint8Array(readFileSync(path.join(inDir, name)));
    if (input.length === 0) continue;
    const walk = walkMaze(maze, input);
    const mapped = !cminMode || walk.aborted === crashesOnly;
    writeFileSync(path.join(outDir, name), mapped ? mazeCoverageMap(walk, mapSizeBytes) : new Uint8Array(0));
    lastAborted = walk.aborted;
  }
  process.exit(lastAborted ? 2 : 0);
}

function readJob(): ReferenceJob | null {
  const target = process.env.SYMCC_TARGET_BRANCH;
  const actionsFile = process.env.SYMCC_S2F_ACTIONS;
  // Trace-only: walk and describe the path, solve nothing (an empty directed job flips no step).
  if (process.env.SYMFENCE_TRACE_ONLY === '1') return { targetBranch: 0n, actions: new Map() };
  const targetBranch = target && /^\d+$/.test(target) ? BigInt(target) : 0n;
  const actions = actionsFile ? parseActionsText(readFileSync(actionsFile, 'utf8')) : new Map();
  return targetBranch === 0n && actions.size === 0 ? null : { targetBranch, actions };
}

async function symccMode(args: string[]): Promise<void> {
  const outputDir = process.env.SYMCC_OUTPUT_DIR;
  // QSYM checks this before main and exits with -1 (255).
  if (!outputDir || !existsSync(outputDir) || !statSync(outputDir).isDirectory()) {
    process.stderr.write(`Error: the output directory ${outputDir ?? '/tmp/output'} (configurable via SYMCC_OUTPUT_DIR) does not exist.\n`);
    process.exit(255);
  }
  if (args.length === 0) die('missing maze argument', 1);
  if (process.env.SYMFENCE_REFSOLVER_IGNORE_SIGTERM === '1') process.on('SIGTERM', () => {});
  const maze = loadMaze(args[0]!);
  const input = readInput(args[1]);
  const run = runReference(maze, input, readJob());
  burnCpu(Number(process.env.SYMFENCE_REFSOLVER_SOLVE_CPU_MS ?? 0));

  let index = 0;
  const write = (bytes: Uint8Array): void => {
    const file = path.join(outputDir, String(index++).padStart(6, '0'));
    writeFileSync(file, bytes);
    process.stderr.write(`[INFO] New testcase: ${file}\n`);
  };
  for (const time of run.statSolvingTimesUs) process.stderr.write(`[STAT] SMT: { "solving_time": ${time}, "total_time": ${time} }\n`);
  for (const solution of run.solutions) write(solution);
  const flood = Number(process.env.SYMFENCE_REFSOLVER_FLOOD ?? 0);
  const floodBytes = Number(process.env.SYMFENCE_REFSOLVER_FLOOD_BYTES ?? input.length);
  for (let i = 0; i < flood; i++) {
    const bytes = new Uint8Array(floodBytes);
    for (let j = 0; j < floodBytes; j++) bytes[j] = (i * 31 + j * 7 + (i >> 8)) & 0xff;
    bytes[0] = i & 0xff;
    if (floodBytes > 1) bytes[1] = (i >> 8) & 0xff;
    write(bytes);
  }
  const telemetryOut = process.env.SYMCC_TELEMETRY_OUT;
  if (telemetryOut) writeFileSync(telemetryOut, JSON.stringify(run.telemetry));

  const delayMs = Number(process.env.SYMFENCE_REFSOLVER_DELAY_MS ?? 0);
  if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
  if (process.env.SYMFENCE_REFSOLVER_HANG === '1') {
    setInterval(() => {}, 1 << 30);
    return;
  }
  const crash = process.env.SYMFENCE_REFSOLVER_CRASH;
  if (crash) process.kill(process.pid, crash as NodeJS.Signals);
  else if (run.crashes) process.kill(process.pid, 'SIGABRT');
}

/** Spends `ms` of this process's CPU time (a stand-in for a solver's constraint-solving work). */
function burnCpu(ms: number): void {
  if (!(ms > 0)) return;
  const start = process.cpuUsage();
  let x = 1;
  for (;;) {
    for (let i = 0; i < 100_000; i++) x = (Math.imul(x, 31) + i) | 0;
    const used = process.cpuUsage(start);
    if ((used.user + used.system) / 1000 >= ms || x === 0x7fffffff) return;
  }
}

const args = process.argv.slice(2);
if (args[0] === '--help' || args[0] === '-h') {
  process.stdout.write(USAGE);
} else if (args[0] === 'showmap') {
  showmapMode(args.slice(1));
} else {
  await symccMode(args);
}
