// Batch triage: a run's several outputs go through one afl-showmap directory run (two when some
// crashed or hung) and get the verdicts and coverage claims one showmap per output gives; a
// showmap without directory mode falls back to one run per output for the rest of the pool.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { referenceSolverCommand, referenceTriage } from '../../src/reference/reference-commands.js';
import { CoverageBitmap } from '../../src/solver/coverage-bitmap.js';
import { triageOutputs } from '../../src/solver/result-triage.js';
import { TRIAGE_NICENESS } from '../../src/solver/showmap.js';
import { aflToolEnv } from '../../src/solver/solver-env.js';
import { SolverPool } from '../../src/solver/solver-pool.js';
import type { GeneratedInput, TriageSettings } from '../../src/solver/solver-types.js';
import { PACKAGE_ROOT } from '../../src/util/paths.js';

const counting = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'counting-showmap.sh');
const dirs: string[] = [];
function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function which(tool: string): string | null {
  const found = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : null;
}

/** The triage settings with the showmap wrapped in the counting fixture (log of starts; optionally no directory mode). */
function countedTriage(triage: Required<TriageSettings>, log: string, noBatch: boolean): Required<TriageSettings> {
  return { ...triage, showmap: { binary: '/bin/sh', argv: [counting, log, noBatch ? '1' : '0', triage.showmap.binary, ...triage.showmap.argv] } };
}

function starts(log: string): string[] {
  try {
    return readFileSync(log, 'utf8').trim().split('\n').filter((line) => line !== '');
  } catch {
    return []; // no start was logged yet
  }
}

function outputsOf(candidates: readonly Uint8Array[]): GeneratedInput[] {
  return candidates.map((bytes, i) => ({ name: String(i).padStart(6, '0'), sha256: `sha-${i}`, sizeBytes: bytes.length, bytes }));
}

async function triageWith(triage: Required<TriageSettings>, candidates: readonly Uint8Array[], batching = { supported: true }) {
  const bitmap = new CoverageBitmap(65_536);
  const workDir = tempDir('symfence-batch-work-');
  const triaged = await triageOutputs({
    triage: { ...triage, inputMode: triage.inputMode === 'stdin' ? 'stdin' : 'file' },
    outputs: outputsOf(candidates),
    bitmap,
    workDir,
    stopRequested: () => false,
    baseEnv: process.env,
    batching,
  });
  if (!Array.isArray(triaged)) throw new Error(`triage failed: ${triaged.setupError.message}`);
  return { verdicts: triaged.map((g) => (g === null ? 'stopped' : g.showmap === 'ok' ? ((g.novelty?.newBits ?? 0) > 0 ? 'new' : 'known') : (g.showmap ?? 'none'))), edges: bitmap.edgesCovered(), batching };
}

const aflCc = which('afl-cc');
const aflShowmap = which('afl-showmap');
const noAfl = aflCc === null || aflShowmap === null;
if (noAfl) console.warn('batch-triage AFL++ tests skipped: afl-cc or afl-showmap not on PATH (install Debian afl++)');

describe.skipIf(noAfl)('batch triage with real afl-showmap', () => {
  let target: string;
  let stdinTarget: string;
  beforeAll(() => {
    const dir = tempDir('symfence-batch-afl-');
    // First byte decides: C crashes, H hangs, A and B take different edges, anything else a third.
    const source = `#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
  FILE *f = argc > 1 ? fopen(argv[1], "rb") : stdin;
  if (!f) return 3;
  int c = fgetc(f);
  if (c == 'C') abort();
  if (c == 'H') for (;;) usleep(1000);
  if (c == 'A') puts("a"); else if (c == 'B') puts("b"); else puts("other");
  return 0;
}
`;
    writeFileSync(path.join(dir, 'target.c'), source);
    target = path.join(dir, 'target');
    execFileSync(aflCc!, ['-O0', '-o', target, path.join(dir, 'target.c')], { env: aflToolEnv(process.env, { AFL_QUIET: '1' }), stdio: 'pipe' });
    stdinTarget = target;
  });

  const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

  it('gives one showmap per output the same claims, tells crashes from hangs, and runs an empty output alone', async () => {
    const log = tempDir('symfence-batch-log-');
    const base: Required<TriageSettings> = { showmap: { binary: aflShowmap!, argv: [] }, target: { binary: target, argv: ['@@'] }, inputMode: 'file', timeoutMs: 300 };
    const candidates = ['A', 'A', 'B', 'C', 'H', 'Zz', ''].map(bytes);
    const batched = await triageWith(countedTriage(base, path.join(log, 'batched'), false), candidates);
    const single = await triageWith(countedTriage(base, path.join(log, 'single'), true), candidates);
    // Debian's afl-showmap 4.04c exits 2 for a target it timed out, like a crash, so one run per
    // output reads the hang as a crash; the batch's second pass (crashes only) tells them apart.
    expect(batched.verdicts).toEqual(['new', 'known', 'new', 'crash', 'hang', 'new', 'known']);
    expect(single.verdicts.map((v, i) => (i === 4 ? 'hang' : v))).toEqual(batched.verdicts);
    expect(batched.edges).toBe(single.edges);
    // One directory run, one for the crash and the hang, then the empty output alone (afl-showmap skips empty files).
    expect(starts(path.join(log, 'batched'))).toEqual(['batch 7', 'batch 2', 'single']);
    // Refused directory mode: one attempt, then one showmap per output, and the pool stops trying.
    expect(starts(path.join(log, 'single'))).toEqual(['batch 7', ...candidates.map(() => 'single')]);
    expect(single.batching.supported).toBe(false);
  });

  it('feeds each input on stdin when the target has no @@', async () => {
    const log = path.join(tempDir('symfence-batch-log-'), 'starts');
    const triage: Required<TriageSettings> = { showmap: { binary: aflShowmap!, argv: [] }, target: { binary: stdinTarget, argv: [] }, inputMode: 'stdin', timeoutMs: 300 };
    const result = await triageWith(countedTriage(triage, log, false), ['A', 'B', 'Q', 'A'].map(bytes));
    expect(result.verdicts).toEqual(['new', 'new', 'new', 'known']);
    expect(starts(log)).toEqual(['batch 4']);
  });
});

describe('batch triage through the solver pool (reference showmap)', () => {
  it('triages a run with several outputs in one showmap start, with the verdicts one start per output gives', async () => {
    const dir = tempDir('symfence-batch-pool-');
    const results: Record<string, { verdicts: string[]; starts: string[] }> = {};
    for (const noBatch of [false, true]) {
      const log = path.join(dir, `starts-${noBatch}`);
      const pool = new SolverPool({ solver: { workers: 1 }, scratchParent: dir });
      try {
        // An all-zero seed: the demo maze's reference solver writes several solutions, each a new path.
        const run = await pool.run({
          input: { bytes: new Uint8Array(16) },
          command: referenceSolverCommand('builtin:demo'),
          triage: countedTriage(referenceTriage('builtin:demo') as Required<TriageSettings>, log, noBatch),
        });
        expect(run.status).toBe('ok');
        results[String(noBatch)] = { verdicts: run.generated.map((g) => `${g.sha256}:${g.showmap ?? 'none'}:${g.novelty?.newBits ?? '-'}`), starts: starts(log) };
      } finally {
        await pool.close();
      }
    }
    const batched = results['false']!;
    const single = results['true']!;
    expect(batched.verdicts.length).toBeGreaterThanOrEqual(2);
    expect(batched.verdicts).toEqual(single.verdicts);
    expect(batched.starts).toEqual([`batch ${batched.verdicts.length}`]);
    expect(single.starts).toEqual([`batch ${single.verdicts.length}`, ...single.verdicts.map(() => 'single')]);
  });
});

describe('grouped triage through the solver pool (reference showmap)', () => {
  /** Distinct seeds of the demo maze's length: each run writes its own solutions. */
  const seed = (fill: number): Uint8Array => new Uint8Array(16).fill(fill);

  async function withGate<T>(gate: string, body: () => Promise<T>): Promise<T> {
    // Read by the pool at construction (its environment snapshot for afl-showmap).
    const previous = process.env.SYMFENCE_TEST_SHOWMAP_GATE;
    process.env.SYMFENCE_TEST_SHOWMAP_GATE = gate;
    try {
      return await body();
    } finally {
      if (previous === undefined) delete process.env.SYMFENCE_TEST_SHOWMAP_GATE;
      else process.env.SYMFENCE_TEST_SHOWMAP_GATE = previous;
    }
  }

  type GatedContext = { pool: SolverPool; gate: string; log: string; triage: Required<TriageSettings>; command: ReturnType<typeof referenceSolverCommand> };

  /** A one-worker pool whose showmap starts wait at `gate` (until the test creates it), counted in `log`. */
  async function withGatedPool(prefix: string, body: (context: GatedContext) => Promise<void>): Promise<void> {
    const dir = tempDir(prefix);
    const gate = path.join(dir, 'gate');
    const log = path.join(dir, 'starts');
    const triage = countedTriage(referenceTriage('builtin:demo') as Required<TriageSettings>, log, false);
    await withGate(gate, async () => {
      const pool = new SolverPool({ solver: { workers: 1 }, scratchParent: dir });
      try {
        await body({ pool, gate, log, triage, command: referenceSolverCommand('builtin:demo') });
      } finally {
        await pool.close();
      }
    });
  }

  it('triages the runs that waited for the triage slot in one showmap start, each with its own verdicts', async () => {
    await withGatedPool('symfence-group-', async ({ pool, gate, log, triage, command }) => {
      const exited: Promise<void>[] = [];
      const later: Promise<Awaited<ReturnType<typeof pool.run>>>[] = [];
      let queued!: () => void;
      const bothQueued = new Promise<void>((resolve) => (queued = resolve));
      // A's triage holds the only triage slot at the gate; B and C run meanwhile and queue.
      const a = pool.run(
        { input: { bytes: seed(0) }, command, triage },
        {
          onSolverExit: () => {
            for (const fill of [0x41, 0x46]) {
              let exit!: () => void;
              exited.push(new Promise<void>((resolve) => (exit = resolve)));
              later.push(pool.run({ input: { bytes: seed(fill) }, command, triage }, { onSolverExit: () => exit() }));
            }
            queued();
          },
        },
      );
      await bothQueued;
      await Promise.all(exited);
      writeFileSync(gate, '');
      const [first, ...rest] = await Promise.all([a, ...later]);
      const counts = [first!, ...rest].map((r) => r.generated.length);
      expect(counts.every((n) => n >= 1)).toBe(true);
      for (const r of [first!, ...rest]) {
        expect(r.status).toBe('ok');
        expect(r.generated.every((g) => g.showmap === 'ok' && g.novelty !== undefined)).toBe(true);
      }
      // One start for A's outputs, one for B's and C's together (single starts for a lone output).
      const groupOf = (n: number): string => (n >= 2 ? `batch ${n}` : 'single');
      expect(starts(log)).toEqual([groupOf(counts[0]!), groupOf(counts[1]! + counts[2]!)]);
    });
  });

  it('drops the outputs of a run aborted while it waited, without claiming their coverage', async () => {
    await withGatedPool('symfence-group-abort-', async ({ pool, gate, log, triage, command }) => {
      const controller = new AbortController();
      let bExited!: () => void;
      const bDone = new Promise<void>((resolve) => (bExited = resolve));
      let b: ReturnType<typeof pool.run> | undefined;
      const a = pool.run(
        { input: { bytes: seed(0) }, command, triage },
        { onSolverExit: () => void (b = pool.run({ input: { bytes: seed(0x41) }, command, triage }, { signal: controller.signal, onSolverExit: () => bExited() })) },
      );
      await bDone;
      const edgesBefore = pool.bitmap.edgesCovered();
      controller.abort();
      writeFileSync(gate, '');
      const first = await a;
      await expect(b!).rejects.toMatchObject({ code: 'ERR_ABORTED' });
      expect(first.status).toBe('ok');
      // A's outputs were triaged; B's never reached a showmap (no second start).
      expect(pool.bitmap.edgesCovered()).toBeGreaterThan(edgesBefore);
      expect(starts(log)).toHaveLength(1);
    });
  });
});

describe('triage priority', () => {
  it('runs afl-showmap at the triage nice value', async () => {
    const dir = tempDir('symfence-nice-');
    const seen = path.join(dir, 'nice');
    const script = path.join(dir, 'nice-showmap.sh');
    // A stand-in showmap: waits (bounded) until its nice value is set, records it, writes a map.
    writeFileSync(
      script,
      `#!/bin/sh
map=
while [ "$#" -gt 0 ]; do if [ "$1" = "-o" ]; then map=$2; shift; fi; if [ "$1" = "--" ]; then break; fi; shift; done
i=0
n=$(cut -d' ' -f19 /proc/$$/stat)
while [ "$n" = 0 ] && [ "$i" -lt 500 ]; do sleep 0.01; i=$((i + 1)); n=$(cut -d' ' -f19 /proc/$$/stat); done
echo "$n" > ${JSON.stringify(seen)}
printf '\\001' > "$map"
`,
    );
    const result = await triageWith({ showmap: { binary: '/bin/sh', argv: [script] }, target: { binary: '/bin/true', argv: ['@@'] }, inputMode: 'file', timeoutMs: 5_000 }, [new Uint8Array([1])]);
    expect(result.verdicts).toEqual(['new']);
    expect(readFileSync(seen, 'utf8').trim()).toBe(String(TRIAGE_NICENESS));
  });
});
