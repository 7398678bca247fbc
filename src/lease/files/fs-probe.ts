/**
 * Filesystem qualification for a shared lease directory (docs/fs-probe.md).
 *
 * The lease tables' guarantees rest on a few filesystem properties that are easy to lose on
 * network or FUSE filesystems: fsync of files and directories, rename replacing an existing name
 * atomically, unlink made durable by a directory fsync, and flock locks that exclude *another
 * process* and that the kernel frees when that process dies. Multi-coordinator mode runs this probe
 * at start and refuses to start when any step fails, naming the step.
 *
 * The probe works in a private temporary directory inside `dir` and removes it afterwards. Its
 * filesystem primitives and its steps are injectable so tests can break one property at a time.
 */
import { spawn } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { FsProbeError, NativeUnavailableError } from '../../errors.js';
import { loadNative, NATIVE_ADDON_PATH, nativeLoadError, type NativeBindings } from '../../native/bindings.js';
import type { FilesystemKind, StatFilesystem } from '../filesystem-kind.js';
import type { LeaseStoreKind } from '../backend-contract.js';
import { defaultStoreFor } from '../store-choice.js';

/** The checks, in the order they run. */
export const FS_PROBE_STEP_NAMES = [
  'directory',
  'file-fsync',
  'directory-fsync',
  'replace',
  'durable-unlink',
  'flock-exclusion',
  'flock-release',
  'cleanup',
] as const;
export type FsProbeStepName = (typeof FS_PROBE_STEP_NAMES)[number];

/** Filesystem primitives the probe uses; replace one to simulate a filesystem lacking it. */
export interface FsProbeOps {
  writeFile(file: string, data: string): Promise<void>;
  readFile(file: string): Promise<string>;
  /** Opens `file` and fsyncs it. */
  fsyncFile(file: string): Promise<void>;
  /** Opens the directory read-only and fsyncs it. */
  fsyncDirectory(dir: string): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  unlink(file: string): Promise<void>;
  exists(file: string): Promise<boolean>;
}

const NODE_FS_PROBE_OPS: FsProbeOps = Object.freeze({
  writeFile: (file: string, data: string) => fsp.writeFile(file, data, { flag: 'w' }),
  readFile: (file: string) => fsp.readFile(file, 'utf8'),
  fsyncFile: async (file: string) => {
    const handle = await fsp.open(file, 'r+');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  },
  fsyncDirectory: async (dir: string) => {
    const handle = await fsp.open(dir, fsConstants.O_RDONLY | fsConstants.O_DIRECTORY);
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  },
  rename: (from: string, to: string) => fsp.rename(from, to),
  unlink: (file: string) => fsp.unlink(file),
  exists: async (file: string) => {
    try {
      await fsp.lstat(file);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw error;
    }
  },
});

/** What a step sees. `workDir` is the probe's private directory inside `dir`. */
export interface FsProbeContext {
  readonly dir: string;
  readonly workDir: string;
  readonly ops: FsProbeOps;
  readonly native: NativeBindings;
  readonly addonPath: string;
  readonly handshakeTimeoutMs: number;
  /** State handed from `flock-exclusion` to `flock-release` (the child still holding the lock). */
  lockHolder?: LockHolder;
}

/** A step throws (anything) to fail; the probe wraps it into `FsProbeError` naming the step. */
export type FsProbeStep = (context: FsProbeContext) => Promise<void>;

export interface FsProbeOptions {
  /** Filesystem primitives to use instead of `node:fs` (tests). */
  readonly ops?: Partial<FsProbeOps>;
  /** Step implementations to use instead of the built-in ones (tests). `directory` and `cleanup` are fixed. */
  readonly steps?: Partial<Record<Exclude<FsProbeStepName, 'directory' | 'cleanup'>, FsProbeStep>>;
  /** The addon; default `loadNative()`. `null` behaves as if it were not built. */
  readonly native?: NativeBindings | null;
  /** Addon file the child process loads; default the built addon. */
  readonly addonPath?: string;
  /** How long to wait for the lock-holding child to report; default 10 000 ms. */
  readonly handshakeTimeoutMs?: number;
  /** `statfs` (tests simulate a network filesystem); default `fs.promises.statfs`. */
  readonly statFilesystem?: StatFilesystem;
}

export interface FsProbeReport {
  readonly dir: string;
  /** Every step that passed, in order, with how long it took. */
  readonly steps: readonly { readonly step: FsProbeStepName; readonly durationMs: number }[];
  /**
   * The filesystem's kind (`statfs` type) and the store `--lease-store auto` gives a new lease
   * directory here, with why: SQLite on a local filesystem, files on a network or FUSE one
   * (docs/fs-probe.md "Filesystem kind").
   */
  readonly filesystem: FilesystemKind & { readonly autoStore: LeaseStoreKind; readonly autoReason: string };
}

const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;

/**
 * Runs every check in `dir`. Resolves with a report when all pass; rejects with `FsProbeError`
 * (`details.step` = the failed step) on the first failure, or with `NativeUnavailableError` when
 * the addon is missing. Removes its temporary files in every case (best effort after a failure).
 */
export async function probeFilesystem(dir: string, options: FsProbeOptions = {}): Promise<FsProbeReport> {
  const native = options.native === undefined ? loadNative() : options.native;
  if (!native) {
    const reason = options.native === null ? 'disabled by the caller' : nativeLoadError()?.message ?? 'unknown reason';
    throw new NativeUnavailableError(
      `the filesystem probe and multi-coordinator mode need the native addon (flock across processes), which is not loadable: ${reason}. ` +
        'Rebuild it with `npm run build:native`; single-coordinator mode works without it.',
      { addonPath: NATIVE_ADDON_PATH, reason },
    );
  }
  const absoluteDir = path.resolve(dir);
  const steps: { step: FsProbeStepName; durationMs: number }[] = [];
  const timed = async (step: FsProbeStepName, run: () => Promise<void>): Promise<void> => {
    const started = performance.now();
    try {
      await run();
    } catch (error) {
      throw probeFailure(step, absoluteDir, error);
    }
    steps.push({ step, durationMs: performance.now() - started });
  };

  let workDir = '';
  await timed('directory', async () => {
    const stat = await fsp.stat(absoluteDir).catch((error: NodeJS.ErrnoException) => {
      throw error.code === 'ENOENT' ? Object.assign(new Error('the directory does not exist'), { code: 'ENOENT' }) : error;
    });
    if (!stat.isDirectory()) throw Object.assign(new Error('the path is not a directory'), { code: 'ENOTDIR' });
    workDir = await fsp.mkdtemp(path.join(absoluteDir, '.symfence-probe-'));
  });

  const context: FsProbeContext = {
    dir: absoluteDir,
    workDir,
    ops: { ...NODE_FS_PROBE_OPS, ...options.ops },
    native,
    addonPath: options.addonPath ?? NATIVE_ADDON_PATH,
    handshakeTimeoutMs: options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS,
  };
  try {
    for (const name of FS_PROBE_STEP_NAMES) {
      if (name === 'directory' || name === 'cleanup') continue;
      const step = options.steps?.[name] ?? BUILT_IN_STEPS[name];
      await timed(name, () => step(context));
    }
  } catch (error) {
    await context.lockHolder?.kill().catch(() => undefined); // cleanup after a failed probe step; that step's error is rethrown
    await fsp.rm(workDir, { recursive: true, force: true }).catch(() => undefined); // cleanup after a failed probe step; that step's error is rethrown
    throw error;
  }
  await timed('cleanup', async () => {
    await fsp.rm(workDir, { recursive: true, force: true });
    if (await NODE_FS_PROBE_OPS.exists(workDir)) throw new Error(`could not remove ${workDir}`);
  });
  const choice = await defaultStoreFor(absoluteDir, options.statFilesystem);
  return { dir: absoluteDir, steps, filesystem: { ...choice.filesystem, autoStore: choice.store, autoReason: choice.reason } };
}

function probeFailure(step: FsProbeStepName, dir: string, error: unknown): InstanceType<typeof FsProbeError> {
  const cause = error instanceof Error ? error : new Error(String(error));
  const errno = (cause as NodeJS.ErrnoException).code;
  return new FsProbeError(
    `filesystem probe failed at step "${step}" in ${dir}: ${cause.message}; this directory cannot hold a shared lease table`,
    { step, dir, reason: cause.message, ...(errno ? { errno } : {}) },
  );
}

// ---- the built-in steps ----------------------------------------------------------------------

async function fileFsync({ workDir, ops }: FsProbeContext): Promise<void> {
  const file = path.join(workDir, 'file-fsync');
  await ops.writeFile(file, 'symfence file fsync probe\n');
  await ops.fsyncFile(file);
  if ((await ops.readFile(file)) !== 'symfence file fsync probe\n') throw new Error('file content differs after fsync');
}

async function directoryFsync({ workDir, ops }: FsProbeContext): Promise<void> {
  await ops.fsyncDirectory(workDir);
}

/** The lease tables' publish protocol: durable temp file, rename over the old name, directory fsync. */
async function replace({ workDir, ops }: FsProbeContext): Promise<void> {
  const target = path.join(workDir, 'record.json');
  const temp = path.join(workDir, 'record.json.probe.tmp');
  await ops.writeFile(target, '{"version":1}');
  await ops.fsyncFile(target);
  await ops.writeFile(temp, '{"version":2}');
  await ops.fsyncFile(temp);
  await ops.rename(temp, target);
  await ops.fsyncDirectory(workDir);
  const content = await ops.readFile(target);
  if (content !== '{"version":2}') throw new Error(`rename did not replace the existing file (content ${JSON.stringify(content)})`);
  if (await ops.exists(temp)) throw new Error('the temporary name still exists after rename');
}

async function durableUnlink({ workDir, ops }: FsProbeContext): Promise<void> {
  const file = path.join(workDir, 'record.json');
  if (!(await ops.exists(file))) await ops.writeFile(file, '{}');
  await ops.unlink(file);
  await ops.fsyncDirectory(workDir);
  if (await ops.exists(file)) throw new Error('the file still exists after unlink and directory fsync');
}

/** A child process takes the lock; this process must then be refused. */
async function flockExclusion(context: FsProbeContext): Promise<void> {
  const lockFile = path.join(context.workDir, 'record.json.lock');
  await context.ops.writeFile(lockFile, '');
  const holder = await spawnLockHolder(context.addonPath, lockFile, context.handshakeTimeoutMs);
  context.lockHolder = holder;
  if (holder.report !== 'locked') throw new Error(`the child process could not take a free lock (it reported ${JSON.stringify(holder.report)})`);
  const handle = await fsp.open(lockFile, 'r+');
  try {
    if (context.native.tryLockExclusive(handle.fd)) {
      context.native.unlock(handle.fd);
      throw new Error('flock did not exclude another process: both held the same lock');
    }
  } finally {
    await handle.close();
  }
}

/** The child holding the lock is SIGKILLed; the kernel must free its lock at once. */
async function flockRelease(context: FsProbeContext): Promise<void> {
  const holder = context.lockHolder;
  if (!holder) throw new Error('no lock-holding child process (the flock-exclusion step did not run)');
  await holder.kill();
  context.lockHolder = undefined;
  const handle = await fsp.open(path.join(context.workDir, 'record.json.lock'), 'r+');
  try {
    if (!context.native.tryLockExclusive(handle.fd)) throw new Error('the lock of a killed process was not released');
    context.native.unlock(handle.fd);
  } finally {
    await handle.close();
  }
}

const BUILT_IN_STEPS: Record<Exclude<FsProbeStepName, 'directory' | 'cleanup'>, FsProbeStep> = {
  'file-fsync': fileFsync,
  'directory-fsync': directoryFsync,
  replace,
  'durable-unlink': durableUnlink,
  'flock-exclusion': flockExclusion,
  'flock-release': flockRelease,
};

// ---- the lock-holding child process ------------------------------------------------------------

interface LockHolder {
  /** The child's first stdout line: `locked` or `busy`. */
  readonly report: string;
  /** SIGKILLs the child and resolves once it has exited (its descriptors are closed by then). */
  kill(): Promise<void>;
}

/** Opens the file, tries the lock, reports, then holds until killed or its stdin closes. */
const LOCK_HOLDER_SCRIPT = `
const fs = require('node:fs');
const native = require(process.argv[1]);
const fd = fs.openSync(process.argv[2], 'r+');
process.stdout.write(native.tryLockExclusive(fd) ? 'locked\\n' : 'busy\\n');
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
`;

async function spawnLockHolder(addonPath: string, lockFile: string, timeoutMs: number): Promise<LockHolder> {
  const child = spawn(process.execPath, ['-e', LOCK_HOLDER_SCRIPT, addonPath, lockFile], { stdio: ['pipe', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk;
  });
  try {
    const report = await new Promise<string>((resolve, reject) => {
      // A liveness bound, not synchronisation: the child's stdout line is the handshake.
      const timer = setTimeout(() => reject(new Error(`the lock-holding child did not report within ${timeoutMs} ms`)), timeoutMs);
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`the lock-holding child exited early (${code ?? signal}): ${stderr.trim().split('\n').pop() ?? ''}`));
      });
      child.stdout.on('data', (chunk: string) => {
        stdout += chunk;
        const newline = stdout.indexOf('\n');
        if (newline >= 0) {
          clearTimeout(timer);
          resolve(stdout.slice(0, newline));
        }
      });
    });
    return { report, kill };
  } catch (error) {
    await kill();
    throw error;
  }
}
