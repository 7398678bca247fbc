import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { inspectLeaseDirectory } from '../../src/lease/lease-inspect.js';
import { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { readJobLog, type JobLogEntry } from '../../src/telemetry/job-log.js';
import { overlappingTargetPairs } from '../helpers/job-overlap.js';
import { campaignDiagnosis, cleanedAfterEach, COMMITTED_STATUSES, fakeAflOut, readJsonIfExists, REFERENCE_SOLVER, runCliProcess, waitFor, type CliRun } from '../helpers/cli-process.js';

/**
 * Campaign chaos: three coordinators share one AFL output directory and one lease directory;
 * one of them is killed with SIGKILL while it holds a running job, restarted, and so on, seven
 * times per store. Afterwards the campaign must show what the lease tables promise despite the
 * kills: no exact work committed twice, no two solver runs overlapping on a target, no corrupt
 * or live record, and no solver process outliving its coordinator.
 */

const { dirs, children } = cleanedAfterEach();

const NAMES = ['c1', 'c2', 'c3'] as const;
const KILLS = 7;
// Enough seeds that every coordinator still has work at the seventh kill: with the answers shared
// in the lease table no coordinator re-asks what another answered, and 12 seeds once ran dry.
const SEEDS = Array.from({ length: 48 }, (_, i) => `AAAAAAAAAAAAAA${String(i).padStart(2, '0')}`);
const TTL = ['--work-lease-ttl', '2s', '--target-lease-ttl', '2s'];

function runArgs(out: string, leases: string, store: string, name: string, duration: string): string[] {
  return [
    'run', '--afl-out', out, '--afl-instance', 'main', '--name', name, '--coordinator-id', name,
    '--lease-dir', leases, '--lease-store', store, '--workers', '1', '--stats-interval', '100ms', '--json', '--log-level', 'warn',
    ...TTL, '--duration', duration,
    '--showmap', `${process.execPath} ${REFERENCE_SOLVER} showmap`,
    '--', process.execPath, REFERENCE_SOLVER, 'builtin:demo', '@@',
  ];
}

function jobsStarted(out: string, name: string): number {
  const stats = readJsonIfExists(path.join(out, name, 'stats.json')) as { counters?: { jobsStarted?: number } } | undefined;
  return stats?.counters?.jobsStarted ?? 0;
}

/** Processes whose command line names `marker` (the campaign's own temporary directory). */
function processesMentioning(marker: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue; // the process exited while the directory was listed: it is not a survivor
    }
    if (cmdline.includes(marker)) found.push(`${pid}: ${cmdline.replaceAll('\0', ' ')}`);
  }
  return found;
}

describe.each(['files', 'sqlite'])('a campaign of three coordinators on the %s store, one SIGKILLed mid-job seven times', (store) => {
  it('commits no work twice, overlaps no target, leaves no corrupt or live record and no solver behind', async () => {
    const root = mkdtempSync(path.join(tmpdir(), `symfence-chaos-${store}-`));
    dirs.push(root);
    const out = fakeAflOut(root, SEEDS, 'builtin:demo @@');
    const leases = path.join(root, 'leases');
    // Every solver run takes a while, so a kill lands while the victim holds a running job.
    const env = { SYMFENCE_REFSOLVER_DELAY_MS: '400' };
    const start = (name: string, duration: string): CliRun => {
      const run = runCliProcess(runArgs(out, leases, store, name, duration), { env });
      children.push(run.child);
      return run;
    };
    // The first coordinator creates the lease directory before the others open it.
    const running = new Map<string, CliRun>([['c1', start('c1', '40s')]]);
    await waitFor(() => (jobsStarted(out, 'c1') >= 1 ? true : undefined), 60_000, 'c1 to start a job');
    for (const name of NAMES.slice(1)) running.set(name, start(name, '40s'));

    const killed: string[] = [];
    for (let k = 0; k < KILLS; k++) {
      const victim = NAMES[k % NAMES.length]!;
      // Handshake: the victim has started a job since it was (re)started, so it is killed holding one.
      const before = jobsStarted(out, victim);
      await waitFor(() => (jobsStarted(out, victim) > before ? true : undefined), 60_000, `${victim} to start a job (kill ${k + 1})`, () => NAMES.map((n) => `${n}:\n${campaignDiagnosis(path.join(out, n), running.get(n)!.stderrSoFar())}`).join('\n'));
      const run = running.get(victim)!;
      run.child.kill('SIGKILL');
      const exit = await run.exit;
      expect(exit.signal).toBe('SIGKILL');
      killed.push(victim);
      running.set(victim, start(victim, '12s'));
    }
    const exits = await Promise.all([...running.values()].map((r) => r.exit));
    for (const e of exits) expect(e.code, e.stderr).toBe(0);
    expect(killed).toHaveLength(KILLS);

    const jobs: JobLogEntry[] = NAMES.flatMap((name) => readJobLog(path.join(out, name, 'jobs.jsonl')));
    const committed = jobs.filter((j) => COMMITTED_STATUSES.has(j.status));
    expect(committed.length).toBeGreaterThan(KILLS);
    const twice = committed.map((j) => j.workId).filter((id, i, all) => all.indexOf(id) !== i);
    expect(twice, 'work committed twice').toEqual([]);
    expect(overlappingTargetPairs(jobs), 'solver runs overlapping on a target').toEqual([]);

    // Past every TTL: nothing is committing and no target is held. A work record still leased is
    // work a coordinator took over from a killed one and had not finished when it stopped: left to
    // expire for the next takeover scan (docs/campaign.md "Lifecycle of a job"), never live.
    const tables = await inspectLeaseDirectory(leases, { nowMs: Date.now() + 10_000, leaseTtlMs: 2_000 });
    expect(tables.map((t) => t.kind).sort()).toEqual(['target', 'work']);
    for (const table of tables) {
      expect(table.store).toBe(store);
      expect(table.corrupt, `${table.kind} table`).toEqual([]);
      expect(table.counts, `${table.kind} table`).toMatchObject({ committing: 0, corrupt: 0 });
      expect(table.counts.leased, `${table.kind} table: leased records that are not expired`).toBe(table.counts.expired);
    }
    expect(tables.find((t) => t.kind === 'target')!.counts.leased).toBe(0);
    // ...and each of those was taken over (a killed coordinator's own work is finished or taken over).
    const work = await FencedWorkLeaseTable.open(path.join(leases, 'work'), { coordination: 'single', store });
    try {
      const leftover = (await work.snapshotRecords()).filter((e) => e.record.status === 'leased');
      for (const entry of leftover) expect(entry.record.steals, `leftover work ${entry.id.slice(0, 8)} was taken over`).toBeGreaterThanOrEqual(1);
    } finally {
      await work.close();
    }
    expect(tables.find((t) => t.kind === 'work')!.counts.done).toBeGreaterThanOrEqual(new Set(committed.map((j) => j.workId)).size);
    expect(processesMentioning(root), 'processes outliving the campaign').toEqual([]);
  }, 600_000);
});
