/**
 * Removing a directory tree a solver may have flooded (a million files) without holding its whole
 * listing in memory: `rmSync({ recursive })` reads each directory completely before unlinking.
 * Here a directory is read in batches of `BATCH` names through a `Dir` iterator; each batch is
 * unlinked (subdirectories recursively) and the directory re-opened, so memory stays at one batch
 * per level. Re-opening after each batch avoids relying on what readdir returns for entries removed
 * while it iterates (unspecified by POSIX). Synchronous, like the rest of the run-directory
 * bookkeeping (solver-run.ts).
 *
 * A removal may carry a `RemovalBudget`: it then stops, leaving the rest in place, once the budget
 * has no entries or time left or its `stop()` says so — the way a run's directory or a closing
 * pool's scratch directory is removed without holding up a shutdown (docs/solver.md, *Where a run's
 * directory goes*).
 */
import { lstatSync, opendirSync, rmdirSync, unlinkSync } from 'node:fs';
import path from 'node:path';

const BATCH = 1024;

/** How much one removal may do: checked before each batch of unlinks. */
interface RemovalBudget {
  /** Entries (files and directories) it may still remove; counts down. */
  entries: number;
  /** `now()` value after which it stops; `Infinity` for no time limit. */
  readonly deadline: number;
  readonly now: () => number;
  /** Stops the removal when it returns true (an abort request). */
  readonly stop?: () => boolean;
}

/** A budget of `entries` entries and `ms` milliseconds from now (on `now`, default `performance.now`). */
export function removalBudget(entries: number, ms: number, now: () => number = () => performance.now(), stop?: () => boolean): RemovalBudget {
  return { entries, deadline: now() + ms, now, ...(stop ? { stop } : {}) };
}

function exhausted(budget: RemovalBudget | undefined): boolean {
  return budget !== undefined && (budget.entries <= 0 || budget.now() >= budget.deadline || budget.stop?.() === true);
}

/**
 * Removes `root` and everything below it; a missing `root` is not an error. Never follows symlinks.
 * Returns false when `budget` ran out first (part of the tree is left), true when `root` is gone.
 */
export function removeTreeBounded(root: string, budget?: RemovalBudget): boolean {
  let isDirectory: boolean;
  try {
    isDirectory = lstatSync(root).isDirectory();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw error;
  }
  if (!isDirectory) {
    if (exhausted(budget)) return false;
    unlinkSync(root);
    if (budget) budget.entries -= 1;
    return true;
  }
  for (;;) {
    if (exhausted(budget)) return false;
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
      if (budget !== undefined && budget.entries <= 0) return false;
      const file = path.join(root, entry.name);
      if (entry.directory) {
        if (!removeTreeBounded(file, budget)) return false;
      } else {
        try {
          unlinkSync(file);
          if (budget) budget.entries -= 1;
        } catch (error) {
          // EISDIR/EPERM: the entry's type was unknown to readdir; ENOENT: gone meanwhile.
          const code = (error as NodeJS.ErrnoException).code;
          if (code === 'EISDIR' || code === 'EPERM') {
            if (!removeTreeBounded(file, budget)) return false;
          } else if (code !== 'ENOENT') throw error;
        }
      }
    }
  }
  rmdirSync(root);
  if (budget) budget.entries -= 1;
  return true;
}
