import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { readJobLog } from '../../src/telemetry/job-log.js';
import { expectExclusiveProgress } from '../helpers/job-overlap.js';
import { cleanedAfterEach, COMMITTED_STATUSES, fakeAflOut, readJsonIfExists, REFERENCE_SOLVER, runCliProcess, waitFor } from '../helpers/cli-process.js';

const { dirs, children } = cleanedAfterEach();

const COMMITTED = COMMITTED_STATUSES;
const SEEDS = Array.from({ length: 8 }, (_, i) => `AAAAAAAAAAAAAAA${i}`);

function runArgs(out: string, leases: string, name: string, extra: string[] = []): string[] {
  return [
    'run', '--afl-out', out, '--afl-instance', 'main', '--name', name, '--coordinator-id', name,
    '--lease-dir', leases, '--workers', '1', '--stats-interval', '200ms', '--json', '--log-level', 'warn',
    '--showmap', `${process.execPath} ${REFERENCE_SOLVER} showmap`,
    ...extra,
    '--', process.execPath, REFERENCE_SOLVER, 'builtin:demo', '@@',
  ];
}

async function leaseCounts(leases: string) {
  const work = await FencedWorkLeaseTable.open(path.join(leases, 'work'), { coordination: 'single' });
  const targets = await FencedTargetLeaseTable.open(path.join(leases, 'targets'), { coordination: 'single' });
  return { work: await work.snapshotCounts({ nowMs: Date.now() }), targets: await targets.snapshotCounts({ nowMs: Date.now() }), workTable: work };
}

describe('two coordinators sharing one AFL output directory and one lease directory', () => {
  it('never run the same exact work twice nor overlap on a shared target, and both make progress', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-multi-'));
    dirs.push(root);
    // 16 seeds of 400 ms runs: one coordinator alone needs over 6 s for them, so the other gets
    // some even when it starts seconds later on a loaded machine (8 fast runs were all taken by
    // the first one up once).
    const out = fakeAflOut(root, [...SEEDS, ...SEEDS.map((s) => s.toLowerCase())], 'builtin:demo @@');
    const leases = path.join(root, 'leases');
    const runs = ['c1', 'c2'].map((name) => runCliProcess(runArgs(out, leases, name, ['--duration', '10s']), { env: { SYMFENCE_REFSOLVER_DELAY_MS: '400' } }));
    children.push(...runs.map((r) => r.child));
    const exits = await Promise.all(runs.map((r) => r.exit));
    for (const e of exits) expect(e.code, e.stderr).toBe(0);

    const { committed } = expectExclusiveProgress(out, ['c1', 'c2']);
    // The reference solver run by `run` writes its own telemetry (runtime mode): first runs are full solves, never traces.
    expect(committed.some((j) => j.kind === 'trace')).toBe(false);

    const counts = await leaseCounts(leases);
    expect(counts.work).toMatchObject({ leased: 0, committing: 0, corrupt: 0 });
    expect(counts.targets).toMatchObject({ leased: 0, corrupt: 0 });
  });

  it('lets the survivor take over the work of a coordinator killed with SIGKILL, after its TTL, leaving no corrupt record', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-kill-'));
    dirs.push(root);
    const out = fakeAflOut(root, SEEDS.slice(0, 2), 'builtin:demo @@');
    const leases = path.join(root, 'leases');
    const ttl = ['--work-lease-ttl', '3s', '--target-lease-ttl', '3s'];
    // The victim's solver runs hang for a while, so it is killed holding leases.
    const victim = runCliProcess(runArgs(out, leases, 'victim', [...ttl, '--duration', '60s']), { env: { SYMFENCE_REFSOLVER_DELAY_MS: '6000' } });
    children.push(victim.child);
    await waitFor(() => {
      const stats = readJsonIfExists(path.join(out, 'victim', 'stats.json')) as { counters?: { jobsStarted: number } } | undefined;
      return (stats?.counters?.jobsStarted ?? 0) >= 1 ? true : undefined;
    }, 30_000, 'the victim to start a job');
    victim.child.kill('SIGKILL');
    await victim.exit;

    const { workTable } = await leaseCounts(leases);
    const orphaned = (await workTable.snapshotRecords()).filter((e) => e.record.status === 'leased' && e.record.owner === 'victim');
    expect(orphaned.length).toBeGreaterThan(0);

    const survivor = runCliProcess(runArgs(out, leases, 'survivor', [...ttl, '--duration', '12s']));
    children.push(survivor.child);
    const exit = await survivor.exit;
    expect(exit.code, exit.stderr).toBe(0);

    const survivorJobs = readJobLog(path.join(out, 'survivor', 'jobs.jsonl'));
    for (const { id, record } of orphaned) {
      const takeover = survivorJobs.find((j) => j.workId === id && COMMITTED.has(j.status));
      expect(takeover, `work ${id.slice(0, 8)} taken over`).toBeDefined();
      expect(takeover!.startMs).toBeGreaterThanOrEqual(record.updatedMs + 3_000);
    }
    const counts = await leaseCounts(leases);
    expect(counts.work.corrupt).toBe(0);
    expect(counts.targets.corrupt).toBe(0);
    expect((await counts.workTable.snapshotRecords()).filter((e) => e.record.status !== 'done' && e.record.owner === 'survivor')).toEqual([]);
  });
});
