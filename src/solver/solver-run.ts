/**
 * One SymCC run, on the worker thread: the solver contract (docs/solver.md "The SymCC contract") end to end.
 *
 *   fresh run dir ── input (file mode: copy / stdin mode: pipe or fd)
 *        │            output/ (exists before start: QSYM exits 255 otherwise)
 *        │            s2f_actions, telemetry.json (directed extension)
 *        ▼
 *   spawn in own process group ── timeout / abort → SIGTERM group → grace → SIGKILL group
 *        ▼
 *   classify exit → collect outputs under caps → read telemetry (triage follows in the pool)
 *        ▼
 *   run dir disposed of: the files a completed run is known to have left unlinked by name, then
 *   two rmdirs; anything else moved aside into the trash directory (one rename, also on every
 *   failure path), then removed there in slices (trash-removal.ts) — unless the run was aborted:
 *   then the task settles at once and the pool's close() or the next pool's sweep removes it
 *   (docs/solver.md, "Where a run's directory goes")
 *
 * Run-directory bookkeeping uses synchronous fs calls on purpose: each is a microsecond syscall,
 * whereas each async call is a round trip through libuv's small shared threadpool — on a loaded
 * machine that round trip, not the syscall, dominated the per-run overhead (`bench/dispatch`).
 * The thread that runs this serves other slots too (a solver thread's, or the coordinator's own
 * when the calling thread serves the slots), so no step holds it for long: what a run may make
 * large (its outputs, its directory) is read and removed within the output caps or in slices.
 * Waiting for the solver itself stays asynchronous.
 */
import { closeSync, copyFileSync, existsSync, fstatSync, mkdirSync, openSync, readFileSync, renameSync, rmdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { SolverExitError, SolverSpawnError, SolverTimeoutError, TelemetryInvalidError, toErrorData, type ErrorData } from '../errors.js';
import { TaskAbortCell } from './abort-cell.js';
import type { CoverageBitmap } from './coverage-bitmap.js';
import { classifyExit } from './exit-classification.js';
import { removeTreeBounded } from './bounded-remove.js';
import { CollectionStopped, collectOutputs, type CollectedOutputs } from './output-collector.js';
import { runInProcessGroup } from './process-group.js';
import type { SlotGate } from './slot-gate.js';
import type { TrashRemoval } from './trash-removal.js';
import { buildSolverEnvFromBase, substituteInputPath } from './solver-env.js';
import type { GeneratedInput, RunTiming, SolverStatus, WireResult, WireTask } from './solver-types.js';

/** Telemetry larger than this is refused as unreadable rather than parsed. */
const TELEMETRY_MAX_BYTES = 4 * 1024 * 1024;

/** Name of the directory under the pool's scratch root that finished run directories are moved into. */
export const TRASH_DIR = 'trash';

export interface SolverRunContext {
  /** Directory private to this slot; run dirs are created inside it. */
  readonly workerDir: string;
  /** The pool's trash directory (same filesystem as `workerDir`): run dirs are renamed into it when done. */
  readonly trashDir: string;
  /** This slot's private QSYM pruning map (`SYMCC_AFL_COVERAGE_MAP`), never AFL's map. */
  readonly pruningMapPath: string;
  readonly bitmap: CoverageBitmap | null;
  readonly baseEnv: NodeJS.ProcessEnv;
  /** `solverBaseEnv(baseEnv)`, computed once per slot: the starting point of every solver env. */
  readonly solverEnvBase: Readonly<Record<string, string>>;
  /**
   * The next run directory's name: never one an earlier context of the same slot gave, so a
   * thread that replaces a crashed one never meets the run directories it left behind.
   */
  nextRunName(): string;
  /** The thread's removal of trashed run directories, in slices (trash-removal.ts). */
  readonly trash: TrashRemoval;
  /** The slot's process gate: one solver process at a time, a staged run next (slot-gate.ts). */
  readonly gate: SlotGate;
}

export async function runSolverTask(task: WireTask, ctx: SolverRunContext): Promise<WireResult> {
  const receivedMs = performance.now();
  const cell = new TaskAbortCell(task.abortBuffer);
  const runDir = path.join(ctx.workerDir, ctx.nextRunName());
  const left: string[] = [];
  try {
    if (cell.abortRequested) return failedBeforeStart(null, true);
    mkdirSync(runDir);
    mkdirSync(path.join(runDir, 'output'));
    return await runInDir(task, ctx, cell, runDir, path.join(runDir, 'output'), receivedMs, left);
  } catch (error) {
    // Setup failures (unreadable input path, full disk …) come back as typed results: a thrown
    // error would cross the thread boundary without its code.
    return failedBeforeStart(toErrorData(error), cell.abortRequested);
  } finally {
    // The cell keeps taking aborts until finish(): an abort during the removal stops it.
    disposeRunDir(runDir, ctx, cell, left);
    cell.finish();
  }
}

/** Unlinks checked for an abort between them, so a removal by name stops as the trash's would. */
const ABORT_CHECK_EVERY = 64;

/**
 * Unlinks `files` (paths this run is known to have left: its input copy, job files, telemetry,
 * the outputs its collection listed) and says whether all of them are gone. Stops, leaving the
 * rest for the trash, at an abort or at an entry that is not a plain file any more (the solver
 * may have replaced one with a directory).
 */
function removeKnownFiles(files: readonly string[], cell: TaskAbortCell): boolean {
  for (let i = 0; i < files.length; i++) {
    if (i % ABORT_CHECK_EVERY === ABORT_CHECK_EVERY - 1 && cell.abortRequested) return false;
    try {
      unlinkSync(files[i]!);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return false;
    }
  }
  return true;
}

/**
 * Disposes of a run directory. Fast path for the common case: the files a completed run is known
 * to have left (`left`: its input copy, job files and telemetry, and the outputs its collection
 * listed — at most `maxOutputFiles`) are unlinked by name, then the two directories go with two
 * `rmdir`s. That is a handful of syscalls, where listing the directories costs a `Dir` (and its
 * promisified methods) per pass of the bounded walk: about a quarter of a slot thread's CPU per
 * run on 20-ms jobs. Anything else left inside (an aborted run's outputs, entries the collection
 * ignored, a flood) is first moved aside into the trash with one rename, so the run's slot path is
 * free whatever happens next. An aborted run leaves it there: a shutdown must not wait for a
 * flood's unlinks (the pool's close() removes the trash within a budget, the next pool's sweep the
 * rest). Any other run hands it to the thread's trash removal: one slice now, the rest in slices
 * between the thread's other work (trash-removal.ts). A failed rename falls back to removing the
 * directory in place.
 */
function disposeRunDir(runDir: string, ctx: SolverRunContext, cell: TaskAbortCell, left: readonly string[]): void {
  try {
    if (left.length === 0 || (!cell.abortRequested && removeKnownFiles(left, cell))) {
      rmdirSync(path.join(runDir, 'output'));
      rmdirSync(runDir);
      return;
    }
  } catch {
    // ENOTEMPTY / ENOENT: something was left behind, or the directory was never created.
  }
  const trashed = path.join(ctx.trashDir, `${path.basename(ctx.workerDir)}-${path.basename(runDir)}`);
  try {
    renameSync(runDir, trashed);
  } catch {
    removeRunDirInPlace(runDir);
    return;
  }
  if (cell.abortRequested) return;
  ctx.trash.remove(trashed);
}

function removeRunDirInPlace(runDir: string): void {
  try {
    // A flooded output directory must not cost its whole listing in memory (bounded-remove.ts).
    removeTreeBounded(runDir);
  } catch {
    rmSync(runDir, { recursive: true, force: true, maxRetries: 2 });
  }
}

/**
 * The run's input in `runDir`: a private copy named by the argv (file mode), or a descriptor for
 * stdin (the caller closes `stdinFd` once the process has started and exited).
 */
function prepareInput(task: WireTask, runDir: string, left: string[]): { stdinFd: number | null; inputFile: string | null } {
  if (task.inputMode === 'file') {
    // A private copy: the solver must not be able to modify the queue entry it was given.
    const inputFile = path.join(runDir, 'input');
    left.push(inputFile);
    if ('path' in task.input) copyFileSync(task.input.path, inputFile);
    else writeFileSync(inputFile, task.input.bytes);
    return { stdinFd: null, inputFile };
  }
  if ('path' in task.input) return { stdinFd: openSync(task.input.path, 'r'), inputFile: null };
  // The bytes go to an unlinked file passed as stdin rather than through a pipe: the solver
  // sees all input at once and then EOF, exactly as with a pipe that was written and closed,
  // and the run skips a pipe + stream per run (measured in bench/dispatch).
  const stdinPath = path.join(runDir, 'stdin');
  writeFileSync(stdinPath, task.input.bytes);
  const stdinFd = openSync(stdinPath, 'r');
  unlinkSync(stdinPath);
  return { stdinFd, inputFile: null };
}

/** A directed job's action and wanted-branch files in `runDir` (null where the job has none). */
function writeJobFiles(task: WireTask, runDir: string, left: string[]): { actionsFile: string | null; wantedFile: string | null } {
  let actionsFile: string | null = null;
  if (task.job !== null && task.job.actions.length > 0) {
    actionsFile = path.join(runDir, 's2f_actions');
    left.push(actionsFile);
    writeFileSync(actionsFile, task.job.actions.map((a) => `${a.branch.toString(10)} ${a.kind}\n`).join(''));
  }
  let wantedFile: string | null = null;
  if (task.job?.wanted !== undefined && task.job.wanted.length > 0) {
    wantedFile = path.join(runDir, 'wanted');
    left.push(wantedFile);
    writeFileSync(wantedFile, task.job.wanted.map((b) => `${b.toString(10)}\n`).join(''));
  }
  return { actionsFile, wantedFile };
}

/** The status of a run that started, from how it exited (and the error that goes with it). */
function statusOf(outcome: { code: number | null; signal: NodeJS.Signals | null; timedOut: boolean }, task: WireTask): { status: SolverStatus; error?: ErrorData } {
  const exitClass = classifyExit(outcome.code, outcome.signal, outcome.timedOut);
  switch (exitClass.kind) {
    case 'timeout':
      return { status: 'timeout', error: toErrorData(new SolverTimeoutError(`solver exceeded ${task.timeoutMs} ms and was killed`, { timeoutMs: task.timeoutMs, signal: outcome.signal })) };
    case 'crash':
      return { status: 'crash' };
    case 'runtime-refused':
      return {
        status: 'error',
        error: toErrorData(
          new SolverExitError('solver runtime exited 255 before running (for SymCC: SYMCC_OUTPUT_DIR missing or runtime misconfigured)', {
            exitCode: outcome.code,
          }),
        ),
      };
    case 'normal':
      return { status: 'ok' };
  }
}

/** `left` collects the paths of the files the run is known to have left in `runDir` (see `disposeRunDir`). */
async function runInDir(task: WireTask, ctx: SolverRunContext, cell: TaskAbortCell, runDir: string, outputDir: string, receivedMs: number, left: string[]): Promise<WireResult> {
  const { stdinFd, inputFile } = prepareInput(task, runDir, left);
  const { actionsFile, wantedFile } = writeJobFiles(task, runDir, left);
  const telemetryOut = task.telemetry || task.job !== null ? path.join(runDir, 'telemetry.json') : null;

  // Under the preload library the coordinator decides what is solved; QSYM's own pruning map
  // would silently skip a directed target that this worker saw in an earlier run.
  const ownPruning = task.preload !== null && task.job !== null;
  const env = buildSolverEnvFromBase(ctx.solverEnvBase, task.env, {
    outputDir,
    inputFile,
    pruningMapPath: ownPruning ? null : ctx.pruningMapPath,
    targetBranch: task.job?.targetBranch ?? null,
    actionsFile,
    telemetryOut,
    traceOnly: task.job?.traceOnly === true,
    preload: task.preload,
    wantedFile,
    // Forked answers share the run's timeout with its start-up and prefix: half of it for them.
    forkCpuBudgetMs: task.preload !== null ? task.timeoutMs / 2 : null,
  });
  const argv = inputFile !== null ? substituteInputPath(task.command.argv, inputFile) : task.command.argv;

  // A run staged behind the slot's running one waits here, prepared, until that process exits.
  const gate = ctx.gate;
  const waits = gate.held;
  if (!(await gate.acquire(cell))) {
    if (stdinFd !== null) closeSync(stdinFd);
    return failedBeforeStart(null, true);
  }
  const previousExitMs = gate.lastExitMs;
  let outcome: Awaited<ReturnType<typeof runInProcessGroup>> | undefined;
  const launchCallMs = performance.now();
  try {
    outcome = await runInProcessGroup({
      binary: task.command.binary,
      argv,
      env,
      cwd: runDir,
      stdin: stdinFd,
      timeoutMs: task.timeoutMs,
      killGraceMs: task.killGraceMs,
      stderrCapBytes: task.stderrCapBytes,
      cancelled: cell.whenSettled(),
      ...(task.spawnMethod !== undefined ? { spawnMethod: task.spawnMethod } : {}),
    });
  } finally {
    if (stdinFd !== null) closeSync(stdinFd);
    gate.release(outcome === undefined ? undefined : launchCallMs + outcome.launchMs + outcome.processMs);
  }
  // The slot's staged run (if any) starts before this one's outputs are collected.
  if (gate.held) await new Promise<void>((resolve) => setImmediate(resolve));

  const settledMs = performance.now();
  const launchedMs = launchCallMs + outcome.launchMs;
  // A staged run was prepared before the gate opened: its start-up is only the launch.
  const spawnMs = (waits ? 0 : launchCallMs - receivedMs) + outcome.launchMs;
  const idle = previousExitMs === undefined ? {} : { idleMs: Math.max(0, launchedMs - previousExitMs) };
  const solverMs = outcome.processMs;
  // Everything after the solver's exit: the stderr drain plus what follows here until return.
  const drainMs = Math.max(0, outcome.elapsedMs - outcome.launchMs - outcome.processMs);
  const cpu = outcome.usage === null ? {} : { solverCpuMs: outcome.usage.userMs + outcome.usage.systemMs };
  const timing = (): RunTiming => ({ spawnMs, solverMs, collectMs: drainMs + (performance.now() - settledMs), triageMs: 0, ...cpu, ...idle });

  return finishRun(task, cell, outcome, outputDir, telemetryOut, timing, left);
}

/**
 * The result of a run that was launched: its status, and (unless it was aborted) its outputs and
 * telemetry, collected within the task's caps. The files it read are added to `left`.
 */
function finishRun(
  task: WireTask,
  cell: TaskAbortCell,
  outcome: Awaited<ReturnType<typeof runInProcessGroup>>,
  outputDir: string,
  telemetryOut: string | null,
  timing: () => RunTiming,
  left: string[],
): WireResult {
  const common = {
    exitCode: outcome.code,
    signal: outcome.signal,
    elapsedMs: outcome.elapsedMs,
    solverTimeUs: clampSolverTime(outcome.stderr.solvingTimeUs, outcome.elapsedMs),
    newTestcaseLines: outcome.stderr.newTestcaseLines,
    aborted: outcome.cancelled,
    stderrTail: outcome.stderr.tail,
    stderrTruncated: outcome.stderr.truncated,
  };

  if (outcome.spawnError) {
    const error = new SolverSpawnError(`cannot start solver ${task.command.binary}: ${outcome.spawnError.code ?? outcome.spawnError.message}`, {
      binary: task.command.binary,
      errno: outcome.spawnError.code ?? null,
    });
    return { ...common, ...emptyOutputs(), status: 'error', error: toErrorData(error) };
  }

  const { status, error } = statusOf(outcome, task);

  // An aborted run's result is dropped by the pool: reading its outputs (possibly a flood) would
  // only delay the abort, so it is skipped — and collection stops if the abort arrives during it.
  if (outcome.cancelled || cell.abortRequested) return { ...common, timing: timing(), ...emptyOutputs(), aborted: true, status, ...(error ? { error } : {}) };
  // Outputs are collected on every other path: a killed or crashing run may still have solved branches.
  let collected: CollectedOutputs;
  try {
    collected = collectOutputs(outputDir, task.caps, { stopRequested: () => cell.abortRequested });
  } catch (budget) {
    if (budget instanceof CollectionStopped) return { ...common, timing: timing(), ...emptyOutputs(), aborted: true, status, outputEntriesRead: budget.entriesRead };
    const data = toErrorData(budget);
    if (data.code !== 'ERR_SOLVER_OUTPUT_BUDGET') throw budget;
    return {
      ...common,
      timing: timing(),
      ...emptyOutputs(),
      totalGenerated: Number(data.details?.totalGenerated ?? 0),
      outputEntriesRead: Number(data.details?.entriesRead ?? 0),
      status: 'error',
      error: data,
    };
  }

  for (const name of collected.names) left.push(path.join(outputDir, name));
  const telemetry = telemetryOut === null ? {} : readTelemetry(telemetryOut);
  if (telemetryOut !== null && (telemetry.telemetryText !== undefined || telemetry.telemetryReadError !== undefined)) left.push(telemetryOut);
  // Coverage triage is not done here: the pool triages after this slot was given back
  // (result-triage.ts), so the outputs' bytes travel with the result whenever it asked for triage.
  const withBytes = task.includeBytes || task.triage !== null;
  const generated: GeneratedInput[] = collected.files.map((file) => ({
    name: file.name,
    sha256: file.sha256,
    sizeBytes: file.bytes.length,
    ...(withBytes ? { bytes: file.bytes } : {}),
  }));
  return {
    ...common,
    timing: timing(),
    // An abort that arrives after the solver exited still drops the result.
    aborted: outcome.cancelled || cell.abortRequested,
    ...telemetry,
    status,
    ...(error ? { error } : {}),
    generated,
    totalGenerated: collected.totalGenerated,
    duplicatesDropped: collected.duplicatesDropped,
    ignoredEntries: collected.ignoredEntries,
    outputEntriesRead: collected.entriesRead,
  };
}

function readTelemetry(file: string): Pick<WireResult, 'telemetryText' | 'telemetryReadError'> {
  // Most runs write no telemetry: check first instead of paying for a thrown ENOENT per run.
  if (!existsSync(file)) return {};
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    return { telemetryReadError: toErrorData(error) };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile() || stat.size > TELEMETRY_MAX_BYTES) {
      return {
        telemetryReadError: toErrorData(
          new TelemetryInvalidError(`telemetry file is not a regular file of at most ${TELEMETRY_MAX_BYTES} bytes`, { sizeBytes: stat.size }),
        ),
      };
    }
    return { telemetryText: readFileSync(fd, 'utf8') };
  } finally {
    closeSync(fd);
  }
}

/** Upstream's rule: the backend's solver time can never exceed the wall time of the run. */
function clampSolverTime(solvingTimeUs: number | null, elapsedMs: number): number | null {
  if (solvingTimeUs === null) return null;
  return Math.min(solvingTimeUs, Math.round(elapsedMs * 1000));
}

function emptyOutputs(): Pick<WireResult, 'generated' | 'totalGenerated' | 'duplicatesDropped' | 'ignoredEntries' | 'outputEntriesRead'> {
  return { generated: [], totalGenerated: 0, duplicatesDropped: 0, ignoredEntries: 0, outputEntriesRead: 0 };
}

function failedBeforeStart(error: ErrorData | null, aborted: boolean): WireResult {
  return {
    status: 'error',
    exitCode: null,
    signal: null,
    elapsedMs: 0,
    solverTimeUs: null,
    newTestcaseLines: 0,
    ...emptyOutputs(),
    ...(error ? { error } : {}),
    aborted,
    stderrTail: '',
    stderrTruncated: false,
  };
}
