import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';

/** True while `pid` is a live (non-zombie) process. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/**
 * Handshake with a child process: resolves once it has published `file` (children write a temp
 * file and rename it, so existence means complete). Polls the filesystem; the deadline only turns
 * a broken fixture into a clear failure instead of a hung test.
 */
export async function waitForFile(file: string, deadlineMs = 30_000): Promise<string> {
  const start = Date.now();
  while (!existsSync(file)) {
    if (Date.now() - start > deadlineMs) throw new Error(`handshake file ${file} never appeared`);
    await delay(5);
  }
  return readFileSync(file, 'utf8');
}

/** Resolves once `pid` is gone; the deadline only bounds a broken test. */
export async function waitForExit(pid: number, deadlineMs = 30_000): Promise<boolean> {
  const start = Date.now();
  while (isAlive(pid)) {
    if (Date.now() - start > deadlineMs) return false;
    await delay(5);
  }
  return true;
}
