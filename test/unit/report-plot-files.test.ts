/**
 * The time-series files the report parses: symfence's plot_data.csv (this version's and the
 * first version's header) and AFL++'s plot_data (AFL++ 4 relative times, AFL++ 3 unix times).
 */
import { describe, expect, it } from 'vitest';
import { createCounters, solverUtilisation } from '../../src/telemetry/counters.js';
import { FIRST_PLOT_COLUMNS, PLOT_COLUMNS, PlotDataLines, plotRow, type PlotRow } from '../../src/telemetry/plot-data.js';
import { AflPlotDataLines, parseFuzzerStats, type AflPlotPoint } from '../../src/report/afl-plot-data.js';
import { codeOf } from '../helpers/error-code.js';

/** Feeds a whole text to a line parser line by line, as the report's bounded line reader does. */
function allLines<T>(text: string, line: (line: string, lineNumber: number, terminated: boolean) => T | undefined): T[] {
  const lines = text.split('\n');
  // The last element is '' when the text ends with a newline, else an unterminated line.
  const last = lines.pop()!;
  const out: T[] = [];
  lines.forEach((text, i) => {
    const parsed = line(text, i + 1, true);
    if (parsed !== undefined) out.push(parsed);
  });
  if (last !== '') line(last, lines.length + 1, false);
  return out;
}

function parsePlotData(file: string, text: string): PlotRow[] {
  const parser = new PlotDataLines(file);
  return allLines(text, (l, n, t) => parser.line(l, n, t));
}

function parseAflPlotData(file: string, text: string, startMs: number | undefined): AflPlotPoint[] {
  const parser = new AflPlotDataLines(file, startMs);
  return allLines(text, (l, n, t) => parser.line(l, n, t));
}

const header = PLOT_COLUMNS.join(',');

describe('plot_data.csv', () => {
  it('round-trips a row by column name, utilisation averaged over workers × elapsed', () => {
    const c = { ...createCounters(), jobsStarted: 5, jobsOk: 3, jobsCrash: 1, solverBusyMs: 6_000, admissions: 7, backFills: 2, dispatchRollbacks: 1 };
    const [row] = parsePlotData('p.csv', `${header}\n${plotRow(11_000, 1_000, c, 2)}`);
    expect(row).toMatchObject({ unix_ms: 11_000, elapsed_s: 10, jobs_started: 5, jobs_completed: 4, jobs_ok: 3, jobs_crash: 1, solver_busy_ms: 6_000, solver_utilisation: 0.3, admissions: 7, back_fills: 2, dispatch_rollbacks: 1 });
  });

  it('reads a file of the first version, whose rows lack the later columns', () => {
    // Each column holds its index, except the fill ratio (a ratio in [0, 1]).
    const values = FIRST_PLOT_COLUMNS.map((name, i) => (name === 'fill_ratio' ? 0.5 : i));
    const rows = parsePlotData('old.csv', `${FIRST_PLOT_COLUMNS.join(',')}\n${values.join(',')}\n`);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ unix_ms: 0, edges_covered: 10, fill_ratio: 0.5 });
    expect(rows[0]!.solver_busy_ms).toBeUndefined();
  });

  it('skips an unterminated last row (being appended) but refuses a malformed complete one, naming file and line', () => {
    const good = plotRow(2_000, 1_000, createCounters(), 1);
    expect(parsePlotData('p.csv', `${header}\n${good}${good.slice(0, 10)}`)).toHaveLength(1);
    const short = `${header}\n${good}1,2,3\n`;
    expect(codeOf(() => parsePlotData('/x/plot_data.csv', short))).toBe('ERR_PLOT_DATA_INVALID');
    expect(() => parsePlotData('/x/plot_data.csv', short)).toThrow(/\/x\/plot_data\.csv line 3/);
    const nan = `${header}\n${good.replace(/^\d+/, 'abc')}`;
    expect(codeOf(() => parsePlotData('p.csv', nan))).toBe('ERR_PLOT_DATA_INVALID');
    expect(codeOf(() => parsePlotData('p.csv', 'a,b,c\n1,2,3\n'))).toBe('ERR_PLOT_DATA_INVALID');
  });

  it('bounds the utilisation to [0, 1] and gives 0 before time has passed', () => {
    expect(solverUtilisation(5_000, 2, 10_000)).toBe(0.25);
    expect(solverUtilisation(50_000, 2, 10_000)).toBe(1);
    expect(solverUtilisation(1, 2, 0)).toBe(0);
    expect(solverUtilisation(1, 0, 10)).toBe(0);
  });
});

describe("AFL++'s plot_data", () => {
  const afl4 = [
    '# relative_time, cycles_done, cur_item, corpus_count, pending_total, pending_favs, map_size, saved_crashes, saved_hangs, max_depth, execs_per_sec, total_execs, edges_found, total_crashes, servers_count',
    '0, 0, 0, 1, 1, 1, 0.01%, 0, 0, 1, 0.00, 12, 2, 0, 0',
    '5, 0, 0, 4, 3, 1, 0.05%, 1, 0, 2, 812.10, 4061, 9, 1, 0',
    '',
  ].join('\n');

  it('turns AFL++ 4 relative times into wall-clock times with fuzzer_stats start_time', () => {
    const start = Number(parseFuzzerStats('start_time        : 1700000000\nlast_update       : 1700000005\n').get('start_time')) * 1000;
    expect(parseAflPlotData('plot_data', afl4, start)).toEqual([
      { unixMs: 1_700_000_000_000, edgesFound: 2, corpusCount: 1, savedCrashes: 0 },
      { unixMs: 1_700_000_005_000, edgesFound: 9, corpusCount: 4, savedCrashes: 1 },
    ]);
  });

  it('reads AFL++ 3 unix times, which need no start time and have no edges_found', () => {
    const afl3 = '# unix_time, cycles_done, cur_path, paths_total, pending_total, pending_favs, map_size, unique_crashes, unique_hangs, max_depth, execs_per_sec\n1600000000, 0, 0, 3, 3, 1, 0.02%, 0, 0, 1, 100.00\n';
    expect(parseAflPlotData('plot_data', afl3, undefined)).toEqual([{ unixMs: 1_600_000_000_000, corpusCount: 3, savedCrashes: 0 }]);
  });

  it('fails closed on relative times without a start, a foreign header, or a malformed row', () => {
    expect(codeOf(() => parseAflPlotData('plot_data', afl4, undefined))).toBe('ERR_PLOT_DATA_INVALID');
    expect(codeOf(() => parseAflPlotData('plot_data', 'hello\n1\n', 0))).toBe('ERR_PLOT_DATA_INVALID');
    expect(codeOf(() => parseAflPlotData('plot_data', `${afl4}7, 0\n`, 0))).toBe('ERR_PLOT_DATA_INVALID');
    expect(codeOf(() => parseAflPlotData('plot_data', `${afl4}x, 0, 0, 1, 1, 1, 0.01%, 0, 0, 1, 0.00, 12, 2, 0, 0\n`, 0))).toBe('ERR_PLOT_DATA_INVALID');
  });
});
