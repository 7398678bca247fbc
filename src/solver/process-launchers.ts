/**
 * The two ways `runInProcessGroup` starts a process (see spawn-method.ts). A launcher starts the
 * child in its own session/process group and reports through `LaunchEvents`; the run's policy —
 * timeout, kill sequence, cancellation, stderr capture — stays in process-group.ts, so both paths
 * obey the same contract and the same tests.
 *
 * Event contract, both launchers:
 *   spawnError ──(nothing follows)
 *   stderr* ── exit ── close       (stderr chunks may also arrive after exit, never after close;
 *                                   close comes at most `stderrDrainMs` after exit)
 * `exit` comes after the whole process group has been sent a final SIGKILL, so nothing the
 * leader forked outlives the run.
 *
 * Supervision: when the spawn shim is built (`spawnShimPath()`, docs/native.md) both launchers
 * start the program under it. The shim then is the leader (the returned pid): it gives the program
 * a parent-death signal and RLIMIT_CPU (`cpuLimitSec`), and kills and reaps everything the run
 * left behind — also processes that left the group with setsid() — before it exits. Its "kill now"
 * is SIGUSR1 (`LaunchedProcess.kill('SIGKILL')`): a SIGKILLed shim could not clean up. The
 * program path is resolved here first (execvp's lookup, program-lookup.ts), so a missing program
 * is still a `spawnError`, not an exit code.
 *
 * On the native path the shim runs as long-lived run supervisors instead (`nativeSupervision()`,
 * docs/native.md, *Run supervisor*): the same guarantees, no extra process per run. The pid is
 * then the program's, both signals go through its supervisor, and `exit` carries the rusage.
 */
import { spawn, type StdioOptions } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { loadNative, nativeSupervision, spawnShimPath, type NativeRunUsage } from '../native/bindings.js';
import { NativeUnavailableError } from '../errors.js';
import { resolveProgramPath } from './program-lookup.js';
import type { SpawnMethod } from './spawn-method.js';

export interface LaunchRequest {
  readonly binary: string;
  readonly argv: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** Bytes to read on stdin then EOF; `null` = /dev/null; a number = that fd. */
  readonly stdin: Uint8Array | number | null;
  /**
   * After the leader exited (and its group was killed), how long to wait for stderr EOF before
   * closing stderr and the run anyway: a process that left the group (`setsid()`, as AFL++'s fork
   * server child does) cannot be killed through it and must not hold the run open.
   */
  readonly stderrDrainMs: number;
  /** CPU-time backstop of the program (RLIMIT_CPU soft, seconds; hard = +1), under the shim. 0/absent: none. */
  readonly cpuLimitSec?: number;
}

interface LaunchEvents {
  stderr(chunk: Buffer): void;
  /** `usage`: the program's rusage, when its supervisor reported it (native path). */
  exit(code: number | null, signal: NodeJS.Signals | null, usage?: RunUsage | null): void;
  close(): void;
  /** The program could not be started (ENOENT, EACCES …); may be called synchronously. */
  spawnError(error: NodeJS.ErrnoException): void;
}

/** A run's resource usage as its supervisor measured it (the program and its reaped descendants). */
export interface RunUsage {
  readonly userMs: number;
  readonly systemMs: number;
  readonly maxRssKb: number;
}

/** A started child: its pid (= its pgid) and how to signal the run. */
export interface LaunchedProcess {
  readonly pid: number;
  /** Whether the spawn shim supervises the run (see the header). */
  readonly supervised: boolean;
  /** SIGTERM: the polite stop, to the whole run. SIGKILL: end the run now, everything in it. */
  kill(signal: 'SIGTERM' | 'SIGKILL'): void;
}

/** Starts the child; returns it, or undefined when it could not be started. */
export type Launcher = (request: LaunchRequest, events: LaunchEvents) => LaunchedProcess | undefined;

function launched(pid: number, supervised: boolean): LaunchedProcess {
  return {
    pid,
    supervised,
    kill(signal) {
      if (!supervised || signal === 'SIGTERM') {
        killGroup(pid, signal);
        return;
      }
      try {
        process.kill(pid, 'SIGUSR1');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
      }
    },
  };
}

/** The program the shim must exec, or the start failure to report (execvp's ENOENT/EACCES). */
function resolveForShim(request: LaunchRequest): { path: string } | { error: NodeJS.ErrnoException } {
  try {
    return { path: resolveProgramPath(request.binary, request.env['PATH'], request.cwd ?? process.cwd()) };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'ENOENT';
    return {
      error: Object.assign(new Error(`spawn ${request.binary} ${code}`), { code, errno: -(osConstants.errno[code as keyof typeof osConstants.errno] ?? 2), syscall: `spawn ${request.binary}`, path: request.binary }),
    };
  }
}

function shimArgv(resolved: string, request: LaunchRequest): string[] {
  return [String(process.pid), String(request.cpuLimitSec ?? 0), resolved, request.binary, ...request.argv];
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

export function launcherFor(method: SpawnMethod): Launcher {
  return method === 'native' ? launchNative : launchChildProcess;
}

/** `child_process.spawn`, detached (libuv: fork + setsid + execvp). */
const launchChildProcess: Launcher = (request, events) => {
  const stdinSpec = request.stdin === null ? 'ignore' : typeof request.stdin === 'number' ? request.stdin : 'pipe';
  const stdio: StdioOptions = [stdinSpec, 'ignore', 'pipe'];
  const shim = spawnShimPath();
  let file = request.binary;
  let args = [...request.argv];
  if (shim !== null) {
    const resolved = resolveForShim(request);
    if ('error' in resolved) {
      events.spawnError(resolved.error);
      return undefined;
    }
    file = shim;
    args = shimArgv(resolved.path, request);
  }
  let child: ReturnType<typeof spawn>;
  try {
    child = spawn(file, args, {
      cwd: request.cwd,
      env: request.env,
      stdio,
      detached: true,
      shell: false,
      windowsHide: true,
    });
  } catch (error) {
    // Node reports ENOENT, EACCES, EAGAIN, EMFILE and ENFILE as an 'error' event but throws every
    // other errno (ENOTDIR, E2BIG, ELOOP …): both are the program's start failing.
    const code = (error as NodeJS.ErrnoException).code;
    if (typeof code !== 'string' || !/^E[A-Z0-9]+$/.test(code)) throw error;
    events.spawnError(error as NodeJS.ErrnoException);
    return undefined;
  }
  const pid = child.pid;
  child.stderr?.on('data', (chunk: Buffer) => events.stderr(chunk));
  child.on('error', (error: NodeJS.ErrnoException) => {
    // 'error' without a pid means spawn failed; no 'exit' follows.
    if (pid === undefined) events.spawnError(error);
  });
  child.on('exit', (code, signal) => {
    // Reap whatever the leader left behind in its group (forked helpers, grandchildren). While a
    // member lives the pgid stays allocated; an empty group gives ESRCH. (Hitting a stranger would
    // need the just-reaped pid recycled as a new group leader within this tick: Linux allocates
    // pids sequentially, so that needs a full pid wrap-around first.)
    if (pid !== undefined) killGroup(pid, 'SIGKILL');
    if (request.stderrDrainMs > 0 && child.stderr && !child.stderr.destroyed) {
      const drain = setTimeout(() => child.stderr?.destroy(), request.stderrDrainMs);
      child.stderr.once('close', () => clearTimeout(drain));
    }
    events.exit(code, signal);
  });
  // 'close' fires once the leader exited and every holder of its stderr pipe closed it.
  child.on('close', () => events.close());
  if (stdinSpec === 'pipe' && child.stdin) {
    // A program that never reads stdin (or exits first) closes the pipe: EPIPE is not our error.
    child.stdin.on('error', () => {});
    child.stdin.end(request.stdin as Uint8Array);
  }
  return pid === undefined ? undefined : launched(pid, shim !== null);
};

/** Signal number → the name Node reports (the first of aliases: SIGABRT, not SIGIOT; SIGIO, not SIGPOLL). */
const SIGNAL_NAMES = new Map<number, NodeJS.Signals>();
for (const [name, number] of Object.entries(osConstants.signals)) {
  if (!SIGNAL_NAMES.has(number)) SIGNAL_NAMES.set(number, name as NodeJS.Signals);
}

function runUsage(usage: NativeRunUsage): RunUsage {
  return { userMs: usage.userUs / 1000, systemMs: usage.systemUs / 1000, maxRssKb: usage.maxRssKb };
}

/**
 * A run of a long-lived supervisor: both signals go through it to the program's group. Its
 * SIGKILL is "kill now": once the program is dead the supervisor kills what the run left behind
 * (setsid'd orphans included) before it reports the exit.
 */
function servedProcess(pid: number, signal: (pid: number, signo: number) => boolean): LaunchedProcess {
  return {
    pid,
    supervised: true,
    kill(name) {
      signal(pid, osConstants.signals[name]);
    },
  };
}

/**
 * The addon's posix_spawn. It kills the group itself, before reaping the leader (the zombie
 * leader pins the pgid, so that kill cannot reach a recycled group).
 */
const launchNative: Launcher = (request, events) => {
  const native = loadNative();
  if (native?.spawnGroup === undefined) {
    throw new NativeUnavailableError('native spawning requested but the addon has no spawnGroup on this thread', { purpose: 'native solver spawning' });
  }
  const env: string[] = [];
  for (const key in request.env) {
    const value = request.env[key];
    if (value !== undefined) env.push(`${key}=${value}`);
  }
  const stdin = request.stdin;
  const supervision = nativeSupervision();
  const shim = supervision === 'none' ? null : spawnShimPath();
  let file = request.binary;
  if (shim !== null) {
    const resolved = resolveForShim(request);
    if ('error' in resolved) {
      events.spawnError(resolved.error);
      return undefined;
    }
    file = resolved.path;
  }
  try {
    const pid = native.spawnGroup(
      {
        file,
        argv: [request.binary, ...request.argv],
        env,
        ...(request.cwd !== undefined ? { cwd: request.cwd } : {}),
        ...(stdin === null ? { stdinFd: -1 } : typeof stdin === 'number' ? { stdinFd: stdin } : { stdinBytes: stdin }),
        stderrDrainMs: request.stderrDrainMs,
        ...(shim === null ? {} : supervision === 'supervisor' ? { supervisor: shim, cpuLimitSec: request.cpuLimitSec ?? 0 } : { shim, cpuLimitSec: request.cpuLimitSec ?? 0 }),
      },
      (chunk) => events.stderr(chunk),
      (code, signal, usage) => events.exit(code, signal === null ? null : (SIGNAL_NAMES.get(signal) ?? null), usage === null ? null : runUsage(usage)),
      () => events.close(),
    );
    if (supervision === 'supervisor') return servedProcess(pid, native.signalSupervised!.bind(native));
    return launched(pid, shim !== null);
  } catch (error) {
    const failure = error as NodeJS.ErrnoException;
    // Errno failures of the start itself are the program's problem, reported like Node's
    // spawn error; argument errors (ERR_*) are ours and propagate.
    if (typeof failure.code !== 'string' || !/^E[A-Z0-9]+$/.test(failure.code)) throw error;
    const spawnError: NodeJS.ErrnoException = Object.assign(new Error(`spawn ${request.binary} ${failure.code}`), {
      code: failure.code,
      errno: failure.errno,
      syscall: `spawn ${request.binary}`,
      path: request.binary,
    });
    events.spawnError(spawnError);
    return undefined;
  }
};
