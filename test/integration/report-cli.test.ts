/**
 * `symfence report` on real demo outputs: the files it writes, that the HTML is self-contained,
 * that every chart drew data marks, AFL++'s series beside symfence's, the lease table, and the
 * coded, file-naming failures for what it cannot read.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCliCaptured } from '../helpers/cli-in-process.js';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { leaseHealth } from '../../src/report/lease-health.js';
import { writeReport } from '../../src/report/write-report.js';
import { codeOfAsync } from '../helpers/error-code.js';
import { demoCampaign } from '../helpers/demo-outputs.js';

const CHARTS = ['coverage', 'jobs', 'findings', 'utilisation', 'admission', 'job-kinds', 'coordinators', 'slot-time'];
const dirs: string[] = [];
let demo: string;

function tmp(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-report-'));
  dirs.push(dir);
  return dir;
}

const cli = runCliCaptured;

function failingOnce(): FaultInjectingFsLayer {
  const fsLayer = new FaultInjectingFsLayer();
  fsLayer.fail({ op: 'read', path: /plot_data\.csv$/, code: 'EIO' });
  return fsLayer;
}

/** Data marks Vega drew in one SVG: the children of each `role-mark` group (lines, points, stacked areas). */
function dataMarks(svg: string): number {
  return (svg.match(/<g class="mark-(?:line|symbol|area) role-mark[^"]*"[^>]*>(.*?)<\/g>/gs) ?? []).reduce((n, g) => n + (g.match(/<path/g)?.length ?? 0), 0);
}

beforeAll(async () => {
  demo = await demoCampaign('symfence-report-demo-');
  dirs.push(path.dirname(demo));
});
afterAll(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('symfence report', () => {
  it('writes report.html and one SVG per chart, prints the HTML path, and every chart drew data marks', async () => {
    const out = path.join(tmp(), 'r');
    const { code, out: stdout, err } = await cli('report', demo, '--output-dir', out);
    expect(code, err).toBe(0);
    expect(stdout).toBe(`${path.join(out, 'report.html')}\n`);
    expect(readdirSync(out).sort()).toEqual(['report.html', ...CHARTS.map((c) => `${c}.svg`)].sort());
    for (const chart of CHARTS) {
      const svg = readFileSync(path.join(out, `${chart}.svg`), 'utf8');
      expect(svg.startsWith('<?xml'), chart).toBe(true);
      expect(dataMarks(svg), chart).toBeGreaterThan(0);
    }
    const html = readFileSync(path.join(out, 'report.html'), 'utf8');
    for (const chart of CHARTS) expect(html).toContain(`data-chart="${chart}"`);
  });

  it('makes an HTML file that references nothing outside itself: no script, stylesheet link, image or URL', async () => {
    const out = path.join(tmp(), 'r');
    expect((await cli('report', demo, '--output-dir', out)).code).toBe(0);
    const html = readFileSync(path.join(out, 'report.html'), 'utf8');
    expect(html).not.toMatch(/<script|<link|<img|<iframe|@import|src=/i);
    // The only URLs are XML namespace names, which are never fetched.
    const urls = (html.match(/(?:https?:)?\/\/[^\s"'<>)]+/g) ?? []).filter((u) => !/^http:\/\/www\.w3\.org\/(2000\/svg|1999\/xlink)$/.test(u));
    expect(urls).toEqual([]);
    // Axis titles with units and a legend title are in the SVG text.
    expect(html).toContain('time since campaign start (seconds)');
    expect(html).toContain('utilisation (%)');
    expect(html).toContain('edges (map entries)');
  });

  it('shows the lease table health of the campaign and its time-averaged utilisation', async () => {
    const out = path.join(tmp(), 'r');
    expect((await cli('report', demo, '--output-dir', out)).code).toBe(0);
    const html = readFileSync(path.join(out, 'report.html'), 'utf8');
    const leaseRow = /<tr><td>[^<]*leases\/work<\/td><td>demo<\/td><td>work<\/td><td>(\d+)<\/td><td>(\d+)<\/td><td>(\d+)<\/td><td>(\d+)<\/td><td>(\d+)<\/td><td>ok<\/td><\/tr>/.exec(html);
    expect(leaseRow, 'a lease-table row for the work table').not.toBeNull();
    const [held, expired, committing, done, corrupt] = leaseRow!.slice(1).map(Number);
    expect({ held, expired, committing, corrupt }).toEqual({ held: 0, expired: 0, committing: 0, corrupt: 0 });
    expect(done).toBeGreaterThan(0);
    expect(html).toMatch(/<td>\d+%<\/td><td>\d+%<\/td><\/tr>/); // utilisation (avg) and fill now
  });

  it("finds every coordinator and AFL++ instance of an AFL output directory and plots AFL++'s edges on the same axis", async () => {
    const aflOut = tmp();
    cpSync(demo, path.join(aflOut, 'symfence'), { recursive: true });
    const stats = JSON.parse(readFileSync(path.join(demo, 'stats.json'), 'utf8')) as { startedMs: number };
    mkdirSync(path.join(aflOut, 'main'));
    writeFileSync(path.join(aflOut, 'main', 'fuzzer_stats'), `start_time        : ${Math.floor(stats.startedMs / 1000)}\nafl_banner        : maze\n`);
    writeFileSync(
      path.join(aflOut, 'main', 'plot_data'),
      '# relative_time, cycles_done, cur_item, corpus_count, pending_total, pending_favs, map_size, saved_crashes, saved_hangs, max_depth, execs_per_sec, total_execs, edges_found, total_crashes, servers_count\n' +
        '0, 0, 0, 1, 1, 1, 0.01%, 0, 0, 1, 0.00, 12, 3, 0, 0\n1, 0, 0, 2, 1, 1, 0.02%, 0, 0, 1, 90.00, 100, 5, 0, 0\n',
    );
    const { code, out, err } = await cli('report', aflOut, '--json');
    expect(code, err).toBe(0);
    const written = JSON.parse(out) as { htmlPath: string; coordinators: string[]; charts: string[] };
    expect(written.htmlPath).toBe(path.join(aflOut, 'symfence-report', 'report.html'));
    expect(written.coordinators).toEqual(['demo']);
    const coverage = readFileSync(path.join(aflOut, 'symfence-report', 'coverage.svg'), 'utf8');
    expect(coverage).toContain('AFL++ edges_found');
    expect(coverage).toContain('symfence map');
    expect(coverage).toContain('AFL++ main');
    // The report directory it wrote is not taken for a coordinator on the next run.
    expect((await cli('report', aflOut, '--json')).code).toBe(0);
  });

  it('lists a shared lease directory once with every coordinator using it, and a missing one as a row saying why', async () => {
    const leases = path.join(demo, 'leases');
    const rows = await leaseHealth(
      [
        { leaseDir: leases, label: 'sf1' },
        { leaseDir: `${leases}/`, label: 'sf2' },
        { leaseDir: path.join(tmp(), 'gone'), label: 'sf3' },
      ],
      { nowMs: Date.now() },
    );
    const work = rows.find((r) => r.kind === 'work')!;
    expect(work.usedBy).toEqual(['sf1', 'sf2']);
    expect(work.done).toBeGreaterThan(0);
    expect(rows.filter((r) => r.leaseDir === path.resolve(leases)).every((r) => r.problem === undefined)).toBe(true);
    const missing = rows.at(-1)!;
    expect(missing).toMatchObject({ usedBy: ['sf3'] });
    expect(missing.problem).toMatch(/cannot read lease directory/);
  });

  it('fails closed on a read error of plot_data.csv (EIO), writing no report, and reads through the bounded reader', async () => {
    const fsLayer = new FaultInjectingFsLayer();
    fsLayer.fail({ op: 'read', path: /plot_data\.csv$/, code: 'EIO' });
    const out = path.join(tmp(), 'r');
    const failure = writeReport([demo], { outputDir: out, fsLayer });
    await expect(failure).rejects.toThrow(path.join(demo, 'plot_data.csv'));
    expect(await codeOfAsync(writeReport([demo], { outputDir: out, fsLayer: failingOnce() }))).toBe('ERR_PLOT_DATA_INVALID');
    expect(existsSync(path.join(out, 'report.html'))).toBe(false);
  });

  it('escapes names from disk: a campaign named like markup shows as text, in the HTML and in the SVG', async () => {
    const dir = path.join(tmp(), 'c');
    cpSync(demo, dir, { recursive: true });
    const statsFile = path.join(dir, 'stats.json');
    const stats = JSON.parse(readFileSync(statsFile, 'utf8')) as Record<string, unknown>;
    writeFileSync(statsFile, JSON.stringify({ ...stats, name: '<img src=x onerror=alert(1)>', coordinator: '"><script>x</script>' }));
    const out = path.join(dir, 'out');
    expect((await cli('report', dir, '--output-dir', out)).code).toBe(0);
    const html = readFileSync(path.join(out, 'report.html'), 'utf8');
    expect(html).not.toMatch(/<img|<script/);
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(readFileSync(path.join(out, 'coordinators.svg'), 'utf8')).not.toContain('<img');
  });

  it('fails with ERR_CAMPAIGN_STATE and exit 1 for a missing directory or one without a symfence coordinator', async () => {
    for (const dir of [path.join(tmp(), 'nope'), tmp()]) {
      const { code, err } = await cli('report', dir);
      expect(code).toBe(1);
      expect(err).toContain('ERR_CAMPAIGN_STATE');
      expect(err.trim().split('\n')).toHaveLength(1);
    }
  });

  it('fails closed, naming the file, on a corrupt plot_data.csv, a corrupt stats.json or a plot file that is not a regular file', async () => {
    const cases: Array<[string, (dir: string) => void, string]> = [
      ['plot row', (d) => writeFileSync(path.join(d, 'plot_data.csv'), `${readFileSync(path.join(demo, 'plot_data.csv'), 'utf8')}1,2,x\n`), 'ERR_PLOT_DATA_INVALID'],
      ['plot header', (d) => writeFileSync(path.join(d, 'plot_data.csv'), 'time,edges\n1,2\n'), 'ERR_PLOT_DATA_INVALID'],
      ['plot directory', (d) => (rmSync(path.join(d, 'plot_data.csv')), mkdirSync(path.join(d, 'plot_data.csv'))), 'ERR_PLOT_DATA_INVALID'],
      ['stats', (d) => writeFileSync(path.join(d, 'stats.json'), '{"schema":"symfence-stats/1",'), 'ERR_CAMPAIGN_STATE'],
    ];
    for (const [what, damage, code] of cases) {
      const dir = path.join(tmp(), 'c');
      cpSync(demo, dir, { recursive: true });
      damage(dir);
      const result = await cli('report', dir, '--output-dir', path.join(dir, 'out'));
      expect(result.code, what).toBe(1);
      expect(result.err, what).toContain(code);
      expect(result.err, what).toContain(dir);
      expect(existsSync(path.join(dir, 'out', 'report.html')), what).toBe(false);
    }
  });
});
