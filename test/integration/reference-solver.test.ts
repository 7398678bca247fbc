import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_MAZE } from '../../src/reference/demo-maze.js';
import { branchId, mazeBranchCount, reachedBranches, walkMaze } from '../../src/reference/maze.js';
import { referenceSolverCommand, referenceTriage } from '../../src/reference/reference-commands.js';
import { SolverPool } from '../../src/solver/solver-pool.js';

const seed = (text: string): Uint8Array => Buffer.from(text.padEnd(16, '\0'), 'latin1');

let pool: SolverPool;
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-refsolver-'));
  pool = new SolverPool({ solver: { workers: 2, killGraceMs: 200 }, scratchParent: dir });
});

afterAll(async () => {
  await pool.close();
  rmSync(dir, { recursive: true, force: true });
});

/** CPU time of this process's reaped children, in ms (Linux /proc, 10 ms ticks). */
function childrenCpuMs(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

describe('reference solver as a SymCC binary', () => {
  it('spends the CPU time SYMFENCE_REFSOLVER_SOLVE_CPU_MS asks for, and solves as usual', () => {
    const inputFile = path.join(dir, 'cpu-seed');
    const outputDir = mkdtempSync(path.join(dir, 'cpu-out-'));
    writeFileSync(inputFile, seed('F'));
    const command = referenceSolverCommand('builtin:demo', 'file');
    const before = childrenCpuMs();
    const run = spawnSync(command.binary, command.argv.map((a) => (a === '@@' ? inputFile : a)), {
      env: { ...process.env, SYMCC_OUTPUT_DIR: outputDir, SYMCC_INPUT_FILE: inputFile, SYMFENCE_REFSOLVER_SOLVE_CPU_MS: '600' },
    });
    expect(run.status).toBe(0);
    expect(childrenCpuMs() - before).toBeGreaterThanOrEqual(590);
    expect(readdirSync(outputDir).length).toBeGreaterThan(0);
  });

  it('reads stdin when argv has no @@ and gives the same outputs as in file mode', async () => {
    const input = seed('F');
    const viaStdin = await pool.run({ input: { bytes: input }, command: referenceSolverCommand('builtin:demo', 'stdin') });
    const viaFile = await pool.run({ input: { bytes: input }, command: referenceSolverCommand('builtin:demo', 'file') });
    expect(viaStdin.status).toBe('ok');
    expect(viaStdin.generated.map((g) => g.sha256)).toEqual(viaFile.generated.map((g) => g.sha256));
    expect(viaStdin.generated.length).toBeGreaterThan(0);
    expect(viaStdin.newTestcaseLines).toBe(viaStdin.generated.length);
    expect(viaStdin.solverTimeUs).toBeGreaterThan(0);
  });

  it('reads a maze file, and a queue file given by path on stdin', async () => {
    const mazeFile = path.join(dir, 'maze.json');
    writeFileSync(mazeFile, JSON.stringify(DEMO_MAZE));
    const inputFile = path.join(dir, 'seed');
    writeFileSync(inputFile, seed('a'));
    const result = await pool.run({ input: { path: inputFile }, command: referenceSolverCommand(mazeFile, 'stdin') });
    expect(result.status).toBe('ok');
    expect((result.telemetry as { branchTrace: unknown[] }).branchTrace).toHaveLength(walkMaze(DEMO_MAZE, seed('a')).steps.length);
  });

  it('solves only the directed target and reports it in its telemetry', async () => {
    const input = seed('F');
    const steps = walkMaze(DEMO_MAZE, input).steps;
    const target = steps[1]!.opposite; // site 2 the other way: in[1] == 'U'
    const result = await pool.run({ input: { bytes: input }, command: referenceSolverCommand('builtin:demo'), job: { targetBranch: target, actions: [] } });
    expect(result.generated).toHaveLength(1);
    expect(Buffer.from(result.generated[0]!.bytes!).subarray(0, 2).toString('latin1')).toBe('FU');
    expect(result.telemetry).toMatchObject({ targetBranch: target.toString(), targetReached: true, targetStatus: 'sat', counters: { queries: 1, sat: 1, generated: 1 } });
    expect(branchId(steps[0]!.actual, 2, true)).toBe(target);
  });

  it('solves nothing in a trace-only run and reports every branch of the path as open', async () => {
    const input = seed('F');
    const steps = walkMaze(DEMO_MAZE, input).steps;
    const result = await pool.run({ input: { bytes: input }, command: referenceSolverCommand('builtin:demo'), job: { targetBranch: 0n, actions: [], traceOnly: true } });
    expect(result.generated).toHaveLength(0);
    const telemetry = result.telemetry as { counters: { queries: number }; openBranches: string[]; branchTrace: unknown[] };
    expect(telemetry.counters.queries).toBe(0);
    expect(telemetry.branchTrace).toHaveLength(steps.length);
    expect(telemetry.openBranches).toEqual(steps.map((s) => s.opposite.toString()));
  });

  it('crashes with SIGABRT after writing its outputs when the input reaches an abort node', async () => {
    const result = await pool.run({ input: { bytes: seed('FU0\x8f!') }, command: referenceSolverCommand('builtin:demo') });
    expect(result.status).toBe('crash');
    expect(result.signal).toBe('SIGABRT');
    expect(result.generated.length).toBeGreaterThan(0);
  });

  it('obeys the crash knob', async () => {
    const result = await pool.run({ input: { bytes: seed('') }, command: referenceSolverCommand('builtin:demo'), env: { SYMFENCE_REFSOLVER_CRASH: 'SIGSEGV' } });
    expect(result.status).toBe('crash');
    expect(result.signal).toBe('SIGSEGV');
  });

  it('obeys the hang and ignore-SIGTERM knobs: killed by SIGKILL after the grace', async () => {
    const result = await pool.run({
      input: { bytes: seed('') },
      command: referenceSolverCommand('builtin:demo'),
      env: { SYMFENCE_REFSOLVER_HANG: '1', SYMFENCE_REFSOLVER_IGNORE_SIGTERM: '1' },
      timeoutMs: 1500,
      killGraceMs: 100,
    });
    expect(result.status).toBe('timeout');
    expect(result.signal).toBe('SIGKILL');
  });
});

describe('reference solver and triage in the pool', () => {
  it('explores a small maze completely by feeding novel outputs back, triaged by the maze showmap mode', async () => {
    const maze = {
      schema: 'symfence-maze/1',
      name: 'small',
      inputLength: 4,
      body: [{ site: 1, test: { kind: 'eq', offset: 0, value: 1 }, then: [{ site: 2, test: { kind: 'checksum', from: 0, to: 4, value: 9 } }] }],
    } as const;
    const mazeFile = path.join(dir, 'small.json');
    writeFileSync(mazeFile, JSON.stringify(maze));
    const queue = [new Uint8Array(4)];
    const reached = new Set<string>(reachedBranches(maze, queue[0]!));
    let runs = 0;
    while (queue.length > 0) {
      const batch = queue.splice(0, 2);
      const results = await Promise.all(batch.map((input) => pool.run({ input: { bytes: input }, command: referenceSolverCommand(mazeFile), triage: referenceTriage(mazeFile) })));
      runs += results.length;
      for (const result of results) {
        for (const g of result.generated) {
          expect(g.showmap).toBe('ok');
          for (const branch of reachedBranches(maze, g.bytes!)) reached.add(branch);
          if ((g.novelty?.newBits ?? 0) > 0) queue.push(g.bytes!);
        }
      }
    }
    expect(reached.size).toBe(mazeBranchCount(maze));
    expect(pool.bitmap.edgesCovered()).toBe(mazeBranchCount(maze));
    expect(runs).toBeLessThan(6);
  });
});
