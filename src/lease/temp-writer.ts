/**
 * Who wrote a temp file. Every temp name symfence writes next to shared state (lease records,
 * staged findings) carries a writer tag, so that a sweeper can tell a crashed writer's leftovers
 * from a live writer's (docs/leases.md "Leftover temp files"):
 *
 *   w1_<host>_<pid>_<start>
 *
 *   host   12 hex digits of SHA-256(hostname, kernel boot id, pid namespace): equal only for
 *          processes whose pids mean the same thing as ours (same machine, same boot, same pid
 *          namespace — containers sharing a directory get different hosts)
 *   pid    the writer's pid, decimal
 *   start  the writer's start time in clock ticks since boot (`/proc/<pid>/stat` field 22), so a
 *          reused pid is told apart from the writer; 0 where it cannot be read (not Linux)
 */
import { createHash } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { processStartTicks } from '../util/process-start.js';

export { processStartTicks };
import os from 'node:os';
import { codeOf } from '../errors.js';

export interface WriterTag {
  readonly host: string;
  readonly pid: number;
  /** Clock ticks since boot; 0 = unknown. */
  readonly startTicks: number;
}

const TAG_RE = /w1_([0-9a-f]{12})_(\d{1,10})_(\d{1,20})/;

function readOr(read: () => string, fallback: string): string {
  try {
    return read();
  } catch {
    return fallback;
  }
}

/** This machine's host digest (see the file comment). */
function hostDigest(): string {
  const bootId = readOr(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(), '');
  const pidNamespace = readOr(() => readlinkSync('/proc/self/ns/pid'), '');
  return createHash('sha256').update(`${os.hostname()}\0${bootId}\0${pidNamespace}`).digest('hex').slice(0, 12);
}

let current: WriterTag | undefined;

/** This process's tag (computed once). */
export function currentWriterTag(): WriterTag {
  current ??= { host: hostDigest(), pid: process.pid, startTicks: processStartTicks('self') ?? 0 };
  return current;
}

export function formatWriterTag(tag: WriterTag): string {
  return `w1_${tag.host}_${tag.pid}_${tag.startTicks}`;
}

/** This process's tag as it appears in temp names. */
export function currentWriterTagText(): string {
  return formatWriterTag(currentWriterTag());
}

/** The writer tag inside a temp file name, or null for an untagged (legacy or foreign) name. */
export function parseWriterTag(name: string): WriterTag | null {
  const m = TAG_RE.exec(name);
  if (!m) return null;
  const pid = Number(m[2]);
  const startTicks = Number(m[3]);
  if (!Number.isSafeInteger(pid) || pid < 1 || !Number.isSafeInteger(startTicks)) return null;
  return { host: m[1]!, pid, startTicks };
}

/** How a sweeper asks about processes of this host (injectable for tests). */
export interface ProcessProbe {
  /** False only when the pid provably names no process (`kill(pid, 0)` → ESRCH). */
  isAlive(pid: number): boolean;
  /** The process's start time in clock ticks since boot; undefined when unknown. */
  startTicksOf(pid: number): number | undefined;
}

export const systemProcessProbe: ProcessProbe = {
  isAlive(pid) {
    try {
      process.kill(pid, 0);
      return true;
    } catch (error) {
      // EPERM: it exists, owned by another user. Anything but ESRCH is treated as alive.
      return codeOf(error) !== 'ESRCH';
    }
  },
  startTicksOf: (pid) => processStartTicks(pid),
};
