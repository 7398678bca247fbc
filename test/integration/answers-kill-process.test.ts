// A coordinator process SIGKILLed after the commit of a directed result that settled questions, and
// before its group release (held there by the CLI's test hook, which writes a handshake file): its
// answers are in the commit manifest only. A second coordinator process sharing the lease directory
// replays the record after the work TTL and writes them into the shared answers before it
// publishes (docs/leases.md "Shared answers"). A stock-SymCC-like binary through the preload
// library, on the default store (SQLite in the lease directory).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { HOLD_ANSWERED_AFTER_BEGIN_COMMIT_ENV } from '../../src/cli/test-hooks.js';
import { parseCommitManifest } from '../../src/commit/commit-manifest.js';
import { answerRecordId } from '../../src/lease/identity.js';
import { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { readJobLog } from '../../src/telemetry/job-log.js';
import { cleanedAfterEach, fakeAflOut, readJsonIfExists, runCliProcess, waitFor } from '../helpers/cli-process.js';
import { buildFakeSymcc, buildFakeSymccAflTarget, fakeSymccCampaignUnavailable } from '../helpers/fake-symcc.js';

/** CI has all three (cc, the built preload library, Debian's afl++); elsewhere the reason is printed. */
const unavailable = fakeSymccCampaignUnavailable();
if (unavailable !== null && process.env['CI'] === 'true') throw new Error(`the answers kill test cannot run in CI: ${unavailable}`);

const { dirs, children } = cleanedAfterEach();
const SEEDS = ['AAAAxxyy', 'MAAAxyxy', 'MZAAyyxx', 'MZ!Axxxx', 'AAAAyyyy', 'MAAAxxxy'];

describe.skipIf(unavailable !== null)('answers of a coordinator SIGKILLed between its commit and its release', () => {
  it('are written by the coordinator that replays the record, before it publishes', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-answers-kill-'));
    dirs.push(root);
    const fake = buildFakeSymcc();
    const aflTarget = buildFakeSymccAflTarget(root);
    const out = fakeAflOut(root, SEEDS, `${aflTarget} @@`);
    const leases = path.join(root, 'leases');
    const heldFile = path.join(root, 'held.json');
    const args = (name: string, duration: string) => [
      'run', '--afl-out', out, '--afl-instance', 'main', '--name', name, '--coordinator-id', name,
      '--lease-dir', leases, '--workers', '1', '--duration', duration, '--stats-interval', '200ms', '--json', '--log-level', 'warn',
      '--work-lease-ttl', '2s', '--target-lease-ttl', '2s',
      '--', fake.program, '@@',
    ];

    const victim = runCliProcess(args('victim', '60s'), { env: { [HOLD_ANSWERED_AFTER_BEGIN_COMMIT_ENV]: heldFile } });
    children.push(victim.child);
    const held = await waitFor(() => readJsonIfExists(heldFile) as { workId: string } | undefined, 50_000, 'the victim to hold a result that settled a question', () => victim.stderrSoFar());
    victim.child.kill('SIGKILL');
    expect((await victim.exit).signal).toBe('SIGKILL');

    const work = await FencedWorkLeaseTable.open(path.join(leases, 'work'), { coordination: 'single' });
    const targets = await FencedTargetLeaseTable.open(path.join(leases, 'targets'), { coordination: 'single' });
    try {
      const record = (await work.snapshotRecords()).find((e) => e.id === held.workId)!.record;
      expect(record).toMatchObject({ status: 'committing', owner: 'victim' });
      const answers = parseCommitManifest(record.commit, held.workId).answers!;
      expect(answers.settled.length).toBeGreaterThan(0);
      /** The settled members whose answer record lists the held result's input. */
      const shared = async (): Promise<bigint[]> => {
        const records = new Map((await targets.snapshotRecords()).map((e) => [e.id, e.record]));
        return answers.settled.filter((t) => records.get(answerRecordId(t))?.settled?.includes(answers.input) === true);
      };
      // Killed before its release: none of its answers reached the shared table.
      expect(await shared()).toEqual([]);

      const rescuer = runCliProcess(args('rescuer', '8s'));
      children.push(rescuer.child);
      const exit = await rescuer.exit;
      expect(exit.code, exit.stderr).toBe(0);
      expect((await work.snapshotRecords()).find((e) => e.id === held.workId)!.record.status).toBe('done');
      expect(await shared()).toEqual(answers.settled);
      const stats = readJsonIfExists(path.join(out, 'rescuer', 'stats.json')) as { counters: Record<string, number> };
      expect(stats.counters).toMatchObject({ commitReplayFailures: 0 });
      expect(stats.counters['answersRecorded']).toBeGreaterThanOrEqual(1);
      expect(stats.counters['commitsReplayed']).toBeGreaterThanOrEqual(1);
      // The replay is journalled by the rescuer, naming the victim.
      expect(readJobLog(path.join(out, 'rescuer', 'jobs.jsonl')).some((j) => j.replay === true && j.workId === held.workId && j.owner === 'victim')).toBe(true);
    } finally {
      await work.close();
      await targets.close();
    }
  }, 90_000);
});
