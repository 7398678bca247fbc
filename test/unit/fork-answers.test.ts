import { describe, expect, it } from 'vitest';
import { FrontierLane } from '../../src/scheduler/lanes/frontier-lane.js';
import { TargetLedger, answeredBy, outcomesOf } from '../../src/scheduler/target-ledger.js';
import { parseTelemetry, type Telemetry } from '../../src/scheduler/telemetry.js';
import { buildSolverEnv, solverBaseEnv } from '../../src/solver/solver-env.js';
import { checkDirectedJob } from '../../src/solver/task-resolution.js';
import { answerCost, countCommittedJob, cpuMsPerAnswer, createCounters, targetNotReachedByLane } from '../../src/telemetry/counters.js';
import { makeSnapshot, parseStatsFile } from '../../src/telemetry/stats-file.js';
import { sha, telemetryJson } from './scheduler-fixtures.js';

function preloadTelemetry(extra: Record<string, unknown>, spec: Parameters<typeof telemetryJson>[0] = {}): Telemetry {
  return parseTelemetry({
    ...telemetryJson(spec),
    preload: { version: 1, mode: 'directed', events: 9, symbolicEvents: 9, solved: 2, skipped: 7, traceDropped: 0, openDropped: 0, earlyExit: false, forks: 2, forkFailed: false, forkCapped: false, cpuUs: 12_000 },
    ...extra,
  });
}

describe('forked answers in the telemetry', () => {
  it('parses each answer with its status, solver time, CPU and files, and the fork fields of the preload block', () => {
    const t = preloadTelemetry({ answers: [['5', 'sat', 120, 900, 1], ['6', 'unknown', 0, 2000, 0]] });
    expect(t.answers).toEqual([
      { branch: 5n, status: 'sat', solverTimeUs: 120, cpuUs: 900, files: 1 },
      { branch: 6n, status: 'unknown', solverTimeUs: 0, cpuUs: 2000, files: 0 },
    ]);
    expect(t.preload).toMatchObject({ forks: 2, forkFailed: false, forkCapped: false, cpuUs: 12_000 });
  });

  it('parses the in-place counts of the preload block, and refuses a malformed one naming the field', () => {
    const base = { version: 1, mode: 'directed', events: 9, symbolicEvents: 9, solved: 2, skipped: 7, traceDropped: 0, openDropped: 0, earlyExit: false };
    const t = parseTelemetry({ ...telemetryJson(), preload: { ...base, forks: 1, inPlace: 1, negations: 1, interposed: true } });
    expect(t.preload).toMatchObject({ forks: 1, inPlace: 1, negations: 1, interposed: true });
    // An older library writes neither: both stay absent.
    const old = parseTelemetry({ ...telemetryJson(), preload: base });
    expect(old.preload?.inPlace).toBeUndefined();
    expect(old.preload?.negations).toBeUndefined();
    for (const [key, bad] of [['inPlace', -1], ['negations', 1.5], ['interposed', 'yes']] as const) {
      let error: { code?: string; details?: { path?: string } } | undefined;
      try {
        parseTelemetry({ ...telemetryJson(), preload: { ...base, [key]: bad } });
      } catch (e) {
        error = e as typeof error;
      }
      expect(error?.code).toBe('ERR_TELEMETRY_INVALID');
      expect(error?.details?.path).toBe(`preload.${key}`);
    }
  });

  it('refuses a malformed answer naming the field', () => {
    for (const [answers, path] of [
      [[['5', 'none', 0, 0, 0]], 'answers[0][1]'],
      [[['0', 'sat', 0, 0, 0]], 'answers[0][0]'],
      [[['5', 'sat', -1, 0, 0]], 'answers[0][2]'],
      [[['5', 'sat', 0, 0]], 'answers[0]'],
      [Array.from({ length: 257 }, () => ['5', 'sat', 0, 0, 0]), 'answers'],
    ] as const) {
      let code: string | undefined;
      let at: string | undefined;
      try {
        preloadTelemetry({ answers });
      } catch (error) {
        code = (error as { code?: string }).code;
        at = (error as { details?: { path?: string } }).details?.path;
      }
      expect(code).toBe('ERR_TELEMETRY_INVALID');
      expect(at).toBe(path);
    }
    let code: string | undefined;
    try {
      parseTelemetry({ ...telemetryJson(), preload: { version: 1, mode: 'trace', events: 0, symbolicEvents: 0, solved: 0, skipped: 0, traceDropped: 0, openDropped: 0, earlyExit: false, forkCapped: 'yes' } });
    } catch (error) {
      code = (error as { code?: string }).code;
    }
    expect(code).toBe('ERR_TELEMETRY_INVALID');
  });

  it('settles sat and unsat answers of a directed group and leaves an unknown one open', () => {
    const t = preloadTelemetry({ answers: [['5', 'sat', 1, 1, 1], ['6', 'unsat', 1, 1, 0], ['7', 'unknown', 0, 1, 0]] }, { target: 5, reached: true, status: 'sat' });
    const outcomes = outcomesOf(t, [5n, 6n, 7n]);
    expect(outcomes.get(5n)).toBe('answered');
    expect(outcomes.get(6n)).toBe('answered');
    expect(outcomes.get(7n)).toBeUndefined(); // the ledger counts it open (retried after back-off)
    const ledger = new TargetLedger();
    ledger.record({ seed: 's', targetBranch: 5n, actions: [{ branch: 6n, kind: 'solve' }, { branch: 7n, kind: 'solve' }] } as never, [5n, 6n, 7n], t, false, 0);
    expect(ledger.isSettled('s', 6n)).toBe(true);
    expect(ledger.isSettled('s', 7n)).toBe(false);
  });

  it('a trace run with a wanted set answers the branches it forked at, sat or unsat, never unknown', () => {
    const t = preloadTelemetry({ answers: [['8', 'unsat', 1, 1, 0], ['9', 'unknown', 0, 1, 0]] });
    expect(answeredBy(t)).toEqual([8n]);
  });
});

describe('the cost of an answer', () => {
  it('counts answers and their CPU by job kind, and targetReached:false per lane', () => {
    const c = createCounters();
    const directed = (reached: boolean) =>
      preloadTelemetry({}, { target: 5, reached, status: reached ? 'sat' : 'none', counters: { queries: 2, sat: 1, unsat: 1 } });
    countCommittedJob(c, 'targeted', directed(true), 'scheduler:frontier');
    countCommittedJob(c, 'targeted', directed(false), 'scheduler:frontier+hint');
    countCommittedJob(c, 'targeted', directed(false), 'scheduler:prefix');
    countCommittedJob(c, 'full', preloadTelemetry({}, { counters: { queries: 10, sat: 3, unsat: 5 } }), 'afl');
    expect(c).toMatchObject({ answersTargeted: 6, answerCpuMsTargeted: 36, answersFull: 8, answerCpuMsFull: 12, targetsNotReached: 2, targetsReached: 1 });
    expect(cpuMsPerAnswer(c)).toEqual({ trace: null, targeted: 6, full: 1.5 });
    expect(targetNotReachedByLane(c)).toEqual({ frontier: { directed: 2, notReached: 1 }, prefix: { directed: 1, notReached: 1 } });
    expect(answerCost(directed(true))).toEqual({ answers: 2, answerCpuMs: 12 });
    // stats.json carries both, and a file without the new counters still reads.
    const snapshot = makeSnapshot({ coordinator: 'c', name: 'n', state: 'running', startedMs: 0, updatedMs: 1000, statsIntervalMs: 1000, workers: 1, counters: c });
    expect(snapshot.cpuMsPerAnswer).toEqual({ trace: null, targeted: 6, full: 1.5 });
    expect(snapshot.targetNotReachedByLane?.frontier).toEqual({ directed: 2, notReached: 1 });
    const old = JSON.parse(JSON.stringify(snapshot)) as { counters: Record<string, number> };
    delete old.counters.answersTrace;
    delete old.counters.laneFrontierNotReached;
    expect(parseStatsFile('stats.json', JSON.stringify(old)).counters.answersTrace).toBe(0);
  });
});

describe('wanted sets', () => {
  it('a trace job may carry up to 256 wanted branches; anything else is refused with a code', () => {
    expect(checkDirectedJob({ targetBranch: 0n, actions: [], traceOnly: true, wanted: [3n, 3n, 4n] })).toEqual({ targetBranch: 0n, actions: [], traceOnly: true, wanted: [3n, 4n] });
    for (const job of [
      { targetBranch: 5n, actions: [], wanted: [3n] },
      { targetBranch: 0n, actions: [], traceOnly: true, wanted: [0n] },
      { targetBranch: 0n, actions: [], traceOnly: true, wanted: Array.from({ length: 257 }, (_, i) => BigInt(i + 1)) },
    ]) {
      expect(() => checkDirectedJob(job)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_JOB' }));
    }
  });

  it('the frontier offers the input its own open branches first, then the campaign’s, none answered', () => {
    const ledger = new TargetLedger();
    const lane = new FrontierLane({ ledger });
    lane.observe(sha(1), parseTelemetry(telemetryJson({ open: [10, 11, 12] })), 0, 0);
    lane.observe(sha(2), parseTelemetry(telemetryJson({ open: [20, 11] })), 0, 0);
    expect(lane.wantedFor(sha(2), 256)).toEqual([20n, 11n, 10n, 12n]);
    expect(lane.wantedFor(sha(3), 2)).toEqual([10n, 11n]);
    ledger.noteAnswered(sha(1), [10n]);
    expect(lane.wantedFor(sha(3), 256)).toEqual([11n, 12n, 20n]);
  });

  it('the solver gets the wanted file and the forked answers’ CPU budget; the coordinator’s own values never pass through', () => {
    const base = solverBaseEnv({ PATH: '/bin', SYMFENCE_WANTED: '/evil', SYMFENCE_PRELOAD_MAX_FORKS: '9999', SYMFENCE_PRELOAD_FORK: '0', SYMFENCE_PRELOAD_HUGE: '0' });
    expect(base).toEqual({ PATH: '/bin' });
    const env = buildSolverEnv({}, {}, { outputDir: '/o', inputFile: null, pruningMapPath: null, targetBranch: null, actionsFile: null, telemetryOut: '/t', traceOnly: true, wantedFile: '/r/wanted', forkCpuBudgetMs: 15_000 });
    expect(env).toMatchObject({ SYMFENCE_TRACE_ONLY: '1', SYMFENCE_WANTED: '/r/wanted', SYMFENCE_PRELOAD_FORK_CPU_MS: '15000' });
  });
});
