import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdUnavailable, startEtcd, type EtcdCluster } from '../helpers/etcd-server.js';
import { inspectLeaseDirectory } from '../../src/lease/lease-inspect.js';
import { readJobLog } from '../../src/telemetry/job-log.js';
import { overlappingTargetPairs, reaskedAnswers } from '../helpers/job-overlap.js';
import { cleanedAfterEach, COMMITTED_STATUSES, fakeAflOut, readJsonIfExists, runCliProcess } from '../helpers/cli-process.js';
import { buildFakeSymcc, buildFakeSymccAflTarget, fakeSymccCampaignUnavailable } from '../helpers/fake-symcc.js';

/** CI has all three (cc, the built preload library, Debian's afl++); elsewhere the reason is printed. */
const unavailable = fakeSymccCampaignUnavailable();

const { dirs, children } = cleanedAfterEach();

const COMMITTED = COMMITTED_STATUSES;

/** Inputs with more than one committed trace run among `jobs`, with the coordinators that ran them. */
function tracedTwice(jobs: readonly { kind?: string; input?: string; coordinator?: string }[]): string[] {
  const by = new Map<string, string[]>();
  for (const j of jobs) if (j.kind === 'trace' && j.input !== undefined) by.set(j.input, [...(by.get(j.input) ?? []), j.coordinator ?? '?']);
  return [...by].filter(([, who]) => who.length > 1).map(([input, who]) => `${input.slice(0, 8)}: ${who.join(',')}`);
}
/** branchy inputs: several share the prefix of sites 1..4, so their branches overlap. */
const SEEDS = ['AAAAxxyy', 'MAAAxyxy', 'MZAAyyxx', 'MZ!Axxxx', 'AAAAyyyy', 'MAAAxxxy'];

/**
 * The lease stores the campaign runs on: the default (SQLite in the lease directory), and etcd —
 * answers versioned there, docs/lease-format.md "Answer versions" — which CI installs.
 */
const STORES = [
  { name: 'the default store', etcd: false },
  { name: 'etcd', etcd: true },
] as const;
const etcdMissing = etcdUnavailable();
if (etcdMissing !== undefined && process.env['CI'] === 'true') throw new Error(`etcd tests cannot run in CI: ${etcdMissing}`);

describe.skipIf(unavailable !== null)('a campaign on a stock-SymCC-like binary through the preload library', () => {
  let etcd: EtcdCluster | undefined;
  afterAll(async () => {
    await etcd?.stop();
  });
  it.each(STORES)('proposes targeted jobs from the preload telemetry without any flag, two coordinators never solve a shared target at overlapping times, and none asks a pair another answered ($name)', async (store) => {
    if (store.etcd && etcdMissing !== undefined) return;
    if (store.etcd) etcd ??= await startEtcd();
    const storeArgs = store.etcd ? ['--lease-store', 'etcd', '--etcd-endpoints', etcd!.endpoints, '--etcd-prefix', `directed-${process.pid}`] : [];
    const storeOptions = store.etcd ? { storeOptions: { store: 'etcd', etcdEndpoints: etcd!.endpoints, etcdPrefix: `directed-${process.pid}` } } : {};
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-directed-'));
    dirs.push(root);
    const fake = buildFakeSymcc();
    const aflTarget = buildFakeSymccAflTarget(root);
    const out = fakeAflOut(root, SEEDS, `${aflTarget} @@`);
    const leases = path.join(root, 'leases');
    const args = (name: string) => [
      'run', '--afl-out', out, '--afl-instance', 'main', '--name', name, '--coordinator-id', name,
      '--lease-dir', leases, ...storeArgs, '--workers', '1', '--duration', '8s', '--stats-interval', '200ms', '--json', '--log-level', 'warn',
      '--', fake.program, '@@',
    ];
    const runs = ['c1', 'c2'].map((name) => runCliProcess(args(name)));
    children.push(...runs.map((r) => r.child));
    const exits = await Promise.all(runs.map((r) => r.exit));
    for (const e of exits) expect(e.code, e.stderr).toBe(0);
    // auto chose the preload library without a word: no fallback warning.
    for (const e of exits) expect(e.stderr).not.toMatch(/untargeted/);

    // Replay lines (commit recovery) record no solver run of their own.
    const jobs = ['c1', 'c2'].flatMap((name) => readJobLog(path.join(out, name, 'jobs.jsonl'))).filter((j) => j.replay !== true);
    const committed = jobs.filter((j) => COMMITTED.has(j.status));
    expect(committed.filter((j) => j.kind === 'trace').length).toBeGreaterThan(0);
    const targeted = committed.filter((j) => j.kind === 'targeted');
    expect(targeted.length).toBeGreaterThan(0);
    expect(targeted.some((j) => j.targetReached === true && j.targetStatus === 'sat')).toBe(true);
    // A trace run solves nothing but the wanted branches (the frontier's open ones) its path
    // reaches, each an answer; the first traces, before any frontier, solve nothing at all.
    // Directed runs solve what they were given and pass over the rest.
    const traces = committed.filter((j) => j.kind === 'trace');
    expect(traces.some((j) => j.queries === 0)).toBe(true);
    for (const j of traces) expect(j.answers).toBe(j.queries);
    for (const j of committed) if (j.queries !== undefined) expect(typeof j.answerCpuMs).toBe('number');
    expect(targeted.some((j) => (j.queries ?? 0) > 0 && (j.skipped ?? 0) > 0)).toBe(true);

    expect(new Set(committed.map((j) => j.workId)).size).toBe(committed.length);
    expect(overlappingTargetPairs(jobs)).toEqual([]);
    // One trace per input per campaign (docs/campaign.md "Shared traces"): no input is traced by
    // both coordinators, and the one that did not trace an input the other traced adopted it.
    expect(tracedTwice(committed)).toEqual([]);
    // A pair one coordinator answered (sat/unsat) is never asked again by it.
    for (const name of ['c1', 'c2']) {
      const answered = targeted.filter((j) => j.coordinator === name && (j.targetStatus === 'sat' || j.targetStatus === 'unsat')).map((j) => `${j.input}/${j.targets[0]}`);
      const asked = targeted.filter((j) => j.coordinator === name).map((j) => `${j.input}/${j.targets[0]}`);
      for (const pair of answered) expect(asked.filter((p) => p === pair), pair).toHaveLength(1);
      expect(committed.filter((j) => j.coordinator === name).length, `${name} made progress`).toBeGreaterThan(0);
    }
    // Across the campaign: once a pair was answered (its run's primary target sat/unsat), no job of
    // either coordinator that started later asks it on that input again, as primary or member.
    const reasked = targeted.flatMap((j) =>
      j.targetStatus === 'sat' || j.targetStatus === 'unsat'
        ? targeted.filter((k) => k.input === j.input && k.startMs > j.endMs && k.targets.includes(j.targets[0]!)).map((k) => `${j.coordinator}->${k.coordinator} ${j.input?.slice(0, 8)}/${j.targets[0]}`)
        : [],
    );
    expect(reasked).toEqual([]);
    // Every member a run answered, not only its primary target: the lines say which they were.
    expect(targeted.some((j) => (j.settled?.length ?? 0) > 0)).toBe(true);
    for (const j of targeted) {
      expect([...(j.settled ?? []), ...(j.open ?? [])].every((t) => j.targets.includes(t))).toBe(true);
      if (j.targetStatus === 'unsat') expect(j.settled).toContain(j.targets[0]);
    }
    expect(reaskedAnswers(jobs)).toEqual([]);
    // The answers the coordinators shared are in the target table, as `symfence leases` shows.
    const inspected = await inspectLeaseDirectory(leases, { nowMs: Date.now(), leaseTtlMs: 60_000, ...storeOptions });
    const answers = inspected.find((t) => t.kind === 'target')?.answers;
    expect(answers?.branches).toBeGreaterThan(0);
    expect(answers!.pairs).toBeGreaterThanOrEqual(answers!.branches);
    expect(inspected.find((t) => t.kind === 'target')?.counts).toMatchObject({ leased: 0, corrupt: 0 });
    const counters = ['c1', 'c2'].map((name) => (readJsonIfExists(path.join(out, name, 'stats.json')) as { counters: Record<string, number> }).counters);
    expect(counters.reduce((n, c) => n + c.jobsTargeted!, 0)).toBe(targeted.length);
    expect(counters.reduce((n, c) => n + c.queriesSolved!, 0)).toBeGreaterThan(0);
    expect(counters.reduce((n, c) => n + c.targetsReached!, 0)).toBeGreaterThan(0);
    const stats = ['c1', 'c2'].map((name) => readJsonIfExists(path.join(out, name, 'stats.json')) as { cpuMsPerAnswer: Record<string, number | null>; targetNotReachedByLane: Record<string, { directed: number }> });
    for (const s of stats) expect(s.cpuMsPerAnswer.targeted === null || s.cpuMsPerAnswer.targeted > 0).toBe(true);
    expect(stats.some((s) => (s.targetNotReachedByLane.frontier?.directed ?? 0) > 0)).toBe(true);

    // A third coordinator that knows nothing (no lane state) joins after the two stopped: the
    // answers are in the lease table, so what it asks about pairs they answered is refused at
    // claim, and no job of the three re-asks an answered pair; the traces are in the lease root,
    // so it adopts the inputs they traced instead of tracing them again.
    const late = runCliProcess(args('c3').map((a) => (a === '8s' ? '6s' : a)));
    children.push(late.child);
    const lateExit = await late.exit;
    expect(lateExit.code, lateExit.stderr).toBe(0);
    const all = ['c1', 'c2', 'c3'].flatMap((name) => readJobLog(path.join(out, name, 'jobs.jsonl'))).filter((j) => j.replay !== true && COMMITTED.has(j.status) && j.kind === 'targeted');
    const lateCounters = (readJsonIfExists(path.join(out, 'c3', 'stats.json')) as { counters: Record<string, number> }).counters;
    expect(lateCounters.answeredElsewhere, 'c3 was refused pairs the others answered').toBeGreaterThan(0);
    expect(lateCounters.tracesAdopted, 'c3 adopted the traces the others made').toBeGreaterThan(0);
    expect(lateCounters.traceAdoptFailures).toBe(0);
    const everyJob = ['c1', 'c2', 'c3'].flatMap((name) => readJobLog(path.join(out, name, 'jobs.jsonl'))).filter((j) => j.replay !== true && COMMITTED.has(j.status));
    expect(tracedTwice(everyJob)).toEqual([]);
    const reaskedByAny = all.flatMap((j) =>
      j.targetStatus === 'sat' || j.targetStatus === 'unsat'
        ? all.filter((k) => k.input === j.input && k.startMs > j.endMs && k.targets.includes(j.targets[0]!)).map((k) => `${j.coordinator}->${k.coordinator} ${j.input?.slice(0, 8)}/${j.targets[0]}`)
        : [],
    );
    expect(reaskedByAny).toEqual([]);
    expect(reaskedAnswers(['c1', 'c2', 'c3'].flatMap((name) => readJobLog(path.join(out, name, 'jobs.jsonl'))))).toEqual([]);
  });
});
