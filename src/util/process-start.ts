/**
 * When a process started, from /proc: with the pid it names a process unambiguously (pids are
 * reused, start times are not), which is how leftover temp files and scratch directories are
 * judged to belong to a live writer or a dead one.
 */
import { readFileSync } from 'node:fs';

/**
 * Start time of `pid` in clock ticks since boot, or undefined when it cannot be read (no such
 * process, no /proc). The command name (field 2) may hold spaces and parentheses: fields are
 * counted after its last `)`.
 */
export function processStartTicks(pid: number | 'self'): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the command: field 3 (state) is fields[0], so field 22 (starttime) is fields[19].
  const ticks = Number(fields[19]);
  return Number.isSafeInteger(ticks) && ticks > 0 ? ticks : undefined;
}

