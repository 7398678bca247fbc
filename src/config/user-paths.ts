/**
 * Directories and files named by the user (`--out-dir`, `--afl-out`, `--log-file` …): created
 * without a recursive `mkdir`, and every failure reported as `ERR_INVALID_OPTION` naming the
 * option and the path.
 *
 * Why not `mkdirSync(dir, { recursive: true })`: on procfs and similar filesystems `mkdir` of a
 * missing name fails with ENOENT although the parent exists, and Node's recursive mkdir retries
 * the parent and the child forever (100% CPU, no output, `--duration` never reached). Creating one
 * level at a time, from the deepest existing ancestor down, takes at most one `mkdir` per path
 * component and stops at the first failure.
 */
import { mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { codeOf, type InvalidOptionError } from '../errors.js';
import { invalidOption } from './values.js';

const WHY: Readonly<Record<string, string>> = {
  EEXIST: 'exists and is not a directory',
  ENOTDIR: 'a component of the path is not a directory',
  ENOENT: 'a component of the path does not exist (or is a dangling symlink) and cannot be created there',
  EACCES: 'permission denied',
  EISDIR: 'is a directory',
  EPERM: 'operation not permitted',
  EROFS: 'read-only filesystem',
  ENOSPC: 'no space left on the device',
  ELOOP: 'too many symlinks',
  ENAMETOOLONG: 'name too long',
};

/** `ERR_INVALID_OPTION` for a user path that cannot be used, naming `option`, the path and why. */
export function userPathError(option: string, file: string, what: string, error: unknown): InstanceType<typeof InvalidOptionError> {
  const errno = codeOf(error) ?? 'EINVAL';
  const why = WHY[errno] ?? (error instanceof Error ? error.message : String(error));
  return invalidOption(option, `a usable ${what}`, file, { because: `${why} (${errno})`, details: { path: file, errno }, cause: error });
}

function isDirectory(dir: string): boolean | undefined {
  try {
    return statSync(dir).isDirectory();
  } catch (error) {
    if (codeOf(error) === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * Makes `dir` exist as a directory (symlinks to directories are followed, as a user expects),
 * creating missing components one level at a time. Throws `userPathError(option, …)` when a
 * component is a file, a dangling link, unwritable, on a read-only filesystem, or cannot be made.
 */
export function makeUserDirectory(dir: string, option: string, what = 'a directory'): void {
  const target = path.resolve(dir);
  const missing: string[] = [];
  try {
    let current = target;
    for (;;) {
      const existing = isDirectory(current);
      if (existing === true) break;
      if (existing === false) throw Object.assign(new Error(`${current} is not a directory`), { code: current === target ? 'EEXIST' : 'ENOTDIR' });
      missing.push(current);
      const parent = path.dirname(current);
      if (parent === current) break;
      current = parent;
    }
    for (const component of missing.reverse()) {
      try {
        mkdirSync(component);
      } catch (error) {
        // Another process may create it first; a dangling symlink also answers EEXIST.
        if (codeOf(error) !== 'EEXIST') throw error;
        const now = isDirectory(component);
        if (now === undefined) throw Object.assign(new Error(`${component} is a dangling symlink`), { code: 'ENOENT' });
        if (!now) throw error;
      }
    }
  } catch (error) {
    throw userPathError(option, target, what, error);
  }
}

function isInside(child: string, dir: string): boolean {
  const relative = path.relative(path.resolve(dir), child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/**
 * Makes sure the directory of a user-named file exists before the file is opened: an existing
 * directory is used as is; a missing one is created (as `makeUserDirectory` does) only inside
 * `createInside` (the output directory) — a typo in `--log-file` must not scatter directories over
 * the filesystem. Anything else throws `userPathError(option, …)`.
 */
export function prepareUserFileDirectory(file: string, option: string, what: string, createInside?: string): void {
  const target = path.resolve(file);
  const parent = path.dirname(target);
  let existing: boolean | undefined;
  try {
    existing = isDirectory(parent);
  } catch (error) {
    throw userPathError(option, target, what, error);
  }
  if (existing === true) return;
  if (existing === false) throw userPathError(option, target, what, Object.assign(new Error(`${parent} is not a directory`), { code: 'ENOTDIR' }));
  if (createInside !== undefined && isInside(parent, createInside)) {
    makeUserDirectory(parent, option, what);
    return;
  }
  throw invalidOption(option, `a usable ${what}`, target, {
    because: `its directory ${parent} does not exist (only directories inside the output directory are created) (ENOENT)`,
    details: { path: target, errno: 'ENOENT' },
  });
}
