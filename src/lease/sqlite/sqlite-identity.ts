/**
 * Which files a SQLite table has open, and whether its paths still name them (docs/leases.md
 * "SQLite identity"). A database deleted or replaced under a running table (an operator's `rm`, a
 * tmp cleaner, a copy over it) leaves the table writing into a file nobody else opens: another
 * coordinator re-creates the database and claims the same targets. The same holds for the `-wal`
 * and `-shm` files: delete them and the next opener starts a new WAL index of its own. So a table
 * compares, at open and before each write, the (device, inode) of the three files it opened with
 * what their paths name now; on a mismatch every lease of the table is lost.
 *
 * What is proven. better-sqlite3 does not expose SQLite's file descriptors, so at open the
 * identity is taken from the paths — `stat` of the database, `-wal` and `-shm` right after the
 * connection has opened all three (its first write transaction) — and confirmed against the
 * process's own open files (`/proc/self/fd`): each inode must be one this process holds open,
 * i.e. SQLite's descriptor (the table opens none itself). A path replaced in the instant between
 * SQLite's open and that `stat` is therefore caught too, unless another connection of this same
 * process happens to hold the replacement open. Later checks need no descriptor: SQLite keeps the
 * three files open for the life of the connection, so their inodes cannot be freed and reused,
 * and a path that still names the same (device, inode) still names SQLite's file.
 *
 * No descriptor of the database is opened here on purpose: closing one would drop every POSIX
 * lock this process holds on the file, SQLite's included (fcntl locks are per process and inode).
 */
import fs from 'node:fs';

/** The three files of a WAL database, by suffix of the database path. */
const SQLITE_FILE_SUFFIXES = ['', '-wal', '-shm'] as const;

interface FileId {
  readonly dev: number;
  readonly ino: number;
}

/** The directory listing this process's open descriptors (Linux). */
const PROC_FD_DIR = '/proc/self/fd';

/** (device, inode) of `file`, or a reason it has none. */
function idOf(file: string): FileId | string {
  try {
    // No exception for the common failure: a check runs on every commit.
    const stat = fs.statSync(file, { throwIfNoEntry: false });
    return stat === undefined ? 'is gone' : { dev: stat.dev, ino: stat.ino };
  } catch (error) {
    return `cannot be checked (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
  }
}

/** (device, inode) of every file this process has open, or undefined where `/proc` is absent. */
function openFileIds(procFdDir: string): Set<string> | undefined {
  let names: string[];
  try {
    names = fs.readdirSync(procFdDir);
  } catch {
    return undefined;
  }
  const ids = new Set<string>();
  for (const name of names) {
    try {
      const stat = fs.statSync(`${procFdDir}/${name}`);
      ids.add(`${stat.dev}:${stat.ino}`);
    } catch {
      // The descriptor of the readdir itself, or one closed meanwhile.
    }
  }
  return ids;
}

/** The identity of a table's open database files, checked against their paths. */
export class SqliteFileIdentity {
  private constructor(
    readonly file: string,
    private readonly ids: readonly FileId[],
  ) {}

  /**
   * Takes the identity of `file` and its `-wal` and `-shm` right after the connection opened them.
   * Returns a reason instead when a path names no file this process has open (it was replaced
   * while opening) or names nothing.
   */
  static capture(file: string, procFdDir = PROC_FD_DIR): SqliteFileIdentity | string {
    const ids: FileId[] = [];
    for (const suffix of SQLITE_FILE_SUFFIXES) {
      const id = idOf(`${file}${suffix}`);
      if (typeof id === 'string') return `${file}${suffix} ${id} right after opening it`;
      ids.push(id);
    }
    const open = openFileIds(procFdDir);
    if (open !== undefined) {
      for (const [index, id] of ids.entries()) {
        if (!open.has(`${id.dev}:${id.ino}`)) return `${file}${SQLITE_FILE_SUFFIXES[index]} is not the file the connection opened (replaced while opening)`;
      }
    }
    return new SqliteFileIdentity(file, ids);
  }

  /** Undefined while every path still names the file opened; else what changed. */
  check(): string | undefined {
    for (const [index, opened] of this.ids.entries()) {
      const path = `${this.file}${SQLITE_FILE_SUFFIXES[index]}`;
      const now = idOf(path);
      if (typeof now === 'string') return `${path} ${now}`;
      if (now.dev !== opened.dev || now.ino !== opened.ino) return `${path} was replaced by another file`;
    }
    return undefined;
  }
}
