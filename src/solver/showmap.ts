/**
 * One `afl-showmap -b` run on one candidate input, the way the upstream SymCC helper does it:
 * `showmap -t <ms> -m none -b -q -o <map> -- <target argv>` with `@@` replaced by the candidate's
 * path, or the candidate on stdin when the target has no `@@`. Exit 0 = map written, 1 = the target
 * hung, 2 = the target crashed; anything else is a tool failure. AFL++ tools get an environment
 * without stray `AFL_*` variables (each unknown one costs a 2 s sleep per start).
 *
 * A set-up failure is not a hang: afl-showmap that cannot run the target at all (missing or
 * non-executable target, no instrumentation, fork server handshake failed) prints `PROGRAM ABORT`
 * (on stdout, which we discard) and exits 1 — the exit code of the hang verdict — but, unlike a
 * run that hung, it writes no map (checked with Debian's afl++ 4.04c: a hang there even exits 2
 * with a map). So exit 1 without a map file, or a showmap that cannot be started, is reported as
 * `setupFailure`: the fault is the set-up's, not the candidate's (docs/solver.md, *Triage*).
 *
 * The reference solver's showmap-compatible mode accepts the same argv and exit codes, so triage
 * runs this exact code path with or without AFL++.
 *
 * A run's several outputs go through one `afl-showmap -Z -i <dir> -o <dir>` (`runShowmapBatch`):
 * one process and one fork server for all of them instead of one each (docs/solver.md, *Batch
 * triage*). `-Z` is the mode afl-cmin drives: an input that ran cleanly gets its map file, one that
 * crashed or timed out gets an empty file. A second batch over those with
 * `AFL_CMIN_CRASHES_ONLY=1` (maps for crashes only) tells crashes from hangs. An input with no
 * file at all (showmap skips empty inputs) has no batch verdict; the caller runs it alone.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { aflToolEnv, substituteInputPath } from './solver-env.js';
import { runInProcessGroup } from './process-group.js';
import type { SpawnMethod } from './spawn-method.js';
import type { CommandTemplate, ShowmapOutcome } from './solver-types.js';

/** Extra wall time granted to afl-showmap beyond its own `-t` before we kill it. */
const SHOWMAP_SLACK_MS = 2_000;

/**
 * Triage runs below the solvers' priority (docs/solver.md *Triage priority*): a run's triage
 * starts the moment its solver exits, exactly when the slot's next solver is being started, and
 * on a host whose other cores run AFL++ the two compete for one core.
 */
export const TRIAGE_NICENESS = 10;

export interface ShowmapRequest {
  readonly showmap: CommandTemplate;
  readonly target: CommandTemplate;
  readonly inputMode: 'stdin' | 'file';
  readonly timeoutMs: number;
  /** Scratch directory owned by the caller (candidate and map files are written here). */
  readonly workDir: string;
  readonly candidate: Uint8Array;
  readonly baseEnv?: NodeJS.ProcessEnv;
  /** How afl-showmap is started; default: native when the addon provides it. */
  readonly spawnMethod?: SpawnMethod;
}

export interface ShowmapResult {
  readonly outcome: ShowmapOutcome;
  /** The bucketed map, when `outcome` is `ok`. */
  readonly map?: Uint8Array;
  readonly exitCode: number | null;
  readonly detail?: string;
  /** afl-showmap could not run the target at all (or could not be started): no verdict on the input. */
  readonly setupFailure?: true;
}

function showmapArgv(request: Pick<ShowmapRequest, 'showmap' | 'target' | 'inputMode' | 'timeoutMs'>, mapPath: string, inputPath: string): string[] {
  const targetArgv = request.inputMode === 'file' ? substituteInputPath(request.target.argv, inputPath) : [...request.target.argv];
  return [...request.showmap.argv, '-t', String(Math.max(1, Math.round(request.timeoutMs))), '-m', 'none', '-b', '-q', '-o', mapPath, '--', request.target.binary, ...targetArgv];
}

export async function runShowmap(request: ShowmapRequest): Promise<ShowmapResult> {
  const inputPath = path.join(request.workDir, 'showmap-input');
  const mapPath = path.join(request.workDir, 'showmap-map');
  await fs.rm(mapPath, { force: true });
  if (request.inputMode === 'file') await fs.writeFile(inputPath, request.candidate);
  const outcome = await runInProcessGroup({
    binary: request.showmap.binary,
    argv: showmapArgv(request, mapPath, inputPath),
    env: aflToolEnv(request.baseEnv ?? process.env),
    cwd: request.workDir,
    stdin: request.inputMode === 'stdin' ? request.candidate : null,
    timeoutMs: request.timeoutMs + SHOWMAP_SLACK_MS,
    killGraceMs: 500,
    stderrCapBytes: 4096,
    niceness: TRIAGE_NICENESS,
    ...(request.spawnMethod !== undefined ? { spawnMethod: request.spawnMethod } : {}),
  });
  if (outcome.spawnError) {
    return { outcome: 'error', exitCode: null, setupFailure: true, detail: `cannot start ${request.showmap.binary}: ${outcome.spawnError.code ?? outcome.spawnError.message}` };
  }
  if (outcome.timedOut) return { outcome: 'hang', exitCode: null, detail: 'showmap itself did not finish' };
  switch (outcome.code) {
    case 0: {
      try {
        const map = new Uint8Array(await fs.readFile(mapPath));
        return { outcome: 'ok', map, exitCode: 0 };
      } catch (error) {
        return { outcome: 'error', exitCode: 0, detail: `no map written: ${(error as NodeJS.ErrnoException).code ?? String(error)}` };
      }
    }
    case 1:
      if (!(await exists(mapPath))) {
        const said = outcome.stderr.tail.trim().slice(-300);
        return { outcome: 'error', exitCode: 1, setupFailure: true, detail: `exit 1 without writing a map (the target never ran)${said ? `: ${said}` : ''}` };
      }
      return { outcome: 'hang', exitCode: 1 };
    case 2:
      return { outcome: 'crash', exitCode: 2 };
    default:
      return { outcome: 'error', exitCode: outcome.code, detail: outcome.stderr.tail.slice(-500) };
  }
}

/** One input's verdict from a batch: its map, or the batch's `crash` / `hang`; `null` = no verdict (run it alone). */
export type BatchVerdict = { readonly outcome: 'ok'; readonly map: Uint8Array } | { readonly outcome: 'crash' | 'hang' } | null;

export type BatchRequest = Omit<ShowmapRequest, 'candidate'> & { readonly candidates: readonly Uint8Array[] };

/**
 * Triage of several candidates in one afl-showmap process (two when some crashed or hung), in
 * `request.workDir`. `unsupported`: this showmap did not run the batch as afl-showmap does (it
 * cannot be started, exits with another code, or wrote no file for any input); the caller then
 * runs each candidate alone, which also diagnoses a set-up failure exactly.
 */
export async function runShowmapBatch(request: BatchRequest): Promise<BatchVerdict[] | 'unsupported'> {
  const inDir = path.join(request.workDir, 'batch-in');
  const names = request.candidates.map((_, i) => String(i).padStart(6, '0'));
  await fs.rm(inDir, { recursive: true, force: true });
  await fs.mkdir(inDir);
  await Promise.all(request.candidates.map((bytes, i) => fs.writeFile(path.join(inDir, names[i]!), bytes)));
  const clean = await batchPass(request, inDir, names, 'batch-out', {});
  if (clean === 'unsupported') return clean;
  const failed = names.filter((_, i) => clean[i]?.length === 0);
  let crashed = new Set<string>();
  if (failed.length > 0) {
    // Only the inputs that failed, with maps written for crashes only: empty again = timed out.
    await fs.rm(inDir, { recursive: true, force: true });
    await fs.mkdir(inDir);
    await Promise.all(failed.map((name) => fs.writeFile(path.join(inDir, name), request.candidates[Number(name)]!)));
    const crashes = await batchPass(request, inDir, failed, 'batch-crashes', { AFL_CMIN_CRASHES_ONLY: '1' });
    if (crashes === 'unsupported') return crashes;
    crashed = new Set(failed.filter((_, i) => (crashes[i]?.length ?? 0) > 0));
  }
  return names.map((name, i): BatchVerdict => {
    const map = clean[i];
    if (map === undefined) return null;
    if (map.length > 0) return { outcome: 'ok', map };
    return { outcome: crashed.has(name) ? 'crash' : 'hang' };
  });
}

/** One `-Z` pass over `inDir`: per name, the map file's bytes (empty: crashed or timed out; undefined: none written). */
async function batchPass(
  request: BatchRequest,
  inDir: string,
  names: readonly string[],
  outName: string,
  cminEnv: Readonly<Record<string, string>>,
): Promise<(Uint8Array | undefined)[] | 'unsupported'> {
  const outDir = path.join(request.workDir, outName);
  await fs.rm(outDir, { recursive: true, force: true });
  // afl-showmap itself substitutes `@@` in directory mode (its own temp file), or feeds stdin.
  const timeoutArg = String(Math.max(1, Math.round(request.timeoutMs)));
  const argv = [...request.showmap.argv, '-Z', '-i', inDir, '-o', outDir, '-t', timeoutArg, '-m', 'none', '-b', '-q', '--', request.target.binary, ...request.target.argv];
  const outcome = await runInProcessGroup({
    binary: request.showmap.binary,
    argv,
    // Set after the filter: the cmin variable is ours, not a stray one from the environment.
    env: { ...aflToolEnv(request.baseEnv ?? process.env), ...cminEnv },
    cwd: request.workDir,
    stdin: null,
    timeoutMs: request.timeoutMs * names.length + SHOWMAP_SLACK_MS,
    killGraceMs: 500,
    stderrCapBytes: 4096,
    niceness: TRIAGE_NICENESS,
    ...(request.spawnMethod !== undefined ? { spawnMethod: request.spawnMethod } : {}),
  });
  if (outcome.spawnError || outcome.timedOut || outcome.code === null || outcome.code > 2) return 'unsupported';
  const maps = await Promise.all(names.map((name) => readIfPresent(path.join(outDir, name))));
  return maps.every((map) => map === undefined) ? 'unsupported' : maps;
}

async function readIfPresent(file: string): Promise<Uint8Array | undefined> {
  try {
    return new Uint8Array(await fs.readFile(file));
  } catch (error) {
    // No file (or no directory: a showmap that wrote -o as a file) is no verdict, not a failure.
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw error;
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.access(file);
    return true;
  } catch {
    return false;
  }
}
