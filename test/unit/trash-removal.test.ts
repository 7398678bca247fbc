/**
 * The slot side's removal of trashed run directories (trash-removal.ts) and the names of run
 * directories (solver-worker-main.ts): a slice never holds the thread for more than its entries,
 * the rest follows on later turns of the event loop, and a slot context never reuses a run name.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSolverRunContext } from '../../src/solver/solver-worker-main.js';
import { TrashRemoval } from '../../src/solver/trash-removal.js';

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'symfence-trash-'));
});
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

function trashedRun(name: string, files: number): string {
  const dir = path.join(tmp, name);
  mkdirSync(path.join(dir, 'output'), { recursive: true });
  for (let i = 0; i < files; i++) writeFileSync(path.join(dir, 'output', `f${i}`), '');
  return dir;
}

describe('trash removal in slices', () => {
  it('removes a small directory within the first slice, before remove() returns', () => {
    const dir = trashedRun('small', 5);
    const trash = new TrashRemoval(64);
    trash.remove(dir);
    expect(trash.pending).toBe(0);
    expect(readdirSync(tmp)).not.toContain('small');
  });

  it('removes a large one slice by slice, one slice per turn of the event loop, oldest directory first', async () => {
    const big = trashedRun('big', 300);
    const next = trashedRun('next', 3);
    const trash = new TrashRemoval(64);
    trash.remove(big);
    trash.remove(next);
    // One slice ran: 64 entries of `big` are gone, and nothing of `next`.
    expect(trash.pending).toBe(2);
    expect(readdirSync(path.join(big, 'output'))).toHaveLength(300 - 64);
    const remaining: number[] = [];
    while (trash.pending === 2) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (trash.pending === 2) remaining.push(readdirSync(path.join(big, 'output')).length);
    }
    // 300 files + 2 directories: 64 per slice, so `big` is gone in the fifth slice, which also removes `next`.
    expect(remaining).toEqual([172, 108, 44]);
    await trash.idle();
    expect(trash.pending).toBe(0);
    expect(readdirSync(tmp).filter((n) => n === 'big' || n === 'next')).toEqual([]);
  });

  it('idle() resolves at once with nothing to remove, and after the last slice otherwise', async () => {
    const trash = new TrashRemoval(16);
    await trash.idle();
    trash.remove(trashedRun('idle', 40));
    expect(trash.pending).toBe(1);
    await trash.idle();
    expect(trash.pending).toBe(0);
    expect(readdirSync(tmp)).not.toContain('idle');
  });

  it('counts a directory already gone (the pool close removed it) as removed and goes on with the next', async () => {
    const trash = new TrashRemoval(16);
    const missing = path.join(tmp, 'never-existed');
    trash.remove(missing);
    const after = trashedRun('after-missing', 3);
    trash.remove(after);
    await trash.idle();
    expect(readdirSync(tmp)).not.toContain('after-missing');
  });
});

describe('run directory names', () => {
  it('never repeat across contexts of the same slot, as when a solver thread replaces a crashed one', async () => {
    const data = { scratchRoot: path.join(tmp, 'scratch'), bitmapBuffer: null, pruningMapBytes: 16 };
    const first = await createSolverRunContext(data, 'slot-0', null);
    const names = [first.nextRunName(), first.nextRunName()];
    const replacement = await createSolverRunContext(data, 'slot-0', null);
    names.push(replacement.nextRunName(), replacement.nextRunName());
    expect(new Set(names).size).toBe(4);
    for (const name of names) expect(name).toMatch(/^run-\d+-\d+-\d+$/);
  });
});
