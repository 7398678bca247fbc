/**
 * Removing a directory tree a solver may have flooded (a million files) without holding its whole
 * listing in memory: `rmSync({ recursive })` reads each directory completely before unlinking.
 * Here a directory is read in batches of `BATCH` names through a `Dir` iterator; each batch is
 * unlinked (subdirectories recursively) and the directory re-opened, so memory stays at one batch
 * per level. Re-opening after each batch avoids relying on what readdir returns for entries removed
 * while it iterates (unspecified by POSIX). Synchronous, like the rest of the run-directory
 * bookkeeping (solver-run.ts).
 */
import { lstatSync, opendirSync, rmdirSync, unlinkSync } from 'node:fs';
import path from 'node:path';

const BATCH = 1024;

/** Removes `root` and everything below it; a missing `root` is not an error. Never follows symlinks. */
export function removeTreeBounded(root: string): void {
  let isDirectory: boolean;
  try {
    isDirectory = lstatSync(root).isDirectory();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  if (!isDirectory) {
    unlinkSync(root);
    return;
  }
  for (;;) {
    const batch: { name: string; directory: boolean }[] = [];
    const dir = opendirSync(root);
    try {
      for (let entry = dir.readSync(); entry !== null && batch.length < BATCH; entry = dir.readSync()) {
        batch.push({ name: entry.name, directory: entry.isDirectory() });
      }
    } finally {
      dir.closeSync();
    }
    if (batch.length === 0) break;
    for (const entry of batch) {
      const file = path.join(root, entry.name);
      if (entry.directory) removeTreeBounded(file);
      else {
        try {
          unlinkSync(file);
        } catch (error) {
          // EISDIR/EPERM: the entry's type was unknown to readdir; ENOENT: gone meanwhile.
          const code = (error as NodeJS.ErrnoException).code;
          if (code === 'EISDIR' || code === 'EPERM') removeTreeBounded(file);
          else if (code !== 'ENOENT') throw error;
        }
      }
    }
  }
  rmdirSync(root);
}
