// A coordinator process SIGKILLed right after beginCommit (held there by the CLI's test hook, which
// writes a handshake file) leaves a committing record with a manifest and staged findings; a second
// coordinator process sharing the lease directory replays it after the work TTL: every finding is
// in its queue exactly once, none in the dead one's, the record is done, the staged files are gone.
// On every lease store: the kill lands inside the commit (the record is committing, nothing is
// published yet) whichever store holds the record.
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { parseCommitManifest, parseStagedName, STAGED_DIR } from '../../src/commit/commit-manifest.js';
import { HOLD_AFTER_BEGIN_COMMIT_ENV } from '../../src/cli/test-hooks.js';
import { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { Etcd3 } from 'etcd3';
import { describeEachStore } from '../helpers/lease-stores.js';
import { cleanedAfterEach, fakeAflOut, readJsonIfExists, REFERENCE_SOLVER, runCliProcess, waitFor } from '../helpers/cli-process.js';

const { dirs, children } = cleanedAfterEach();

const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');
const TTL = ['--work-lease-ttl', '2s', '--target-lease-ttl', '2s'];

/** The CLI flags selecting the store of table options `options` (as the conformance suite starts it). */
function storeFlags(options: Record<string, unknown>): string[] {
  return [
    '--lease-store', String(options['store']),
    ...(options['etcdEndpoints'] !== undefined ? ['--etcd-endpoints', String(options['etcdEndpoints'])] : []),
    ...(options['etcdPrefix'] !== undefined ? ['--etcd-prefix', String(options['etcdPrefix'])] : []),
  ];
}

function runArgs(out: string, leases: string, name: string, store: string[], extra: string[]): string[] {
  return [
    'run', '--afl-out', out, '--afl-instance', 'main', '--name', name, '--coordinator-id', name,
    '--lease-dir', leases, ...store, '--workers', '1', '--stats-interval', '200ms', '--json', '--log-level', 'warn',
    '--showmap', `${process.execPath} ${REFERENCE_SOLVER} showmap`,
    ...TTL, ...extra,
    '--', process.execPath, REFERENCE_SOLVER, 'builtin:demo', '@@',
  ];
}

/** SHA-256 of every `id:` entry in `dir`. */
function digestsIn(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((n) => n.startsWith('id:')).map((n) => sha(readFileSync(path.join(dir, n))));
}

/**
 * The staged files of the lease directory `leases`, by name: files under `<leases>/staged/`, or
 * with the etcd store the keys under `<etcdPrefix>/staged/` (where a survivor on another host
 * finds them).
 */
async function stagedFiles(leases: string, options: Record<string, unknown>): Promise<Map<string, Buffer>> {
  if (options['store'] !== 'etcd') {
    const dir = path.join(leases, STAGED_DIR);
    return new Map(existsSync(dir) ? readdirSync(dir).map((name) => [name, readFileSync(path.join(dir, name))]) : []);
  }
  const client = new Etcd3({ hosts: String(options['etcdEndpoints']).split(',').map((e) => `http://${e.replace(/^https?:\/\//, '')}`) });
  try {
    const base = `${String(options['etcdPrefix'])}/staged/`;
    const all = await client.getAll().prefix(base).buffers();
    return new Map(Object.entries(all).map(([key, value]) => [key.slice(base.length), value]));
  } finally {
    client.close();
  }
}

describeEachStore('commit recovery across processes', (store) => {
  it('replays the result of a coordinator SIGKILLed right after beginCommit in a second coordinator, exactly once', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-commit-kill-'));
    dirs.push(root);
    const out = fakeAflOut(root, ['AAAAAAAAAAAAAAA0', 'AAAAAAAAAAAAAAA1'], 'builtin:demo @@');
    const leases = path.join(root, 'leases');
    const heldFile = path.join(root, 'held.json');
    const flags = storeFlags(store.options());

    const victim = runCliProcess(runArgs(out, leases, 'victim', flags, ['--duration', '60s']), { env: { [HOLD_AFTER_BEGIN_COMMIT_ENV]: heldFile } });
    children.push(victim.child);
    const held = await waitFor(() => readJsonIfExists(heldFile) as { workId: string } | undefined, 60_000, 'the victim to hold after beginCommit');
    victim.child.kill('SIGKILL');
    const victimExit = await victim.exit;
    expect(victimExit.signal).toBe('SIGKILL');

        const table = await FencedWorkLeaseTable.open(path.join(leases, 'work'), { coordination: 'single', ...store.options() });
    const records = await table.snapshotRecords();
    const before = records.find((e) => e.id === held.workId)!.record;
    // The held job, and any other the victim's slot was finishing at the kill (a slot takes up to
    // two finishing jobs, so a second one may have passed its own beginCommit meanwhile).
    const committing = records.filter((e) => e.record.status === 'committing').map((e) => e.id);
    expect(committing).toContain(held.workId);
    expect(before).toMatchObject({ status: 'committing', owner: 'victim' });
    const manifest = parseCommitManifest(before.commit, held.workId);
    expect(manifest.items.length).toBeGreaterThan(0);
    const staged = await stagedFiles(leases, store.options());
    for (const item of manifest.items) expect(sha(staged.get(path.basename(item.path)) ?? Buffer.alloc(0)), item.path).toBe(item.sha256);
    expect(digestsIn(path.join(out, 'victim', 'queue'))).toEqual([]);

    const rescuer = runCliProcess(runArgs(out, leases, 'rescuer', flags, ['--duration', '8s']));
    children.push(rescuer.child);
    const exit = await rescuer.exit;
    expect(exit.code, exit.stderr).toBe(0);

    const after = (await table.snapshotRecords()).find((e) => e.id === held.workId)!.record;
    expect(after.status).toBe('done');
    for (const item of manifest.items) {
      const inRescuer = digestsIn(path.join(out, 'rescuer', item.kind)).filter((d) => d === item.sha256);
      expect(inRescuer, `${item.kind} ${item.sha256.slice(0, 8)} in the rescuer's ${item.kind}/`).toHaveLength(1);
      expect(digestsIn(path.join(out, 'victim', item.kind))).not.toContain(item.sha256);
    }
    const stats = readJsonIfExists(path.join(out, 'rescuer', 'stats.json')) as { counters: Record<string, number> };
    expect(stats.counters).toMatchObject({ commitsReplayed: committing.length, commitReplayFailures: 0 });
    const done = new Set((await table.snapshotRecords()).filter((e) => e.record.status === 'done').map((e) => e.id));
    for (const id of committing) expect(done.has(id), `committing ${id.slice(0, 8)} replayed to done`).toBe(true);
    expect([...(await stagedFiles(leases, store.options())).keys()].filter((n) => parseStagedName(n)?.workId === held.workId)).toEqual([]);
    await table.close();
  });
});
