/**
 * `report` streams plot files: a `plot_data.csv` just under the 256 MiB limit is read with peak RSS
 * under 150 MB (measured in a child process that only writes the report), the charts keep a fixed
 * number of evenly spaced points ending at the latest row, and every plot number is checked.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_PLOT_FILE_BYTES, collectReportSources } from '../../src/report/report-sources.js';
import { MAX_POINTS_PER_LINE } from '../../src/report/chart-data.js';
import { DecimatedRows } from '../../src/report/decimated-rows.js';
import { createCounters } from '../../src/telemetry/counters.js';
import { PLOT_COLUMNS, plotRow } from '../../src/telemetry/plot-data.js';
import { makeSnapshot } from '../../src/telemetry/stats-file.js';
import { builtFile } from '../../src/util/paths.js';
import { codeOfAsync } from '../helpers/error-code.js';

const MB = 1_000_000;
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tmp(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-large-report-'));
  dirs.push(dir);
  return dir;
}

const START_MS = 1_700_000_000_000;

function campaignDir(root: string, updatedMs: number): string {
  const dir = path.join(root, 'c');
  mkdirSync(dir, { recursive: true });
  const stats = makeSnapshot({ coordinator: 'c', name: 'big', state: 'stopped', startedMs: START_MS, updatedMs, statsIntervalMs: 1000, workers: 2, counters: createCounters() });
  writeFileSync(path.join(dir, 'stats.json'), JSON.stringify(stats));
  return dir;
}

/** Writes rows one second apart until the file is about `bytes` long; returns the row count. */
function writePlot(file: string, bytes: number): number {
  const fd = openSync(file, 'w');
  let written = 0;
  let rows = 0;
  try {
    written += writeSync(fd, `${PLOT_COLUMNS.join(',')}\n`);
    const c = createCounters();
    for (;;) {
      let batch = '';
      for (let i = 0; i < 20_000; i++) {
        c.jobsStarted = rows;
        c.jobsOk = rows;
        c.edgesCovered = rows % 65_536;
        c.solverBusyMs = rows * 1500;
        c.fillRatio = (rows % 3) / 2;
        batch += plotRow(START_MS + (rows + 1) * 1000, START_MS, c, 2);
        rows++;
      }
      if (written + batch.length > bytes) break;
      written += writeSync(fd, batch);
    }
  } finally {
    closeSync(fd);
  }
  return rows;
}

/** The first `n` lines of `file` (read from its first 64 KiB), each with its newline. */
function firstLines(file: string, n: number): string {
  const fd = openSync(file, 'r');
  try {
    const buffer = Buffer.alloc(64 * 1024);
    const text = buffer.toString('utf8', 0, readSync(fd, buffer, 0, buffer.length, 0));
    return `${text.split('\n').slice(0, n).join('\n')}\n`;
  } finally {
    closeSync(fd);
  }
}

/** Peak RSS (VmHWM) of a child process that only writes the report of `dir` into `outputDir`. */
function reportPeak(dir: string, outputDir: string): { htmlPath: string; maxRss: number } {
  const script = `
    const { writeReport } = await import(${JSON.stringify(builtFile('src/report/write-report.js'))});
    const written = await writeReport([${JSON.stringify(dir)}], { outputDir: ${JSON.stringify(outputDir)} });
    // VmHWM: this process's own peak RSS (getrusage's maxRSS would include the forking parent's).
    const hwmKiB = Number((await import('node:fs')).readFileSync('/proc/self/status', 'utf8').match(/VmHWM:\\s*(\\d+)/)[1]);
    console.log(JSON.stringify({ htmlPath: written.htmlPath, maxRss: hwmKiB * 1024 }));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', maxBuffer: 1 << 20 });
  return JSON.parse(out.trim().split('\n').pop()!) as { htmlPath: string; maxRss: number };
}

describe('report over large plot files', () => {
  it('writes the report of a plot_data.csv just under 256 MiB with peak RSS under 150 MB, within 25 MB of a 10-row file', () => {
    const root = tmp();
    const dir = campaignDir(root, START_MS);
    const plot = path.join(dir, 'plot_data.csv');
    writePlot(plot, MAX_PLOT_FILE_BYTES - 1024 * 1024);
    const size = statSync(plot).size;
    expect(size).toBeGreaterThan(250 * 1024 * 1024);
    expect(size).toBeLessThanOrEqual(MAX_PLOT_FILE_BYTES);
    const result = reportPeak(dir, path.join(root, 'report'));
    expect(readFileSync(result.htmlPath, 'utf8')).toContain('<html');
    expect(result.maxRss).toBeLessThan(150 * MB);
    // The same report of a 10-row file, in the same run: what the file's size adds is bounded
    // (most of the peak is the chart renderer's, whatever the file).
    const smallRoot = path.join(root, 'small');
    const small = campaignDir(smallRoot, START_MS);
    writeFileSync(path.join(small, 'plot_data.csv'), firstLines(plot, 11));
    const baseline = reportPeak(small, path.join(smallRoot, 'report'));
    console.log(JSON.stringify({ largeFilePeak: result.maxRss, tenRowPeak: baseline.maxRss }));
    expect(result.maxRss - baseline.maxRss).toBeLessThan(25 * MB);
  }, 300_000);

  it('keeps a fixed number of evenly spaced rows, the first and the last included', async () => {
    const root = tmp();
    const dir = campaignDir(root, START_MS);
    const rows = writePlot(path.join(dir, 'plot_data.csv'), 4 * 1024 * 1024);
    const sources = await collectReportSources([dir]);
    const plot = sources.coordinators[0]!.plot;
    expect(sources.coordinators[0]!.plotRows).toBeGreaterThan(2 * MAX_POINTS_PER_LINE);
    expect(plot.length).toBeLessThanOrEqual(2 * MAX_POINTS_PER_LINE + 1);
    expect(plot.length).toBeGreaterThanOrEqual(MAX_POINTS_PER_LINE);
    expect(plot[0]!.jobs_started).toBe(0);
    const lastWritten = sources.coordinators[0]!.plotRows - 1;
    expect(plot[plot.length - 1]!.jobs_started).toBe(lastWritten);
    expect(lastWritten).toBeLessThan(rows);
    const steps = new Set(plot.slice(1, -1).map((r, i) => r.jobs_started! - plot[i]!.jobs_started!));
    expect(steps.size).toBe(1);
  });
});

describe('DecimatedRows', () => {
  it('holds at most 2 × target + 1 rows for any count, evenly spaced from the first, ending at the last', () => {
    for (const count of [0, 1, 2, 7, 8, 9, 100, 1023, 1024, 1025, 54_321]) {
      const series = new DecimatedRows(4, 2);
      for (let i = 0; i < count; i++) {
        const at = series.nextOffset();
        series.data[at] = i;
        series.data[at + 1] = -i;
        series.commit();
        // A line that is not a row writes its slot but is never committed: it must not replace the last row.
        series.data.fill(Number.NaN, series.nextOffset(), series.nextOffset() + 2);
      }
      const rows = series.offsets().map((at) => series.data[at]!);
      expect(series.offsets().every((at) => series.data[at + 1] === -series.data[at]!)).toBe(true);
      expect(series.count).toBe(count);
      expect(rows.length).toBeLessThanOrEqual(9);
      if (count === 0) {
        expect(rows).toEqual([]);
        continue;
      }
      expect(rows[0]).toBe(0);
      expect(rows[rows.length - 1]).toBe(count - 1);
      const body = rows[rows.length - 1] === rows[rows.length - 2]! + (rows[1]! - rows[0]!) ? rows : rows.slice(0, -1);
      const gaps = new Set(body.slice(1).map((r, i) => r - body[i]!));
      expect(gaps.size).toBeLessThanOrEqual(1);
    }
  });
});

describe('numbers in plot files', () => {
  const header = PLOT_COLUMNS.join(',');
  const good = plotRow(START_MS + 1000, START_MS, createCounters(), 1);
  const column = (name: string): number => PLOT_COLUMNS.indexOf(name as (typeof PLOT_COLUMNS)[number]);
  const withValue = (name: string, value: string): string => {
    const fields = good.trimEnd().split(',');
    fields[column(name)] = value;
    return fields.join(',');
  };
  for (const [name, value] of [['jobs_ok', '-1'], ['fill_ratio', '4'], ['unix_ms', '1e300'], ['interesting', '1e999']] as const) {
    it(`refuses ${name} = ${value} with ERR_PLOT_DATA_INVALID naming the file, line and column`, async () => {
      const root = tmp();
      const dir = campaignDir(root, START_MS + 2000);
      const file = path.join(dir, 'plot_data.csv');
      writeFileSync(file, `${header}\n${good}${withValue(name, value)}\n`);
      const promise = collectReportSources([dir]);
      expect(await codeOfAsync(promise)).toBe('ERR_PLOT_DATA_INVALID');
      await expect(collectReportSources([dir])).rejects.toMatchObject({ details: { file, line: 3, field: name } });
    });
  }

  it('refuses a negative count in an AFL++ plot_data, naming the column', async () => {
    const root = tmp();
    campaignDir(root, START_MS + 2000);
    const instance = path.join(root, 'main');
    mkdirSync(instance);
    writeFileSync(path.join(instance, 'fuzzer_stats'), `start_time : ${START_MS / 1000}\n`);
    writeFileSync(path.join(instance, 'plot_data'), '# relative_time, cycles_done, cur_item, corpus_count, pending_total, pending_favs, map_size, saved_crashes, saved_hangs, max_depth, execs_per_sec, total_execs, edges_found\n1, 0, 0, 5, 0, 0, 1.0%, 0, 0, 1, 100, 100, -7\n');
    await expect(collectReportSources([root])).rejects.toMatchObject({ code: 'ERR_PLOT_DATA_INVALID', details: { line: 2, field: 'edges_found' } });
  });
});
