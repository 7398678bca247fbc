import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { Campaign, type CampaignComponents, type CampaignFinding } from '../../src/coordinator/campaign.js';
import { OUT_DIR_LOCK_FILE } from '../../src/coordinator/out-dir-lock.js';
import type { SolverOutcome, SolverPort } from '../../src/coordinator/ports.js';
import { readJobLog } from '../../src/telemetry/job-log.js';
import { readStatsFile, type StatsSnapshot } from '../../src/telemetry/stats-file.js';
import { FakeReservations, FakeSource, FakeTargetLeases, FakeWorkLeases, makeJob } from '../helpers/coordinator-fakes.js';
import { MemoryResultCommits } from '../helpers/memory-result-commits.js';

const dirs: string[] = [];
function tmp(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-camp-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Finishes every run at once with one interesting input; parks runs once `park` is set. */
class InstantSolver implements SolverPort {
  park = false;
  runs = 0;
  async run(task: { workId: string }, options: { signal: AbortSignal }): Promise<SolverOutcome> {
    this.runs++;
    if (this.park) {
      return new Promise((resolve) => options.signal.addEventListener('abort', () => resolve({ status: 'aborted', generated: [], elapsedMs: 0 })));
    }
    const bytes = new TextEncoder().encode(task.workId);
    return { status: 'ok', elapsedMs: 1, generated: [{ bytes, sha256: task.workId, interesting: true }] };
  }
}

function components(jobs: number, solver = new InstantSolver()) {
  const reservations = new FakeReservations();
  const targets = new FakeTargetLeases(60_000);
  const source = new FakeSource();
  for (let i = 0; i < jobs; i++) {
    const job = makeJob(`in${i}`, BigInt(i + 1));
    reservations.tryReserveGroup(job.group, 1);
    source.queue.push({ job, owner: 1 });
  }
  const workLeases = new FakeWorkLeases(60_000);
  const parts = {
    workLeases,
    targetLeases: targets,
    reservations,
    solver,
    source,
    commits: new MemoryResultCommits(workLeases),
    closed: 0,
    async close() {
      parts.closed++;
    },
  } satisfies CampaignComponents & { closed: number };
  return parts;
}

describe('Campaign', () => {
  it('runs admitted work, emits findings and progress, and leaves stats, plot and job log behind', async () => {
    const outDir = tmp();
    const parts = components(3);
    const findings: CampaignFinding[] = [];
    const campaign = await Campaign.start({ outDir, workers: 2, coordinatorId: 'c-test', statsIntervalMs: '100ms' }, { components: async () => parts });
    campaign.on('finding', (f) => findings.push(f));
    campaign.on('jobFinished', () => {
      if (campaign.counters().jobsOk === 3) void campaign.stop();
    });
    const summary = await campaign.done;

    expect(summary.jobsCompleted).toBe(3);
    expect(findings).toHaveLength(3);
    expect(findings[0]!.inputPath).toMatch(/^\/afl\/queue\/in/);
    expect(campaign.counters()).toMatchObject({ jobsOk: 3, interesting: 3, jobsStarted: 3 });
    expect(readJobLog(path.join(outDir, 'jobs.jsonl')).map((j) => j.coordinator)).toEqual(['c-test', 'c-test', 'c-test']);
    const stats = readStatsFile(path.join(outDir, 'stats.json'));
    expect(stats).toMatchObject({ state: 'stopped', coordinator: 'c-test', workers: 2, jobsCompleted: 3 });
    expect(readFileSync(path.join(outDir, 'plot_data.csv'), 'utf8').split('\n')[0]).toContain('unix_ms');
    expect(parts.closed).toBe(1);
    expect(parts.targetLeases.records.size).toBe(0);
  });

  it('stops on the embedder’s AbortSignal, releasing every lease, and stop() stays idempotent', async () => {
    const solver = new InstantSolver();
    solver.park = true;
    const parts = components(4, solver);
    const controller = new AbortController();
    const campaign = await Campaign.start({ outDir: tmp(), workers: 2, statsIntervalMs: '100ms' }, { components: async () => parts, signal: controller.signal });
    const snapshot = await new Promise<StatsSnapshot>((resolve) => campaign.once('progress', resolve));
    expect(snapshot).toMatchObject({ state: 'running', workers: 2 });
    while (solver.runs < 2) await new Promise((r) => setImmediate(r));
    controller.abort();
    const summary = await campaign.done;
    expect(await campaign.stop()).toBe(summary);
    // The other two jobs waited claimed ahead for the two slots (prefetched): released, never run.
    expect(summary.shutdown).toEqual({ abortedRuns: 2, releasedPending: 2, releaseFailures: 0 });
    expect(parts.workLeases.held()).toEqual([]);
    expect(parts.targetLeases.records.size).toBe(0);
    expect(parts.closed).toBe(1);
  });

  it('stops by itself when the duration has elapsed', async () => {
    const campaign = await Campaign.start({ outDir: tmp(), workers: 1, durationMs: '50ms' }, { components: async () => components(0) });
    const summary = await campaign.done;
    expect(summary.jobsCompleted).toBe(0);
    expect(campaign.stopping).toBe(true);
  });

  it('logs through the embedder’s pino logger', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, new Writable({ write: (chunk, _enc, cb) => (lines.push(String(chunk)), cb()) }));
    const campaign = await Campaign.start({ outDir: tmp(), workers: 1, coordinatorId: 'logged' }, { components: async () => components(0), logger });
    await campaign.stop();
    const messages = lines.map((l) => JSON.parse(l) as { msg: string; coordinator?: string });
    expect(messages.map((m) => m.msg)).toEqual(expect.arrayContaining(['campaign started', 'campaign stopped']));
    expect(messages.find((m) => m.msg === 'campaign started')?.coordinator).toBe('logged');
  });

  it('rejects bad options with ERR_INVALID_OPTION naming the option, before building anything', async () => {
    let built = 0;
    const factory = async () => (built++, components(0));
    await expect(Campaign.start({ outDir: tmp(), workers: -1 }, { components: factory })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION', details: { option: 'workers' } });
    await expect(Campaign.start({ workers: 1 }, { components: factory })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION', details: { option: 'outDir' } });
    await expect(Campaign.start({ aflOut: tmp(), name: '../escape' }, { components: factory })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION', details: { option: 'name' } });
    await expect(Campaign.start({ outDir: tmp(), solverTimeoutMs: 'soon' }, { components: factory })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION', details: { option: 'solverTimeoutMs' } });
    expect(built).toBe(0);
  });

  it('propagates a component factory failure from start()', async () => {
    const failing = async () => {
      throw Object.assign(new Error('no addon'), { code: 'ERR_NATIVE_UNAVAILABLE' });
    };
    await expect(Campaign.start({ outDir: tmp(), workers: 1 }, { components: failing })).rejects.toMatchObject({ code: 'ERR_NATIVE_UNAVAILABLE' });
  });
});

describe('one live campaign per output directory', () => {
  it('refuses a second campaign on a live one\'s output directory, naming the holder, and admits one after stop', async () => {
    const outDir = tmp();
    const first = await Campaign.start({ outDir, workers: 1, coordinatorId: 'first' }, { components: async () => components(0) });
    const second = components(0);
    await expect(Campaign.start({ outDir, workers: 1, coordinatorId: 'second' }, { components: async () => second })).rejects.toMatchObject({
      code: 'ERR_OUT_DIR_BUSY',
      details: { outDir },
    });
    expect(readFileSync(path.join(outDir, OUT_DIR_LOCK_FILE), 'utf8')).toContain('first');
    await first.stop();
    const third = await Campaign.start({ outDir, workers: 1, coordinatorId: 'third' }, { components: async () => components(0) });
    await third.stop();
  });

  it('gives the directory back when building the components fails', async () => {
    const outDir = tmp();
    await expect(Campaign.start({ outDir, workers: 1 }, { components: async () => Promise.reject(new Error('no solver')) })).rejects.toThrow('no solver');
    const next = await Campaign.start({ outDir, workers: 1 }, { components: async () => components(0) });
    await next.stop();
  });
});

