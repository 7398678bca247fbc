// A SQLite table whose database files are deleted or replaced under it (an operator's `rm`, a tmp
// cleaner) loses every lease: its heartbeats answer `stale`, its claims are refused with
// ERR_LEASE_STORE_REPLACED, its scans too, and it never writes into the file nobody else opens.
// The other coordinator is a real second process (a connection in this process would share the
// old WAL index instead of starting a new one); it opens the table after the deletion and claims
// the same group, which it may: the first table's leases went with its files.
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SQLITE_FILE } from '../../src/lease/sqlite/sqlite-database.js';
import { builtFile } from '../../src/util/paths.js';
import { nextMessage } from '../fixtures/lease-race-driver.js';
import { openTarget, openWork, S, tempRoot } from '../helpers/lease-fixtures.js';
import { leaseStoreUnderTest } from '../helpers/lease-stores.js';
import { codeOfAsync } from '../helpers/error-code.js';
import { Sqlite } from '../helpers/sqlite-tables.js';

const sqlite = leaseStoreUnderTest('sqlite');
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** Another coordinator process: opens the table at `root` and claims the one-target group `target`. */
async function claimFromAnotherProcess(root: string, target: bigint): Promise<{ ok: boolean; claimed?: boolean; error?: { code: string } }> {
  const inbox: unknown[] = [];
  let wake: (() => void) | undefined;
  const process_ = fork(builtFile('test/fixtures/lease-open-race-child.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push(process_);
  const child = {
    process: process_,
    inbox,
    get waiter() {
      return wake;
    },
    set waiter(w) {
      wake = w;
    },
  };
  process_.on('message', (m) => {
    inbox.push(m);
    wake?.();
  });
  process_.on('exit', () => wake?.());
  if (!(await nextMessage(child, 'loaded', 60_000))) throw new Error('child did not load');
  process_.send({ type: 'open', round: 0, root, options: { store: 'sqlite' }, target: String(target) });
  const reply = await nextMessage<{ ok: boolean; claimed?: boolean; error?: { code: string } }>(child, 'opened', 60_000);
  if (!reply) throw new Error('child did not answer');
  return reply;
}

const files = (root: string, suffixes: readonly string[]): string[] => suffixes.map((s) => path.join(root, `${SQLITE_FILE}${s}`));

describe.skipIf(sqlite.unavailable?.() !== undefined && process.env['CI'] !== 'true')('SQLite identity: the database a table has open is the one at its path', () => {
  it('loses every lease when -wal and -shm are deleted while it holds a group: heartbeats stale, claims refused, the other process holds the group alone', async () => {
    const root = await tempRoot();
    const holder = await openTarget(root, { store: 'sqlite', coordination: 'multi' });
    const claim = await holder.claimGroup([1n, 2n], {}, { owner: 'holder', nowMs: 10 * S });
    if (!claim.ok) throw new Error('claim failed');
    expect(await holder.heartbeatGroup([1n, 2n], claim.token, { nowMs: 11 * S })).toEqual({ ok: true });
    for (const file of files(root, ['-wal', '-shm'])) rmSync(file);

    expect(await holder.heartbeatGroup([1n, 2n], claim.token, { nowMs: 12 * S })).toMatchObject({ ok: false, reason: 'stale' });
    const other = await claimFromAnotherProcess(root, 1n);
    expect(other).toMatchObject({ ok: true });
    // Never two holders: whatever the other process got, the first table holds nothing any more.
    expect(await holder.heartbeatGroup([1n, 2n], claim.token, { nowMs: 13 * S })).toMatchObject({ ok: false, reason: 'stale' });
    expect(await codeOfAsync(holder.claimGroup([3n], {}, { owner: 'holder', nowMs: 14 * S }))).toBe('ERR_LEASE_STORE_REPLACED');
    expect(await codeOfAsync(holder.snapshotRecords())).toBe('ERR_LEASE_STORE_REPLACED');
    await holder.close();
  });

  it('loses every lease when lease-table.sqlite* is deleted under it, and writes nothing into the deleted file', async () => {
    const root = await tempRoot();
    const holder = await openWork(root, { store: 'sqlite', coordination: 'multi' });
    const claim = await holder.claim('0'.repeat(64), { seed: 1 }, { owner: 'holder', nowMs: 10 * S });
    if (!claim.ok) throw new Error('claim failed');
    // Moved away rather than unlinked, so that what the holder writes into them afterwards can be
    // read back.
    const moved = path.join(await tempRoot(), 'moved');
    for (const [i, file] of files(root, ['', '-wal', '-shm']).entries()) renameSync(file, `${moved}${['', '-wal', '-shm'][i]}`);

    const renewed = await holder.heartbeatMany([['0'.repeat(64), claim.token]], { nowMs: 12 * S });
    expect(renewed.lost).toEqual(['0'.repeat(64)]);
    expect(await holder.beginCommit('0'.repeat(64), claim.token, { nowMs: 13 * S, commit: { items: [] } })).toMatchObject({ ok: false, reason: 'stale' });
    expect(await codeOfAsync(holder.claim('1'.repeat(64), { seed: 2 }, { owner: 'holder', nowMs: 14 * S }))).toBe('ERR_LEASE_STORE_REPLACED');
    expect(existsSync(path.join(root, SQLITE_FILE))).toBe(false);
    await holder.close();
    const old = new Sqlite(moved, { readonly: true });
    try {
      const rows = old.prepare('SELECT record FROM lease_records').all() as { record: string }[];
      expect(rows).toHaveLength(1);
      expect(String(rows[0]!.record)).toContain('"updatedMs":10000');
    } finally {
      old.close();
    }
  });

  it('keeps its leases when the paths still name its files (a checkpoint, other connections opening and closing)', async () => {
    const root = await tempRoot();
    const holder = await openTarget(root, { store: 'sqlite', coordination: 'multi' });
    const claim = await holder.claimGroup([1n], {}, { owner: 'holder', nowMs: 10 * S });
    if (!claim.ok) throw new Error('claim failed');
    const other = new Sqlite(path.join(root, SQLITE_FILE));
    other.pragma('wal_checkpoint(TRUNCATE)');
    other.close();
    expect(await claimFromAnotherProcess(root, 2n)).toMatchObject({ ok: true, claimed: true });
    expect(await holder.heartbeatGroup([1n], claim.token, { nowMs: 11 * S })).toEqual({ ok: true });
    expect((await holder.snapshotRecords()).map((e) => e.record.owner).sort()).toEqual(['holder', expect.stringMatching(/^open-race-/)]);
    await holder.close();
  });
});
