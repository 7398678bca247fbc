import { describe, expect, it } from 'vitest';
import { SolverPoolAdapter } from '../../src/coordinator/adapters/solver-adapter.js';
import { mazeClassifier } from '../../src/coordinator/adapters/demo-campaign.js';
import { AbortedError } from '../../src/errors.js';
import { DEMO_MAZE } from '../../src/reference/demo-maze.js';
import { parseTelemetry, type Telemetry } from '../../src/scheduler/telemetry.js';
import type { SolverPool } from '../../src/solver/solver-pool.js';
import type { SolverResult, SolverTask } from '../../src/solver/solver-types.js';
import { CoverageBitmap } from '../../src/solver/coverage-bitmap.js';
import { makeJob } from '../helpers/coordinator-fakes.js';

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);

function result(overrides: Partial<SolverResult<Telemetry>>): SolverResult<Telemetry> {
  return {
    status: 'ok',
    exitCode: 0,
    signal: null,
    elapsedMs: 12,
    solverTimeUs: 3_000,
    newTestcaseLines: 0,
    generated: [],
    totalGenerated: 0,
    duplicatesDropped: 0,
    ignoredEntries: 0,
    aborted: false,
    stderrTail: '',
    stderrTruncated: false,
    ...overrides,
  };
}

/** A pool stand-in that records the task and answers (or throws) what the test says. */
function fakePool(answer: (task: SolverTask, signal?: AbortSignal) => Promise<SolverResult<Telemetry>>) {
  const tasks: SolverTask[] = [];
  const pool = {
    run: (task: SolverTask, options: { signal?: AbortSignal } = {}) => {
      tasks.push(task);
      return answer(task, options.signal);
    },
  } as unknown as SolverPool<Telemetry>;
  return { pool, tasks };
}

const command = { binary: '/bin/symcc-target', argv: ['@@'] };

const PARSED = parseTelemetry({
  schema: 'symfence-telemetry/1',
  targetBranch: '77',
  targetReached: true,
  targetStatus: 'sat',
  branchTrace: [],
  openBranches: [],
  counters: { queries: 1, sat: 1, unsat: 0, unknown: 0, solverTimeUs: 3_000, generated: 1 },
});

describe('SolverPoolAdapter', () => {
  it('sends the job as a directed pool task and maps novelty, showmap verdicts and telemetry', async () => {
    const { pool, tasks } = fakePool(async () =>
      result({
        telemetry: PARSED,
        generated: [
          { name: '000000', sha256: 'a', sizeBytes: 1, bytes: bytes('a'), showmap: 'ok', novelty: { newBytes: 1, newBits: 1 } },
          { name: '000001', sha256: 'b', sizeBytes: 1, bytes: bytes('b'), showmap: 'ok', novelty: { newBytes: 0, newBits: 0 } },
          { name: '000002', sha256: 'c', sizeBytes: 1, bytes: bytes('c'), showmap: 'crash' },
          { name: '000003', sha256: 'd', sizeBytes: 1, bytes: bytes('d'), showmap: 'hang' },
        ],
      }),
    );
    const adapter = new SolverPoolAdapter(pool, { command, timeoutMs: 5_000 });
    const job = makeJob('in', 77n, [88n]);
    const outcome = await adapter.run({ workId: 'w', job }, { signal: new AbortController().signal });
    expect(tasks[0]).toMatchObject({ input: { path: job.inputPath }, command, timeoutMs: 5_000, job: { targetBranch: 77n, actions: job.actions } });
    expect(outcome.generated.map((g) => [g.sha256, g.interesting, g.terminal])).toEqual([
      ['a', true, undefined],
      ['b', false, undefined],
      ['c', false, 'crash'],
      ['d', false, 'timeout'],
    ]);
    expect(outcome).toMatchObject({ status: 'ok', telemetry: PARSED, solverTimeUs: 3_000, elapsedMs: 12 });
    expect(outcome.telemetryError).toBeUndefined();
  });

  it('hands on a telemetry refusal from the pool instead of the telemetry', async () => {
    const refusal = { code: 'ERR_TELEMETRY_INVALID', message: 'bad', details: { path: 'schema' } };
    const { pool } = fakePool(async () => result({ telemetryError: refusal }));
    const outcome = await new SolverPoolAdapter(pool, { command, timeoutMs: 5_000 }).run({ workId: 'w', job: makeJob('in', 77n) }, { signal: new AbortController().signal });
    expect(outcome.telemetry).toBeUndefined();
    expect(outcome.telemetryError).toEqual(refusal);
  });

  it('reports an aborted run as aborted, and any other rejection as an error outcome', async () => {
    const aborted = new SolverPoolAdapter(fakePool(async () => Promise.reject(new AbortedError('solver run aborted'))).pool, { command, timeoutMs: 1_000 });
    expect((await aborted.run({ workId: 'w', job: makeJob('x') }, { signal: new AbortController().signal })).status).toBe('aborted');
    const broken = new SolverPoolAdapter(fakePool(async () => Promise.reject(new Error('bad task'))).pool, { command, timeoutMs: 1_000 });
    expect(await broken.run({ workId: 'w', job: makeJob('x') }, { signal: new AbortController().signal })).toMatchObject({ status: 'error', error: 'bad task' });
  });

  it('triages in-process with built-in maze coverage: new edges are interesting once, an abort node is a crash', async () => {
    // 'F' 'U' digit, byte 3 making (in[0]+…+in[3]) mod 256 == 0x5a, then '!': the maze's abort node.
    const crashing = Uint8Array.from([0x46, 0x55, 0x30, (0x5a - 0x46 - 0x55 - 0x30 + 512) % 256, 0x21, ...new Array<number>(11).fill(0x41)]);
    const { pool } = fakePool(async () =>
      result({
        generated: [
          { name: '000000', sha256: 'f', sizeBytes: 16, bytes: bytes('FAAAAAAAAAAAAAAA') },
          { name: '000001', sha256: 'g', sizeBytes: 16, bytes: bytes('FBAAAAAAAAAAAAAA') },
          { name: '000002', sha256: 'h', sizeBytes: crashing.length, bytes: crashing },
        ],
      }),
    );
    const adapter = new SolverPoolAdapter(pool, { command, timeoutMs: 1_000, classify: mazeClassifier(DEMO_MAZE, new CoverageBitmap(65_536)) });
    const outcome = await adapter.run({ workId: 'w', job: makeJob('seed') }, { signal: new AbortController().signal });
    expect(outcome.generated.map((g) => [g.sha256, g.interesting, g.terminal])).toEqual([
      ['f', true, undefined],
      ['g', false, undefined],
      ['h', true, 'crash'],
    ]);
  });
});
