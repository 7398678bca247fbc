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
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { aflToolEnv, substituteInputPath } from './solver-env.js';
import { runInProcessGroup } from './process-group.js';
import type { SpawnMethod } from './spawn-method.js';
import type { CommandTemplate, ShowmapOutcome } from './solver-types.js';

/** Extra wall time granted to afl-showmap beyond its own `-t` before we kill it. */
const SHOWMAP_SLACK_MS = 2_000;

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

async function exists(file: string): Promise<boolean> {
  try {
    await fs.access(file);
    return true;
  } catch {
    return false;
  }
}
