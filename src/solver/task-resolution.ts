/**
 * Turning a caller's `SolverTask` into the fully resolved `WireTask` a worker runs: defaults from
 * the pool's solver options, input mode decided, directed job checked. Pure; every bad field is an
 * `InvalidOptionError` or `InvalidJobError` naming the field and the value.
 */
import path from 'node:path';
import { InvalidJobError } from '../errors.js';
import { invalidOption } from '../config/values.js';
import { argvWantsFile, validateTaskEnv } from './solver-env.js';
import type { SolverOptions } from './solver-options.js';
import type { SpawnMethod } from './spawn-method.js';
import type { ActionKind, CommandTemplate, DirectedJob, InputMode, SolverTask, TriageSettings, WireTask } from './solver-types.js';

const MAX_U64 = (1n << 64n) - 1n;
const MAX_ACTIONS = 64;
/** The preload library reads at most this many wanted branches. */
const MAX_WANTED = 256;
const ACTION_KINDS: readonly ActionKind[] = ['solve', 'sample', 'skip'];

const invalid = invalidOption;

function checkCommand(field: string, command: unknown): CommandTemplate {
  const c = command as CommandTemplate | undefined;
  if (typeof c !== 'object' || c === null || typeof c.binary !== 'string' || c.binary.length === 0 || c.binary.includes('\0')) {
    throw invalid(`${field}.binary`, 'a non-empty program path', c?.binary);
  }
  if (!Array.isArray(c.argv) || !c.argv.every((a) => typeof a === 'string' && !a.includes('\0'))) {
    throw invalid(`${field}.argv`, 'an array of strings', c.argv);
  }
  return { binary: c.binary, argv: [...c.argv] };
}

function decideMode(field: string, mode: InputMode | undefined, fallback: InputMode, argv: readonly string[]): 'stdin' | 'file' {
  const chosen = mode ?? fallback;
  if (chosen !== 'auto' && chosen !== 'stdin' && chosen !== 'file') throw invalid(field, 'auto, stdin or file', chosen);
  if (chosen === 'auto') return argvWantsFile(argv) ? 'file' : 'stdin';
  return chosen;
}

function positive(field: string, value: number | undefined, fallback: number, allowZero = false): number {
  const v = value ?? fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || (!allowZero && v === 0)) {
    throw invalid(field, allowZero ? 'a finite number ≥ 0' : 'a finite number > 0', v);
  }
  return v;
}

/** Checks a directed job; ids must be u64 bigints, kinds solve/sample/skip, ≤ 64 actions. */
export function checkDirectedJob(job: DirectedJob | undefined): DirectedJob | null {
  if (job === undefined) return null;
  if (typeof job !== 'object' || job === null) throw new InvalidJobError(`job must be an object, got ${String(job)}`, { field: 'job' });
  if (job.traceOnly !== undefined && typeof job.traceOnly !== 'boolean') {
    throw new InvalidJobError(`job.traceOnly must be a boolean, got ${String(job.traceOnly)}`, { field: 'traceOnly' });
  }
  if (typeof job.targetBranch !== 'bigint' || job.targetBranch < 0n || job.targetBranch > MAX_U64) {
    throw new InvalidJobError(`job.targetBranch must be a bigint in 0..2^64-1, got ${String(job.targetBranch)}`, { field: 'targetBranch' });
  }
  if (!Array.isArray(job.actions) || job.actions.length > MAX_ACTIONS) {
    throw new InvalidJobError(`job.actions must be an array of at most ${MAX_ACTIONS} actions`, { field: 'actions' });
  }
  for (const action of job.actions) {
    if (typeof action?.branch !== 'bigint' || action.branch < 1n || action.branch > MAX_U64 || !ACTION_KINDS.includes(action.kind)) {
      throw new InvalidJobError(`job action must be { branch: 1..2^64-1 bigint, kind: solve|sample|skip }`, {
        field: 'actions',
        branch: String(action?.branch),
        kind: String(action?.kind),
      });
    }
  }
  const wanted = job.wanted ?? [];
  if (!Array.isArray(wanted) || wanted.length > MAX_WANTED) {
    throw new InvalidJobError(`job.wanted must be an array of at most ${MAX_WANTED} branch ids`, { field: 'wanted' });
  }
  for (const branch of wanted) {
    if (typeof branch !== 'bigint' || branch < 1n || branch > MAX_U64) {
      throw new InvalidJobError(`job.wanted entries must be bigints in 1..2^64-1, got ${String(branch)}`, { field: 'wanted', branch: String(branch) });
    }
  }
  if (job.traceOnly === true) {
    // A trace-only run solves nothing, so a target or an action would be a promise it cannot keep.
    if (job.targetBranch !== 0n || job.actions.length > 0) {
      throw new InvalidJobError('job.traceOnly excludes a target branch and actions', { field: 'traceOnly' });
    }
    return { targetBranch: 0n, actions: [], traceOnly: true, ...(wanted.length > 0 ? { wanted: [...new Set(wanted)] } : {}) };
  }
  if (wanted.length > 0) throw new InvalidJobError('job.wanted needs job.traceOnly (a directed run names its branches as actions)', { field: 'wanted' });
  if (job.targetBranch === 0n && job.actions.length === 0) return null;
  return { targetBranch: job.targetBranch, actions: job.actions.map((a) => ({ branch: a.branch, kind: a.kind })) };
}

/**
 * The preload library path: absolute, and free of the characters the dynamic loader splits
 * `LD_PRELOAD` on (colon, whitespace), which would silently load something else.
 */
function checkPreload(preload: unknown): string | null {
  if (preload === undefined) return null;
  if (typeof preload !== 'string' || !path.isAbsolute(preload) || /[:\s\0]/.test(preload)) {
    throw invalid('preload', 'an absolute library path without colons or whitespace', preload);
  }
  return preload;
}

function resolveTriage(triage: TriageSettings | undefined, options: SolverOptions): WireTask['triage'] {
  if (triage === undefined) return null;
  const showmap = checkCommand('triage.showmap', triage.showmap);
  const target = checkCommand('triage.target', triage.target);
  return {
    showmap,
    target,
    inputMode: decideMode('triage.inputMode', triage.inputMode, 'auto', target.argv),
    timeoutMs: positive('triage.timeoutMs', triage.timeoutMs, options.showmapTimeoutMs),
  };
}

/**
 * `slot`: the pool's solver slot the task runs in. `spawnMethod`: decided once by the pool (it
 * depends on the addon), passed through to the solver thread.
 */
export function resolveTask(task: SolverTask, options: SolverOptions, taskId: number, abortBuffer: SharedArrayBuffer, slot: number, spawnMethod?: SpawnMethod): WireTask {
  if (typeof task !== 'object' || task === null) throw invalid('task', 'an object', task);
  const command = checkCommand('command', task.command);
  const input = task.input as { path?: unknown; bytes?: unknown } | undefined;
  if (typeof input !== 'object' || input === null) throw invalid('input', '{ path } or { bytes }', input);
  let resolvedInput: WireTask['input'];
  if (typeof input.path === 'string' && input.path.length > 0) resolvedInput = { path: input.path };
  else if (input.bytes instanceof Uint8Array) resolvedInput = { bytes: input.bytes };
  else throw invalid('input', '{ path: string } or { bytes: Uint8Array }', JSON.stringify(input));
  const caps = {
    maxOutputFiles: positive('caps.maxOutputFiles', task.caps?.maxOutputFiles, options.maxOutputFiles),
    maxOutputFileBytes: positive('caps.maxOutputFileBytes', task.caps?.maxOutputFileBytes, options.maxOutputFileBytes),
    maxOutputTotalBytes: positive('caps.maxOutputTotalBytes', task.caps?.maxOutputTotalBytes, options.maxOutputTotalBytes),
  };
  return {
    taskId,
    abortBuffer,
    input: resolvedInput,
    command,
    env: validateTaskEnv(task.env),
    inputMode: decideMode('inputMode', task.inputMode, options.inputMode, command.argv),
    timeoutMs: positive('timeoutMs', task.timeoutMs, options.timeoutMs),
    killGraceMs: positive('killGraceMs', task.killGraceMs, options.killGraceMs, true),
    caps,
    stderrCapBytes: positive('stderrCapBytes', task.stderrCapBytes, options.stderrCapBytes),
    job: checkDirectedJob(task.job),
    telemetry: task.telemetry ?? true,
    triage: resolveTriage(task.triage, options),
    includeBytes: task.includeBytes ?? true,
    preload: checkPreload(task.preload),
    ...(spawnMethod !== undefined ? { spawnMethod } : {}),
    slot,
  };
}
