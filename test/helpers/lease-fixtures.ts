import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';
import { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import type { LeaseTableDeps } from '../../src/lease/lease-table-base.js';

const roots: string[] = [];

/** A fresh temporary directory, removed after the test. */
export async function tempRoot(prefix = 'symfence-lease-'): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  roots.push(dir);
  return dir;
}

afterEach(async () => {
  await Promise.all(roots.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

export const S = 1000;

/** A work table; the file store unless `options.store` says otherwise (file-specific tests rely on it). */
export function openWork(root: string, options: Record<string, unknown> = {}, deps: LeaseTableDeps = {}): Promise<FencedWorkLeaseTable> {
  return FencedWorkLeaseTable.open(root, { store: 'files', shardCount: 4, leaseTtlMs: 10 * S, verifyFilesystem: false, ...options }, deps);
}

/** A target table; the file store unless `options.store` says otherwise. */
export function openTarget(root: string, options: Record<string, unknown> = {}, deps: LeaseTableDeps = {}): Promise<FencedTargetLeaseTable> {
  return FencedTargetLeaseTable.open(root, { store: 'files', shardCount: 4, leaseTtlMs: 10 * S, verifyFilesystem: false, ...options }, deps);
}

/** Bytes of a file, or null when it does not exist. */
export async function bytesOf(file: string): Promise<Buffer | null> {
  try {
    return await readFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

export async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

export async function recordJson(file: string): Promise<Record<string, unknown>> {
  return JSON.parse((await readFile(file, 'utf8'))) as Record<string, unknown>;
}

/** Every file under `root` (relative paths), sorted. */
export async function listFiles(root: string): Promise<string[]> {
  const out: string[] = [];
  async function walk(dir: string): Promise<void> {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) await walk(full);
      else out.push(path.relative(root, full));
    }
  }
  await walk(root);
  return out.sort();
}

/** Record files (`<shard>/<id>.json`) under a root. */
export async function recordFiles(root: string): Promise<string[]> {
  return (await listFiles(root)).filter((f) => f.includes(path.sep) && f.endsWith('.json'));
}

/** Snapshot of every file's bytes under a root (lock files are empty and stable). */
export async function snapshotTree(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const file of await listFiles(root)) out.set(file, (await readFile(path.join(root, file))).toString('base64'));
  return out;
}

export const ID_A0 = `00000000${'a'.repeat(56)}`;
export const ID_B0 = `00000004${'b'.repeat(56)}`;
export const ID_C1 = `00000001${'c'.repeat(56)}`;
