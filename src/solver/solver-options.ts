/**
 * The solver component's options: how long a SymCC run may take, how it is killed, and how much
 * output a run may leave behind before the whole result is refused. One schema, shared by the
 * library (`SolverPool`), the CLI flags and the `SYMFENCE_SOLVER_*` environment variables.
 */
import { defineOptionSchema, omitOptions, type ResolvedOptions } from '../config/schema.js';
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import path from 'node:path';
import { invalidOption } from '../config/values.js';
import { userPathError } from '../config/user-paths.js';

export const SOLVER_OPTIONS = defineOptionSchema('solver', {
  /** Number of solver slots (one SymCC subprocess each at a time). Default 2. */
  workers: {
    kind: 'integer',
    default: 2,
    min: 1,
    max: 256,
    flag: 'solver-workers',
    env: 'SYMFENCE_SOLVER_WORKERS',
    description: 'solver slots, each running one SymCC process at a time',
  },
  /** Wall-clock limit of one solver run, in ms. Default 30 s. */
  timeoutMs: {
    kind: 'duration',
    default: 30_000,
    min: 1,
    max: 86_400_000,
    flag: 'solver-timeout',
    env: 'SYMFENCE_SOLVER_TIMEOUT',
    description: 'wall-clock limit of one solver run',
  },
  /** Time between SIGTERM and SIGKILL of the solver's process group, in ms. Default 5 s. */
  killGraceMs: {
    kind: 'duration',
    default: 5_000,
    min: 0,
    max: 600_000,
    flag: 'solver-kill-grace',
    env: 'SYMFENCE_SOLVER_KILL_GRACE',
    description: 'grace between SIGTERM and SIGKILL of the solver process group',
  },
  /**
   * Most generated files one run may leave; more refuses the result. Default 4096. At most 100,000:
   * a committed result names every finding in its commit manifest (`MAX_MANIFEST_ITEMS`).
   */
  maxOutputFiles: {
    kind: 'integer',
    default: 4096,
    min: 1,
    max: 100_000,
    flag: 'solver-max-outputs',
    env: 'SYMFENCE_SOLVER_MAX_OUTPUTS',
    description: 'most generated inputs one run may leave (more refuses the result)',
  },
  /** Largest single generated file, in bytes. Default 1 MiB; at most 64 MiB (`MAX_STAGED_BYTES`). */
  maxOutputFileBytes: {
    kind: 'size',
    default: 1024 * 1024,
    min: 1,
    max: 64 * 1024 * 1024,
    flag: 'solver-max-output-size',
    env: 'SYMFENCE_SOLVER_MAX_OUTPUT_SIZE',
    description: 'largest single generated input (larger refuses the result)',
  },
  /** Total bytes of generated files of one run. Default 64 MiB. */
  maxOutputTotalBytes: {
    kind: 'size',
    default: 64 * 1024 * 1024,
    min: 1,
    flag: 'solver-max-output-total',
    env: 'SYMFENCE_SOLVER_MAX_OUTPUT_TOTAL',
    description: 'total bytes of generated inputs of one run (more refuses the result)',
  },
  /** Bytes of solver stderr kept per run (the tail is parsed for `[STAT] SMT:`). Default 64 KiB. */
  stderrCapBytes: {
    kind: 'size',
    default: 64 * 1024,
    min: 1024,
    max: 64 * 1024 * 1024,
    flag: 'solver-stderr-cap',
    env: 'SYMFENCE_SOLVER_STDERR_CAP',
    description: 'bytes of solver stderr kept per run',
  },
  /** Size of the shared AFL coverage map, in bytes. Default 64 KiB (AFL's MAP_SIZE). */
  mapSizeBytes: {
    kind: 'size',
    default: 65_536,
    min: 8,
    max: 64 * 1024 * 1024,
    flag: 'map-size',
    env: 'SYMFENCE_MAP_SIZE',
    description: 'size of the AFL coverage map shared by the solver threads',
  },
  /**
   * Which thread serves the solver slots (docs/solver.md "Solver threads", "Per-run overhead").
   * `worker`: solver threads, `slotsPerThread` slots each. `main`: the pool's calling thread
   * serves every slot and no solver thread starts; it costs the least CPU (no isolate to warm up,
   * no message per run, and with `child_process` spawning no fork from a process with busy
   * threads), but the slots' run-directory bookkeeping and output reading (bounded by the output
   * caps) then run synchronously on the calling thread. `auto` (default): `main` for up to
   * `AUTO_MAIN_THREAD_SLOTS` workers, `worker` above.
   */
  spawnThread: {
    kind: 'enum',
    values: ['auto', 'worker', 'main'] as const,
    default: 'auto',
    flag: 'solver-spawn-thread',
    env: 'SYMFENCE_SOLVER_SPAWN_THREAD',
    description: 'thread that serves the solver slots: worker (solver threads), main (the calling thread: least CPU, but output reading runs on it) or auto (main up to 2 workers)',
  },
  /**
   * How many solver slots one solver worker thread serves (docs/solver.md "Solver threads"): the
   * pool starts ceil(workers / slotsPerThread) threads. A thread waits on its slots' processes
   * through its event loop, so one thread keeps several slots busy; every extra thread costs an
   * isolate of its own (its memory, its JIT and GC, a message hop per run). 1 gives every slot a
   * thread of its own. Ignored when the calling thread serves the slots (`spawnThread` `main`, or
   * `auto` up to `AUTO_MAIN_THREAD_SLOTS` workers). Default 4.
   */
  slotsPerThread: {
    kind: 'integer',
    default: 4,
    min: 1,
    max: 256,
    flag: 'solver-slots-per-thread',
    env: 'SYMFENCE_SOLVER_SLOTS_PER_THREAD',
    description: 'solver slots served by one solver thread (threads = workers / this, rounded up)',
  },
  /**
   * How solver and afl-showmap processes are started. `auto` (default): `native` when the addon
   * provides it, else `child-process`. `native`: the addon's posix_spawn (no page-table copy; see
   * docs/native.md) — refused with ERR_NATIVE_UNAVAILABLE when the addon lacks it.
   * `child-process`: Node's `child_process.spawn` (libuv forks).
   */
  spawnMethod: {
    kind: 'enum',
    values: ['auto', 'native', 'child-process'] as const,
    default: 'auto',
    flag: 'solver-spawn-method',
    env: 'SYMFENCE_SOLVER_SPAWN_METHOD',
    description: 'how solver processes are started: auto (native when the addon has it), native (posix_spawn) or child-process',
  },
  /** How the target reads its input: `stdin`, `file` (`@@`), or `auto` (file when argv has `@@`). */
  inputMode: {
    kind: 'enum',
    values: ['auto', 'stdin', 'file'] as const,
    default: 'auto',
    flag: 'input-mode',
    env: 'SYMFENCE_INPUT_MODE',
    description: 'how the target reads its input (auto = file when argv contains @@)',
  },
  /** afl-showmap's per-input timeout (`-t`), in ms. Default 5 s. */
  showmapTimeoutMs: {
    kind: 'duration',
    default: 5_000,
    min: 1,
    max: 600_000,
    flag: 'showmap-timeout',
    env: 'SYMFENCE_SHOWMAP_TIMEOUT',
    description: 'afl-showmap timeout per generated input',
  },
  /**
   * How many entries of the scratch directory (finished and aborted runs' directories, possibly a
   * solver's flood) `close()` removes before it returns; the next pool's sweep removes the rest
   * (docs/solver.md, *Where a run's directory goes*). Default 20,000.
   */
  closeRemovalEntries: {
    kind: 'integer',
    default: 20_000,
    min: 0,
    max: 100_000_000,
    flag: 'solver-close-removal-entries',
    env: 'SYMFENCE_SOLVER_CLOSE_REMOVAL_ENTRIES',
    description: 'scratch entries removed at shutdown at most; the next start removes the rest',
  },
  /**
   * Parent of the pool's scratch directory, where every run gets a fresh directory for its input
   * copy and outputs (docs/solver.md "Scratch directories"): an existing, writable directory.
   * Default: `/dev/shm` when it is a writable directory, else the tmp directory. Each run creates
   * and removes two directories, which costs several times the CPU on a disk filesystem.
   */
  scratchDir: {
    kind: 'string',
    default: undefined,
    flag: 'solver-scratch-dir',
    env: 'SYMFENCE_SOLVER_SCRATCH_DIR',
    description: 'existing, writable directory under which each solver run gets its scratch directory (memory-backed is fastest)',
    defaultHelp: '/dev/shm when writable, else the tmp directory',
  },
  /** The time `close()` spends removing the scratch directory at most, in ms. Default 2 s. */
  closeRemovalMs: {
    kind: 'duration',
    default: 2_000,
    min: 0,
    max: 600_000,
    flag: 'solver-close-removal-time',
    env: 'SYMFENCE_SOLVER_CLOSE_REMOVAL_TIME',
    description: 'time spent removing scratch files at shutdown at most; the next start removes the rest',
  },
});

export type SolverOptions = ResolvedOptions<typeof SOLVER_OPTIONS.specs>;

/**
 * Most workers `spawnThread: 'auto'` serves on the calling thread. Per job that thread then does
 * about 1.5 ms more (run directory, output reading) and the process saves a solver thread's ~3 ms
 * (docs/solver.md "Solver threads"); two slots of short directed runs (25 ms) keep it under half
 * busy, while more would make it the campaign's bottleneck.
 */
export const AUTO_MAIN_THREAD_SLOTS = 2;

/** The thread `options` serves its slots on: `spawnThread` with `auto` decided by the worker count. */
export function resolveSpawnThread(options: Pick<SolverOptions, 'spawnThread' | 'workers'>): 'worker' | 'main' {
  if (options.spawnThread !== 'auto') return options.spawnThread;
  return options.workers <= AUTO_MAIN_THREAD_SLOTS ? 'main' : 'worker';
}

/**
 * The solver options a campaign command exposes as its own flags: the campaign's options own the
 * worker count and the solver timeout, and the input mode follows the command (`@@` or stdin).
 */
export const SOLVER_CAMPAIGN_OPTIONS = omitOptions(SOLVER_OPTIONS, ['workers', 'timeoutMs', 'inputMode']);

/**
 * Resolves solver options and checks the cross-field rules the per-option ranges cannot express.
 * Throws `InvalidOptionError` naming the option and the value.
 */
export function resolveSolverOptions(input: object = {}): SolverOptions {
  const options = SOLVER_OPTIONS.resolve(input);
  if (options.maxOutputFileBytes > options.maxOutputTotalBytes) {
    throw invalidOption(
      'maxOutputFileBytes',
      `at most maxOutputTotalBytes (${options.maxOutputTotalBytes} bytes)`,
      options.maxOutputFileBytes,
    );
  }
  if (options.mapSizeBytes % 8 !== 0) {
    throw invalidOption('mapSizeBytes', 'a multiple of 8 bytes', options.mapSizeBytes);
  }
  return options;
}

/**
 * The option `scratchDir`, checked to be a writable directory (resolved to an absolute path): a
 * wrong one is refused as `ERR_INVALID_OPTION` naming it, before a pool makes anything.
 */
export function checkScratchDir(dir: string | undefined): string | undefined {
  if (dir === undefined) return undefined;
  try {
    if (!statSync(dir).isDirectory()) throw Object.assign(new Error(`${dir} is not a directory`), { code: 'ENOTDIR' });
    accessSync(dir, fsConstants.W_OK);
  } catch (error) {
    throw userPathError('scratchDir (--solver-scratch-dir)', dir, 'solver scratch directory', error);
  }
  return path.resolve(dir);
}
