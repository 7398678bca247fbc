/**
 * Durable file publication for the AFL-visible queue, run by the I/O thread as part of a group
 * commit. AFL++ imports a peer's `id:…` entries as soon as it sees the name, so the protocol is:
 *
 *   1. stage     write each file to a hidden temp (`.symfence-io-<writer tag>-<seq>.tmp`) in its directory
 *   2. file barrier  one pass for every temp of the batch (one syncfs, or parallel fsyncs)
 *   3. publish   rename each temp to its final name, in the caller's order
 *   4. directory barrier  one per touched directory
 *
 * Content is durable before its name exists (2 before 3), and every name is durable before the
 * request is answered (4). A final name that already exists is refused before anything is written
 * (AFL names are unique; overwriting one would change an entry AFL may already have imported).
 * Steps 1, 2 and 4 are the shared durable-file steps (src/fs/durable-files.ts), run over the
 * whole batch at once.
 *
 * Failure contract, per request: a failure in 1 fails that request only (its temps are removed);
 * a failure of the shared file barrier fails every request of the batch (their content is not
 * known to be durable); a failure in 3 or 4 fails the requests of that directory, and the names
 * they published are unlinked again (they did not exist before), so no final name survives from a
 * failed request and the directory holds exactly what it held before it.
 */
import path from 'node:path';
import { PublishError } from '../errors.js';
import { currentWriterTagText } from '../lease/temp-writer.js';
import { barrierDirectories, barrierFiles, createTempFile, type FileBarrierStrategy } from '../fs/durable-files.js';
import { errnoCode, type FsLayer } from '../fs/fs-layer.js';
import type { PublishedFile } from './io-requests.js';

/**
 * Pids repeat across hosts and containers sharing a directory (the staged findings live under a
 * shared lease root), and a temp name must be unique among all writers: the writer tag names host,
 * pid namespace, pid and process start time — which also lets a sweeper tell a crashed writer's
 * leftovers from a live one's (src/lease/temp-sweep.ts).
 */
const TEMP_TAG = currentWriterTagText();

export interface PublicationJob {
  readonly dir: string;
  readonly files: readonly PublishedFile[];
  /**
   * What an existing final name means. `refuse` (default, AFL names): the job fails before
   * anything is written. `keep` (content-addressed names, e.g. staged findings): the file is
   * already there from an earlier attempt and is left alone; the directory barrier still runs,
   * because that earlier attempt may have died between its rename and its barrier.
   */
  readonly existing?: 'refuse' | 'keep';
}

interface PublicationReport {
  /** One entry per job, in order: null = published and durable, else the error to answer. */
  readonly errors: readonly (Error | null)[];
  readonly fileBarriers: number;
  readonly directoryBarriers: number;
}

let tempSeq = 0;

interface Staged {
  readonly temp: string;
  readonly final: string;
  fd?: number;
}

interface JobState {
  readonly dir: string;
  /** Barrier the directory even when nothing was renamed (`existing: 'keep'`). */
  readonly alwaysBarrier: boolean;
  readonly staged: Staged[];
  /** Final names already renamed into place (removed again on failure). */
  readonly published: string[];
  error: Error | null;
}

/** Rejects a name that is not a plain, visible file name. */
export function checkPublishedName(name: unknown): string {
  if (typeof name !== 'string' || name === '' || name.startsWith('.') || name.includes('/') || name.includes('\0')) {
    throw new PublishError(`invalid published file name ${JSON.stringify(name)}: a visible name without '/'`, { name: String(name) });
  }
  return name;
}

function publishError(step: string, file: string, error: unknown): Error {
  return new PublishError(`publication failed during ${step} at ${file}: ${(error as Error)?.message ?? String(error)}; no final name was left behind`, {
    step,
    path: file,
    errno: errnoCode(error) ?? null,
  });
}

/**
 * Publishes every job in one barrier pass (see the file comment). Never rejects: per-job errors
 * are returned.
 */
export async function publishFiles(fsLayer: FsLayer, fileBarrier: FileBarrierStrategy, jobs: readonly PublicationJob[]): Promise<PublicationReport> {
  const states: JobState[] = jobs.map((job) => ({ dir: path.resolve(job.dir), alwaysBarrier: job.existing === 'keep' && job.files.length > 0, staged: [], published: [], error: null }));

  // 1. stage: per job, refusing existing names first, then writing hidden temps.
  await Promise.all(states.map((state, index) => stageJob(fsLayer, jobs[index]!, state)));

  // 2. file barrier: one pass for every temp still alive.
  const live = states.filter((s) => s.error === null && s.staged.length > 0);
  const pass = await barrierFiles(fsLayer, fileBarrier, live.flatMap((s) => s.staged.map((st) => st.fd!)));
  if (pass.failure) for (const state of live) state.error = publishError('file-barrier', state.dir, pass.failure.reason);
  await closeAll(fsLayer, states);

  // 3. publish, in order per job; 4. one directory barrier per touched directory.
  for (const state of states) if (state.error === null) await renameInOrder(fsLayer, state);
  const dirs = [...new Set(states.filter((s) => s.error === null && (s.published.length > 0 || s.alwaysBarrier)).map((s) => s.dir))].sort();
  const dirResults = await barrierDirectories(fsLayer, dirs);
  dirs.forEach((dir, i) => {
    const result = dirResults[i]!;
    if (result.status === 'fulfilled') return;
    for (const state of states) if (state.error === null && state.dir === dir) state.error = publishError('directory-barrier', dir, result.reason);
  });

  const undoBarriers = await undoFailed(fsLayer, states);
  return { errors: states.map((s) => s.error), fileBarriers: pass.barriers, directoryBarriers: dirs.length + undoBarriers };
}

/** Step 1 for one job: refuses existing names (unless kept), then writes a hidden temp per new file. Records its error in `state`. */
async function stageJob(fsLayer: FsLayer, job: PublicationJob, state: JobState): Promise<void> {
  try {
    const names = job.files.map((f) => checkPublishedName(f.name));
    const keepExisting = job.existing === 'keep';
    if (new Set(names).size !== names.length) throw new PublishError(`duplicate file names in one publication to ${state.dir}`, { dir: state.dir });
    const fresh = new Set<number>();
    for (const [i, name] of names.entries()) {
      const final = path.join(state.dir, name);
      if (!(await pathExists(fsLayer, final))) fresh.add(i);
      else if (!keepExisting) throw new PublishError(`refusing to publish over existing ${final}`, { path: final });
    }
    for (const [i, file] of job.files.entries()) {
      if (!fresh.has(i)) continue;
      const temp = path.join(state.dir, `.symfence-io-${TEMP_TAG}-${++tempSeq}.tmp`);
      let fd: number;
      try {
        fd = await createTempFile(fsLayer, temp, file.bytes, 0o644);
      } catch (error) {
        throw publishError('stage', temp, error);
      }
      state.staged.push({ temp, final: path.join(state.dir, names[i]!), fd });
    }
  } catch (error) {
    state.error = error instanceof PublishError ? error : publishError('stage', state.dir, error);
  }
}

/** Step 3 for one job: its temps to their final names in order; stops at the first failure. */
async function renameInOrder(fsLayer: FsLayer, state: JobState): Promise<void> {
  for (const staged of state.staged) {
    try {
      await fsLayer.rename(staged.temp, staged.final);
      state.published.push(staged.final);
    } catch (error) {
      // A rename that failed after taking effect must be undone too (unlink is idempotent here).
      state.published.push(staged.final);
      state.error = publishError('rename', staged.final, error);
      return;
    }
  }
}

/** Undoes failed jobs: unlinks their published names and every temp left, then barriers each such directory. Returns the barriers issued. */
async function undoFailed(fsLayer: FsLayer, states: readonly JobState[]): Promise<number> {
  const failedDirs = new Set<string>();
  for (const state of states) {
    if (state.error === null) continue;
    await Promise.allSettled(state.published.map((final) => fsLayer.unlink(final)));
    await Promise.allSettled(state.staged.map((st) => fsLayer.unlink(st.temp)));
    if (state.published.length > 0) failedDirs.add(state.dir);
  }
  for (const dir of failedDirs) {
    await fsLayer.syncDirectory(dir).catch(() => undefined); // best effort after a failed publication: the request already fails with that error
  }
  return failedDirs.size;
}

async function closeAll(fsLayer: FsLayer, states: JobState[]): Promise<void> {
  const closes: Promise<void>[] = [];
  for (const state of states) {
    for (const staged of state.staged) {
      if (staged.fd === undefined) continue;
      const fd = staged.fd;
      staged.fd = undefined;
      closes.push(
        fsLayer.close(fd).catch((error: unknown) => {
          if (state.error === null) state.error = publishError('close', staged.temp, error);
        }),
      );
    }
  }
  await Promise.all(closes);
}

async function pathExists(fsLayer: FsLayer, file: string): Promise<boolean> {
  try {
    await fsLayer.lstat(file);
    return true;
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return false;
    throw error;
  }
}

/** Creates `dir` and any missing parents, each made durable in its parent directory. */
export async function ensureDirectoryTree(fsLayer: FsLayer, dir: string): Promise<void> {
  const target = path.resolve(dir);
  const missing: string[] = [];
  let current = target;
  for (;;) {
    try {
      const stat = await fsLayer.lstat(current);
      if (!stat.isDirectory) throw new PublishError(`not a directory: ${current}`, { path: current });
      break;
    } catch (error) {
      if (errnoCode(error) !== 'ENOENT') throw error;
      missing.push(current);
      const parent = path.dirname(current);
      if (parent === current) break;
      current = parent;
    }
  }
  for (const created of missing.reverse()) {
    try {
      await fsLayer.mkdir(created);
    } catch (error) {
      if (errnoCode(error) !== 'EEXIST') throw error;
    }
    await fsLayer.syncDirectory(path.dirname(created));
  }
}
