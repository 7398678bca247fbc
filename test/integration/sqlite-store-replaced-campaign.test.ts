// `lease-table.sqlite*` deleted while a campaign runs (an operator's `rm`, a tmp cleaner), then a
// second coordinator started on the same lease directory re-creates the databases and claims the
// same work. The first coordinator has lost every lease with its databases: no result of a run
// that ended after the deletion may be committed by it (its beginCommit must be stale), so no
// work is published twice. A run's `endMs` is taken before its beginCommit, so a committed entry
// with `endMs` at or after the deletion is a commit into the deleted database.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SQLITE_FILE } from '../../src/lease/sqlite/sqlite-database.js';
import { readJobLog } from '../../src/telemetry/job-log.js';
import { leaseStoreUnderTest } from '../helpers/lease-stores.js';
import { cleanedAfterEach, COMMITTED_STATUSES, fakeAflOut, REFERENCE_SOLVER, runCliProcess, waitFor } from '../helpers/cli-process.js';

const { dirs, children } = cleanedAfterEach();
const sqlite = leaseStoreUnderTest('sqlite');
const SEEDS = Array.from({ length: 24 }, (_, i) => `AAAAAAAAAAAAAA${String(i).padStart(2, '0')}`);

function runArgs(out: string, leases: string, name: string, extra: string[]): string[] {
  return [
    'run', '--afl-out', out, '--afl-instance', 'main', '--name', name, '--coordinator-id', name,
    '--lease-dir', leases, '--lease-store', 'sqlite', '--workers', '2', '--stats-interval', '200ms', '--json', '--log-level', 'warn',
    '--work-lease-ttl', '3s', '--target-lease-ttl', '3s',
    '--showmap', `${process.execPath} ${REFERENCE_SOLVER} showmap`,
    ...extra,
    '--', process.execPath, REFERENCE_SOLVER, 'builtin:demo', '@@',
  ];
}

const jobsOf = (out: string, name: string) => (existsSync(path.join(out, name, 'jobs.jsonl')) ? readJobLog(path.join(out, name, 'jobs.jsonl')) : []);

describe.skipIf(sqlite.unavailable?.() !== undefined && process.env['CI'] !== 'true')('SQLite databases deleted under a running campaign', () => {
  it('commits nothing into the deleted databases after the deletion, so a second coordinator never publishes a work twice', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-sqlite-rm-'));
    dirs.push(root);
    const out = fakeAflOut(root, SEEDS, 'builtin:demo @@');
    const leases = path.join(root, 'leases');
    const first = runCliProcess(runArgs(out, leases, 'first', ['--duration', '12s']));
    children.push(first.child);
    await waitFor(() => (jobsOf(out, 'first').some((j) => COMMITTED_STATUSES.has(j.status)) ? true : undefined), 60_000, 'the first coordinator to commit a job');

    const deletionMs = Date.now();
    for (const table of ['work', 'targets']) {
      for (const name of readdirSync(path.join(leases, table))) if (name.startsWith(SQLITE_FILE)) rmSync(path.join(leases, table, name));
    }
    const second = runCliProcess(runArgs(out, leases, 'second', ['--duration', '6s']));
    children.push(second.child);
    const [firstExit, secondExit] = await Promise.all([first.exit, second.exit]);
    expect(secondExit.code, secondExit.stderr).toBe(0);

    const firstJobs = jobsOf(out, 'first').filter((j) => j.replay !== true);
    const intoDeleted = firstJobs.filter((j) => COMMITTED_STATUSES.has(j.status) && j.endMs >= deletionMs);
    expect(intoDeleted.map((j) => `${j.workId.slice(0, 12)} ${j.status} +${j.endMs - deletionMs}ms`), firstExit.stderr.slice(-4000)).toEqual([]);
    // Not vacuous: the first coordinator was still running jobs when its databases went.
    expect(firstJobs.filter((j) => j.endMs >= deletionMs).length, 'runs of the first coordinator ending after the deletion').toBeGreaterThan(0);
    // The second coordinator worked on the re-created databases, and nothing it committed was
    // committed by the first one after the deletion.
    const secondCommitted = new Set(jobsOf(out, 'second').filter((j) => COMMITTED_STATUSES.has(j.status)).map((j) => j.workId));
    expect(secondCommitted.size).toBeGreaterThan(0);
    expect(firstExit.stderr).toContain('ERR_LEASE_STORE_REPLACED');
  });
});
