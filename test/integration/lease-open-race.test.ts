// Coordinators started at the same moment on a fresh lease directory (a start script launching
// several): every one of them opens the table and they all share one store. Eight processes load
// their modules, then get the `open` message at once (a handshake, no sleeps), so their opens
// really race; each round uses a new directory (and, for etcd, a new key prefix). After each
// round a table opened afterwards sees all eight claims: no process refused the half-created
// store, and none opened a store of its own.
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { targetRecordId } from '../../src/lease/identity.js';
import { builtFile } from '../../src/util/paths.js';
import { describeEachStore } from '../helpers/lease-stores.js';
import { nextMessage } from '../fixtures/lease-race-driver.js';

const PROCESSES = 8;
const ROUNDS = Number(process.env['SYMFENCE_OPEN_RACE_ROUNDS'] ?? 10);

interface Child {
  readonly process: ChildProcess;
  readonly inbox: unknown[];
  waiter?: () => void;
}

function spawnChild(): Child {
  const child: Child = { process: fork(builtFile('test/fixtures/lease-open-race-child.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }), inbox: [] };
  child.process.on('message', (message) => {
    child.inbox.push(message);
    child.waiter?.();
  });
  child.process.on('exit', () => child.waiter?.());
  return child;
}

describeEachStore('coordinators opening a fresh lease directory at once', (store) => {
  let children: Child[] = [];
  const dirs: string[] = [];
  beforeAll(async () => {
    children = Array.from({ length: PROCESSES }, spawnChild);
    for (const child of children) expect(await nextMessage(child, 'loaded', 60_000), 'a child loaded').toBeDefined();
  }, 120_000);
  afterAll(() => {
    for (const child of children) child.process.kill('SIGKILL');
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it(`${PROCESSES} processes opening one new table at once all open the same store`, async () => {
    for (let round = 0; round < ROUNDS; round += 1) {
      const root = path.join(mkdtempSync(path.join(tmpdir(), 'symfence-open-race-')), 'leases', 'targets');
      dirs.push(path.dirname(path.dirname(root)));
      const options = store.fresh();
      children.forEach((child, i) => child.process.send({ type: 'open', round, root, options, target: String(i + 1) }));
      const replies = await Promise.all(children.map((child) => nextMessage<{ ok: boolean; claimed?: boolean; error?: unknown }>(child, 'opened', 60_000)));
      expect(replies.map((r) => (r?.ok ? { ok: true, claimed: r.claimed } : r)), `round ${round}`).toEqual(children.map(() => ({ ok: true, claimed: true })));
      const observer = await FencedTargetLeaseTable.open(root, { ...options, coordination: 'multi' });
      try {
        const ids = (await observer.snapshotRecords()).map((e) => e.id).sort();
        expect(ids, `round ${round}: every claim in the one store`).toEqual(children.map((_, i) => targetRecordId(BigInt(i + 1))).sort());
      } finally {
        await observer.close();
      }
      children.forEach((child) => child.process.send({ type: 'close', round }));
      for (const child of children) expect(await nextMessage(child, 'closed', 60_000)).toBeDefined();
    }
  }, 600_000);
});
