import { describe, expect, it } from 'vitest';
import { aflToolEnv, buildSolverEnv, buildSolverEnvFromBase, solverBaseEnv, substituteInputPath, validateTaskEnv } from '../../src/solver/solver-env.js';
import { SOLVER_OPTIONS, resolveSolverOptions } from '../../src/solver/solver-options.js';
import { checkDirectedJob, resolveTask } from '../../src/solver/task-resolution.js';

const contract = { outputDir: '/r/output', inputFile: null, pruningMapPath: '/w/map', targetBranch: null, actionsFile: null, telemetryOut: null };

describe('solver environment', () => {
  it('drops inherited SYMCC_* variables and lets contract variables win over task extras', () => {
    const env = buildSolverEnv({ PATH: '/bin', SYMCC_INPUT_FILE: '/stale', SYMCC_OUTPUT_DIR: '/stale' }, { SYMCC_FOCUS_BYTES: '0-3' }, contract);
    expect(env).toEqual({
      PATH: '/bin',
      SYMCC_FOCUS_BYTES: '0-3',
      SYMCC_OUTPUT_DIR: '/r/output',
      SYMCC_ENABLE_LINEARIZATION: '1',
      SYMCC_AFL_COVERAGE_MAP: '/w/map',
    });
  });

  it('sets the directed extension only when the job has a target or actions', () => {
    const env = buildSolverEnv({}, {}, { ...contract, inputFile: '/r/input', targetBranch: 18446744073709551615n, actionsFile: '/r/a', telemetryOut: '/r/t' });
    expect(env.SYMCC_TARGET_BRANCH).toBe('18446744073709551615');
    expect(env.SYMCC_INPUT_FILE).toBe('/r/input');
    expect(env.SYMCC_S2F_ACTIONS).toBe('/r/a');
    expect(env.SYMCC_TELEMETRY_OUT).toBe('/r/t');
  });

  it('computes a frozen per-worker base env without SYMCC_* or undefined values, which runs copy and never mutate', () => {
    const base = solverBaseEnv({ PATH: '/bin', HOME: undefined, SYMCC_OUTPUT_DIR: '/stale', SYMCC_NO_SYMBOLIC_INPUT: '1' });
    expect(base).toEqual({ PATH: '/bin' });
    expect(Object.isFrozen(base)).toBe(true);
    const first = buildSolverEnvFromBase(base, { EXTRA: 'a' }, contract);
    const second = buildSolverEnvFromBase(base, {}, { ...contract, outputDir: '/r2/output' });
    expect(first.EXTRA).toBe('a');
    expect(second.EXTRA).toBeUndefined();
    expect(second.SYMCC_OUTPUT_DIR).toBe('/r2/output');
    expect(base).toEqual({ PATH: '/bin' });
  });

  it('strips unknown AFL_* variables from AFL++ tool environments but keeps the allowed ones', () => {
    const env = aflToolEnv({ PATH: '/bin', AFL_TYPO: '1', AFL_NO_UI: '1', AFL_MAP_SIZE: '65536' }, { AFL_QUIET: '1' });
    expect(env).toEqual({ PATH: '/bin', AFL_MAP_SIZE: '65536', AFL_QUIET: '1' });
  });

  it('replaces every @@, also inside an argument', () => {
    expect(substituteInputPath(['-f', '@@', '--in=@@'], '/x')).toEqual(['-f', '/x', '--in=/x']);
  });

  it('refuses contract variables and non-string values in a task environment', () => {
    expect(() => validateTaskEnv({ SYMCC_AFL_COVERAGE_MAP: '/afl/map' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION', details: expect.objectContaining({ option: 'env.SYMCC_AFL_COVERAGE_MAP' }) }));
    expect(() => validateTaskEnv({ X: 1 as unknown as string })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
  });
});

describe('solver options', () => {
  it('has documented defaults', () => {
    expect(SOLVER_OPTIONS.defaults).toMatchObject({ timeoutMs: 30_000, killGraceMs: 5_000, mapSizeBytes: 65_536, inputMode: 'auto' });
  });

  it('parses durations and sizes from strings', () => {
    expect(resolveSolverOptions({ timeoutMs: '90s', maxOutputTotalBytes: '1M', maxOutputFileBytes: '64k' })).toMatchObject({
      timeoutMs: 90_000,
      maxOutputTotalBytes: 1024 * 1024,
      maxOutputFileBytes: 65_536,
    });
  });

  it.each([
    [{ timeoutMs: 0 }, 'timeoutMs'],
    [{ workers: 0 }, 'workers'],
    [{ inputMode: 'pipe' }, 'inputMode'],
    [{ maxOutputFileBytes: '2M', maxOutputTotalBytes: '1M' }, 'maxOutputFileBytes'],
    [{ mapSizeBytes: 65_537 }, 'mapSizeBytes'],
    [{ solverTimeout: 5 }, 'solverTimeout'],
  ])('rejects %j naming the option', (input, option) => {
    expect(() => resolveSolverOptions(input)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION', details: expect.objectContaining({ option }) }));
  });
});

describe('task resolution', () => {
  const options = resolveSolverOptions();
  const abort = new SharedArrayBuffer(4);
  const base = { input: { bytes: new Uint8Array(1) }, command: { binary: '/bin/true', argv: [] } };

  it('chooses file mode when argv contains @@, stdin otherwise, unless told', () => {
    expect(resolveTask({ ...base, command: { binary: '/t', argv: ['@@'] } }, options, 1, abort, 0).inputMode).toBe('file');
    expect(resolveTask(base, options, 1, abort, 0).inputMode).toBe('stdin');
    expect(resolveTask({ ...base, inputMode: 'file' }, options, 1, abort, 0).inputMode).toBe('file');
  });

  it('fills defaults from the pool options and per-task overrides', () => {
    const wire = resolveTask({ ...base, timeoutMs: 123, caps: { maxOutputFiles: 3 } }, options, 7, abort, 0);
    expect(wire).toMatchObject({ taskId: 7, timeoutMs: 123, killGraceMs: 5_000, caps: { maxOutputFiles: 3, maxOutputFileBytes: options.maxOutputFileBytes }, telemetry: true, job: null });
  });

  it.each([
    [{ ...base, command: { binary: '', argv: [] } }, 'command.binary'],
    [{ ...base, command: { binary: '/t', argv: [1] } }, 'command.argv'],
    [{ ...base, input: {} }, 'input'],
    [{ ...base, timeoutMs: -1 }, 'timeoutMs'],
    [{ ...base, caps: { maxOutputFiles: Number.NaN } }, 'caps.maxOutputFiles'],
  ])('rejects a malformed task naming the field (%#)', (task, option) => {
    expect(() => resolveTask(task as never, options, 1, abort, 0)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION', details: expect.objectContaining({ option }) }));
  });

  it('checks directed jobs: u64 bigint ids, known kinds, at most 64 actions; empty = untargeted', () => {
    expect(checkDirectedJob({ targetBranch: 0n, actions: [] })).toBeNull();
    expect(checkDirectedJob({ targetBranch: 5n, actions: [{ branch: 6n, kind: 'sample' }] })).toEqual({ targetBranch: 5n, actions: [{ branch: 6n, kind: 'sample' }] });
    for (const bad of [
      { targetBranch: 1n << 64n, actions: [] },
      { targetBranch: 5 as unknown as bigint, actions: [] },
      { targetBranch: 1n, actions: [{ branch: 0n, kind: 'solve' }] },
      { targetBranch: 1n, actions: [{ branch: 2n, kind: 'SOLVE' }] },
      { targetBranch: 1n, actions: Array.from({ length: 65 }, (_, i) => ({ branch: BigInt(i + 1), kind: 'solve' })) },
    ]) {
      expect(() => checkDirectedJob(bad as never)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_JOB' }));
    }
  });
});

describe('solver environment for the preload library and trace-only runs', () => {
  it('prepends the preload library to an LD_PRELOAD of the base or the task, keeping theirs', () => {
    const base = buildSolverEnv({ LD_PRELOAD: '/u/libfirst.so /u/libsecond.so' }, {}, { ...contract, preload: '/p/symfence_preload.so' });
    expect(base.LD_PRELOAD).toBe('/p/symfence_preload.so:/u/libfirst.so:/u/libsecond.so');
    const task = buildSolverEnv({ LD_PRELOAD: '/u/base.so' }, { LD_PRELOAD: '/u/task.so' }, { ...contract, preload: '/p/symfence_preload.so' });
    expect(task.LD_PRELOAD).toBe('/p/symfence_preload.so:/u/task.so');
    const twice = buildSolverEnv({ LD_PRELOAD: '/p/symfence_preload.so' }, {}, { ...contract, preload: '/p/symfence_preload.so' });
    expect(twice.LD_PRELOAD).toBe('/p/symfence_preload.so');
    expect(buildSolverEnv({ LD_PRELOAD: '/u/x.so' }, {}, contract).LD_PRELOAD).toBe('/u/x.so');
  });

  it('sets SYMFENCE_TRACE_ONLY for a trace-only run, leaves the pruning map unset when asked, and refuses the variable from a task', () => {
    const env = buildSolverEnv({ SYMFENCE_TRACE_ONLY: '1' }, {}, { ...contract, pruningMapPath: null });
    expect(env.SYMFENCE_TRACE_ONLY).toBeUndefined();
    expect(env.SYMCC_AFL_COVERAGE_MAP).toBeUndefined();
    expect(buildSolverEnv({}, {}, { ...contract, traceOnly: true }).SYMFENCE_TRACE_ONLY).toBe('1');
    expect(() => validateTaskEnv({ SYMFENCE_TRACE_ONLY: '1' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
  });

  it('accepts a trace-only job without targets and refuses one that names a target or actions', () => {
    expect(checkDirectedJob({ targetBranch: 0n, actions: [], traceOnly: true })).toEqual({ targetBranch: 0n, actions: [], traceOnly: true });
    expect(() => checkDirectedJob({ targetBranch: 5n, actions: [], traceOnly: true })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_JOB' }));
    expect(() => checkDirectedJob({ targetBranch: 0n, actions: [{ branch: 3n, kind: 'solve' }], traceOnly: true })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_JOB' }),
    );
  });

  it('refuses a preload path that is relative or that the loader would split', () => {
    const task = (preload: string) => resolveTask({ input: { bytes: new Uint8Array(1) }, command: { binary: '/bin/true', argv: [] }, preload }, resolveSolverOptions(), 1, new SharedArrayBuffer(8), 0);
    expect(task('/p/symfence_preload.so').preload).toBe('/p/symfence_preload.so');
    for (const bad of ['rel/lib.so', '/p/a:b.so', '/p/a b.so']) expect(() => task(bad)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
  });
});
