import { describe, expect, it } from 'vitest';
import { parseTelemetry, telemetryToJson } from '../../src/scheduler/telemetry.js';
import { difficultyOf } from '../../src/scheduler/telemetry-metrics.js';
import type { SymfenceError } from '../../src/errors.js';
import { telemetryJson } from './scheduler-fixtures.js';

function base(): Record<string, unknown> {
  return telemetryJson({
    target: 77,
    reached: true,
    status: 'sat',
    trace: [[1, 2, 3, 4, 1, 0]],
    open: [88],
    counters: { queries: 3, sat: 1, unsat: 1, unknown: 1, solverTimeUs: 1200, generated: 1 },
  });
}

function rejectionOf(input: unknown): SymfenceError {
  try {
    parseTelemetry(input);
  } catch (error) {
    return error as SymfenceError;
  }
  throw new Error('expected the telemetry to be rejected');
}

function mutate(fn: (t: Record<string, any>) => void): Record<string, unknown> {
  const t = structuredClone(base()) as Record<string, any>;
  fn(t);
  return t;
}

describe('symfence-telemetry/1 parser', () => {
  it('parses the documented example with u64 ids as bigint', () => {
    const t = parseTelemetry(JSON.stringify(base()));
    expect(t.targetBranch).toBe(77n);
    expect(t.targetReached).toBe(true);
    expect(t.targetStatus).toBe('sat');
    expect(t.branchTrace).toEqual([{ parent: 1n, actual: 2n, opposite: 3n, site: 4n, taken: 1, interesting: 0 }]);
    expect(t.openBranches).toEqual([88n]);
    expect(t.counters).toEqual({ queries: 3, sat: 1, unsat: 1, unknown: 1, solverTimeUs: 1200, generated: 1 });
  });

  it('keeps full 64-bit precision for ids above 2^53', () => {
    const t = parseTelemetry(mutate((x) => (x.openBranches = ['18446744073709551615', '9007199254740993'])));
    expect(t.openBranches).toEqual([18446744073709551615n, 9007199254740993n]);
  });

  it('ignores unknown top-level keys', () => {
    expect(parseTelemetry(mutate((x) => (x.engine = 'symcc'))).targetBranch).toBe(77n);
  });

  it('de-duplicates open branches in first-seen order', () => {
    expect(parseTelemetry(mutate((x) => (x.openBranches = ['101', '202', '101']))).openBranches).toEqual([101n, 202n]);
  });

  it('round-trips through its wire form', () => {
    const t = parseTelemetry(base());
    expect(parseTelemetry(telemetryToJson(t))).toEqual(t);
  });

  it('round-trips the preload fields: attributed branches, answers and the library report', () => {
    const t = parseTelemetry(
      mutate((x) => {
        x.generatedBy = [['id-000001', '101', '7'], ['id-000002', '101', '7'], ['id-000003', '303', '9']];
        x.answers = [['101', 'sat', 10, 20, 2], ['404', 'unsat', 5, 6, 0]];
        x.preload = { mode: 'trace', events: 9, symbolicEvents: 4, solved: 0, skipped: 4, traceDropped: 0, openDropped: 0, earlyExit: false, cpuUs: 1234 };
      }),
    );
    expect(t.generatedFor).toEqual([101n, 303n]);
    expect(parseTelemetry(telemetryToJson(t))).toEqual(t);
  });

  it('derives a difficulty in [0, 1]', () => {
    const d = difficultyOf(parseTelemetry(base()));
    expect(d).toBeGreaterThan(0);
    expect(d).toBeLessThanOrEqual(1);
  });

  const cases: [string, (t: Record<string, any>) => void, string][] = [
    ['wrong schema', (t) => (t.schema = 'symfence-telemetry/2'), 'schema'],
    ['missing schema', (t) => delete t.schema, 'schema'],
    ['numeric targetBranch', (t) => (t.targetBranch = 77), 'targetBranch'],
    ['negative targetBranch', (t) => (t.targetBranch = '-1'), 'targetBranch'],
    ['targetBranch of 2^64', (t) => (t.targetBranch = '18446744073709551616'), 'targetBranch'],
    ['targetBranch with leading zero', (t) => (t.targetBranch = '077'), 'targetBranch'],
    ['string targetReached', (t) => (t.targetReached = 'true'), 'targetReached'],
    ['unknown targetStatus', (t) => (t.targetStatus = 'timeout'), 'targetStatus'],
    ['upper-case targetStatus', (t) => (t.targetStatus = 'SAT'), 'targetStatus'],
    ['branchTrace not a list', (t) => (t.branchTrace = {}), 'branchTrace'],
    ['trace entry too short', (t) => (t.branchTrace = [['1', '2', '3', '4', 1]]), 'branchTrace[0]'],
    ['numeric parent', (t) => (t.branchTrace[0][0] = 1), 'branchTrace[0][0]'],
    ['zero actual', (t) => (t.branchTrace[0][1] = '0'), 'branchTrace[0][1]'],
    ['zero opposite', (t) => (t.branchTrace[0][2] = '0'), 'branchTrace[0][2]'],
    ['hex site', (t) => (t.branchTrace[0][3] = '0x4'), 'branchTrace[0][3]'],
    ['taken of 2', (t) => (t.branchTrace[0][4] = 2), 'branchTrace[0][4]'],
    ['boolean interesting', (t) => (t.branchTrace[0][5] = true), 'branchTrace[0][5]'],
    ['openBranches not a list', (t) => (t.openBranches = '88'), 'openBranches'],
    ['numeric open branch', (t) => (t.openBranches = [88]), 'openBranches[0]'],
    ['zero open branch', (t) => (t.openBranches = ['0']), 'openBranches[0]'],
    ['counters missing', (t) => delete t.counters, 'counters'],
    ['counters a list', (t) => (t.counters = []), 'counters'],
    ['counter missing', (t) => delete t.counters.generated, 'counters.generated'],
    ['negative counter', (t) => (t.counters.queries = -1), 'counters.queries'],
    ['fractional counter', (t) => (t.counters.sat = 1.5), 'counters.sat'],
    ['string counter', (t) => (t.counters.solverTimeUs = '1200'), 'counters.solverTimeUs'],
  ];
  it.each(cases)('rejects %s with ERR_TELEMETRY_INVALID at the bad field', (_name, fn, path) => {
    const error = rejectionOf(mutate(fn));
    expect(error.code).toBe('ERR_TELEMETRY_INVALID');
    expect(error.details.path).toBe(path);
  });

  it('accepts exactly 512 trace entries and rejects 513', () => {
    const row = ['1', '2', '3', '4', 0, 0];
    expect(parseTelemetry(mutate((t) => (t.branchTrace = Array(512).fill(row)))).branchTrace).toHaveLength(512);
    expect(rejectionOf(mutate((t) => (t.branchTrace = Array(513).fill(row)))).details.path).toBe('branchTrace');
  });

  it('accepts exactly 256 open branches and rejects 257', () => {
    const ids = (n: number): string[] => Array.from({ length: n }, (_, i) => String(i + 1));
    expect(parseTelemetry(mutate((t) => (t.openBranches = ids(256)))).openBranches).toHaveLength(256);
    expect(rejectionOf(mutate((t) => (t.openBranches = ids(257)))).details.path).toBe('openBranches');
  });

  it.each([
    ['not JSON', '{"schema":'],
    ['a JSON list', '[]'],
    ['JSON null', 'null'],
  ])('rejects %s at the root', (_name, text) => {
    const error = rejectionOf(text);
    expect(error.code).toBe('ERR_TELEMETRY_INVALID');
    expect(error.details.path).toBe('$');
  });
});
