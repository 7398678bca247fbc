/**
 * The small N-API addon in `native-bindings/`: what Node itself cannot do for the lease tables, and
 * a cheaper way to start solver processes.
 *
 * `flock` gives cross-process record locks that the kernel frees when the holder dies (Node has
 * no flock); `syncfs` makes a whole batch of files durable with one call; `spawnGroup` starts a
 * process with posix_spawn (no page-table copy, unlike libuv's fork) and watches it on the calling
 * thread's event loop (see docs/native.md). The addon is built by
 * node-gyp during `npm ci`. When it is missing, `loadNative()` returns `null`: single-coordinator
 * mode keeps working (the I/O thread is the only writer), multi-coordinator mode refuses to start.
 */
import { accessSync, constants as fsConstants } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { NativeUnavailableError } from '../errors.js';
import { PACKAGE_ROOT } from '../util/paths.js';

export interface NativeBindings {
  /**
   * `flock(fd, LOCK_EX | LOCK_NB)`. Returns true when the lock was taken, false when another open
   * file description holds it (EWOULDBLOCK). Any other errno throws an Error whose `code` is the
   * errno name (e.g. `EBADF`).
   */
  tryLockExclusive(fd: number): boolean;
  /** `flock(fd, LOCK_UN)`. Throws with the errno name as `code` on failure. */
  unlock(fd: number): void;
  /** `syncfs(fd)`: flush every dirty page of the filesystem holding `fd`. Throws on failure. */
  syncfs(fd: number): void;
  /**
   * Starts `file` with posix_spawn in a new session (pgid = pid) and watches it on this thread's
   * loop; see `native-bindings/spawn_group.c` for the exact child setup. Returns the pid. Throws
   * an Error whose `code` is the errno name when the program cannot be started (`ENOENT`,
   * `EACCES` …). `onExit` runs once the leader is reaped (its group has already had a SIGKILL);
   * `onClose` once it is reaped and stderr reached EOF. Absent when the addon was built without
   * it or the kernel lacks `pidfd_open` (then `spawnUnsupported` says why).
   */
  spawnGroup?(
    options: NativeSpawnOptions,
    onStderr: (chunk: Buffer) => void,
    onExit: (code: number | null, signal: number | null, usage: NativeRunUsage | null) => void,
    onClose: () => void,
  ): number;
  /**
   * Signals the process group of a run this thread started with `supervisor`, through its
   * supervisor (which has not reaped the program yet, so the group cannot be a stranger's).
   * False when no such run is live any more.
   */
  signalSupervised?(pid: number, signo: number): boolean;
  /** Why `spawnGroup` is missing, when it is. */
  readonly spawnUnsupported?: string;
}

export interface NativeSpawnOptions {
  /** Program; a name without `/` is searched in `env`'s PATH (default `/bin:/usr/bin`), like execvp. */
  readonly file: string;
  /** Full argv, `argv[0]` included. */
  readonly argv: readonly string[];
  /** `NAME=value` strings: the child's whole environment. */
  readonly env: readonly string[];
  readonly cwd?: string;
  /** fd for stdin (`-1` = `/dev/null`). */
  readonly stdinFd?: number;
  /** Bytes the child reads on stdin, then EOF (a memfd; overrides `stdinFd`). */
  readonly stdinBytes?: Uint8Array;
  /**
   * Once the leader is reaped, wait at most this long for stderr EOF, then stop reading and close
   * (a process that left the group may hold the pipe open). Absent or 0: wait for EOF.
   */
  readonly stderrDrainMs?: number;
  /**
   * Start the program under this spawn shim (`SPAWN_SHIM_PATH`, see docs/native.md): `file` must
   * then be the resolved program path; the returned pid is the shim's, and "kill now" is SIGUSR1 to
   * it (a SIGKILLed shim could not kill what left the process group).
   */
  readonly shim?: string;
  /**
   * Start the program through a long-lived run supervisor of this thread (`SPAWN_SHIM_PATH
   * --serve`, see docs/native.md, *Run supervisor*): `file` must be the resolved program path; the
   * returned pid is the program's; signals go through `signalSupervised`; `onExit` gets the
   * program's rusage. Takes precedence over `shim`.
   */
  readonly supervisor?: string;
  /** With `shim` or `supervisor`: RLIMIT_CPU of the program, soft (hard = +1 s); 0 = unchanged. */
  readonly cpuLimitSec?: number;
}

/** A supervised run's resource usage (getrusage of the program, its reaped descendants included). */
export interface NativeRunUsage {
  readonly userUs: number;
  readonly systemUs: number;
  readonly maxRssKb: number;
}

/** Where node-gyp leaves the addon. */
export const NATIVE_ADDON_PATH = path.join(PACKAGE_ROOT, 'native-bindings', 'build', 'Release', 'symfence_native.node');

/**
 * The spawn shim node-gyp builds next to the addon (native-bindings/spawn_shim.c): the per-run
 * supervisor that gives every solver run a parent-death signal, a CPU-time backstop and a
 * subreaper that kills what the run left behind (docs/native.md, *Spawn shim*).
 */
export const SPAWN_SHIM_PATH = path.join(PACKAGE_ROOT, 'native-bindings', 'build', 'Release', 'symfence_spawn_shim');

let shimChecked: string | null | undefined;

/**
 * `SPAWN_SHIM_PATH` when it is an executable file here, else null (then runs start unsupervised).
 * `SYMFENCE_SPAWN_SHIM=0` turns the shim off (to measure its cost, or to rule it out).
 */
export function spawnShimPath(): string | null {
  if (shimChecked !== undefined) return shimChecked;
  if (process.env['SYMFENCE_SPAWN_SHIM'] === '0') return (shimChecked = null);
  try {
    accessSync(SPAWN_SHIM_PATH, fsConstants.X_OK);
    shimChecked = SPAWN_SHIM_PATH;
  } catch {
    shimChecked = null;
  }
  return shimChecked;
}

/**
 * How native spawns are supervised when the shim is built (docs/native.md): `supervisor` — one
 * long-lived supervisor process per concurrent run per thread, the default — or `per-run`, one
 * shim process started for every run (`SYMFENCE_SPAWN_SHIM=per-run`; kept to measure the
 * difference, `npm run bench -- dispatch`). The child_process path always uses the per-run shim:
 * passing fds to a supervisor needs the addon. Read at each spawn.
 */
export function nativeSupervision(): 'supervisor' | 'per-run' | 'none' {
  if (spawnShimPath() === null) return 'none';
  return process.env['SYMFENCE_SPAWN_SHIM'] === 'per-run' ? 'per-run' : 'supervisor';
}

let cached: NativeBindings | null | undefined;
let loadError: Error | undefined;

/** The addon, or `null` when it is not built here. Loaded once per thread. */
export function loadNative(): NativeBindings | null {
  if (cached !== undefined) return cached;
  try {
    cached = createRequire(import.meta.url)(NATIVE_ADDON_PATH) as NativeBindings;
  } catch (error) {
    cached = null;
    loadError = error as Error;
  }
  return cached;
}

/** Why `loadNative()` returned null, for the refusal message. */
export function nativeLoadError(): Error | undefined {
  loadNative();
  return loadError;
}

/**
 * The addon, or a `NativeUnavailableError` naming what needs it (`purpose`, e.g.
 * "multi-coordinator mode") and why loading failed. For code paths that cannot run without flock.
 */
export function requireNative(purpose: string): NativeBindings {
  const native = loadNative();
  if (native) return native;
  const reason = nativeLoadError()?.message ?? 'unknown reason';
  throw new NativeUnavailableError(
    `${purpose} needs the native addon (flock across processes), which is not loadable from ` +
      `${NATIVE_ADDON_PATH}: ${reason}. Rebuild it with \`npm run build:native\` (node-gyp, C compiler ` +
      'and the local Node headers are required).',
    { purpose, addonPath: NATIVE_ADDON_PATH, reason },
  );
}
