/**
 * Coordinators on "many hosts": separate `symfence run` processes, each with its own local lease
 * directory (as on separate machines), sharing leases only through one real etcd. The
 * two-coordinator exclusivity scenario of multi-coordinator.test.ts, the SIGKILL takeover, and a
 * bad endpoint refused before any seed is spent.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { readJobLog } from '../../src/telemetry/job-log.js';
import { etcdUnavailable, freePort, freezeMember, startEtcd, type EtcdCluster } from '../helpers/etcd-server.js';
import { expectExclusiveProgress } from '../helpers/job-overlap.js';
import { cleanedAfterEach, COMMITTED_STATUSES, fakeAflOut, readJsonIfExists, REFERENCE_SOLVER, runCliProcess, waitFor } from '../helpers/cli-process.js';

const unavailable = etcdUnavailable();
if (unavailable !== undefined && process.env['CI'] === 'true') throw new Error(`etcd tests cannot run in CI: ${unavailable}`);

const { dirs, children } = cleanedAfterEach();

const COMMITTED = COMMITTED_STATUSES;
const SEEDS = Array.from({ length: 8 }, (_, i) => `AAAAAAAAAAAAAAA${i}`);

function runArgs(out: string, leases: string, name: string, etcd: string[], extra: string[] = []): string[] {
  return [
    'run', '--afl-out', out, '--afl-instance', 'main', '--name', name, '--coordinator-id', name,
    '--lease-dir', leases, ...etcd, '--workers', '1', '--stats-interval', '200ms', '--json', '--log-level', 'warn',
    '--showmap', `${process.execPath} ${REFERENCE_SOLVER} showmap`,
    ...extra,
    '--', process.execPath, REFERENCE_SOLVER, 'builtin:demo', '@@',
  ];
}

describe.skipIf(unavailable !== undefined)('coordinators in separate processes sharing leases through one etcd', () => {
  let cluster: EtcdCluster;
  let campaigns = 0;
  beforeAll(async () => {
    cluster = await startEtcd();
  });
  afterAll(async () => {
    await cluster?.stop();
  });
  const etcdFlags = (prefix: string): string[] => ['--lease-store', 'etcd', '--etcd-endpoints', cluster.endpoints, '--etcd-prefix', prefix];

  const leaseCounts = (root: string, prefix: string) => leaseCountsAt(cluster, root, prefix);
  async function leaseCountsAt(at: EtcdCluster, root: string, prefix: string) {
    const options = { store: 'etcd', etcdEndpoints: at.endpoints, etcdPrefix: prefix, coordination: 'single' };
    const work = await FencedWorkLeaseTable.open(path.join(root, 'inspect', 'work'), options);
    const targets = await FencedTargetLeaseTable.open(path.join(root, 'inspect', 'targets'), options);
    try {
      return { work: await work.snapshotCounts({ nowMs: Date.now() }), targets: await targets.snapshotCounts({ nowMs: Date.now() }), records: await work.snapshotRecords() };
    } finally {
      await work.close();
      await targets.close();
    }
  }

  it('never run the same exact work twice nor overlap on a shared target, and both make progress', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-etcd-multi-'));
    dirs.push(root);
    const prefix = `multi-${process.pid}-${++campaigns}`;
    // 16 seeds of 400 ms runs, as in multi-coordinator.test.ts: the coordinator that starts later
    // still finds work on a loaded machine.
    const out = fakeAflOut(root, [...SEEDS, ...SEEDS.map((s) => s.toLowerCase())], 'builtin:demo @@');
    // One local lease directory per coordinator, as on two hosts: only etcd is shared.
    const runs = ['c1', 'c2'].map((name) =>
      runCliProcess(runArgs(out, path.join(root, `leases-${name}`), name, etcdFlags(prefix), ['--duration', '10s']), { env: { SYMFENCE_REFSOLVER_DELAY_MS: '400' } }),
    );
    children.push(...runs.map((r) => r.child));
    const exits = await Promise.all(runs.map((r) => r.exit));
    for (const e of exits) expect(e.code, e.stderr).toBe(0);

    const { committed } = expectExclusiveProgress(out, ['c1', 'c2']);

    const counts = await leaseCounts(root, prefix);
    expect(counts.work).toMatchObject({ leased: 0, committing: 0, corrupt: 0 });
    expect(counts.work.done).toBe(committed.length);
    expect(counts.targets).toMatchObject({ leased: 0, corrupt: 0 });
  });

  it('keeps a named campaign\'s records under <etcd-prefix>/campaigns/<name>, apart from the prefix\'s own campaign', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-etcd-named-'));
    dirs.push(root);
    const prefix = `named-${process.pid}-${++campaigns}`;
    const out = fakeAflOut(root, SEEDS.slice(0, 3), 'builtin:demo @@');
    const run = runCliProcess(runArgs(out, path.join(root, 'leases'), 'named', [...etcdFlags(prefix), '--campaign', 'alpha'], ['--duration', '4s']));
    children.push(run.child);
    const exit = await run.exit;
    expect(exit.code, exit.stderr).toBe(0);
    const named = await leaseCounts(root, `${prefix}/campaigns/alpha`);
    expect(named.work.done).toBeGreaterThan(0);
    expect(named.work.done).toBe(expectExclusiveProgress(out, ['named']).committed.length);
    // The prefix itself holds no work: another campaign on it would see none of alpha's.
    expect((await leaseCounts(root, prefix)).work).toMatchObject({ leased: 0, committing: 0, done: 0 });
  });

  it('lets the survivor take over the work of a coordinator killed with SIGKILL once its session expires', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-etcd-kill-'));
    dirs.push(root);
    const prefix = `kill-${process.pid}-${++campaigns}`;
    const out = fakeAflOut(root, SEEDS.slice(0, 2), 'builtin:demo @@');
    const ttl = ['--work-lease-ttl', '3s', '--target-lease-ttl', '3s'];
    const victim = runCliProcess(runArgs(out, path.join(root, 'leases-victim'), 'victim', etcdFlags(prefix), [...ttl, '--duration', '60s']), { env: { SYMFENCE_REFSOLVER_DELAY_MS: '6000' } });
    children.push(victim.child);
    await waitFor(() => {
      const stats = readJsonIfExists(path.join(out, 'victim', 'stats.json')) as { counters?: { jobsStarted: number } } | undefined;
      return (stats?.counters?.jobsStarted ?? 0) >= 1 ? true : undefined;
    }, 30_000, 'the victim to start a job');
    const orphaned = (await leaseCounts(root, prefix)).records.filter((e) => e.record.status === 'leased' && e.record.owner === 'victim');
    victim.child.kill('SIGKILL');
    await victim.exit;
    expect(orphaned.length).toBeGreaterThan(0);

    const survivor = runCliProcess(runArgs(out, path.join(root, 'leases-survivor'), 'survivor', etcdFlags(prefix), [...ttl, '--duration', '12s']));
    children.push(survivor.child);
    const exit = await survivor.exit;
    expect(exit.code, exit.stderr).toBe(0);
    const survivorJobs = readJobLog(path.join(out, 'survivor', 'jobs.jsonl'));
    for (const { id } of orphaned) {
      expect(survivorJobs.find((j) => j.workId === id && COMMITTED.has(j.status)), `work ${id.slice(0, 8)} taken over`).toBeDefined();
    }
    const counts = await leaseCounts(root, prefix);
    expect(counts.work.corrupt).toBe(0);
    expect(counts.targets.corrupt).toBe(0);
    expect(counts.records.filter((e) => e.record.status !== 'done' && e.record.owner === 'survivor')).toEqual([]);
  });

  it('aborts the solver runs whose leases it can no longer renew while etcd is unreachable, logs and counts the loss, and carries on', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-etcd-loss-'));
    dirs.push(root);
    const lossy = await startEtcd();
    const member = lossy.members[0]!;
    try {
      const out = fakeAflOut(root, SEEDS.slice(0, 2), 'builtin:demo @@');
      const flags = ['--lease-store', 'etcd', '--etcd-endpoints', lossy.endpoints, '--etcd-prefix', 'loss', '--etcd-timeout', '500ms'];
      const ttl = ['--work-lease-ttl', '4s', '--target-lease-ttl', '4s'];
      // Solver runs outlast the outage, so the leases are held (and lost) while they run.
      const run = runCliProcess(runArgs(out, path.join(root, 'leases'), 'cut-off', flags, [...ttl, '--duration', '30s']), { env: { SYMFENCE_REFSOLVER_DELAY_MS: '15000' } });
      children.push(run.child);
      const counters = (): { jobsStarted: number; leaseExpiries: number; jobsAborted: number } | undefined =>
        (readJsonIfExists(path.join(out, 'cut-off', 'stats.json')) as { counters?: { jobsStarted: number; leaseExpiries: number; jobsAborted: number } } | undefined)?.counters;
      await waitFor(() => ((counters()?.jobsStarted ?? 0) >= 1 ? true : undefined), 30_000, 'a job to start');
      await freezeMember(member);
      try {
        // Without any answer from etcd: the session's local deadline passes, the next renewal
        // answers the leases as lost, and the runs are aborted.
        await waitFor(() => ((counters()?.leaseExpiries ?? 0) >= 1 ? true : undefined), 30_000, 'a lease to be declared lost while etcd is frozen');
      } finally {
        member.process!.kill('SIGCONT');
      }
      const exit = await run.exit;
      expect(exit.code, exit.stderr).toBe(0);
      expect(exit.stderr).toContain('lease store session lost');
      expect(exit.stderr).toContain('lease lost; aborting the solver run');
      const jobs = readJobLog(path.join(out, 'cut-off', 'jobs.jsonl'));
      expect(jobs.some((j) => j.status === 'aborted')).toBe(true);
      expect(counters()!.jobsAborted).toBeGreaterThanOrEqual(1);
      // Nothing of an aborted run was published: its work is done only if a later run committed it.
      const counts = await leaseCountsAt(lossy, root, 'loss');
      const done = new Set(counts.records.filter((e) => e.record.status === 'done').map((e) => e.id));
      const committedIds = new Set(jobs.filter((j) => COMMITTED.has(j.status)).map((j) => j.workId));
      for (const job of jobs.filter((j) => j.status === 'aborted')) expect(!done.has(job.workId) || committedIds.has(job.workId), `aborted work ${job.workId.slice(0, 8)}`).toBe(true);
      expect(counts.work.corrupt).toBe(0);
    } finally {
      member.process?.kill('SIGCONT');
      await lossy.stop();
    }
  });

  it('refuses to start with ERR_ETCD_UNAVAILABLE before any seed is spent when no etcd answers', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-etcd-bad-'));
    dirs.push(root);
    const out = fakeAflOut(root, SEEDS.slice(0, 2), 'builtin:demo @@');
    const port = await freePort();
    const run = runCliProcess(runArgs(out, path.join(root, 'leases'), 'lonely', ['--lease-store', 'etcd', '--etcd-endpoints', `127.0.0.1:${port}`, '--etcd-timeout', '1s'], ['--duration', '10s']));
    children.push(run.child);
    const exit = await run.exit;
    expect(exit.code).not.toBe(0);
    expect(exit.stderr + exit.stdout).toContain('ERR_ETCD_UNAVAILABLE');
    const jobLog = path.join(out, 'lonely', 'jobs.jsonl');
    expect(existsSync(jobLog) ? readJobLog(jobLog) : []).toEqual([]);
  });
});
