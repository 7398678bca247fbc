/**
 * Scratch directories of dead coordinators. A pool removes its scratch directory on `close()`,
 * but a coordinator that was SIGKILLed (or lost its machine's power) cannot; on tmpfs the leftovers
 * hold memory until reboot. So each pool's directory carries its owner — `symfence-solver-<pid>-<start>-…`,
 * `<start>` being the process start time (`/proc/<pid>/stat`, clock ticks since boot), which tells
 * a recycled pid from the owner — and a pool sweeps, at start, the directories under its scratch
 * parent whose owner is no longer running on this host (docs/solver.md, *Scratch directories*).
 *
 * A pool that closed renames its directory to `…<CLOSED_SUFFIX>` before removing it within a
 * budget; a directory with that name is swept whoever its owner (docs/solver.md, *Where a run's
 * directory goes*).
 *
 * Only directories in this naming scheme are touched; one whose owner cannot be judged (no /proc)
 * is kept. The scratch parent is assumed to be private to this host's pid namespace (/dev/shm and
 * the tmp directory are).
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { processStartTicks } from '../util/process-start.js';
import { removeTreeBounded } from './bounded-remove.js';

const SCRATCH_PREFIX = 'symfence-solver-';
const OWNED_NAME = /^symfence-solver-(\d+)-(\d+)-/;
/** Appended to a pool's scratch directory name at close(): its pool is done with it. */
export const CLOSED_SUFFIX = '.closed';

/** Start time of `pid` in clock ticks since boot, as a name component; null when it is not running (or unreadable). */
export function processStartTime(pid: number): string | null {
  const ticks = processStartTicks(pid);
  return ticks === undefined ? null : String(ticks);
}

/** The prefix for `mkdtemp` of this process's scratch directory. */
export function ownedScratchPrefix(parent: string): string {
  const start = processStartTime(process.pid) ?? '0';
  return path.join(parent, `${SCRATCH_PREFIX}${process.pid}-${start}-`);
}

/**
 * Removes the scratch directories under `parent` whose pool closed, or whose owner process is gone
 * (dead, or its pid now belongs to a process started at another time). Never throws; returns the
 * names removed.
 */
export function sweepStaleScratch(parent: string): string[] {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return [];
  }
  // Without /proc no owner can be judged alive: keep everything but closed pools' directories.
  const ownersKnown = processStartTime(process.pid) !== null;
  const removed: string[] = [];
  for (const name of names) {
    const owner = OWNED_NAME.exec(name);
    if (!owner) continue;
    const pid = Number(owner[1]);
    if (!name.endsWith(CLOSED_SUFFIX) && (!ownersKnown || processStartTime(pid) === owner[2])) continue;
    try {
      // A dead coordinator's run directory may hold a solver's flood: remove it without its listing in memory.
      removeTreeBounded(path.join(parent, name));
      removed.push(name);
    } catch {
      // Someone else's (another user's) or already gone: not ours to insist on.
    }
  }
  return removed;
}
