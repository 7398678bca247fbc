import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SolverPool } from '../../src/solver/solver-pool.js';
import { referenceSolverCommand, referenceSolverScript } from '../../src/reference/reference-commands.js';
import { PACKAGE_ROOT } from '../../src/util/paths.js';
import { isAlive, waitForExit, waitForFile } from '../helpers/processes.js';
import { SPAWN_METHODS } from '../helpers/spawn-methods.js';

const fixture = (name: string): string => path.join(PACKAGE_ROOT, 'test', 'fixtures', name);
const sh = (script: string, ...args: string[]) => ({ binary: '/bin/sh', argv: [fixture(script), ...args] });
const text = (bytes: Uint8Array | undefined): string => Buffer.from(bytes ?? []).toString('utf8');

function envLines(bytes: Uint8Array | undefined): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of text(bytes).split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) map.set(line.slice(0, eq), line.slice(eq + 1));
  }
  return map;
}

describe.each(SPAWN_METHODS)('SolverPool with spawnMethod %s', (spawnMethod) => {
  let pool: SolverPool;
  let scratchParent: string;
  let tmp: string;

  beforeAll(() => {
    scratchParent = mkdtempSync(path.join(os.tmpdir(), 'symfence-pool-test-'));
    tmp = mkdtempSync(path.join(os.tmpdir(), 'symfence-pool-handshake-'));
    pool = new SolverPool({ solver: { workers: 2, killGraceMs: 200, spawnMethod }, scratchParent });
  });

  afterAll(async () => {
    await pool.close();
    rmSync(tmp, { recursive: true, force: true });
    rmSync(scratchParent, { recursive: true, force: true });
  });

  describe('SolverPool: the SymCC contract', () => {
    it('pipes the input on stdin and closes it when argv has no @@, without SYMCC_INPUT_FILE', async () => {
      const result = await pool.run({ input: { bytes: Buffer.from('stdin bytes') }, command: sh('echo-solver.sh') });
      expect(result.status).toBe('ok');
      const [copy, envDump] = result.generated;
      expect(text(copy?.bytes)).toBe('stdin bytes');
      const env = envLines(envDump?.bytes);
      expect(env.has('SYMCC_INPUT_FILE')).toBe(false);
      expect(env.get('ARGC')).toBe('0');
    });

    it('replaces @@ with a private copy of the input and sets SYMCC_INPUT_FILE to the same path', async () => {
      const inputFile = path.join(tmp, 'queue-entry');
      const { writeFileSync } = await import('node:fs');
      writeFileSync(inputFile, 'file bytes');
      const result = await pool.run({ input: { path: inputFile }, command: sh('echo-solver.sh', '@@') });
      expect(result.status).toBe('ok');
      expect(text(result.generated[0]?.bytes)).toBe('file bytes');
      const env = envLines(result.generated[1]?.bytes);
      expect(env.get('SYMCC_INPUT_FILE')).toBe(env.get('ARG1'));
      expect(env.get('SYMCC_INPUT_FILE')).not.toBe(inputFile);
    });

    it('sets the contract variables: fresh empty output dir, linearization, private pruning map, directed extension', async () => {
      const previous = process.env.SYMCC_INPUT_FILE;
      const result = await pool.run({
        input: { bytes: Buffer.from('x') },
        command: sh('echo-solver.sh'),
        env: { SYMFENCE_TEST_MARK: 'kept' },
        job: { targetBranch: 77n, actions: [{ branch: 88n, kind: 'solve' }, { branch: 99n, kind: 'skip' }] },
      });
      expect(previous).toBeUndefined();
      const env = envLines(result.generated[1]?.bytes);
      expect(env.get('SYMCC_ENABLE_LINEARIZATION')).toBe('1');
      expect(env.get('OUTPUT_ENTRIES_AT_START')).toBe('0');
      expect(env.get('OUTPUT_DIR_IS_DIR')).toBe('yes');
      expect(env.get('SYMCC_TARGET_BRANCH')).toBe('77');
      expect(text(result.generated[1]?.bytes)).toContain('ACTION=88 solve\nACTION=99 skip\n');
      expect(env.get('SYMCC_TELEMETRY_OUT')).toMatch(/telemetry\.json$/);
      expect(env.get('SYMFENCE_TEST_MARK')).toBe('kept');
      expect(env.get('PRUNING_MAP_BYTES')).toBe(String(pool.options.mapSizeBytes));
      expect(env.get('SYMCC_AFL_COVERAGE_MAP')).toMatch(/slot-\d+\/pruning-map$/);
      expect(result.solverTimeUs).toBe(2500);
    });

    it('gives each worker thread its own pruning map', async () => {
      const maps = new Set<string>();
      // Two concurrent runs occupy both workers.
      for (let round = 0; round < 3 && maps.size < 2; round++) {
        const results = await Promise.all(
          [0, 1].map(() => pool.run({ input: { bytes: Buffer.from('y') }, command: sh('echo-solver.sh'), env: { SYMFENCE_TEST_ROUND: String(round) } })),
        );
        for (const r of results) maps.add(envLines(r.generated[1]?.bytes).get('SYMCC_AFL_COVERAGE_MAP') ?? '');
      }
      expect(maps.size).toBe(2);
    });

    it('refuses a task that tries to set a contract variable', async () => {
      await expect(
        pool.run({ input: { bytes: Buffer.from('x') }, command: sh('echo-solver.sh'), env: { SYMCC_OUTPUT_DIR: '/tmp' } }),
      ).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION' });
    });

    it('reports a solver that cannot be started as an error status', async () => {
      const result = await pool.run({ input: { bytes: Buffer.from('x') }, command: { binary: path.join(tmp, 'no-such-solver'), argv: [] } });
      expect(result.status).toBe('error');
      expect(result.error?.code).toBe('ERR_SOLVER_SPAWN');
    });

    it('reports an unreadable input path as an error status carrying the errno code', async () => {
      const result = await pool.run({ input: { path: path.join(tmp, 'missing-input') }, command: sh('echo-solver.sh', '@@') });
      expect(result.status).toBe('error');
      expect(result.error?.code).toBe('ENOENT');
    });

    it('reports exit 255 of a runtime whose SYMCC_OUTPUT_DIR is missing as an error status', async () => {
      const result = await pool.run({
        input: { bytes: Buffer.from('x') },
        command: sh('no-output-dir-solver.sh'),
        env: { SYMFENCE_TEST_NODE: process.execPath, SYMFENCE_TEST_REFSOLVER: referenceSolverScript() },
      });
      expect(result.exitCode).toBe(255);
      expect(result.status).toBe('error');
      expect(result.error?.code).toBe('ERR_SOLVER_EXIT');
    });
  });

  describe('SolverPool: exits, timeouts and cancellation', () => {
    it.each([
      ['signal:SEGV', 'SIGSEGV'],
      ['signal:ABRT', 'SIGABRT'],
      ['exit:139', 'SIGSEGV'],
      ['exit:134', 'SIGABRT'],
    ])('classifies %s as a crash by %s and still collects its outputs', async (mode) => {
      const result = await pool.run({ input: { bytes: Buffer.from('x') }, command: sh('crashing-solver.sh'), env: { SYMFENCE_TEST_MODE: mode } });
      expect(result.status).toBe('crash');
      expect(text(result.generated[0]?.bytes)).toBe('partial');
    });

    it.each(['signal:TERM', 'exit:1', 'exit:143'])('does not classify %s as a crash', async (mode) => {
      const result = await pool.run({ input: { bytes: Buffer.from('x') }, command: sh('crashing-solver.sh'), env: { SYMFENCE_TEST_MODE: mode } });
      expect(result.status).toBe('ok');
    });

    it('on timeout kills the whole process group: the forked grandchild dies too', async () => {
      const pidFile = path.join(tmp, 'timeout.pids');
      const result = await pool.run({ input: { bytes: Buffer.from('x') }, command: sh('forking-solver.sh'), timeoutMs: 1500, env: { SYMFENCE_TEST_PIDFILE: pidFile } });
      expect(result.status).toBe('timeout');
      expect(result.error?.code).toBe('ERR_SOLVER_TIMEOUT');
      const [leader, grandchild] = (await waitForFile(pidFile)).trim().split(' ').map(Number);
      expect(await waitForExit(leader!)).toBe(true);
      expect(await waitForExit(grandchild!)).toBe(true);
    });

    it('SIGKILLs a solver that ignores SIGTERM once the grace has passed', async () => {
      const pidFile = path.join(tmp, 'stubborn.pid');
      const result = await pool.run({
        input: { bytes: Buffer.from('x') },
        command: sh('stubborn-solver.sh'),
        timeoutMs: 1000,
        killGraceMs: 100,
        env: { SYMFENCE_TEST_PIDFILE: pidFile },
      });
      expect(result.status).toBe('timeout');
      expect(result.signal).toBe('SIGKILL');
      expect(isAlive(Number((await waitForFile(pidFile)).trim()))).toBe(false);
    });

    it('aborting mid-run kills the process group from inside the worker and rejects with ERR_ABORTED', async () => {
      const pidFile = path.join(tmp, 'abort.pids');
      const controller = new AbortController();
      const running = pool.run({ input: { bytes: Buffer.from('x') }, command: sh('forking-solver.sh'), timeoutMs: 600_000, env: { SYMFENCE_TEST_PIDFILE: pidFile } }, { signal: controller.signal });
      const [leader, grandchild] = (await waitForFile(pidFile)).trim().split(' ').map(Number);
      expect(isAlive(leader!)).toBe(true);
      const abortedBefore = pool.counters.aborted;
      controller.abort();
      await expect(running).rejects.toMatchObject({ code: 'ERR_ABORTED' });
      expect(await waitForExit(leader!)).toBe(true);
      expect(await waitForExit(grandchild!)).toBe(true);
      expect(pool.counters.aborted).toBe(abortedBefore + 1);
      // The worker thread survived (piscina did not terminate it) and keeps serving tasks.
      const after = await pool.run({ input: { bytes: Buffer.from('still here') }, command: sh('echo-solver.sh') });
      expect(text(after.generated[0]?.bytes)).toBe('still here');
    });

    it('rejects at once when the signal is already aborted', async () => {
      await expect(pool.run({ input: { bytes: Buffer.from('x') }, command: sh('echo-solver.sh') }, { signal: AbortSignal.abort() })).rejects.toMatchObject({
        code: 'ERR_ABORTED',
      });
    });
  });

  describe('SolverPool: containment of solver output', () => {
    const flood = (count: number, bytes?: number) => ({
      SYMFENCE_REFSOLVER_FLOOD: String(count),
      ...(bytes !== undefined ? { SYMFENCE_REFSOLVER_FLOOD_BYTES: String(bytes) } : {}),
    });

    it('refuses a result with more files than the cap, counts it, and returns no bytes', async () => {
      const before = pool.counters.outputBudgetRefusals;
      const result = await pool.run({
        input: { bytes: new Uint8Array(16) },
        command: referenceSolverCommand('builtin:demo'),
        env: flood(40),
        caps: { maxOutputFiles: 10 },
      });
      expect(result.status).toBe('error');
      expect(result.error?.code).toBe('ERR_SOLVER_OUTPUT_BUDGET');
      expect(result.error?.details).toMatchObject({ resource: 'files', limit: 10 });
      expect(result.generated).toEqual([]);
      expect(result.totalGenerated).toBeGreaterThan(10);
      expect(pool.counters.outputBudgetRefusals).toBe(before + 1);
    });

    it('refuses a result with a file over the per-file cap', async () => {
      const result = await pool.run({ input: { bytes: new Uint8Array(16) }, command: referenceSolverCommand('builtin:demo'), env: flood(1, 4096), caps: { maxOutputFileBytes: 1024 } });
      expect(result.error?.code).toBe('ERR_SOLVER_OUTPUT_BUDGET');
      expect(result.error?.details).toMatchObject({ resource: 'fileBytes' });
    });

    it('refuses a result over the total-bytes cap', async () => {
      const result = await pool.run({
        input: { bytes: new Uint8Array(16) },
        command: referenceSolverCommand('builtin:demo'),
        env: flood(8, 1000),
        caps: { maxOutputFileBytes: 1000, maxOutputTotalBytes: 5000 },
      });
      expect(result.error?.code).toBe('ERR_SOLVER_OUTPUT_BUDGET');
      expect(result.error?.details).toMatchObject({ resource: 'totalBytes', limit: 5000 });
    });

    it('ignores symlinks, dot files, directories and FIFOs, and drops duplicates by digest', async () => {
      const result = await pool.run({ input: { bytes: Buffer.from('x') }, command: sh('messy-output-solver.sh') });
      expect(result.status).toBe('ok');
      expect(result.generated.map((g) => [g.name, text(g.bytes)])).toEqual([
        ['000001', 'one'],
        ['000003', 'two'],
      ]);
      expect(result.duplicatesDropped).toBe(1);
      expect(result.ignoredEntries).toBe(4);
      expect(result.totalGenerated).toBe(3);
    });

    it('leaves no run directory, at the slot path or in the trash, after runs that left collected outputs, job files or entries the collection ignored', async () => {
      const parent = mkdtempSync(path.join(os.tmpdir(), 'symfence-pool-rundirs-'));
      const own = new SolverPool({ solver: { workers: 1, spawnMethod }, scratchParent: parent });
      try {
        const runs = [
          { input: { bytes: Buffer.from('file mode') }, command: sh('echo-solver.sh', '@@') },
          { input: { bytes: Buffer.from('directed') }, command: sh('echo-solver.sh', '@@'), job: { targetBranch: 7n, actions: [{ branch: 9n, kind: 'solve' as const }] } },
          { input: { bytes: Buffer.from('x') }, command: sh('messy-output-solver.sh') },
        ];
        for (const task of runs) expect((await own.run(task)).status).toBe('ok');
        const [root] = readdirSync(parent);
        const left = readdirSync(path.join(parent, root!), { recursive: true, encoding: 'utf8' }).filter((name) => /(^|\/)run-\d+|^trash\//.test(name));
        expect(left).toEqual([]);
      } finally {
        await own.close();
        rmSync(parent, { recursive: true, force: true });
      }
    });

    it('keeps only a bounded tail of a noisy stderr', async () => {
      const result = await pool.run({
        input: { bytes: Buffer.from('x') },
        command: { binary: '/bin/sh', argv: ['-c', 'i=0; while [ $i -lt 2000 ]; do echo "noise line $i noise noise noise" >&2; i=$((i+1)); done; echo "[STAT] SMT: { \\"solving_time\\": 7 }" >&2; echo tail-end >&2'] },
        stderrCapBytes: 1024,
      });
      expect(result.stderrTruncated).toBe(true);
      expect(result.stderrTail.length).toBeLessThanOrEqual(1024);
      expect(result.stderrTail).toContain('tail-end');
      expect(result.solverTimeUs).toBe(7);
    });
  });

  describe('SolverPool: telemetry', () => {
    it('reports malformed telemetry as a telemetry error, not a crash, and counts it', async () => {
      const before = pool.counters.telemetryErrors;
      const result = await pool.run({ input: { bytes: Buffer.from('x') }, command: sh('telemetry-solver.sh'), env: { SYMFENCE_TEST_TELEMETRY: '{"schema": "symfence-telemetry/1", ' } });
      expect(result.status).toBe('ok');
      expect(result.telemetry).toBeUndefined();
      expect(result.telemetryError?.code).toBe('ERR_TELEMETRY_INVALID');
      expect(pool.counters.telemetryErrors).toBe(before + 1);
    });

    it('hands the raw telemetry text to an injected parser and returns its value', async () => {
      const scratch = mkdtempSync(path.join(os.tmpdir(), 'symfence-pool-parser-'));
      const custom = new SolverPool({ solver: { workers: 1, spawnMethod }, scratchParent: scratch, parseTelemetry: (raw) => ({ length: raw.length, upper: raw.toUpperCase() }) });
      try {
        const result = await custom.run({ input: { bytes: Buffer.from('x') }, command: sh('telemetry-solver.sh'), env: { SYMFENCE_TEST_TELEMETRY: 'abc' } });
        expect(result.telemetryText).toBe('abc');
        expect(result.telemetry).toEqual({ length: 3, upper: 'ABC' });
      } finally {
        await custom.close();
        rmSync(scratch, { recursive: true, force: true });
      }
    });

    it('parses the reference solver telemetry of a directed run', async () => {
      const result = await pool.run({ input: { bytes: new Uint8Array(16) }, command: referenceSolverCommand('builtin:demo') });
      expect(result.telemetryError).toBeUndefined();
      const telemetry = result.telemetry as { schema: string; branchTrace: unknown[] };
      expect(telemetry.schema).toBe('symfence-telemetry/1');
      expect(telemetry.branchTrace.length).toBeGreaterThan(0);
    });
  });

  describe('SolverPool: lifecycle', () => {
    it('close() kills running solvers, removes its scratch directory, is idempotent, and refuses new runs', async () => {
      const scratch = mkdtempSync(path.join(os.tmpdir(), 'symfence-pool-close-'));
      const pidFile = path.join(tmp, 'close.pids');
      const local = new SolverPool({ solver: { workers: 1, killGraceMs: 100, spawnMethod }, scratchParent: scratch });
      const running = local.run({ input: { bytes: Buffer.from('x') }, command: sh('forking-solver.sh'), timeoutMs: 600_000, env: { SYMFENCE_TEST_PIDFILE: pidFile } });
      const [leader, grandchild] = (await waitForFile(pidFile)).trim().split(' ').map(Number);
      const rejected = expect(running).rejects.toMatchObject({ code: 'ERR_ABORTED' });
      await Promise.all([local.close(), local.close()]);
      await rejected;
      expect(await waitForExit(leader!)).toBe(true);
      expect(await waitForExit(grandchild!)).toBe(true);
      expect(readdirSync(scratch)).toEqual([]);
      await expect(local.run({ input: { bytes: Buffer.from('x') }, command: sh('echo-solver.sh') })).rejects.toMatchObject({ code: 'ERR_CLOSED' });
      rmSync(scratch, { recursive: true, force: true });
    });

    it('removes every run directory after each run', async () => {
      await pool.run({ input: { bytes: Buffer.from('x') }, command: sh('echo-solver.sh') });
      const root = readdirSync(scratchParent).find((name) => name.startsWith('symfence-solver-'))!;
      for (const worker of readdirSync(path.join(scratchParent, root))) {
        expect(readdirSync(path.join(scratchParent, root, worker)).filter((n) => n.startsWith('run-'))).toEqual([]);
      }
    });
  });
});
