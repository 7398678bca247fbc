import { appendFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { createCounters } from '../../src/telemetry/counters.js';
import { JobLogFile, readJobLog } from '../../src/telemetry/job-log.js';
import { PLOT_COLUMNS, PlotDataFile } from '../../src/telemetry/plot-data.js';
import { makeSnapshot, readStatsFile, writeStatsAtomic } from '../../src/telemetry/stats-file.js';

const dirs: string[] = [];
function tmp(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-tel-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function snapshot(name: string, state: 'running' | 'stopped', updatedMs: number) {
  return makeSnapshot({
    coordinator: `${name}-c`,
    name,
    state,
    startedMs: updatedMs - 10_000,
    updatedMs,
    statsIntervalMs: 2_000,
    workers: 2,
    counters: { ...createCounters(), jobsStarted: 4, jobsOk: 3, interesting: 2 },
  });
}

async function cli(...argv: string[]) {
  let out = '';
  let err = '';
  const code = await runCli(argv, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}

describe('stats.json', () => {
  it('is replaced atomically and leaves no temp file behind', async () => {
    const dir = tmp();
    const file = path.join(dir, 'stats.json');
    await writeStatsAtomic(file, snapshot('a', 'running', 1_000_000));
    await writeStatsAtomic(file, snapshot('a', 'stopped', 1_002_000));
    expect(readdirSync(dir)).toEqual(['stats.json']);
    const read = readStatsFile(file);
    expect(read).toMatchObject({ schema: 'symfence-stats/1', state: 'stopped', jobsCompleted: 3 });
    expect(read.jobsPerSec).toBeCloseTo(0.3);
  });

  it('rejects a file of another schema or with missing counters with ERR_CAMPAIGN_STATE', () => {
    const dir = tmp();
    writeFileSync(path.join(dir, 'a.json'), '{"schema":"other"}');
    writeFileSync(path.join(dir, 'b.json'), '{"schema":"symfence-stats/1","counters":{"jobsOk":1}}');
    writeFileSync(path.join(dir, 'c.json'), '{trunc');
    for (const f of ['a.json', 'b.json', 'c.json', 'missing.json']) {
      expect(() => readStatsFile(path.join(dir, f))).toThrow(expect.objectContaining({ code: 'ERR_CAMPAIGN_STATE' }));
    }
  });
});

describe('stats.json of an earlier version', () => {
  it('reads a file without the commit-recovery counters, taking them as 0', async () => {
    const dir = tmp();
    const file = path.join(dir, 'stats.json');
    await writeStatsAtomic(file, snapshot('a', 'stopped', 1_002_000));
    const data = JSON.parse(readFileSync(file, 'utf8')) as { counters: Record<string, number> };
    for (const k of ['stagingFailures', 'commitPublishFailures', 'commitsReplayed', 'commitReplayFailures', 'stagedSwept', 'tempsSwept']) delete data.counters[k];
    writeFileSync(file, JSON.stringify(data));
    expect(readStatsFile(file).counters).toMatchObject({ commitsReplayed: 0, stagedSwept: 0, tempsSwept: 0, jobsOk: data.counters['jobsOk'] });
    data.counters['commitsReplayed'] = 'x' as unknown as number;
    writeFileSync(file, JSON.stringify(data));
    expect(() => readStatsFile(file)).toThrow(expect.objectContaining({ code: 'ERR_CAMPAIGN_STATE' }));
  });
});

describe('plot_data.csv and jobs.jsonl', () => {
  it('writes the CSV header once, also when reopened, then one row per sample', () => {
    const file = path.join(tmp(), 'plot_data.csv');
    const plot = new PlotDataFile(file);
    plot.append(2_000, 1_000, createCounters(), 1);
    plot.close();
    const again = new PlotDataFile(file);
    again.append(3_000, 1_000, { ...createCounters(), interesting: 4 });
    again.close();
    again.close();
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(lines[0]).toBe(PLOT_COLUMNS.join(','));
    expect(lines).toHaveLength(3);
    expect(lines[2]!.split(',')[1]).toBe('2.000');
    expect(lines[2]!.split(',')[4]).toBe('4');
  });

  it('reads back job lines and skips a truncated last line left by a crash', () => {
    const file = path.join(tmp(), 'jobs.jsonl');
    const log = new JobLogFile(file);
    const entry = { workId: 'w1', targets: ['18446744073709551615'], coordinator: 'c', startMs: 1, endMs: 2, status: 'ok' as const, generated: 1, interesting: 0 };
    log.append(entry);
    log.close();
    appendFileSync(file, '{"workId":"w2","targ');
    expect(readJobLog(file)).toEqual([entry]);
  });
});

describe('symfence status', () => {
  it('prints one campaign as JSON, with its liveness', async () => {
    const dir = tmp();
    await writeStatsAtomic(path.join(dir, 'stats.json'), snapshot('solo', 'stopped', Date.now()));
    const { code, out } = await cli('status', dir, '--json');
    expect(code).toBe(0);
    expect(JSON.parse(out)).toMatchObject({ name: 'solo', liveness: 'stopped', counters: { jobsOk: 3 } });
  });

  it('finds every coordinator directory of an AFL output directory and flags a silent running one as stale', async () => {
    const dir = tmp();
    for (const [name, updated] of [['fresh', Date.now()], ['dead', Date.now() - 60_000]] as const) {
      mkdirSync(path.join(dir, name));
      await writeStatsAtomic(path.join(dir, name, 'stats.json'), snapshot(name, 'running', updated));
    }
    mkdirSync(path.join(dir, 'main')); // an AFL instance: no stats.json
    const json = await cli('status', dir, '--json');
    expect((JSON.parse(json.out) as Array<{ name: string; liveness: string }>).map((s) => [s.name, s.liveness])).toEqual([
      ['dead', 'stale'],
      ['fresh', 'running'],
    ]);
    // Text: the afl-whatsup-style overview, one line per coordinator and a totals line…
    const human = await cli('status', dir);
    expect(human.code).toBe(0);
    const line = (name: string): string => human.out.split('\n').find((l) => l.trim().startsWith(`${name} `))!;
    expect(human.out).toContain('2 (1 alive, 1 stale, 0 finished)');
    expect(line('fresh')).toMatch(/fresh-c\s+alive\s+10s\s+\d+s ago\s+3\/4/);
    expect(line('dead')).toMatch(/dead-c\s+stale\s+10s\s+1m00s ago\s+3\/4/);
    expect(human.out).toMatch(/total {2}jobs 6 done of 8 started/);
    expect(human.out).not.toContain('campaign fresh');
    // …and with --details each coordinator's block after it.
    const details = await cli('status', dir, '--details');
    expect(details.out).toContain('campaign fresh');
    expect(details.out).toContain('completed 3');
  });

  it('says alive, stale or finished in --json beside the liveness it always had', async () => {
    const dir = tmp();
    for (const [name, state] of [['done', 'stopped'], ['live', 'running']] as const) {
      mkdirSync(path.join(dir, name));
      await writeStatsAtomic(path.join(dir, name, 'stats.json'), snapshot(name, state, Date.now()));
    }
    const rows = JSON.parse((await cli('status', dir, '--json')).out) as Array<{ name: string; liveness: string; status: string; solverUtilisation: number }>;
    expect(rows.map((r) => [r.name, r.liveness, r.status])).toEqual([
      ['done', 'stopped', 'finished'],
      ['live', 'running', 'alive'],
    ]);
    expect(rows[0]!.solverUtilisation).toBe(0);
  });

  it('refuses --watch when stdout is not a terminal, with exit 2 and nothing drawn', async () => {
    const dir = tmp();
    await writeStatsAtomic(path.join(dir, 'stats.json'), snapshot('solo', 'running', Date.now()));
    const { code, out, err } = await cli('status', dir, '--watch');
    expect(code).toBe(2);
    expect(out).toBe('');
    expect(err).toContain('ERR_USAGE');
  });

  it('--watch on a terminal redraws until every coordinator has finished', async () => {
    const dir = tmp();
    await writeStatsAtomic(path.join(dir, 'stats.json'), snapshot('solo', 'stopped', Date.now()));
    let out = '';
    const code = await runCli(['status', dir, '--watch', '--watch-interval', '100ms'], { stdout: (t) => (out += t), stderr: () => undefined, isTty: () => true });
    expect(code).toBe(0);
    expect(out.split('\u001b[H\u001b[2J')).toHaveLength(2); // one frame: it was already finished
    expect(out).toContain('campaign solo');
  });

  it('fails with one line and exit 1 when there is no campaign there', async () => {
    const { code, err } = await cli('status', tmp());
    expect(code).toBe(1);
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err).toContain('ERR_CAMPAIGN_STATE');
  });
});
