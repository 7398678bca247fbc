// The demo campaign over the real parts: lane state persistence across restarts, a corrupt state
// file set aside, scheduler/I/O options and the hints file checked at start.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { startDemo } from '../../src/coordinator/adapters/demo-campaign.js';
import { Campaign } from '../../src/coordinator/campaign.js';
import { inspectLeaseDirectory } from '../../src/lease/lease-inspect.js';
import { SCHEDULER_STATE_FILE } from '../../src/scheduler/lane-state-keeper.js';
import { MapLocalReservations } from '../../src/scheduler/map-local-reservations.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { FakeReservations, FakeSink, FakeSource, FakeWorkLeases } from '../helpers/coordinator-fakes.js';

const dirs: string[] = [];
function tmp(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-wiring-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function capture() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const text of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(text) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

const DEMO = { workers: 1, durationMs: '60s', statsIntervalMs: '1s' } as const;

/** Stops the demo once `jobs` jobs have finished (or it completes by itself); resolves with its summary. */
async function runJobs(demo: Awaited<ReturnType<typeof startDemo>>, jobs: number) {
  let finished = 0;
  demo.campaign.on('jobFinished', () => {
    if (++finished >= jobs) void demo.campaign.stop();
  });
  return demo.done;
}

/** Lane sizes a fresh scheduler gets from a saved state document. */
function laneSizesOf(document: unknown): Record<string, number> {
  const s = new Scheduler({ local: new MapLocalReservations() });
  s.restore(document, Date.now());
  return { ...s.stats().laneSizes };
}

describe('campaign lane state', () => {
  it('saves lane state at stop, and a campaign restarted on the same out-dir starts from it', async () => {
    const outDir = tmp();
    const summary = await runJobs(await startDemo({ ...DEMO, outDir }, {}), 4);
    expect(summary.jobsCompleted).toBeGreaterThan(0);
    const file = path.join(outDir, SCHEDULER_STATE_FILE);
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { schema: string; ledger: { pairs: [number, string, number, number][] } };
    expect(saved.schema).toBe('symfence-scheduler-state/1');
    const savedSizes = laneSizesOf(saved);
    expect(Object.values(savedSizes).some((n) => n > 0)).toBe(true);
    // The target ledger is saved with the lanes: the pairs the runs answered (attempts 0 = settled).
    const settled = saved.ledger.pairs.filter((p) => p[2] === 0).length;
    expect(settled).toBeGreaterThan(0);

    const { logger, lines } = capture();
    const second = await startDemo({ ...DEMO, outDir }, { logger });
    await second.campaign.stop();
    const loaded = lines.find((l) => l['msg'] === 'scheduler lane state loaded');
    expect(loaded).toMatchObject({ component: 'campaign.scheduler', file, lanes: savedSizes, settledPairs: settled });
  });

  it('sets a corrupt state file aside with a warning naming it and its code, and runs', async () => {
    const outDir = tmp();
    const file = path.join(outDir, SCHEDULER_STATE_FILE);
    writeFileSync(file, '{"schema":"symfence-scheduler-state/1","lanes":');
    const { logger, lines } = capture();
    const summary = await runJobs(await startDemo({ ...DEMO, outDir }, { logger }), 2);
    expect(summary.jobsCompleted).toBeGreaterThan(0);
    const warned = lines.find((l) => l['msg'] === 'scheduler lane state unusable; set aside, lanes start empty');
    expect(warned).toMatchObject({ level: 40, file, code: 'ERR_LANE_STATE' });
    const asideName = readdirSync(outDir).find((n) => n.startsWith(`${SCHEDULER_STATE_FILE}.corrupt-`));
    expect(asideName).toBeDefined();
    expect(warned!['movedTo']).toBe(path.join(outDir, asideName!));
    expect(readFileSync(path.join(outDir, asideName!), 'utf8')).toBe('{"schema":"symfence-scheduler-state/1","lanes":');
    // The campaign's own state replaced it at stop.
    expect((JSON.parse(readFileSync(file, 'utf8')) as { schema: string }).schema).toBe('symfence-scheduler-state/1');
  });
});

describe('campaign scheduler and I/O options', () => {
  const fakeParts = () => ({ workLeases: new FakeWorkLeases(60_000), reservations: new FakeReservations(), solver: { run: async () => ({ status: 'ok' as const, elapsedMs: 0, generated: [] }) }, source: new FakeSource(), findings: new FakeSink() });

  it.each([
    ['scheduler', { scheduler: { prefixNodes: 'lots' } }, 'prefixNodes'],
    ['scheduler', { scheduler: { stateIntervalMs: -1 } }, 'stateIntervalMs'],
    ['io', { io: { maxBatchRequests: 0 } }, 'maxBatchRequests'],
    ['io', { io: { fileBarrier: 'sometimes' } }, 'fileBarrier'],
    ['lease', { lease: { shardCount: 0 } }, 'shardCount'],
    ['lease', { lease: { store: 'tape' } }, 'store'],
    ['lease', { lease: { leaseTtlMs: 5000 } }, 'leaseTtlMs'],
    ['hints', { hints: [{ notAHintSource: true }] }, 'hints[0]'],
  ])('refuses a bad %s option with ERR_INVALID_OPTION naming it, before building anything', async (_what, input, option) => {
    const outDir = tmp();
    let built = false;
    const error = await Campaign.start({ outDir, ...(input as object) }, {
      components: async () => {
        built = true;
        return fakeParts();
      },
    }).catch((e: unknown) => e as { code?: string; message?: string });
    expect(error).toMatchObject({ code: 'ERR_INVALID_OPTION', message: expect.stringContaining(option) });
    expect(built).toBe(false);
  });

  it('refuses a bad hints file at start with ERR_HINT_INVALID naming --hints, leaving the out-dir free', async () => {
    const outDir = tmp();
    const hints = path.join(outDir, 'hints.jsonl');
    writeFileSync(hints, '{"sha256":"xyz"}\n');
    const error = await startDemo({ ...DEMO, outDir, scheduler: { hintsFile: hints } }, {}).catch((e: unknown) => e as { code?: string; message?: string });
    expect(error).toMatchObject({ code: 'ERR_HINT_INVALID', message: expect.stringContaining(`--hints ${hints} line 1`) });
    expect(existsSync(path.join(outDir, SCHEDULER_STATE_FILE))).toBe(false);
    // Nothing kept running or holding the directory: a good start succeeds right away.
    const demo = await startDemo({ ...DEMO, outDir }, {});
    await demo.campaign.stop();
  });

  it('opens the lease tables with the campaign\'s lease options (shard count recorded in lease-table.json)', async () => {
    const outDir = tmp();
    const demo = await startDemo({ ...DEMO, outDir, lease: { shardCount: 8, store: 'files' } }, {});
    await demo.campaign.stop();
    const meta = JSON.parse(readFileSync(path.join(outDir, 'leases', 'work', 'lease-table.json'), 'utf8')) as Record<string, unknown>;
    expect(meta).toEqual({ kind: 'work', schema: 1, shardCount: 8 });
    expect(readdirSync(path.join(outDir, 'leases', 'work')).filter((name) => /^\d{3}$/.test(name)).every((name) => Number(name) < 8)).toBe(true);
  });

  it('keeps each named campaign of a shared lease directory in its own namespace: the same inputs are work of each, and leases sees both', async () => {
    const root = tmp();
    const leaseDir = path.join(root, 'leases');
    const done: Record<string, Set<string>> = {};
    for (const campaign of ['alpha', 'beta']) {
      const demo = await startDemo({ ...DEMO, outDir: path.join(root, campaign), leaseDir, campaign, lease: { store: 'files' } }, {});
      await runJobs(demo, 4);
      const work = await inspectLeaseDirectory(path.join(leaseDir, 'campaigns', campaign, 'work'), { nowMs: Date.now(), leaseTtlMs: 60_000 });
      expect(work[0]!.counts.done).toBeGreaterThanOrEqual(4);
      const jobs = readFileSync(path.join(root, campaign, 'jobs.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { workId: string; status: string });
      done[campaign] = new Set(jobs.filter((j) => j.status === 'ok').map((j) => j.workId));
      const stats = JSON.parse(readFileSync(path.join(root, campaign, 'stats.json'), 'utf8')) as { leaseDir: string };
      expect(stats.leaseDir).toBe(path.join(leaseDir, 'campaigns', campaign));
    }
    // The demo's seeds are the same for both: beta ran work alpha had done, which one namespace would have refused.
    expect([...done.beta!].filter((id) => done.alpha!.has(id)).length).toBeGreaterThan(0);
    expect(existsSync(path.join(leaseDir, 'work'))).toBe(false);
    const tables = await inspectLeaseDirectory(leaseDir, { nowMs: Date.now(), leaseTtlMs: 60_000 });
    expect(tables.map((t) => path.relative(leaseDir, t.root)).sort()).toEqual(['campaigns/alpha/targets', 'campaigns/alpha/work', 'campaigns/beta/targets', 'campaigns/beta/work']);
  });

  it('refuses a bad campaign name naming the option, before the out-dir is created', async () => {
    const root = tmp();
    for (const campaign of ['', '../x', 'a/b', '.hidden', 'x'.repeat(65)]) {
      await expect(startDemo({ ...DEMO, outDir: path.join(root, 'out'), leaseDir: path.join(root, 'leases'), campaign }, {})).rejects.toMatchObject({
        code: 'ERR_INVALID_OPTION',
        message: expect.stringContaining('campaign'),
      });
    }
    expect(existsSync(path.join(root, 'out'))).toBe(false);
    expect(existsSync(path.join(root, 'leases'))).toBe(false);
  });

  it('refuses a bad guidance file at start with ERR_GUIDANCE_INVALID naming --guidance', async () => {
    const outDir = tmp();
    const guidance = path.join(outDir, 'guidance.txt');
    writeFileSync(guidance, '12 far\n');
    await expect(startDemo({ ...DEMO, outDir, scheduler: { guidanceFile: guidance } }, {})).rejects.toMatchObject({
      code: 'ERR_GUIDANCE_INVALID',
      message: expect.stringContaining('--guidance'),
    });
  });
});
