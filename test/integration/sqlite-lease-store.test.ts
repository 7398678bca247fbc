// What only the SQLite store has: the choice of store (auto, network filesystems, a directory
// keeping its store), the database schema check at open, row validation, non-blocking lock waits,
// publication while the write lock is held elsewhere, and read-only inspection.
import { createRequire } from 'node:module';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type BetterSqlite3 from 'better-sqlite3';
import { answerRecordId, targetRecordId } from '../../src/lease/identity.js';
import { inspectLeaseTable } from '../../src/lease/lease-inspect.js';
import { SQLITE_APPLICATION_ID, SQLITE_FILE, SQLITE_SCHEMA_VERSION } from '../../src/lease/sqlite/sqlite-database.js';
import { probeFilesystem } from '../../src/lease/files/fs-probe.js';
import { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { ID_A0, ID_B0, openTarget, openWork, S, tempRoot } from '../helpers/lease-fixtures.js';
import { scanDatabase } from '../../src/lease/sqlite/sqlite-backend.js';
import { workIdOf } from '../../src/lease/identity.js';
import { nodeFsLayer, type FsLayer } from '../../src/fs/fs-layer.js';
import { IoService } from '../../src/io/io-service.js';
import { leaseStoreUnderTest } from '../helpers/lease-stores.js';
import { codeOfAsync as codeOf } from '../helpers/error-code.js';
import { loadNative } from '../../src/native/bindings.js';

const Sqlite = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
const NFS = async () => ({ type: 0x6969 });
const sqlite = leaseStoreUnderTest('sqlite');

describe.skipIf(sqlite.unavailable?.() !== undefined && process.env['CI'] !== 'true')('SQLite lease store', () => {
  it('leaves done rows out of an expiry scan, read by SQLite without decoding them, and returns every other row, a corrupt one included', async () => {
    const root = await tempRoot();
    const table = await openWork(root, { store: 'sqlite' });
    const payload = { path: 'seed', target_branch: 0 };
    const done = workIdOf(payload);
    const claimed = await table.claim(done, payload, { owner: 'master', nowMs: S });
    if (!claimed.ok) throw new Error('claim refused');
    const { token } = claimed;
    await table.beginCommit(done, token, { nowMs: S });
    expect(await table.complete(done, token, { nowMs: S })).toBe(true);
    const leasedPayload = { path: 'other', target_branch: 0 };
    const leased = workIdOf(leasedPayload);
    expect((await table.claim(leased, leasedPayload, { owner: 'master', nowMs: S })).ok).toBe(true);
    await table.close();
    const file = path.join(root, SQLITE_FILE);
    const db = new Sqlite(file);
    try {
      // Rows that say done but that only a full decode can judge: a blob, and text that is not JSON.
      db.prepare('INSERT INTO lease_records (id, record, group_id) VALUES (?, ?, NULL)').run(ID_A0, Buffer.from('{"status":"done"}'));
      db.prepare('INSERT INTO lease_records (id, record, group_id) VALUES (?, ?, NULL)').run(ID_B0, '{"status":"done",');
      const every = scanDatabase(db, file, 'work').map((e) => [e.id, e.state]);
      const live = scanDatabase(db, file, 'work', { skipDone: true }).map((e) => [e.id, e.state]);
      expect(every).toEqual(expect.arrayContaining([[done, 'valid'], [leased, 'valid'], [ID_A0, 'corrupt'], [ID_B0, 'corrupt']]));
      expect(every).toHaveLength(4);
      expect(live).toEqual(expect.arrayContaining([[leased, 'valid'], [ID_A0, 'corrupt'], [ID_B0, 'corrupt']]));
      expect(live).toHaveLength(3);
    } finally {
      db.close();
    }
  });

  it('reads a batch\'s rows a chunk of ids per statement, past a chunk and across both tables, the answer table\'s row first', async () => {
    const root = await tempRoot();
    const writer = await openTarget(root, { store: 'sqlite' });
    const input = 'c'.repeat(64);
    // 100 targets: 1..40 held by another coordinator, 41..70 answered on the input, 71..100 free.
    const held = await writer.claimGroup(Array.from({ length: 40 }, (_, i) => BigInt(i + 1)), {}, { owner: 'holder', nowMs: S });
    if (!held.ok) throw new Error('claim refused');
    const answered = Array.from({ length: 30 }, (_, i) => BigInt(i + 41));
    expect(await writer.recordAnswers({ input, settled: answered }, { owner: 'writer', token: 'tok', worker: 0 }, S)).toEqual({ ok: true });
    await writer.close();
    // A copy of an answer record under the same id in the lease table (as a table of schema 2 left
    // them): the answer table's row is the record.
    const db = new Sqlite(path.join(root, SQLITE_FILE));
    try {
      db.prepare('INSERT INTO lease_records (id, record, group_id) VALUES (?, ?, NULL)').run(answerRecordId(41n), '{"not":"a record"}');
    } finally {
      db.close();
    }
    // A fresh handle knows no row: one batch of 100 claims reads 100 lease and 100 answer rows.
    const reader = await openTarget(root, { store: 'sqlite' });
    try {
      const targets = Array.from({ length: 100 }, (_, i) => BigInt(i + 1));
      const result = await reader.executeBatch(targets.map((t) => reader.planClaimGroup([t], {}, { owner: 'reader', nowMs: 2 * S, input })));
      const reasons = result.outcomes.map((o) => (o.ok ? ((o.value as { ok: boolean; reason?: string }).ok ? 'ok' : (o.value as { reason: string }).reason) : 'error'));
      expect(reasons).toEqual([...Array(40).fill('conflict'), ...Array(30).fill('answered'), ...Array(30).fill('ok')]);
    } finally {
      await reader.close();
    }
  });

  it('is what auto gives a new lease directory on a local filesystem, recorded as schema 2 in lease-table.json', async () => {
    const root = path.join(await tempRoot(), 'targets');
    const table = await FencedTargetLeaseTable.open(root, { coordination: 'single' });
    expect(table.store).toBe('sqlite');
    expect(JSON.parse(await readFile(path.join(root, 'lease-table.json'), 'utf8'))).toEqual({ kind: 'target', schema: 2, shardCount: 1, store: 'sqlite' });
    expect((await readdir(root)).sort()).toContain(SQLITE_FILE);
    await table.close();
  });

  it('answers a record path asked of a SQLite table with ERR_LEASE_STORE_UNSUPPORTED, naming the store', async () => {
    const table = await FencedWorkLeaseTable.open(path.join(await tempRoot(), 'work'), { coordination: 'single', store: 'sqlite' });
    for (const ask of [() => table.recordPath(ID_A0), () => table.lockPath(ID_A0), () => table.shardDirOf(ID_A0)]) {
      expect(() => ask()).toThrow(expect.objectContaining({ code: 'ERR_LEASE_STORE_UNSUPPORTED', details: { store: 'sqlite' } }));
    }
    await table.close();
  });

  it('gives a new lease directory on a network filesystem the file store under auto, and refuses an explicit sqlite there before writing anything', async () => {
    const parent = await tempRoot();
    const auto = await FencedWorkLeaseTable.open(path.join(parent, 'auto'), { coordination: 'single', shardCount: 4 }, { statFilesystem: NFS });
    expect(auto.store).toBe('files');
    const refused = path.join(parent, 'explicit');
    const error = await FencedWorkLeaseTable.open(refused, { coordination: 'single', store: 'sqlite' }, { statFilesystem: NFS }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ERR_LEASE_STORE_UNSUPPORTED', details: { store: 'sqlite', filesystem: 'nfs', fsType: 0x6969 } });
    expect((error as Error).message).toContain('shared memory');
    await expect(stat(refused)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('keeps the store a lease directory was created with under auto, and refuses an explicit other store naming the recorded one', async () => {
    const parent = await tempRoot();
    const files = path.join(parent, 'files');
    await (await openWork(files, { coordination: 'single' })).close();
    expect((await FencedWorkLeaseTable.open(files, { coordination: 'single', shardCount: 4 })).store).toBe('files');
    const sqliteRoot = path.join(parent, 'sqlite');
    await (await FencedWorkLeaseTable.open(sqliteRoot, { coordination: 'single', store: 'sqlite' })).close();
    // A network filesystem report does not move an existing directory off its recorded store.
    expect((await FencedWorkLeaseTable.open(sqliteRoot, { coordination: 'single' })).store).toBe('sqlite');
    for (const [root, store, recorded] of [[files, 'sqlite', 'files'], [sqliteRoot, 'files', 'sqlite']] as const) {
      const error = await FencedWorkLeaseTable.open(root, { coordination: 'single', store, shardCount: 4 }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'ERR_INVALID_OPTION', details: { option: 'store' } });
      expect((error as Error).message).toContain(`expected ${recorded}`);
    }
  });

  it('refuses a database of another application, of a newer schema, or that is no database at all', async () => {
    const cases: [string, (file: string) => Promise<void>, string][] = [
      ['foreign', async (file) => setPragmas(file, 0x12345678, 1), 'another application'],
      ['newer', async (file) => setPragmas(file, SQLITE_APPLICATION_ID, SQLITE_SCHEMA_VERSION + 1), 'newer'],
      ['garbage', async (file) => writeFile(file, 'this is not a database, just bytes long enough to look like a header ....................................'), 'not a SQLite database'],
    ];
    for (const [label, damage, reason] of cases) {
      const root = await tempRoot();
      await (await openTarget(root, { store: 'sqlite' })).close();
      await damage(path.join(root, SQLITE_FILE));
      const error = await openTarget(root, { store: 'sqlite' }).catch((e: unknown) => e);
      expect(error, label).toMatchObject({ code: 'ERR_LEASE_STORE_SCHEMA' });
      expect((error as Error).message, label).toContain(reason);
    }
  });

  it('fails closed on corrupt rows: a foreign id, a record of the other kind, and bytes that do not parse are reported and never overwritten', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    const id = targetRecordId(5n);
    const otherKind = Buffer.from(JSON.stringify({ schema: 1, kind: 'work', id, status: 'leased' }));
    await sqlite.writeRaw(root, id, otherKind);
    await sqlite.writeRaw(root, 'not-a-record-id', '{}');
    await sqlite.writeRaw(root, targetRecordId(6n), '{"schema":');
    expect(await table.claimGroup([5n, 7n], {}, { owner: 'a', nowMs: 10 * S })).toMatchObject({ ok: false, reason: 'corrupt', corrupt: [{ target: 5n }] });
    expect(await sqlite.readRaw(root, id)).toEqual(otherKind);
    expect(await sqlite.readRaw(root, targetRecordId(7n))).toBeNull();
    const inspection = await inspectLeaseTable(root, { nowMs: 10 * S, leaseTtlMs: 10 * S });
    expect(inspection.corrupt.map((c) => [c.id, c.path.endsWith(`#${c.id ?? 'not-a-record-id'}`), c.reason.length > 0])).toEqual(
      [[targetRecordId(6n), true, true], [id, true, true], [null, true, true]].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );
    await expect(table.snapshotRecords()).rejects.toMatchObject({ code: 'ERR_LEASE_CORRUPT' });
    await table.close();
  });

  it('waits for a held database write lock without blocking the thread, then fails closed with ERR_LOCK_TIMEOUT at the monotonic deadline', async () => {
    const root = await tempRoot();
    let fakeNowMs = 0;
    const table = await FencedTargetLeaseTable.open(root, { store: 'sqlite', coordination: 'single', lockAcquireTimeoutMs: 5_000 }, { monotonicNowMs: () => fakeNowMs });
    const release = await sqlite.holdLock!(root, targetRecordId(1n));
    let turns = 0;
    const claim = table.claimGroup([1n], {}, { owner: 'a', nowMs: 10 * S }).then(
      () => 'granted',
      (e: unknown) => (e as { code?: string }).code,
    );
    // The event loop keeps turning while the claim waits: the clock is advanced from a timer.
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        turns += 1;
        if (turns === 5) {
          fakeNowMs = 5_000;
          clearInterval(timer);
          resolve();
        }
      }, 1);
    });
    expect(await claim).toBe('ERR_LOCK_TIMEOUT');
    expect(turns).toBe(5);
    await release();
    expect((await table.claimGroup([1n], {}, { owner: 'a', nowMs: 10 * S })).ok).toBe(true);
    await table.close();
  });

  it('lets symfence leases read a table without changing its metadata, its database file or any row', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { store: 'sqlite' });
    expect((await table.claimGroup([1n, 2n], {}, { owner: 'a', nowMs: 10 * S })).ok).toBe(true);
    await table.close();
    // A reader of a WAL database may create SQLite's empty -wal and shared-memory index files when
    // no writer has them open; the database itself and the metadata stay byte for byte.
    const snapshot = async () => Promise.all(['lease-table.json', SQLITE_FILE].map(async (name) => [name, (await readFile(path.join(root, name))).toString('base64')]));
    const before = await snapshot();
    const inspection = await inspectLeaseTable(root, { nowMs: 10 * S, leaseTtlMs: 10 * S });
    expect(inspection).toMatchObject({ store: 'sqlite', kind: 'target', counts: { leased: 2, corrupt: 0 } });
    expect(await snapshot()).toEqual(before);
  });

  it('refuses a foreign database without an application_id before changing anything in it (its journal mode stays)', async () => {
    const root = await tempRoot();
    await (await openTarget(root, { store: 'sqlite' })).close();
    const file = path.join(root, SQLITE_FILE);
    await writeFile(file, '');
    const foreign = new Sqlite(file);
    foreign.exec('CREATE TABLE notes (text TEXT)');
    foreign.close();
    const header = async () => (await readFile(file)).subarray(18, 20).toString('hex');
    const before = await header();
    await expect(openTarget(root, { store: 'sqlite' })).rejects.toMatchObject({ code: 'ERR_LEASE_STORE_SCHEMA' });
    // Bytes 18-19 of the header are the file format versions: 01 01 rollback journal, 02 02 WAL.
    expect(await header()).toBe(before);
    expect(before).toBe('0101');
  });

  it('publishes a committed result while another connection holds the write lock: only the finish waits for it, and another replayer publishes nothing', async () => {
    const root = await tempRoot();
    const first = await openWork(root, { store: 'sqlite', coordination: 'multi', lockAcquireTimeoutMs: 60_000 });
    const second = await openWork(root, { store: 'sqlite', coordination: 'multi', lockAcquireTimeoutMs: 60_000 });
    const id = 'f'.repeat(64);
    const claim = await first.claim(id, { p: 1 }, { owner: 'a', nowMs: 10 * S });
    if (!claim.ok) throw new Error('setup');
    expect((await first.beginCommit(id, claim.token, { nowMs: 10 * S, commit: { files: [] } })).ok).toBe(true);
    const release = await sqlite.holdLock!(root, id);
    const events: string[] = [];
    let published!: () => void;
    const publishedWhileHeld = new Promise<void>((resolve) => (published = resolve));
    // The owner's own publication, just after its beginCommit.
    const replay = first.replayCommitOnce(id, claim.token, async () => {
      events.push('a publishes');
      published();
    }, { nowMs: 11 * S });
    await publishedWhileHeld;
    // A replayer finds the owner renewed within a TTL and leaves the result to it (no lock needed to say so).
    expect(await second.replayCommitOnce(id, claim.token, () => void events.push('b publishes'), { nowMs: 11 * S, minIdleMs: 10 * S })).toBe('live');
    events.push('lock released');
    await release();
    expect(await replay).toBe('completed');
    expect(events).toEqual(['a publishes', 'lock released']);
    expect((await second.snapshotRecords())[0]!.record).toMatchObject({ status: 'done', completedMs: 11 * S });
    await first.close();
    await second.close();
  });

  it('answers a publishCommitted request of the I/O service with its files published while another connection holds the write lock', async () => {
    const root = await tempRoot();
    const work = await openWork(path.join(root, 'work'), { store: 'sqlite', coordination: 'multi', lockAcquireTimeoutMs: 60_000 });
    const claim = await work.claim(ID_A0, { p: 1 }, { owner: 'me', nowMs: 1 * S });
    if (!claim.ok) throw new Error('setup');
    expect((await work.beginCommit(ID_A0, claim.token, { nowMs: 2 * S, commit: { files: [] } })).ok).toBe(true);
    const queue = path.join(root, 'out', 'queue');
    let renamed!: () => void;
    const inQueue = new Promise<void>((resolve) => (renamed = resolve));
    const fsLayer: FsLayer = Object.create(nodeFsLayer, {
      rename: {
        value: async (from: string, to: string) => {
          await nodeFsLayer.rename(from, to);
          if (path.dirname(to) === queue) renamed();
        },
      },
    });
    const service = await IoService.start({ coordinatorId: 'me', work, fsLayer, options: { fileBarrier: 'fsync' } }, 0);
    await service.submit({ kind: 'ensureDir', dir: queue });
    const release = await sqlite.holdLock!(path.join(root, 'work'), ID_A0);
    const files = [{ name: 'id:000000,src:000001', bytes: Buffer.from('finding') }];
    const answer = service.submit({ kind: 'publishCommitted', workId: ID_A0, token: claim.token, publications: [{ dir: queue, files }], nowMs: 3 * S });
    await inQueue;
    expect(await readdir(queue)).toEqual([files[0]!.name]);
    expect((await work.snapshotRecords())[0]!.record.status).toBe('committing');
    await release();
    expect(await answer).toBe('completed');
    expect((await work.snapshotRecords())[0]!.record.status).toBe('done');
    await service.close();
    await work.close();
  });

  it.skipIf(loadNative() === null)('has the filesystem probe say which store auto picks there, and why', async () => {
    const dir = await tempRoot();
    expect((await probeFilesystem(dir)).filesystem).toMatchObject({ network: false, autoStore: 'sqlite' });
    const nfs = (await probeFilesystem(dir, { statFilesystem: NFS })).filesystem;
    expect(nfs).toMatchObject({ network: true, name: 'nfs', autoStore: 'files' });
    expect(nfs.autoReason).toContain('shared memory');
  });
});

function setPragmas(file: string, applicationId: number, userVersion: number): void {
  const db = new Sqlite(file);
  try {
    db.pragma(`application_id = ${applicationId}`);
    db.pragma(`user_version = ${userVersion}`);
  } finally {
    db.close();
  }
}
