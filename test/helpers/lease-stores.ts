/**
 * The lease stores the conformance suite runs against. A scenario written once with
 * `describeEachStore` runs against every store here; a store that needs a server starts it once per
 * test file in `start` and stops it in `stop`.
 *
 * What a scenario needs to do to a store from outside the table API — write a corrupt record,
 * read the stored bytes back, hold a record's lock from another connection — goes through the
 * store's hooks below, so a scenario never asks which store it runs on.
 *
 * A store that cannot run on this machine is skipped locally and fails in CI (`CI=true`): CI
 * installs what every store needs, and a silently skipped store would be an untested one.
 */
import { mkdir, open, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe } from 'vitest';
import type BetterSqlite3 from 'better-sqlite3';
import { Etcd3 } from 'etcd3';
import { LeaseLayout, META_FILE } from '../../src/lease/table-layout.js';
import { scanRecords } from '../../src/lease/files/record-scan.js';
import { nodeFsLayer } from '../../src/fs/fs-layer.js';
import { loadNative } from '../../src/native/bindings.js';
import { SQLITE_FILE } from '../../src/lease/sqlite/sqlite-database.js';
import { canonicalJsonBytes } from '../../src/lease/canonical-json.js';
import type { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { etcdUnavailable, startEtcd, type EtcdCluster } from './etcd-server.js';
import { answerRecordId, targetRecordId } from '../../src/lease/identity.js';
import { versionSuffix } from '../../src/lease/etcd/answer-version-keys.js';

/** Store-specific access a scenario needs beyond the table API. `root` is a table root. */
export interface LeaseStoreHooks {
  /** Stores `bytes` as record `id`, bypassing every check (how a test corrupts a record). */
  writeRaw(root: string, id: string, bytes: Buffer | string): Promise<void>;
  /** The stored bytes of record `id`, or null when there is none. */
  readRaw(root: string, id: string): Promise<Buffer | null>;
  /** Removes record `id` as an operator would, bypassing every check (nothing when there is none). */
  removeRaw(root: string, id: string): Promise<void>;
  /** Where record `id` lives, as scans and `symfence leases check` name it. */
  recordLocation(root: string, id: string): Promise<string>;
  /** How `symfence leases` describes the table's layout, e.g. `4 shards`. */
  layoutLabel(root: string): Promise<string>;
  /** Ids of every stored record, sorted. */
  storedIds(root: string): Promise<string[]>;
  /**
   * Takes the store's exclusive lock covering record `id` from outside any table (another lock
   * holder); resolves to the function that lets it go.
   */
  holdLock?(root: string, id: string): Promise<() => Promise<void>>;
  /**
   * Makes the next batch that writes to the table at `root` fail in its commit, before anything
   * of it is visible; the returned function lifts the fault (call it right after that batch: a
   * store may keep failing until then). `fsLayer` is the fault layer the table was opened with.
   */
  failWrites?(root: string, fsLayer: FaultInjectingFsLayer): Promise<() => Promise<void>>;
  /**
   * False for a store whose leased records end with the session of the process that wrote them
   * when it closes its tables (etcd revokes the session lease): such records do not outlive a
   * clean close, only a crash.
   */
  readonly leasesOutliveClose?: boolean;
}

export interface LeaseStoreUnderTest extends LeaseStoreHooks {
  /** `files`, … — also the value of the table option `store`. */
  readonly name: string;
  /** Why the store cannot run here (a missing binary), or undefined when it can. */
  unavailable?(): string | undefined;
  /** Starts what the store needs; resolves to the table options that select it. */
  start(): Promise<Record<string, unknown>>;
  stop?(): Promise<void>;
  /**
   * The options of one test, from the started ones (default: unchanged). A shared server gives
   * every test its own namespace here, as every test has its own temp directory.
   */
  perTest?(options: Record<string, unknown>): Record<string, unknown>;
}

async function fileLayout(root: string): Promise<LeaseLayout> {
  const meta = JSON.parse(await readFile(path.join(root, META_FILE), 'utf8')) as { shardCount: number };
  return new LeaseLayout(root, meta.shardCount);
}

async function tableKind(root: string): Promise<'work' | 'target'> {
  return (JSON.parse(await readFile(path.join(root, META_FILE), 'utf8')) as { kind: 'work' | 'target' }).kind;
}

const filesStore: LeaseStoreUnderTest = {
  name: 'files',
  start: async () => ({ store: 'files' }),
  recordLocation: async (root, id) => (await fileLayout(root)).recordPath(id),
  layoutLabel: async (root) => `${(await fileLayout(root)).shardCount} shards`,
  async writeRaw(root, id, bytes) {
    const layout = await fileLayout(root);
    await mkdir(layout.dirOf(id), { recursive: true });
    await writeFile(layout.recordPath(id), bytes);
  },
  async removeRaw(root, id) {
    await rm((await fileLayout(root)).recordPath(id), { force: true });
  },
  async readRaw(root, id) {
    try {
      return await readFile((await fileLayout(root)).recordPath(id));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  },
  async storedIds(root) {
    const entries = await scanRecords(nodeFsLayer, await fileLayout(root), (JSON.parse(await readFile(path.join(root, META_FILE), 'utf8')) as { kind: 'work' | 'target' }).kind);
    return entries.flatMap((e) => (e.id === undefined ? [] : [e.id])).sort();
  },
  async holdLock(root, id) {
    const native = loadNative();
    if (!native) throw new Error('holding a file lock needs the native addon');
    const layout = await fileLayout(root);
    await mkdir(layout.dirOf(id), { recursive: true });
    const handle = await open(layout.lockPath(id), 'a+');
    if (!native.tryLockExclusive(handle.fd)) throw new Error(`lock of ${id} is already held`);
    return async () => {
      native.unlock(handle.fd);
      await handle.close();
    };
  },
  async failWrites(root, fsLayer) {
    // The first file barrier of a temp (a write) or the first unlink (a release) under the root:
    // the batch fails before publishing, or restores what it unlinked.
    fsLayer.fail({ op: ['fsync', 'unlink'], path: `${path.resolve(root)}${path.sep}` });
    return async () => fsLayer.clearRules();
  },
};

function sqliteModule(): typeof BetterSqlite3 {
  return createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
}

/** A second connection to a table's database (the test's own, outside the table under test). */
function connect(root: string): BetterSqlite3.Database {
  const Sqlite = sqliteModule();
  return new Sqlite(path.join(root, SQLITE_FILE), { fileMustExist: true, timeout: 10_000 });
}

const sqliteStore: LeaseStoreUnderTest = {
  name: 'sqlite',
  unavailable() {
    try {
      new (sqliteModule())(':memory:').close();
      return undefined;
    } catch (error) {
      return `better-sqlite3 is not loadable: ${(error as Error).message}`;
    }
  },
  start: async () => ({ store: 'sqlite' }),
  recordLocation: async (root, id) => `${path.join(path.resolve(root), SQLITE_FILE)}#${id}`,
  layoutLabel: async () => 'sqlite store',
  async writeRaw(root, id, bytes) {
    const db = connect(root);
    try {
      // The row then holds the whole record as a blob (no group row), as a schema-1 row does.
      db.transaction(() => {
        // A row of the answer table is replaced where it is (an answer record, docs/lease-format.md "SQLite store").
        if (db.prepare('SELECT 1 FROM answer_records WHERE id = ?').get(id) !== undefined) {
          db.prepare('UPDATE answer_records SET record = ? WHERE id = ?').run(Buffer.from(bytes), id);
          return;
        }
        const old = db.prepare('SELECT group_id FROM lease_records WHERE id = ?').get(id) as { group_id: number | null } | undefined;
        db.prepare('INSERT INTO lease_records (id, record, group_id) VALUES (?, ?, NULL) ON CONFLICT (id) DO UPDATE SET record = excluded.record, group_id = NULL').run(id, Buffer.from(bytes));
        if (typeof old?.group_id === 'number') {
          db.prepare('DELETE FROM lease_groups WHERE id = ? AND NOT EXISTS (SELECT 1 FROM lease_records WHERE group_id = ?)').run(old.group_id, old.group_id);
        }
      }).immediate();
    } finally {
      db.close();
    }
  },
  async removeRaw(root, id) {
    const db = connect(root);
    try {
      db.prepare('DELETE FROM answer_records WHERE id = ?').run(id);
      db.prepare('DELETE FROM lease_records WHERE id = ?').run(id);
    } finally {
      db.close();
    }
  },
  async readRaw(root, id) {
    const db = connect(root);
    try {
      // A member of a target group keeps its group's payload and targets in its group row: joined
      // here, the record is the exact bytes a record file of it would hold.
      const answer = db.prepare('SELECT record FROM answer_records WHERE id = ?').get(id) as { record: Buffer | string } | undefined;
      if (answer !== undefined) return typeof answer.record === 'string' ? Buffer.from(`${answer.record}\n`) : Buffer.from(answer.record);
      const row = db.prepare('SELECT r.record, r.group_id, g.content FROM lease_records r LEFT JOIN lease_groups g ON g.id = r.group_id WHERE r.id = ?').get(id) as
        | { record: Buffer | string; group_id: number | null; content: string | null }
        | undefined;
      if (row === undefined) return null;
      if (row.group_id === null) return typeof row.record === 'string' ? Buffer.from(`${row.record}\n`) : Buffer.from(row.record);
      if (row.content === null) throw new Error(`record ${id} names a missing group row`);
      return canonicalJsonBytes({ ...(JSON.parse(String(row.record)) as object), ...(JSON.parse(row.content) as object) });
    } finally {
      db.close();
    }
  },
  async storedIds(root) {
    const db = connect(root);
    try {
      return (db.prepare('SELECT id FROM lease_records UNION ALL SELECT id FROM answer_records ORDER BY id').all() as { id: string }[]).map((r) => r.id);
    } finally {
      db.close();
    }
  },
  async holdLock(root) {
    // One write transaction excludes every record of the database.
    const db = connect(root);
    db.exec('BEGIN IMMEDIATE');
    return async () => {
      db.exec('ROLLBACK');
      db.close();
    };
  },
  async failWrites(root) {
    // Triggers written into the database by another connection: every row write aborts, so the
    // batch's transaction is rolled back in its commit.
    const db = connect(root);
    try {
      for (const op of ['INSERT', 'UPDATE', 'DELETE']) {
        for (const table of ['lease_records', 'answer_records']) {
          db.exec(`CREATE TRIGGER test_fail_${op.toLowerCase()}_${table} BEFORE ${op} ON ${table} BEGIN SELECT RAISE(ABORT, 'injected write failure'); END`);
        }
      }
    } finally {
      db.close();
    }
    return async () => {
      const again = connect(root);
      try {
        for (const op of ['insert', 'update', 'delete']) for (const table of ['lease_records', 'answer_records']) again.exec(`DROP TRIGGER IF EXISTS test_fail_${op}_${table}`);
      } finally {
        again.close();
      }
    };
  },
};

let etcd: EtcdCluster | undefined;
let etcdTests = 0;

/** Targets whose answer records the etcd hooks can place (tests name targets below this). */
const KNOWN_TARGETS = 4096n;
let answerLeases: Map<string, string> | undefined;
let leaseAnswers: Map<string, string> | undefined;
function knownBranches(): void {
  if (answerLeases !== undefined) return;
  answerLeases = new Map();
  leaseAnswers = new Map();
  for (let t = 1n; t < KNOWN_TARGETS; t++) {
    answerLeases.set(answerRecordId(t), targetRecordId(t));
    leaseAnswers.set(targetRecordId(t), answerRecordId(t));
  }
}
/** The lease record id of answer record `id` (of a target below `KNOWN_TARGETS`); undefined for any other id. */
function answerLeaseOf(id: string): string | undefined {
  knownBranches();
  return answerLeases!.get(id);
}
function answerIdOfLease(leaseId: string): string | undefined {
  knownBranches();
  return leaseAnswers!.get(leaseId);
}
/** The key of the newest answer version of the branch of `leaseId`, if any. */
async function newestAnswerKey(client: Etcd3, base: string, leaseId: string): Promise<string | undefined> {
  const keys = await client.getAll().prefix(`${base}r/${leaseId}/`).sort('Key', 'Ascend').limit(1).keys();
  return keys[0];
}
/** The options of the running etcd test (its own key prefix), for the hooks. */
let etcdOptions: Record<string, unknown> | undefined;

/** A client of the test's etcd, and the key prefix of the table at `root`. */
async function etcdTable(root: string): Promise<{ client: Etcd3; base: string }> {
  if (etcd === undefined || etcdOptions === undefined) throw new Error('the etcd store was not started');
  const client = new Etcd3({ hosts: etcd.endpoints.split(',').map((e) => `http://${e.replace(/^https?:\/\//, '')}`) });
  return { client, base: `${String(etcdOptions['etcdPrefix'] ?? 'symfence')}/${await tableKind(root)}/` };
}

/**
 * The etcd store: one local member per test file, a key prefix per test. Its batches are
 * optimistic (no lock a test could hold) and its writes fail only when etcd does, so it has no
 * `holdLock` or `failWrites` hook; the scenarios that need them run on the other stores, and
 * etcd-lease-store.test.ts covers its own failures (a frozen member, lost sessions).
 */
const etcdStore: LeaseStoreUnderTest = {
  name: 'etcd',
  unavailable: etcdUnavailable,
  async start() {
    etcd = await startEtcd();
    return { store: 'etcd', etcdEndpoints: etcd.endpoints };
  },
  async stop() {
    await etcd?.stop();
    etcd = undefined;
  },
  perTest: (options) => (etcdOptions = { ...options, etcdPrefix: `test-${process.pid}-${++etcdTests}` }),
  leasesOutliveClose: false,
  recordLocation: async (root, id) => {
    const { client, base } = await etcdTable(root);
    try {
      const leaseId = answerLeaseOf(id);
      if (leaseId === undefined) return `etcd:${base}r/${id}`;
      return `etcd:${(await newestAnswerKey(client, base, leaseId)) ?? `${base}r/${leaseId}/${versionSuffix(1)}`}`;
    } finally {
      client.close();
    }
  },
  layoutLabel: async () => 'etcd store',
  // An answer record lives at its branch's newest version key (etcd-backend.ts "Answer versions"):
  // a raw write replaces every version with one, at the version its bytes name (else the newest's, else 1).
  async writeRaw(root, id, bytes) {
    const { client, base } = await etcdTable(root);
    try {
      const leaseId = answerLeaseOf(id);
      if (leaseId === undefined) {
        await client.put(`${base}r/${id}`).value(Buffer.from(bytes));
        return;
      }
      const newest = await newestAnswerKey(client, base, leaseId);
      let version = newest === undefined ? 1 : Number.MAX_SAFE_INTEGER - Number(newest.slice(newest.lastIndexOf('/') + 1));
      try {
        const named = (JSON.parse(Buffer.from(bytes).toString('utf8')) as { version?: unknown }).version;
        if (typeof named === 'number' && Number.isSafeInteger(named) && named >= 1) version = named;
      } catch {
        // Not JSON: a corrupt record at the version it replaces.
      }
      await client.delete().prefix(`${base}r/${leaseId}/`);
      await client.put(`${base}r/${leaseId}/${versionSuffix(version)}`).value(Buffer.from(bytes));
    } finally {
      client.close();
    }
  },
  async removeRaw(root, id) {
    const { client, base } = await etcdTable(root);
    try {
      const leaseId = answerLeaseOf(id);
      if (leaseId === undefined) await client.delete().key(`${base}r/${id}`);
      else await client.delete().prefix(`${base}r/${leaseId}/`);
    } finally {
      client.close();
    }
  },
  async readRaw(root, id) {
    const { client, base } = await etcdTable(root);
    try {
      const leaseId = answerLeaseOf(id);
      if (leaseId === undefined) return await client.get(`${base}r/${id}`).buffer();
      const newest = await newestAnswerKey(client, base, leaseId);
      return newest === undefined ? null : await client.get(newest).buffer();
    } finally {
      client.close();
    }
  },
  async storedIds(root) {
    const { client, base } = await etcdTable(root);
    try {
      // An answer version's key names its branch's lease record: listed as the answer record's id, once.
      const ids = (await client.getAll().prefix(`${base}r/`).keys()).map((key) => key.slice(`${base}r/`.length));
      return [...new Set(ids.map((id) => (id.includes('/') ? (answerIdOfLease(id.slice(0, id.indexOf('/'))) ?? id) : id)))].sort();
    } finally {
      client.close();
    }
  },
};

export const LEASE_STORES_UNDER_TEST: readonly LeaseStoreUnderTest[] = [filesStore, sqliteStore, etcdStore];

/** A store by name (tests that need one store's hooks outside `describeEachStore`). */
export function leaseStoreUnderTest(name: string): LeaseStoreUnderTest {
  const store = LEASE_STORES_UNDER_TEST.find((s) => s.name === name);
  if (!store) throw new Error(`no lease store ${name} under test`);
  return store;
}

/**
 * What a scenario body gets: the store's name, its table options (valid once the suite started)
 * and its hooks.
 */
export interface StoreContext extends LeaseStoreHooks {
  readonly name: string;
  options(): Record<string, unknown>;
  /**
   * Options of a new, empty namespace of the store (a new key prefix on a shared server; the
   * same options where a new root directory is enough), which `options()` and the hooks then
   * use: for a test that opens several independent tables, e.g. one per property run.
   */
  fresh(): Record<string, unknown>;
}

/** `describe(title)` once per store, with the store started before and stopped after its tests. */
export function describeEachStore(title: string, body: (store: StoreContext) => void, stores: readonly LeaseStoreUnderTest[] = LEASE_STORES_UNDER_TEST): void {
  for (const store of stores) {
    const reason = store.unavailable?.();
    if (reason !== undefined && process.env['CI'] === 'true') throw new Error(`lease store ${store.name} cannot run in CI: ${reason}`);
    const run = reason === undefined ? describe : describe.skip;
    run(`${title} [${store.name} store]`, () => {
      let started: Record<string, unknown> | undefined;
      let options: Record<string, unknown> | undefined;
      beforeAll(async () => {
        started = await store.start();
        options = started;
      });
      beforeEach(() => {
        if (started !== undefined) options = store.perTest?.(started) ?? started;
      });
      afterAll(async () => {
        await store.stop?.();
      });
      body({
        name: store.name,
        options: () => {
          if (options === undefined) throw new Error(`lease store ${store.name} was not started`);
          return options;
        },
        fresh: () => {
          if (started === undefined) throw new Error(`lease store ${store.name} was not started`);
          options = store.perTest?.(started) ?? started;
          return options;
        },
        writeRaw: (root, id, bytes) => store.writeRaw(root, id, bytes),
        readRaw: (root, id) => store.readRaw(root, id),
        removeRaw: (root, id) => store.removeRaw(root, id),
        storedIds: (root) => store.storedIds(root),
        recordLocation: (root, id) => store.recordLocation(root, id),
        layoutLabel: (root) => store.layoutLabel(root),
        ...(store.leasesOutliveClose !== undefined ? { leasesOutliveClose: store.leasesOutliveClose } : {}),
        ...(store.holdLock ? { holdLock: store.holdLock.bind(store) } : {}),
        ...(store.failWrites ? { failWrites: store.failWrites.bind(store) } : {}),
      });
    });
  }
}
