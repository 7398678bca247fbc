/**
 * Finding the file a program name runs, the way execvp() does: a name containing `/` is used as
 * is (relative to the current directory); any other name is searched in the `PATH` elements in
 * order (no `PATH`: `/bin:/usr/bin`, glibc's default), an empty element meaning the current
 * directory. A candidate counts when it is a regular file with an execute permission for us;
 * a candidate that exists but is not executable is remembered (EACCES) while the search goes on.
 *
 * Used to refuse a campaign whose solver cannot start before it claims any work, and by the
 * launchers when the spawn shim (docs/native.md) starts the program: the shim execs a resolved
 * path, so the lookup — and its ENOENT/EACCES — happens here, in the spawning process.
 */
import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';

const SEARCH_CONTINUES: ReadonlySet<string> = new Set(['ENOENT', 'ESTALE', 'ENOTDIR', 'ENODEV', 'EHOSTUNREACH', 'ETIMEDOUT']);

/** glibc's `confstr(_CS_PATH)`: the search path when the environment has no PATH. */
const DEFAULT_SEARCH_PATH = '/bin:/usr/bin';

function errnoError(code: string, file: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: cannot execute ${file}`), { code, path: file, syscall: 'execvp' });
}

/** 'ok', or the errno name of why `file` cannot be executed (ENOENT, EACCES, ENOTDIR, ELOOP …). */
function check(file: string): string {
  let stat;
  try {
    stat = statSync(file);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? 'ENOENT';
  }
  // execve on a directory or a device fails with EACCES.
  if (!stat.isFile()) return 'EACCES';
  try {
    accessSync(file, constants.X_OK);
  } catch {
    return 'EACCES';
  }
  return 'ok';
}

/**
 * The path execvp() would execute for `file` under `searchPath` (the `PATH` of the environment the
 * program gets), relative names taken from `cwd` (the directory the program starts in). Returns it (absolute when `file` was found through a relative or PATH element);
 * throws an Error whose `code` is the errno name (`ENOENT`, `EACCES`, `ENOTDIR` …).
 */
export function resolveProgramPath(file: string, searchPath: string | undefined, cwd: string = process.cwd()): string {
  if (file.length === 0) throw errnoError('ENOENT', file);
  if (file.includes('/')) {
    const resolved = path.resolve(cwd, file);
    const outcome = check(resolved);
    if (outcome !== 'ok') throw errnoError(outcome, file);
    return resolved;
  }
  let sawAccess = false;
  for (const dir of (searchPath ?? DEFAULT_SEARCH_PATH).split(':')) {
    const candidate = path.resolve(cwd, dir === '' ? '.' : dir, file);
    const outcome = check(candidate);
    if (outcome === 'ok') return candidate;
    // execvp goes on after these and after EACCES (remembered); any other failure ends the search.
    if (outcome === 'EACCES') sawAccess = true;
    else if (!SEARCH_CONTINUES.has(outcome)) throw errnoError(outcome, file);
  }
  throw errnoError(sawAccess ? 'EACCES' : 'ENOENT', file);
}
