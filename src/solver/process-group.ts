/**
 * Running one subprocess in its own process group, with a timeout, a kill grace and an external
 * cancel hook. Used for the solver and for afl-showmap.
 *
 * Why a process group: SymCC targets (and wrappers) may fork; a timeout must take the grandchildren
 * down too, so the child is spawned `detached` (it becomes a group leader, pgid = pid) and every
 * kill goes to `-pid`. Kill sequence on timeout or cancel: SIGTERM to the group, SIGKILL to the
 * group after `killGraceMs` if the leader is still alive. When the leader exits, the group gets a
 * final SIGKILL regardless of how it ended, so nothing it forked outlives the run (ESRCH — an
 * already empty group — is the normal case and ignored). No shell is ever involved.
 */
import { spawn, type StdioOptions } from 'node:child_process';
import { StderrCapture } from './stderr-capture.js';

export interface GroupRunOptions {
  readonly binary: string;
  readonly argv: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** Bytes piped to stdin then closed; `null` = stdin from /dev/null; a number = that fd. */
  readonly stdin: Uint8Array | number | null;
  readonly timeoutMs: number;
  readonly killGraceMs: number;
  readonly stderrCapBytes: number;
  /** Resolves when the caller wants the run cancelled (never resolving = not cancellable). */
  readonly cancelled?: Promise<boolean>;
  /** Clock for elapsed time (injected for tests); defaults to `performance.now`. */
  readonly nowMs?: () => number;
}

export interface GroupRunOutcome {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timedOut: boolean;
  readonly cancelled: boolean;
  /** Set when the process could not be started (ENOENT, EACCES …). */
  readonly spawnError: NodeJS.ErrnoException | null;
  readonly elapsedMs: number;
  readonly stderr: StderrCapture;
}

export function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

export function runInProcessGroup(options: GroupRunOptions): Promise<GroupRunOutcome> {
  const now = options.nowMs ?? (() => performance.now());
  const stderr = new StderrCapture(options.stderrCapBytes);
  const started = now();
  const stdinSpec = options.stdin === null ? 'ignore' : typeof options.stdin === 'number' ? options.stdin : 'pipe';
  const stdio: StdioOptions = [stdinSpec, 'ignore', 'pipe'];

  return new Promise<GroupRunOutcome>((resolve) => {
    let timedOut = false;
    let cancelled = false;
    let killing = false;
    let spawnError: NodeJS.ErrnoException | null = null;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let graceTimer: NodeJS.Timeout | null = null;
    let settled = false;

    const child = spawn(options.binary, [...options.argv], {
      cwd: options.cwd,
      env: options.env,
      stdio,
      detached: true,
      shell: false,
      windowsHide: true,
    });
    const pid = child.pid;

    const beginKill = (): void => {
      if (killing || pid === undefined || exit !== null) return;
      killing = true;
      killGroup(pid, 'SIGTERM');
      graceTimer = setTimeout(() => {
        if (exit === null) killGroup(pid, 'SIGKILL');
      }, options.killGraceMs);
    };

    const timeoutTimer = setTimeout(() => {
      timedOut = true;
      beginKill();
    }, options.timeoutMs);

    options.cancelled?.then((cancel) => {
      if (!cancel || exit !== null || settled) return;
      cancelled = true;
      beginKill();
    });

    const finish = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timeoutTimer);
      if (graceTimer) clearTimeout(graceTimer);
      stderr.end();
      resolve({
        code: exit?.code ?? null,
        signal: exit?.signal ?? null,
        timedOut,
        cancelled,
        spawnError,
        elapsedMs: now() - started,
        stderr,
      });
    };

    child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
    child.on('error', (error: NodeJS.ErrnoException) => {
      // 'error' without a pid means spawn failed; no 'exit' follows.
      if (pid === undefined) {
        spawnError = error;
        finish();
      }
    });
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      // Reap whatever the leader left behind in its group (forked helpers, grandchildren). While a
      // member lives the pgid stays allocated; an empty group gives ESRCH. (Hitting a stranger would
      // need the just-reaped pid recycled as a new group leader within this tick: Linux allocates
      // pids sequentially, so that needs a full pid wrap-around first.)
      if (pid !== undefined) killGroup(pid, 'SIGKILL');
    });
    // 'close' fires once the leader exited and every holder of its stderr pipe closed it.
    child.on('close', () => finish());

    if (stdinSpec === 'pipe' && child.stdin) {
      // A solver that never reads stdin (or exits first) closes the pipe: EPIPE is not our error.
      child.stdin.on('error', () => {});
      child.stdin.end(options.stdin as Uint8Array);
    }
  });
}
