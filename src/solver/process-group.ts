/**
 * Running one subprocess in its own process group, with a timeout, a kill grace and an external
 * cancel hook. Used for the solver and for afl-showmap.
 *
 * Why a process group: SymCC targets (and wrappers) may fork; a timeout must take the grandchildren
 * down too, so the child starts in a new session (it becomes a group leader, pgid = pid) and every
 * kill goes to `-pid`. Kill sequence on timeout or cancel: SIGTERM to the group, SIGKILL to the
 * group after `killGraceMs` if the leader is still alive. When the leader exits, the group gets a
 * final SIGKILL regardless of how it ended, so nothing it forked outlives the run (ESRCH — an
 * already empty group — is the normal case and ignored). No shell is ever involved.
 *
 * How the process is started is the launcher's business (process-launchers.ts): the native
 * posix_spawn path when the addon provides it, else `child_process.spawn`; `spawnMethod` forces one.
 * With the spawn shim built, either launcher puts the program under it (docs/native.md): the shim
 * is then the leader, forwards SIGTERM to the program's group, takes "kill now" as SIGUSR1 (hence
 * `LaunchedProcess.kill`, not a raw group SIGKILL), and before it exits kills everything the run
 * left behind — processes that left the group with setsid() included — so nothing outlives the run
 * even when its coordinator is SIGKILLed.
 */
import os from 'node:os';
import { launcherFor, type LaunchedProcess, type Launcher, type LaunchRequest, type RunUsage } from './process-launchers.js';
import { resolveSpawnMethod, type SpawnMethod } from './spawn-method.js';
import { StderrCapture } from './stderr-capture.js';

/**
 * The CPU-time backstop (RLIMIT_CPU under the spawn shim): the wall-clock budget of the run —
 * timeout plus kill grace — in whole seconds, rounded up. It only matters when our own timer can
 * no longer fire (coordinator gone): a single-threaded program cannot use more CPU than wall time.
 */
function cpuLimitSec(timeoutMs: number, killGraceMs: number): number {
  return Math.max(1, Math.ceil((timeoutMs + killGraceMs) / 1000));
}

/** What to start (as for a launcher; the stderr drain and CPU limit follow from the policy), and the run's policy. */
export interface GroupRunOptions extends Omit<LaunchRequest, 'stderrDrainMs' | 'cpuLimitSec'> {
  readonly timeoutMs: number;
  readonly killGraceMs: number;
  readonly stderrCapBytes: number;
  /** Resolves when the caller wants the run cancelled (never resolving = not cancellable). */
  readonly cancelled?: Promise<boolean>;
  /** Clock for elapsed time (injected for tests); defaults to `performance.now`. */
  readonly nowMs?: () => number;
  /** How to start the process; default: native when the addon provides it (`resolveSpawnMethod('auto')`). */
  readonly spawnMethod?: SpawnMethod;
  /**
   * A nice value for the started process (`setpriority` on its pid right after the launch; what
   * it forks afterwards inherits it). Best effort: a process that is already gone is not an error.
   */
  readonly niceness?: number;
}

interface GroupRunOutcome {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timedOut: boolean;
  readonly cancelled: boolean;
  /** Set when the process could not be started (ENOENT, EACCES …). */
  readonly spawnError: NodeJS.ErrnoException | null;
  readonly elapsedMs: number;
  /** From the call to the launcher returning: the cost of starting the process, ms. */
  readonly launchMs: number;
  /** From the launcher returning to the leader's exit (its lifetime as seen here), ms; elapsedMs when it never exited. */
  readonly processMs: number;
  /** The program's CPU time and peak RSS, when its run supervisor reported them (native path); else null. */
  readonly usage: RunUsage | null;
  readonly stderr: StderrCapture;
}

let autoLauncher: Launcher | undefined;

function lowerPriority(pid: number, niceness: number): void {
  try {
    os.setPriority(pid, niceness);
  } catch {
    // Gone already (it exited at once), or not ours to change: its priority does not change a result.
  }
}

function launcher(method: SpawnMethod | undefined): Launcher {
  if (method !== undefined) return launcherFor(method);
  autoLauncher ??= launcherFor(resolveSpawnMethod('auto'));
  return autoLauncher;
}

/** Shortest stderr drain after exit: the last buffered chunk of a dead group is read in time. */
const STDERR_DRAIN_FLOOR_MS = 250;

/**
 * Contract: resolves exactly once, after the leader was reaped and its stderr reached EOF (or the
 * start failed); by then the process group has had its final SIGKILL (under the spawn shim: every
 * process of the run is dead and reaped) and every timer is cleared.
 */
export function runInProcessGroup(options: GroupRunOptions): Promise<GroupRunOutcome> {
  const now = options.nowMs ?? (() => performance.now());
  const stderr = new StderrCapture(options.stderrCapBytes);
  const started = now();
  const launch = launcher(options.spawnMethod);

  return new Promise<GroupRunOutcome>((resolve) => {
    let timedOut = false;
    let cancelled = false;
    let killing = false;
    let spawnError: NodeJS.ErrnoException | null = null;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let usage: RunUsage | null = null;
    let timeoutTimer: NodeJS.Timeout | null = null;
    let graceTimer: NodeJS.Timeout | null = null;
    let settled = false;
    let child: LaunchedProcess | undefined;
    let launchedAt: number | null = null;
    let exitedAt: number | null = null;

    const finish = (): void => {
      if (settled) return;
      settled = true;
      if (timeoutTimer) clearTimeout(timeoutTimer);
      if (graceTimer) clearTimeout(graceTimer);
      stderr.end();
      const end = now();
      const launched = launchedAt ?? end;
      resolve({
        code: exit?.code ?? null,
        signal: exit?.signal ?? null,
        timedOut,
        cancelled,
        spawnError,
        elapsedMs: end - started,
        launchMs: launched - started,
        processMs: Math.max(0, (exitedAt ?? end) - launched),
        usage,
        stderr,
      });
    };

    child = launch(
      // stderr of an exited run is drained for at most the kill grace (see LaunchRequest).
      {
        binary: options.binary,
        argv: options.argv,
        env: options.env,
        cwd: options.cwd,
        stdin: options.stdin,
        stderrDrainMs: Math.max(STDERR_DRAIN_FLOOR_MS, options.killGraceMs),
        cpuLimitSec: cpuLimitSec(options.timeoutMs, options.killGraceMs),
      },
      {
        stderr: (chunk) => stderr.push(chunk),
        exit: (code, signal, reported) => {
          exit = { code, signal };
          usage = reported ?? null;
          exitedAt = now();
          // Exited in time: the timeout no longer applies, even if stderr is still draining.
          if (timeoutTimer) clearTimeout(timeoutTimer);
        },
        close: finish,
        spawnError: (error) => {
          spawnError = error;
          finish();
        },
      },
    );
    launchedAt = now();
    if (child === undefined || settled) return;
    const leader = child;
    if (options.niceness !== undefined) lowerPriority(leader.pid, options.niceness);

    const beginKill = (): void => {
      if (killing || exit !== null || settled) return;
      killing = true;
      leader.kill('SIGTERM');
      graceTimer = setTimeout(() => {
        if (exit === null) leader.kill('SIGKILL');
      }, options.killGraceMs);
    };

    if (exit === null) {
      timeoutTimer = setTimeout(() => {
        if (exit !== null || settled) return;
        timedOut = true;
        beginKill();
      }, options.timeoutMs);
    }

    options.cancelled?.then(
      (cancel) => {
        if (!cancel || exit !== null || settled) return;
        cancelled = true;
        beginKill();
      },
      () => {}, // a failing cancel source cancels nothing
    );
  });
}
