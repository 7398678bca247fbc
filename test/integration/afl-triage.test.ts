import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_MAZE } from '../../src/reference/demo-maze.js';
import { mazeToC } from '../../src/reference/maze-c.js';
import { runReference } from '../../src/reference/reference-run.js';
import { referenceSolverCommand, referenceTriage } from '../../src/reference/reference-commands.js';
import { aflToolEnv } from '../../src/solver/solver-env.js';
import { SolverPool } from '../../src/solver/solver-pool.js';
import { CoverageBitmap } from '../../src/solver/coverage-bitmap.js';
import { runShowmap } from '../../src/solver/showmap.js';

function which(tool: string): string | null {
  const found = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : null;
}

const aflCc = which('afl-cc');
const aflShowmap = which('afl-showmap');
const missing = aflCc === null || aflShowmap === null;
if (missing) console.warn('afl-triage tests skipped: afl-cc or afl-showmap not on PATH (install Debian afl++)');

/** Inputs the reference solver generates from an all-zero seed, breadth first (deterministic). */
function generatedSequence(limit: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  const seen = new Set<string>();
  const queue = [new Uint8Array(16)];
  out.push(queue[0]!);
  while (queue.length > 0 && out.length < limit) {
    for (const solution of runReference(DEMO_MAZE, queue.shift()!, null).solutions) {
      const key = Buffer.from(solution).toString('hex');
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(solution);
      queue.push(solution);
    }
  }
  return out.slice(0, limit);
}

describe.skipIf(missing)('triage with real AFL++ on the maze compiled by afl-cc', () => {
  let dir: string;
  let binary: string;

  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-afl-'));
    writeFileSync(path.join(dir, 'maze.c'), mazeToC(DEMO_MAZE));
    binary = path.join(dir, 'maze');
    execFileSync(aflCc!, ['-O0', '-o', binary, path.join(dir, 'maze.c')], { env: aflToolEnv(process.env, { AFL_QUIET: '1' }), stdio: 'pipe' });
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('makes the same novelty and crash decisions as the maze own showmap-compatible map', async () => {
    const afl = new CoverageBitmap(65_536);
    const maze = new CoverageBitmap(65_536);
    const work = mkdtempSync(path.join(dir, 'work-'));
    const referenceShowmap = referenceTriage('builtin:demo');
    const decisions: { afl: string; maze: string }[] = [];
    // The generated sequence, then an input that reaches the maze's abort node.
    const crasher = Buffer.from('FU0\x8f!'.padEnd(16, '\0'), 'latin1');
    for (const candidate of [...generatedSequence(14), crasher]) {
      const real = await runShowmap({ showmap: { binary: aflShowmap!, argv: [] }, target: { binary, argv: ['@@'] }, inputMode: 'file', timeoutMs: 5000, workDir: work, candidate });
      const own = await runShowmap({ ...referenceShowmap, inputMode: 'file', timeoutMs: 5000, workDir: work, candidate });
      const decide = (r: typeof real, bitmap: CoverageBitmap): string => (r.outcome === 'ok' ? (bitmap.claim(r.map!).newBits > 0 ? 'novel' : 'known') : r.outcome);
      decisions.push({ afl: decide(real, afl), maze: decide(own, maze) });
    }
    expect(decisions.map((d) => d.afl)).toEqual(decisions.map((d) => d.maze));
    expect(decisions.filter((d) => d.afl === 'novel').length).toBeGreaterThan(3);
    expect(decisions.some((d) => d.afl === 'crash')).toBe(true);
  });

  it('feeds the candidate on stdin when the target has no @@', async () => {
    const work = mkdtempSync(path.join(dir, 'stdin-'));
    const bitmap = new CoverageBitmap(65_536);
    const show = (text: string) =>
      runShowmap({ showmap: { binary: aflShowmap!, argv: [] }, target: { binary, argv: [] }, inputMode: 'stdin', timeoutMs: 5000, workDir: work, candidate: Buffer.from(text.padEnd(16, '\0'), 'latin1') });
    const zero = await show('');
    const ax = await show('ax');
    expect([zero.outcome, ax.outcome]).toEqual(['ok', 'ok']);
    bitmap.claim(zero.map!);
    // Had the input not reached the target, both runs would have the same map.
    expect(bitmap.claim(ax.map!).newBits).toBeGreaterThan(0);
    expect(bitmap.claim((await show('ax')).map!).newBits).toBe(0);
  });

  it('runs afl-showmap triage inside the solver pool despite a stray AFL_* variable in the coordinator environment', async () => {
    const scratch = mkdtempSync(path.join(dir, 'pool-'));
    // Set before the pool starts: worker threads copy process.env when they start.
    const previous = process.env.AFL_TYPO_THAT_WOULD_SLEEP;
    process.env.AFL_TYPO_THAT_WOULD_SLEEP = '1';
    const pool = new SolverPool({ solver: { workers: 1 }, scratchParent: scratch });
    try {
      const result = await pool.run({
        input: { bytes: new Uint8Array(16) },
        command: referenceSolverCommand('builtin:demo'),
        triage: { showmap: { binary: aflShowmap!, argv: [] }, target: { binary, argv: ['@@'] } },
      });
      expect(result.status).toBe('ok');
      expect(result.generated.length).toBeGreaterThan(0);
      expect(result.generated.every((g) => g.showmap === 'ok' || g.showmap === 'crash')).toBe(true);
      expect(result.generated.some((g) => (g.novelty?.newBits ?? 0) > 0)).toBe(true);
      expect(pool.bitmap.edgesCovered()).toBeGreaterThan(0);
    } finally {
      if (previous === undefined) delete process.env.AFL_TYPO_THAT_WOULD_SLEEP;
      else process.env.AFL_TYPO_THAT_WOULD_SLEEP = previous;
      await pool.close();
    }
  });
});
