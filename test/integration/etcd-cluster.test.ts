/**
 * A three-member etcd cluster on loopback under two coordinators (separate `symfence run`
 * processes, separate local lease directories): the leader is killed mid-campaign, then a member
 * is frozen with SIGSTOP. After each fault the coordinators keep claiming and starting jobs; at
 * the end no exact work was committed twice, no two jobs held a shared target at the same time,
 * and every committed job's record is done exactly once.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { readJobLog } from '../../src/telemetry/job-log.js';
import { etcdUnavailable, freezeMember, startEtcd, type EtcdCluster, type EtcdMember } from '../helpers/etcd-server.js';
import { overlappingTargetPairs } from '../helpers/job-overlap.js';
import { campaignDiagnosis, cleanedAfterEach, COMMITTED_STATUSES, fakeAflOut, readJsonIfExists, REFERENCE_SOLVER, runCliProcess, waitFor } from '../helpers/cli-process.js';

const unavailable = etcdUnavailable();
if (unavailable !== undefined && process.env['CI'] === 'true') throw new Error(`etcd tests cannot run in CI: ${unavailable}`);

const COMMITTED = COMMITTED_STATUSES;
// Enough seeds that the campaign still has work after both faults: a directed job answers up to 8
// branches, so 16 seeds were once all done before the member froze on a loaded machine.
const SEEDS = Array.from({ length: 64 }, (_, i) => `AAAAAAAAAAAAAA${String(i).padStart(2, '0')}`);
const NAMES = ['c1', 'c2'] as const;

const { dirs, children } = cleanedAfterEach();

describe.skipIf(unavailable !== undefined)('two coordinators on a three-member etcd cluster', () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 3 });
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('keep claiming through a killed leader and a frozen member, never holding a target twice nor publishing a result twice', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-etcd-cluster-'));
    dirs.push(root);
    const prefix = `cluster-${process.pid}`;
    const out = fakeAflOut(root, SEEDS, 'builtin:demo @@');
    const runs = NAMES.map((name) =>
      runCliProcess(
        [
          'run', '--afl-out', out, '--afl-instance', 'main', '--name', name, '--coordinator-id', name,
          '--lease-dir', path.join(root, `leases-${name}`),
          '--lease-store', 'etcd', '--etcd-endpoints', cluster.endpoints, '--etcd-prefix', prefix, '--etcd-timeout', '3s',
          '--work-lease-ttl', '10s', '--target-lease-ttl', '10s',
          '--workers', '1', '--stats-interval', '100ms', '--json', '--log-level', 'warn', '--duration', '45s',
          '--showmap', `${process.execPath} ${REFERENCE_SOLVER} showmap`,
          '--', process.execPath, REFERENCE_SOLVER, 'builtin:demo', '@@',
        ],
        // Each solver run takes a while, so the campaign is still claiming when the faults hit.
        { env: { SYMFENCE_REFSOLVER_DELAY_MS: '150' } },
      ),
    );
    children.push(...runs.map((r) => r.child));
    const startedBy = (name: string): number => ((readJsonIfExists(path.join(out, name, 'stats.json')) as { counters?: { jobsStarted: number } } | undefined)?.counters?.jobsStarted) ?? 0;
    const started = (): number => NAMES.reduce((sum, name) => sum + startedBy(name), 0);
    const startedAfter = async (what: string): Promise<void> => {
      const before = started();
      await waitFor(() => (started() > before ? true : undefined), 60_000, `jobs to start ${what}`, () => NAMES.map((name, i) => `${name}:\n${campaignDiagnosis(path.join(out, name), runs[i]!.stderrSoFar())}`).join('\n'));
    };

    // Mid-campaign: both coordinators are running jobs before the first fault.
    await waitFor(() => (NAMES.every((name) => startedBy(name) > 0) ? true : undefined), 60_000, 'both coordinators to start jobs');
    const leader: EtcdMember = await cluster.leader();
    const atKill = started();
    await cluster.kill(leader);
    await startedAfter('after the leader was killed');
    await cluster.restart(leader);
    const frozen = cluster.members.find((m) => m !== leader)!;
    const frozeLeader = frozen === (await cluster.leader());
    const atFreeze = started();
    await freezeMember(frozen);
    let whileFrozen = 0;
    try {
      await startedAfter('while a member is frozen');
      whileFrozen = started() - atFreeze;
    } finally {
      frozen.process!.kill('SIGCONT');
    }

    const exits = await Promise.all(runs.map((r) => r.exit));
    for (const e of exits) expect(e.code, e.stderr).toBe(0);
    const jobs = NAMES.flatMap((name) => readJobLog(path.join(out, name, 'jobs.jsonl')));
    // A run whose publication failed after beginCommit (a killed leader, a frozen member) logs its
    // line and leaves the record committing; a survivor then replays it once (`replay: true`):
    // the result is still published exactly once. A work id may therefore have one committed run
    // line and one replay line, never two of either.
    const committed = jobs.filter((j) => COMMITTED.has(j.status) && j.replay !== true);
    const replays = jobs.filter((j) => j.replay === true);
    expect(committed.length).toBeGreaterThan(0);
    const twice = (lines: typeof jobs) => lines.filter((j) => lines.filter((k) => k.workId === j.workId).length > 1);
    expect(twice(committed), JSON.stringify(twice(jobs.filter((j) => twice(committed).some((k) => k.workId === j.workId))))).toEqual([]);
    expect(twice(replays)).toEqual([]);
    expect(overlappingTargetPairs(jobs)).toEqual([]);
    // One line for the record of a run (CI logs): what the faults hit and what still happened.
    console.info(JSON.stringify({ cluster: 3, killedLeader: leader.name, frozen: frozen.name, frozeLeader, startedBeforeKill: atKill, startedBeforeFreeze: atFreeze, startedWhileFrozen: whileFrozen, jobs: jobs.length, committed: committed.length, replays: replays.length, duplicateCommits: committed.length - new Set(committed.map((j) => j.workId)).size, overlappingTargetPairs: overlappingTargetPairs(jobs).length }));

    const options = { store: 'etcd', etcdEndpoints: cluster.endpoints, etcdPrefix: prefix, coordination: 'single' };
    const work = await FencedWorkLeaseTable.open(path.join(root, 'inspect', 'work'), options);
    const targets = await FencedTargetLeaseTable.open(path.join(root, 'inspect', 'targets'), options);
    try {
      const counts = await work.snapshotCounts({ nowMs: Date.now() });
      expect(counts).toMatchObject({ leased: 0, committing: 0, corrupt: 0 });
      const done = new Set((await work.snapshotRecords()).filter((e) => e.record.status === 'done').map((e) => e.id));
      for (const job of committed) expect(done.has(job.workId), `work ${job.workId.slice(0, 8)} done`).toBe(true);
      expect(done.size).toBe(committed.length);
      expect(await targets.snapshotCounts({ nowMs: Date.now() })).toMatchObject({ leased: 0, corrupt: 0 });
    } finally {
      await work.close();
      await targets.close();
    }
  }, 180_000);
});
