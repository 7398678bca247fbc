/**
 * What only the etcd store does, against a real local etcd: leased records ride the coordinator's
 * keep-alive session (and vanish with it) while committing, done and answer records are never
 * attached to an expiring lease; reads at one revision; the request limits (a 64-member group and its answer records fit, an oversized manifest is refused
 * with a code and nothing written); the table metadata in etcd and in the local root; the client
 * configuration (endpoints, auth) checked before anything is claimed; and connection loss (a session
 * past its keep-alive deadline answers its records as lost without waiting for the server).
 */
import { spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { optionsFromEnv } from '../../src/config/schema.js';
import { STAGED_DIR, TRACES_DIR } from '../../src/commit/commit-manifest.js';
import { EtcdStagedFindings, MAX_ETCD_STAGED_BYTES } from '../../src/commit/etcd-staged-findings.js';
import { StagedFindings } from '../../src/commit/staged-findings.js';
import { connectEtcd, etcdClientConfig, parseEndpoints } from '../../src/lease/etcd/etcd-connection.js';
import { versionSuffix } from '../../src/lease/etcd/answer-version-keys.js';
import { answerRecordId, targetRecordId, workIdOf } from '../../src/lease/identity.js';
import { LEASE_TABLE_OPTIONS } from '../../src/lease/lease-table-options.js';
import { readTableMeta } from '../../src/lease/table-meta.js';
import { nodeFsLayer } from '../../src/fs/fs-layer.js';
import { scanTableRoot } from '../../src/lease/open-backend.js';
import { inspectLeaseTable } from '../../src/lease/lease-inspect.js';
import { S, openTarget, openWork, tempRoot } from '../helpers/lease-fixtures.js';
import { codeOf, codeOfAsync } from '../helpers/error-code.js';
import type { GroupClaimResult } from '../../src/lease/lease-results.js';
import { runCliProcess } from '../helpers/cli-process.js';
import { etcdUnavailable, freePort, freezeMember, startEtcd, type EtcdCluster } from '../helpers/etcd-server.js';

const unavailable = etcdUnavailable();
if (unavailable !== undefined && process.env['CI'] === 'true') throw new Error(`etcd tests cannot run in CI: ${unavailable}`);

let prefixes = 0;
const nextPrefix = (): string => `etcd-store-${process.pid}-${++prefixes}`;

describe.skipIf(unavailable !== undefined)('etcd lease store', () => {
  let cluster: EtcdCluster;
  let client: Etcd3;
  beforeAll(async () => {
    cluster = await startEtcd();
    client = new Etcd3({ hosts: cluster.endpoints });
  });
  afterAll(async () => {
    client?.close();
    await cluster?.stop();
  });
  const base = (prefix: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ store: 'etcd', etcdEndpoints: cluster.endpoints, etcdPrefix: prefix, ...extra });

  it('attaches leased target records to the session lease, and never a work, committing or done record', async () => {
    const prefix = nextPrefix();
    const table = await openWork(await tempRoot(), base(prefix));
    const targets = await openTarget(await tempRoot(), base(prefix));
    try {
      const group = await targets.claimGroup([7n, 8n], { path: 'g' }, { owner: 'c', nowMs: 10 * S });
      if (!group.ok) throw new Error('group claim failed');
      const members = (await client.getAll().prefix(`${prefix}/target/r/`).exec()).kvs;
      expect(members).toHaveLength(2);
      for (const kv of members) expect(String(kv.lease)).not.toBe('0');
      const ttl = await client.leaseClient.leaseTimeToLive({ ID: members[0]!.lease });
      expect(Number(ttl.TTL)).toBeGreaterThan(0);

      const id = workIdOf({ job: 'attach' });
      const claim = await table.claim(id, { job: 1 }, { owner: 'c', nowMs: 10 * S });
      if (!claim.ok) throw new Error('claim failed');
      const key = `${prefix}/work/r/${id}`;
      const leased = (await client.get(key).exec()).kvs[0]!;
      expect(String(leased.lease)).toBe('0');
      expect(await table.beginCommit(id, claim.token, { nowMs: 11 * S, commit: { findings: [] } })).toEqual({ ok: true });
      const committing = (await client.get(key).exec()).kvs[0]!;
      expect(String(committing.lease)).toBe('0');
      expect(Number(committing.mod_revision)).toBeGreaterThan(Number(leased.mod_revision));
      expect(await table.heartbeat(id, claim.token, { nowMs: 12 * S })).toEqual({ ok: true });
      expect(String((await client.get(key).exec()).kvs[0]!.lease)).toBe('0');
      expect(await table.completeOnce(id, claim.token, { nowMs: 13 * S })).toBe('completed');
      expect(String((await client.get(key).exec()).kvs[0]!.lease)).toBe('0');
    } finally {
      await table.close();
      await targets.close();
    }
  });

  it('frees a closed (or dead) coordinator\'s targets with its session, and keeps its work records for a takeover', async () => {
    const prefix = nextPrefix();
    const root = await tempRoot();
    const owner = await openWork(root, base(prefix));
    const ownerTargets = await openTarget(await tempRoot(), base(prefix));
    const leasedId = workIdOf({ job: 'leased' });
    const committingId = workIdOf({ job: 'committing' });
    const a = await owner.claim(leasedId, { job: 1 }, { owner: 'gone', nowMs: 10 * S });
    const b = await owner.claim(committingId, { job: 2 }, { owner: 'gone', nowMs: 10 * S });
    const group = await ownerTargets.claimGroup([21n, 22n, 23n], { path: 'g' }, { owner: 'gone', nowMs: 10 * S });
    if (!a.ok || !b.ok || !group.ok) throw new Error('claims failed');
    expect(await owner.beginCommit(committingId, b.token, { nowMs: 11 * S, commit: { findings: [] } })).toEqual({ ok: true });
    // Revokes the session, as its server-side expiry would.
    await owner.close();
    await ownerTargets.close();
    const survivor = await openWork(root, base(prefix));
    const survivorTargets = await openTarget(await tempRoot(), base(prefix));
    try {
      // Well before any TTL by the records' own clock: the server-side expiry freed the targets.
      expect(await survivorTargets.snapshotRecords()).toEqual([]);
      expect((await survivorTargets.claimGroup([21n, 22n, 23n], { path: 'g' }, { owner: 'survivor', nowMs: 12 * S })).ok).toBe(true);
      // The work stays, payload and all, until its TTL lets another coordinator take it over.
      const records = new Map((await survivor.snapshotRecords()).map((e) => [e.id, e.record]));
      expect(records.get(leasedId)).toMatchObject({ status: 'leased', payload: { job: 1 } });
      expect(records.get(committingId)?.status).toBe('committing');
      expect((await survivor.claim(leasedId, { job: 1 }, { owner: 'survivor', nowMs: 12 * S })).ok).toBe(false);
      expect(await survivor.recoverExpired({ nowMs: 21 * S })).toMatchObject([{ id: leasedId, payload: { job: 1 } }]);
      expect((await survivor.claim(leasedId, { job: 1 }, { owner: 'survivor', nowMs: 21 * S })).ok).toBe(true);
    } finally {
      await survivor.close();
      await survivorTargets.close();
    }
  });

  it('keeps a branch\'s answers through its holder\'s lost session: the answer record rides no session, the lease record does', async () => {
    const prefix = nextPrefix();
    const x = 'a'.repeat(64);
    const y = 'b'.repeat(64);
    const owner = await openTarget(await tempRoot(), base(prefix, { leaseTtlMs: 5 * S }));
    const first = await owner.claimGroup([31n, 32n], { path: 'g' }, { owner: 'gone', nowMs: 10 * S, input: x });
    if (!first.ok) throw new Error('claim failed');
    expect(await owner.releaseGroup([31n, 32n], first.token, { nowMs: 11 * S, answers: { input: x, settled: [31n] } })).toEqual({ ok: true });
    const again = await owner.claimGroup([31n, 32n], { path: 'g' }, { owner: 'gone', nowMs: 12 * S, input: y });
    if (!again.ok) throw new Error('claim failed');
    const leases = new Map((await client.getAll().prefix(`${prefix}/target/r/`).exec()).kvs.map((kv) => [String(kv.key), String(kv.lease)]));
    // 31's answer record (version 1, a key of its own beside its lease record's) rides no session.
    expect(leases.get(`${prefix}/target/r/${targetRecordId(31n)}/${versionSuffix(1)}`)).toBe('0');
    expect(leases.get(`${prefix}/target/r/${targetRecordId(31n)}`)).not.toBe('0');
    expect(leases.get(`${prefix}/target/r/${targetRecordId(32n)}`)).not.toBe('0');
    await owner.close(); // revokes the session, as its server-side expiry would
    const survivor = await openTarget(await tempRoot(), base(prefix, { leaseTtlMs: 5 * S }));
    try {
      const records = await survivor.snapshotRecords();
      expect(records.map((e) => e.id)).toEqual([answerRecordId(31n)]);
      expect(records[0]!.record).toMatchObject({ status: 'done', owner: 'gone', settled: [x] });
      // The dead holder's targets are free at once; the answer still refuses its question.
      expect(await survivor.claimGroup([31n], { path: 'g' }, { owner: 'survivor', nowMs: 13 * S, input: x })).toEqual({ ok: false, reason: 'answered', answered: [31n] });
      expect((await survivor.claimGroup([31n], { path: 'g' }, { owner: 'survivor', nowMs: 13 * S, input: y })).ok).toBe(true);
    } finally {
      await survivor.close();
    }
  });

  it('refuses a claim whose answer record changed after its read, even when the lease record is absent again by its commit', async () => {
    const prefix = nextPrefix();
    const a = await openTarget(await tempRoot(), base(prefix));
    const b = await openTarget(await tempRoot(), base(prefix));
    const x = 'a'.repeat(64);
    try {
      const kv = (a as unknown as { backend: { connection: { client: { kv: { txn: (...args: unknown[]) => Promise<unknown> } } } } }).backend.connection.client.kv;
      const txn = kv.txn.bind(kv);
      // Right after a's read of branch 60 (lease record and answer record absent), b claims 60,
      // answers it on x and releases it, then another coordinator claims 60 and dies: the server
      // deletes its lease record with its session, so it is absent again when a commits, and only
      // the compare of the answer record a read tells the change.
      let armed = true;
      kv.txn = async (...args: unknown[]) => {
        const result = await txn(...args);
        if (armed) {
          armed = false;
          const other = await b.claimGroup([60n], { path: 'b' }, { owner: 'b', nowMs: 10 * S, input: x });
          if (!other.ok) throw new Error('claim of b failed');
          expect(await b.releaseGroup([60n], other.token, { nowMs: 11 * S, answers: { input: x, settled: [60n] } })).toEqual({ ok: true });
          expect((await b.claimGroup([60n], { path: 'c' }, { owner: 'c', nowMs: 11 * S })).ok).toBe(true);
          // What the server does when that session expires (a and b share this process's session).
          await client.delete().key(`${prefix}/target/r/${targetRecordId(60n)}`).exec();
        }
        return result;
      };
      expect(await a.claimGroup([60n], { path: 'a' }, { owner: 'a', nowMs: 12 * S, input: x })).toEqual({ ok: false, reason: 'answered', answered: [60n] });
      expect((await a.snapshotRecords()).map((e) => e.id)).toEqual([answerRecordId(60n)]);
      kv.txn = txn;
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('reads a batch\'s records at one revision, however many requests the reads take', async () => {
    const prefix = nextPrefix();
    const table = await openTarget(await tempRoot(), base(prefix));
    try {
      const backend = (table as unknown as { backend: { readRecords(ids: readonly string[]): Promise<Map<string, { read: { state: string } }>>; connection: { client: { kv: { txn: (...args: unknown[]) => Promise<unknown> } } } } }).backend;
      const ids = Array.from({ length: 200 }, (_, i) => targetRecordId(BigInt(9000 + i)));
      const kv = backend.connection.client.kv;
      const txn = kv.txn.bind(kv);
      let requests = 0;
      kv.txn = async (...args: unknown[]) => {
        const result = await txn(...args);
        // Between the first and the second read request, another writer creates a record the second one reads.
        if ((requests += 1) === 1) await client.put(`${prefix}/target/r/${ids[150]}`).value('written later');
        return result;
      };
      const reads = await backend.readRecords(ids);
      expect(requests).toBe(2);
      expect(reads.get(ids[150]!)?.read.state).toBe('absent');
      kv.txn = txn;
      expect((await backend.readRecords([ids[150]!])).get(ids[150]!)?.read.state).toBe('corrupt');
    } finally {
      await table.close();
    }
  });

  type Kv = { txn: (...args: unknown[]) => Promise<unknown> };
  type Request = { compare: { key: Buffer; range_end?: Buffer; target: string; create_revision?: number }[]; success: { request_range?: unknown; request_put?: { key: Buffer } }[] };
  const kvOf = (table: unknown): Kv => (table as { backend: { connection: { client: { kv: Kv } } } }).backend.connection.client.kv;
  const isCommit = (request: unknown): boolean => (request as Request).success.some((op) => op.request_range === undefined);
  const leaseKey = (prefix: string, t: bigint): string => `${prefix}/target/r/${targetRecordId(t)}`;

  describe('a transaction whose answer is lost', () => {
    /** Makes `table`'s next commit transaction fail on the wire: `before` it reaches etcd, or `after` etcd applied it (then `meanwhile` runs first). */
    const loseNextCommit = (table: unknown, when: 'before' | 'after', meanwhile?: () => Promise<void>): { restore: () => void; lost: () => boolean } => {
      const kv = kvOf(table);
      const txn = kv.txn.bind(kv);
      let armed = true;
      kv.txn = async (...args: unknown[]) => {
        if (!armed || !isCommit(args[0])) return txn(...args);
        armed = false;
        if (when === 'after') {
          await txn(...args);
          await meanwhile?.();
        }
        throw new Error(`14 UNAVAILABLE: the connection was reset (injected ${when} the transaction)`);
      };
      return { restore: () => (kv.txn = txn), lost: () => !armed };
    };

    /**
     * Lets `table`'s next commit transaction reach etcd and be applied, then fails its answer on the
     * wire (below the client's own retries): the client sends it again, and that attempt's compares
     * fail on the first one's writes.
     */
    const dropNextCommitAnswer = (table: unknown): { restore: () => void; dropped: () => boolean } => {
      type Callback = (error: Error | null, response?: unknown) => void;
      type Service = Record<string, unknown> & { txn: (payload: unknown, metadata: unknown, options: unknown, callback: Callback) => unknown };
      type Host = { getServiceClient: (name: string) => Service };
      const pool = (table as { backend: { connection: { client: { pool: { hosts: Host[] } } } } }).backend.connection.client.pool;
      let armed = true;
      const restores: Array<() => void> = [];
      for (const host of pool.hosts) {
        const get = host.getServiceClient;
        host.getServiceClient = function (this: Host, name: string): Service {
          const service = get.call(this, name);
          if (name !== 'KV') return service;
          return new Proxy(service, {
            get(target, property) {
              const value = Reflect.get(target, property) as unknown;
              if (property !== 'txn' || !armed) return value;
              return (payload: unknown, metadata: unknown, options: unknown, callback: Callback) => {
                if (!isCommit(payload)) return target.txn(payload, metadata, options, callback);
                armed = false;
                return target.txn(payload, metadata, options, (error) => callback(error ?? Object.assign(new Error('14 UNAVAILABLE: the connection was reset (injected after the transaction)'), { code: 14 })));
              };
            },
          });
        };
        restores.push(() => (host.getServiceClient = get));
      }
      return { restore: () => restores.forEach((restore) => restore()), dropped: () => !armed };
    };

    it('goes on as committed when etcd applied it but the answer was lost on the wire and the client sent it again', async () => {
      const prefix = nextPrefix();
      const table = await openTarget(await tempRoot(), base(prefix));
      try {
        const dropped = dropNextCommitAnswer(table);
        const claim = await table.claimGroup([3n, 4n], { p: 'lost on the wire' }, { owner: 'a', nowMs: 10 * S });
        expect(dropped.dropped()).toBe(true);
        dropped.restore();
        // Not refused `conflict` by its own record: the read-back found the first attempt applied.
        if (!claim.ok) throw new Error(`claim refused: ${claim.reason}`);
        const stored = JSON.parse((await client.get(leaseKey(prefix, 3n)).exec()).kvs[0]!.value.toString('utf8')) as { token: string };
        expect(stored.token).toBe(claim.token);
        expect(await table.releaseGroup([3n, 4n], claim.token, { nowMs: 11 * S })).toEqual({ ok: true });
      } finally {
        await table.close();
      }
    });

    it('goes on as committed when etcd applied it and answered an error (as it does the write that crosses its space quota): the records read back hold the bytes it wrote', async () => {
      const prefix = nextPrefix();
      const table = await openTarget(await tempRoot(), base(prefix));
      const work = await openWork(await tempRoot(), base(prefix));
      try {
        let lost = loseNextCommit(table, 'after');
        const claim = await table.claimGroup([5n, 6n], { p: 'lost answer' }, { owner: 'a', nowMs: 10 * S });
        expect(lost.lost()).toBe(true);
        lost.restore();
        if (!claim.ok) throw new Error(`claim refused: ${claim.reason}`);
        // The token granted is the one etcd holds: the holder heartbeats and releases with it.
        const stored = JSON.parse((await client.get(leaseKey(prefix, 5n)).exec()).kvs[0]!.value.toString('utf8')) as { token: string };
        expect(stored.token).toBe(claim.token);
        expect(await table.heartbeatGroup([5n, 6n], claim.token, { nowMs: 11 * S })).toEqual({ ok: true });
        expect(await table.releaseGroup([5n, 6n], claim.token, { nowMs: 12 * S })).toEqual({ ok: true });

        // The same for a work lease: claimed once, never refused by its own record.
        const id = workIdOf('lost-answer-work');
        lost = loseNextCommit(work, 'after');
        const held = await work.claim(id, { job: 1 }, { owner: 'a', nowMs: 10 * S });
        expect(lost.lost()).toBe(true);
        lost.restore();
        if (!held.ok) throw new Error(`work claim refused: ${held.reason}`);
        expect(await work.beginCommit(id, held.token, { nowMs: 11 * S, commit: { findings: [] } })).toEqual({ ok: true });
      } finally {
        await table.close();
        await work.close();
      }
    });

    it('fails with nothing written when etcd never applied it, and unknown when another writer came between', async () => {
      const prefix = nextPrefix();
      const table = await openTarget(await tempRoot(), base(prefix));
      try {
        let lost = loseNextCommit(table, 'before');
        const error = await table.claimGroup([7n], { p: 'never sent' }, { owner: 'a', nowMs: 10 * S }).then(() => undefined, (e: unknown) => e as Error & { code?: string; details?: Record<string, unknown> });
        lost.restore();
        expect(error).toMatchObject({ code: 'ERR_LEASE_IO', details: { step: 'commit', restored: true } });
        expect(error?.message).toContain('nothing was written');
        expect((await client.get(leaseKey(prefix, 7n)).exec()).kvs).toEqual([]);

        // Applied, then the record deleted before the read-back (its session gone, say): neither
        // as read nor as written, so the outcome stays unknown and the call says so.
        lost = loseNextCommit(table, 'after', async () => {
          await client.delete().key(leaseKey(prefix, 8n)).exec();
        });
        const unknown = await table.claimGroup([8n, 9n], { p: 'overtaken' }, { owner: 'a', nowMs: 10 * S }).then(() => undefined, (e: unknown) => e as Error & { code?: string; details?: Record<string, unknown> });
        lost.restore();
        expect(unknown).toMatchObject({ code: 'ERR_LEASE_IO', details: { step: 'commit', restored: false } });
        expect(unknown?.message).not.toContain('nothing was written');

        // Each record is as the last writer left it, and the table claims on.
        const again = await table.claimGroup([7n, 8n], { p: 'again' }, { owner: 'a', nowMs: 11 * S });
        expect(again.ok).toBe(true);
      } finally {
        await table.close();
      }
    });
  });

  describe('answer versions', () => {
    const versionKey = (prefix: string, t: bigint, version: number): string => `${leaseKey(prefix, t)}/${versionSuffix(version)}`;
    /** The keys of a branch: its lease record's, then its answer versions', newest first. */
    const branchKeys = async (prefix: string, t: bigint): Promise<string[]> => (await client.getAll().prefix(leaseKey(prefix, t)).keys()).sort();
    /** `table` claims `t` on `input` at `nowMs` and releases it answered there, a second later. */
    const answerOn = async (table: Awaited<ReturnType<typeof openTarget>>, t: bigint, input: string, nowMs: number): Promise<void> => {
      const held = await table.claimGroup([t], { path: 'answer' }, { owner: 'a', nowMs, input });
      if (!held.ok) throw new Error(`claim of ${t} failed: ${held.reason}`);
      expect(await table.releaseGroup([t], held.token, { nowMs: nowMs + S, answers: { input, settled: [t] } })).toEqual({ ok: true });
    };

    it('decides from the versions its view holds without reading them, checks each in one compare on keys that do not exist, and a stale one costs a conflict, never a wrong claim', async () => {
      const prefix = nextPrefix();
      const a = await openTarget(await tempRoot(), base(prefix));
      const b = await openTarget(await tempRoot(), base(prefix));
      const [x, y, z] = ['a'.repeat(64), 'b'.repeat(64), 'd'.repeat(64)];
      const kv = kvOf(a);
      const txn = kv.txn.bind(kv);
      // Both tables share this process's etcd client: only the requests of a's calls are recorded.
      let counting = true;
      const requests: { reads: number; compares: number }[] = [];
      let lastCompares: Request['compare'] = [];
      kv.txn = async (...args: unknown[]) => {
        const request = args[0] as Request;
        if (counting) {
          requests.push({ reads: request.success.filter((op) => op.request_range !== undefined).length, compares: request.compare.length });
          lastCompares = request.compare;
        }
        return txn(...args);
      };
      try {
        // a answers 50 on x: the lease record is gone, the answer record is version 1 at its own key.
        await answerOn(a, 50n, x, 10 * S);
        expect(await branchKeys(prefix, 50n)).toEqual([versionKey(prefix, 50n, 1)]);
        expect((await a.snapshotRecords()).map((e) => [e.id, e.record.version])).toEqual([[answerRecordId(50n), 1]]);
        requests.length = 0;
        // Refused on x from its view, confirmed by one compare on keys that do not exist: from the
        // lease record's key to version 1's, nothing (no lease taken, no newer version).
        expect(await a.claimGroup([50n], { path: 'a' }, { owner: 'a', nowMs: 12 * S, input: x })).toEqual({ ok: false, reason: 'answered', answered: [50n] });
        expect(requests).toEqual([{ reads: 0, compares: 1 }]);
        expect(lastCompares).toMatchObject([{ target: 'Create', create_revision: 0 }]);
        expect([String(lastCompares[0]!.key), String(lastCompares[0]!.range_end)]).toEqual([leaseKey(prefix, 50n), versionKey(prefix, 50n, 1)]);
        requests.length = 0;
        // b answers 50 on y: version 2 replaces version 1, in the same transaction.
        counting = false;
        const other = await b.claimGroup([50n], { path: 'b' }, { owner: 'b', nowMs: 13 * S, input: y });
        if (!other.ok) throw new Error('claim failed');
        expect(await b.releaseGroup([50n], other.token, { nowMs: 14 * S, answers: { input: y, settled: [50n] } })).toEqual({ ok: true });
        expect(await branchKeys(prefix, 50n)).toEqual([versionKey(prefix, 50n, 2)]);
        counting = true;
        // a asks 50 on y: its view (version 1) says open, its commit finds version 2 and fails; the
        // run again reads the lease record and the newest version, and refuses. Nothing written.
        expect(await a.claimGroup([50n], { path: 'a' }, { owner: 'a', nowMs: 15 * S, input: y })).toEqual({ ok: false, reason: 'answered', answered: [50n] });
        expect(requests).toEqual([{ reads: 0, compares: 1 }, { reads: 1, compares: 0 }, { reads: 1, compares: 0 }]);
        expect(await branchKeys(prefix, 50n)).toEqual([versionKey(prefix, 50n, 2)]);
        // On a third input the claim holds, deciding from what it read last: one compare.
        requests.length = 0;
        expect((await a.claimGroup([50n], { path: 'a' }, { owner: 'a', nowMs: 16 * S, input: z })).ok).toBe(true);
        expect(requests).toEqual([{ reads: 0, compares: 1 }]);
        expect([String(lastCompares[0]!.key), String(lastCompares[0]!.range_end)]).toEqual([leaseKey(prefix, 50n), versionKey(prefix, 50n, 2)]);
      } finally {
        kv.txn = txn;
        await a.close();
        await b.close();
      }
    });

    // A batch holding a release of x that turns out stale (x's holder is gone) and a claim of x on
    // input I: the release's lock reads x's answer record and writes nothing, and the claim relies
    // on that read. Between the read and the commit, b answers x on I and c claims x and dies, so
    // the server deletes x's lease record: absent at the read and absent at the commit. The
    // answer version must be checked all the same, or the claim is granted on an old answer.
    for (const staleReleaseInBatch of [false, true]) {
      it(`refuses a claim whose member's lease record is absent at its read and again at its commit, with answers written in between (a stale release in the batch: ${staleReleaseInBatch})`, async () => {
        const prefix = nextPrefix();
        const a = await openTarget(await tempRoot(), base(prefix));
        const b = await openTarget(await tempRoot(), base(prefix));
        // Its own connection (another spelling of the endpoint), so revoking c's session leaves a's alone.
        const c = await openTarget(await tempRoot(), base(prefix, { etcdEndpoints: `http://${cluster.endpoints}` }));
        const x = 900n;
        const [i, j, k] = ['7'.repeat(64), '8'.repeat(64), '9'.repeat(64)];
        const kv = kvOf(a);
        const txn = kv.txn.bind(kv);
        let armed = true;
        kv.txn = async (...args: unknown[]) => {
          if (armed && isCommit(args[0])) {
            armed = false;
            const bc = await b.claimGroup([x], { p: 'b' }, { owner: 'b', nowMs: 11 * S, input: j });
            if (!bc.ok) throw new Error('b: claim failed');
            expect(await b.releaseGroup([x], bc.token, { nowMs: 12 * S, answers: { input: i, settled: [x] } })).toEqual({ ok: true });
            const cc = await c.claimGroup([x], { p: 'c' }, { owner: 'c', nowMs: 13 * S, input: k });
            if (!cc.ok) throw new Error('c: claim failed');
            const lease = (await client.get(leaseKey(prefix, x)).exec()).kvs[0]!.lease;
            await client.leaseClient.leaseRevoke({ ID: lease });
            expect((await client.get(leaseKey(prefix, x)).exec()).kvs).toEqual([]);
          }
          return txn(...args);
        };
        try {
          const ops = [
            ...(staleReleaseInBatch ? [a.planReleaseGroup([x], 'a:0:1:1:00', { nowMs: 10 * S, answers: { input: i, settled: [x] } })] : []),
            a.planClaimGroup([x], { p: 'a' }, { owner: 'a', nowMs: 14 * S, input: i }),
          ];
          const { outcomes } = await a.executeBatch(ops);
          expect(armed).toBe(false);
          const claim = outcomes.at(-1)!;
          expect(claim.ok && claim.value).toEqual({ ok: false, reason: 'answered', answered: [x] });
          // Nothing written: x's lease record is still the one the server deleted.
          expect((await client.get(leaseKey(prefix, x)).exec()).kvs).toEqual([]);
        } finally {
          kv.txn = txn;
          await a.close();
          await b.close();
          await c.close();
        }
      });
    }

    it('refuses a claim, never grants it, when another table answers its question between its read and its commit', async () => {
      const prefix = nextPrefix();
      const a = await openTarget(await tempRoot(), base(prefix));
      const b = await openTarget(await tempRoot(), base(prefix));
      const [p, x] = ['1'.repeat(64), '2'.repeat(64)];
      const kv = kvOf(a);
      const txn = kv.txn.bind(kv);
      try {
        // a knows 70 free, with no answers.
        const warm = await a.claimGroup([70n], { path: 'a' }, { owner: 'a', nowMs: 10 * S, input: p });
        if (!warm.ok) throw new Error('claim failed');
        expect(await a.releaseGroup([70n], warm.token)).toEqual({ ok: true });
        expect(await branchKeys(prefix, 70n)).toEqual([]);
        // a's claim on x decides from what it knows (nothing read); just before its commit goes
        // out, b claims 70 on x, answers it and releases it: the branch's keys are as absent as
        // before but for version 1, which the compare covers.
        let armed = true;
        kv.txn = async (...args: unknown[]) => {
          if (armed && isCommit(args[0])) {
            armed = false;
            const other = await b.claimGroup([70n], { path: 'b' }, { owner: 'b', nowMs: 11 * S, input: x });
            if (!other.ok) throw new Error('claim of b failed');
            expect(await b.releaseGroup([70n], other.token, { nowMs: 12 * S, answers: { input: x, settled: [70n] } })).toEqual({ ok: true });
          }
          return txn(...args);
        };
        expect(await a.claimGroup([70n], { path: 'a' }, { owner: 'a', nowMs: 13 * S, input: x })).toEqual({ ok: false, reason: 'answered', answered: [70n] });
        expect(armed).toBe(false);
        expect(await branchKeys(prefix, 70n)).toEqual([versionKey(prefix, 70n, 1)]);
        expect((await a.snapshotRecords()).map((e) => e.record)).toMatchObject([{ role: 'answers', owner: 'b', version: 1 }]);

        // A fresh table reads the lease record from the server; b answers between that read and
        // the read of the answer record: the claim still sees the answer.
        const c = await openTarget(await tempRoot(), base(prefix));
        const kvC = kvOf(c);
        const y = '3'.repeat(64);
        armed = true;
        kvC.txn = async (...args: unknown[]) => {
          const result = await txn(...args);
          if (armed) {
            armed = false;
            const other = await b.claimGroup([70n], { path: 'b' }, { owner: 'b', nowMs: 14 * S, input: y });
            if (!other.ok) throw new Error('claim of b failed');
            expect(await b.releaseGroup([70n], other.token, { nowMs: 15 * S, answers: { input: y, settled: [70n] } })).toEqual({ ok: true });
          }
          return result;
        };
        try {
          expect(await c.claimGroup([70n], { path: 'c' }, { owner: 'c', nowMs: 16 * S, input: y })).toEqual({ ok: false, reason: 'answered', answered: [70n] });
          expect(armed).toBe(false);
          // A claim on a question nobody answered holds.
          expect((await c.claimGroup([70n], { path: 'c' }, { owner: 'c', nowMs: 17 * S, input: '4'.repeat(64) })).ok).toBe(true);
        } finally {
          await c.close();
        }
      } finally {
        kv.txn = txn;
        await a.close();
        await b.close();
      }
    });

    it('never takes the versions behind a corrupt newest one for superseded: `leases check` keeps them, and they answer again once the corrupt one is removed', async () => {
      const prefix = nextPrefix();
      const root = await tempRoot();
      const x = 'b'.repeat(64);
      const table = await openTarget(root, base(prefix));
      try {
        const held = await table.claimGroup([41n], { path: 'x' }, { owner: 'a', nowMs: 10 * S, input: x });
        if (!held.ok) throw new Error('claim failed');
        expect(await table.releaseGroup([41n], held.token, { nowMs: 11 * S, answers: { input: x, settled: [41n] } })).toEqual({ ok: true });
      } finally {
        await table.close();
      }
      // A corrupt value at the next version's key (a truncated hand edit), in front of version 1.
      await client.put(versionKey(prefix, 41n, 2)).value('{"truncated');
      const inspected = await inspectLeaseTable(root, { nowMs: 20 * S, leaseTtlMs: 30 * S, storeOptions: base(prefix) });
      expect(inspected.answers).toMatchObject({ branches: 0, superseded: 0 });
      expect(inspected.corrupt.map((c) => c.path)).toEqual([`etcd:${versionKey(prefix, 41n, 2)}`]);
      const env = { SYMFENCE_ETCD_ENDPOINTS: cluster.endpoints, SYMFENCE_ETCD_PREFIX: prefix };
      const checked = await runCliProcess(['leases', 'check', root, '--json'], { env }).exit;
      expect(checked.code).toBe(1);
      expect(await branchKeys(prefix, 41n)).toEqual([versionKey(prefix, 41n, 2), versionKey(prefix, 41n, 1)]);
      // Claims fail closed meanwhile; with the corrupt key removed, version 1 answers again.
      const reopened = await openTarget(root, base(prefix));
      try {
        expect(await reopened.claimGroup([41n], { path: 'y' }, { owner: 'b', nowMs: 30 * S, input: x })).toMatchObject({ ok: false, reason: 'corrupt' });
        await client.delete().key(versionKey(prefix, 41n, 2)).exec();
        const fresh = await openTarget(await tempRoot(), base(prefix));
        try {
          expect(await fresh.claimGroup([41n], { path: 'y' }, { owner: 'b', nowMs: 31 * S, input: x })).toEqual({ ok: false, reason: 'answered', answered: [41n] });
        } finally {
          await fresh.close();
        }
      } finally {
        await reopened.close();
      }
    });

    it('reads and checks each named campaign of a lease directory under its own prefix', async () => {
      const prefix = nextPrefix();
      const leaseDir = await tempRoot();
      const x = 'a'.repeat(64);
      const rootOf = (name: string): string => path.join(leaseDir, 'campaigns', name, 'target');
      const a = await openTarget(rootOf('A'), base(`${prefix}/campaigns/A`));
      const b = await openTarget(rootOf('B'), base(`${prefix}/campaigns/B`));
      try {
        for (const t of [1n, 2n, 3n]) {
          const held = await a.claimGroup([t], { path: 'x' }, { owner: 'a', nowMs: 10 * S, input: x });
          if (!held.ok) throw new Error('claim failed');
          expect(await a.releaseGroup([t], held.token, { nowMs: 11 * S, answers: { input: x, settled: [t] } })).toEqual({ ok: true });
        }
      } finally {
        await a.close();
        await b.close();
      }
      // A corrupt answer version in campaign A.
      await client.put(versionKey(`${prefix}/campaigns/A`, 9n, 1)).value('{"garbage":true}');
      const env = { SYMFENCE_ETCD_ENDPOINTS: cluster.endpoints, SYMFENCE_ETCD_PREFIX: prefix };
      const listed = await runCliProcess(['leases', leaseDir, '--json'], { env }).exit;
      expect(listed.code, listed.stderr).toBe(0);
      const tables = (JSON.parse(listed.stdout) as { tables: { root: string; answers: { branches: number }; counts: { corrupt: number } }[] }).tables;
      const byCampaign = Object.fromEntries(tables.map((t) => [path.relative(leaseDir, t.root), { branches: t.answers.branches, corrupt: t.counts.corrupt }]));
      expect(byCampaign).toEqual({ 'campaigns/A/target': { branches: 3, corrupt: 1 }, 'campaigns/B/target': { branches: 0, corrupt: 0 } });
      const checked = await runCliProcess(['leases', 'check', leaseDir], { env }).exit;
      expect(checked.code).toBe(1);
      expect(checked.stdout + checked.stderr).toContain(versionKey(`${prefix}/campaigns/A`, 9n, 1));
    });

    it('deletes a released lease record, keeps one version per branch, lists a version left behind, and a reopened table reads each member once', async () => {
      const prefix = nextPrefix();
      const root = await tempRoot();
      const a = await openTarget(root, base(prefix));
      const [x, y] = ['5'.repeat(64), '6'.repeat(64)];
      try {
        const held = await a.claimGroup([81n, 82n], { path: 'a' }, { owner: 'a', nowMs: 10 * S, input: x });
        if (!held.ok) throw new Error('claim failed');
        const leased = await client.getAll().prefix(`${prefix}/target/r/`).exec();
        expect(leased.kvs).toHaveLength(2);
        for (const kv of leased.kvs) expect(String(kv.lease)).not.toBe('0');
        // 81 answered: version 1 on no session; both lease records are gone.
        expect(await a.releaseGroup([81n, 82n], held.token, { nowMs: 11 * S, answers: { input: x, settled: [81n] } })).toEqual({ ok: true });
        expect(await branchKeys(prefix, 81n)).toEqual([versionKey(prefix, 81n, 1)]);
        expect(await branchKeys(prefix, 82n)).toEqual([]);
        expect(String((await client.get(versionKey(prefix, 81n, 1)).exec()).kvs[0]!.lease)).toBe('0');
        expect((await a.snapshotRecords()).map((e) => e.record)).toMatchObject([{ id: answerRecordId(81n), role: 'answers', token: held.token, version: 1 }]);
        // 81 answered again on y: version 2, and version 1 removed in the same transaction.
        const again = await a.claimGroup([81n], { path: 'a' }, { owner: 'a', nowMs: 12 * S, input: y });
        if (!again.ok) throw new Error('claim failed');
        expect(await a.releaseGroup([81n], again.token, { nowMs: 13 * S, answers: { input: y, settled: [81n] } })).toEqual({ ok: true });
        expect(await branchKeys(prefix, 81n)).toEqual([versionKey(prefix, 81n, 2)]);
        expect(await a.snapshotCounts({ nowMs: 14 * S })).toMatchObject({ leased: 0, done: 1, corrupt: 0 });
        // A version a release could not remove (it died between its commit and the removal):
        // listed apart, read by no one.
        const older = (await client.get(versionKey(prefix, 81n, 2)).exec()).kvs[0]!.value;
        await client.put(versionKey(prefix, 81n, 1)).value(Buffer.from(String(older).replace('"version":2', '"version":1')));
        const inspected = await inspectLeaseTable(root, { nowMs: 14 * S, leaseTtlMs: 30 * S, storeOptions: base(prefix) });
        expect(inspected).toMatchObject({ counts: { leased: 0, done: 1, corrupt: 0 }, corrupt: [], answers: { branches: 1, pairs: 2, superseded: 1 } });
        expect(await a.snapshotCounts({ nowMs: 14 * S })).toMatchObject({ leased: 0, done: 1, corrupt: 0 });
        // `symfence leases` lists it; `leases check` removes it.
        const env = { SYMFENCE_ETCD_ENDPOINTS: cluster.endpoints, SYMFENCE_ETCD_PREFIX: prefix };
        const listed = await runCliProcess(['leases', root], { env }).exit;
        expect(listed.stdout).toMatch(/; 1 superseded answer versions \(\d+ bytes\) to remove/);
        const checked = await runCliProcess(['leases', 'check', root, '--json'], { env }).exit;
        expect(checked.code, checked.stderr).toBe(0);
        expect(JSON.parse(checked.stdout)).toMatchObject({ supersededRemoved: 1 });
        expect(await branchKeys(prefix, 81n)).toEqual([versionKey(prefix, 81n, 2)]);
      } finally {
        await a.close();
      }
      // Reopened: the view lists the branches with answer versions (81), so one read: each member's
      // lease record, and 81's newest answer version in the same range request (the claim's
      // `readAlong`); the newest decides. 82 has none: declared at version 0 without a read. The
      // refused claim writes nothing, so one transaction of compares alone confirms 82 (no
      // operations in it).
      const reopened = await openTarget(root, base(prefix));
      const kv = kvOf(reopened);
      const txn = kv.txn.bind(kv);
      const reads: number[] = [];
      kv.txn = async (...args: unknown[]) => {
        const request = args[0] as Request;
        if (!isCommit(request)) reads.push(request.success.length);
        return txn(...args);
      };
      try {
        expect(await reopened.claimGroup([81n, 82n], { path: 'b' }, { owner: 'b', nowMs: 15 * S, input: y })).toEqual({ ok: false, reason: 'answered', answered: [81n] });
        expect(reads).toEqual([2, 0]);
        expect(reopened.answerScans).toEqual({ scans: 1, failed: 0 });
        expect((await reopened.claimGroup([81n, 82n], { path: 'b' }, { owner: 'b', nowMs: 16 * S, input: '7'.repeat(64) })).ok).toBe(true);
      } finally {
        kv.txn = txn;
        await reopened.close();
      }
    });

    it('claims 16 groups of 8 in one transaction, round after round, and keeps every transaction within etcd\'s bounds', async () => {
      const prefix = nextPrefix();
      const table = await openTarget(await tempRoot(), base(prefix));
      const kv = kvOf(table);
      const txn = kv.txn.bind(kv);
      const commits: { compares: number; writes: number }[] = [];
      kv.txn = async (...args: unknown[]) => {
        const request = args[0] as Request;
        if (isCommit(request)) commits.push({ compares: request.compare.length, writes: request.success.length });
        return txn(...args);
      };
      const groups = Array.from({ length: 16 }, (_, g) => Array.from({ length: 8 }, (_, i) => BigInt(6000 + g * 8 + i)));
      const round = async (n: number): Promise<void> => {
        const input = n.toString(16).padStart(64, '0');
        const claims = await table.executeBatch(groups.map((g) => table.planClaimGroup(g, { n }, { owner: 'c', nowMs: n * S, input })));
        const tokens = claims.outcomes.map((o) => (o.ok && (o.value as GroupClaimResult).ok ? (o.value as { token: string }).token : undefined));
        expect(tokens.every((t) => t !== undefined)).toBe(true);
        const releases = await table.executeBatch(groups.map((g, i) => table.planReleaseGroup(g, tokens[i]!, { nowMs: n * S, answers: { input, settled: g.filter((_, j) => j % 2 === 0) } })));
        expect(releases.outcomes.every((o) => o.ok && (o.value as { ok: boolean }).ok)).toBe(true);
      };
      try {
        // First round: the answer records are read (their compares shared with the lease records'); later ones decide from the view.
        for (let n = 1; n <= 3; n++) {
          await round(n);
          expect(commits[0]).toEqual({ compares: 128, writes: 128 });
          expect(commits.every((c) => c.compares <= 128 && c.writes <= 128)).toBe(true);
          commits.length = 0;
        }
        // The releases past the first replaced versions in transactions of their own where theirs were full: none is left.
        const keys = await client.getAll().prefix(`${prefix}/target/r/`).keys();
        expect(keys).toHaveLength(64);
        expect(keys.every((key) => key.endsWith(`/${versionSuffix(3)}`))).toBe(true);
      } finally {
        kv.txn = txn;
        await table.close();
      }
    });

    it('takes over an expired member that names its input: its answer version checked apart from its lease record, and a newer one refuses', async () => {
      const prefix = nextPrefix();
      const a = await openTarget(await tempRoot(), base(prefix, { leaseTtlMs: 5 * S }));
      const b = await openTarget(await tempRoot(), base(prefix, { leaseTtlMs: 5 * S }));
      const [x, y] = ['c'.repeat(64), 'e'.repeat(64)];
      const kv = kvOf(b);
      const txn = kv.txn.bind(kv);
      const commits: Request['compare'][] = [];
      try {
        // 95 answered on x (version 1), then held by a on y until its lease expires (a dead holder
        // whose session the server has not ended yet: a still runs).
        await answerOn(a, 95n, x, 10 * S);
        expect((await a.claimGroup([95n], { path: 'a' }, { owner: 'a', nowMs: 12 * S, input: y })).ok).toBe(true);
        kv.txn = async (...args: unknown[]) => {
          if (isCommit(args[0])) commits.push((args[0] as Request).compare);
          return txn(...args);
        };
        // b takes it over on another input: two compares, the lease record's revision and no version after 1.
        const taken = await b.claimGroup([95n], { path: 'b' }, { owner: 'b', nowMs: 60 * S, input: '1'.repeat(64) });
        expect(taken.ok).toBe(true);
        expect(commits).toHaveLength(1);
        expect(commits[0]!.map((c) => [String(c.key), c.range_end === undefined ? null : String(c.range_end), c.target])).toEqual([
          [`${leaseKey(prefix, 95n)}/`, versionKey(prefix, 95n, 1), 'Create'],
          [leaseKey(prefix, 95n), null, 'Mod'],
        ]);
        // Taken over on x, the answer refuses it.
        expect(await b.claimGroup([95n], { path: 'b' }, { owner: 'b', nowMs: 120 * S, input: x })).toEqual({ ok: false, reason: 'answered', answered: [95n] });
      } finally {
        kv.txn = txn;
        await a.close();
        await b.close();
      }
    });

    it('finds its answer records however many others were named between its planning and its batch', async () => {
      const prefix = nextPrefix();
      const a = await openTarget(await tempRoot(), base(prefix));
      const x = 'f'.repeat(64);
      try {
        const held = await a.claimGroup([97n], { path: 'a' }, { owner: 'a', nowMs: 10 * S, input: x });
        if (!held.ok) throw new Error('claim failed');
        const release = a.planReleaseGroup([97n], held.token, { nowMs: 11 * S, answers: { input: x, settled: [97n] } });
        // The store's table of answer records to lease records forgets the oldest past its bound.
        const backend = (a as unknown as { backend: { relateAnswers(pairs: readonly (readonly [string, string])[]): void } }).backend;
        backend.relateAnswers(Array.from({ length: 70_000 }, (_, i) => [`${i}`.padStart(64, 'a'), `${i}`.padStart(64, 'b')] as const));
        const { outcomes } = await a.executeBatch([release]);
        expect(outcomes[0]).toEqual({ ok: true, value: { ok: true } });
        expect(await branchKeys(prefix, 97n)).toEqual([versionKey(prefix, 97n, 1)]);
        expect(await a.claimGroup([97n], { path: 'a' }, { owner: 'a', nowMs: 12 * S, input: x })).toEqual({ ok: false, reason: 'answered', answered: [97n] });
      } finally {
        await a.close();
      }
    });

    it('reads a stray key inside a branch\'s compared range as a corrupt answer record: refused at once, never retried until a timeout', async () => {
      const prefix = nextPrefix();
      const root = await tempRoot();
      const a = await openTarget(root, base(prefix));
      try {
        await client.put(`${leaseKey(prefix, 98n)}.bak`).value('left by hand');
        const refused = await a.claimGroup([98n], { path: 'a' }, { owner: 'a', nowMs: 10 * S, input: '2'.repeat(64) });
        expect(refused).toMatchObject({ ok: false, reason: 'corrupt', corrupt: [{ id: answerRecordId(98n), detail: expect.stringMatching(/not an answer version/) }] });
        // A claim that asks nothing about answers does not look there, and holds.
        expect((await a.claimGroup([98n], { path: 'a' }, { owner: 'a', nowMs: 11 * S })).ok).toBe(true);
        const inspected = await inspectLeaseTable(root, { nowMs: 12 * S, leaseTtlMs: 30 * S, storeOptions: base(prefix) });
        expect(inspected.corrupt).toMatchObject([{ path: `etcd:${leaseKey(prefix, 98n)}.bak` }]);
      } finally {
        await a.close();
      }
    });

    it('fails closed on a version whose key and record disagree, and refuses a table of the earlier layout naming what to do', async () => {
      const prefix = nextPrefix();
      const a = await openTarget(await tempRoot(), base(prefix));
      const x = '8'.repeat(64);
      try {
        await answerOn(a, 90n, x, 10 * S);
        // Version 1's record moved under version 3's key: corrupt, and never written over.
        const value = (await client.get(versionKey(prefix, 90n, 1)).exec()).kvs[0]!.value;
        await client.delete().key(versionKey(prefix, 90n, 1)).exec();
        await client.put(versionKey(prefix, 90n, 3)).value(value);
        const fresh = await openTarget(await tempRoot(), base(prefix));
        try {
          expect(await fresh.claimGroup([90n], { path: 'f' }, { owner: 'f', nowMs: 12 * S, input: '9'.repeat(64) })).toMatchObject({ ok: false, reason: 'corrupt', corrupt: [{ id: answerRecordId(90n), detail: expect.stringMatching(/version 3 says version 1/) }] });
          expect(await branchKeys(prefix, 90n)).toEqual([versionKey(prefix, 90n, 3)]);
        } finally {
          await fresh.close();
        }
      } finally {
        await a.close();
      }
      const old = nextPrefix();
      await client.put(`${old}/target/meta`).value('{"kind":"target","schema":2,"store":"etcd"}\n');
      const refused = await openTarget(await tempRoot(), base(old)).then(
        () => undefined,
        (error: unknown) => error as { code?: string; message: string },
      );
      expect(refused?.code).toBe('ERR_LEASE_CORRUPT');
      expect(refused?.message).toMatch(/earlier layout \(schema 2.*new --etcd-prefix/);
    });
  });

  it('claims a 64-member group in one transaction and refuses a manifest too large for etcd without writing', async () => {
    const prefix = nextPrefix();
    const targets = await openTarget(await tempRoot(), base(prefix));
    const work = await openWork(await tempRoot(), base(prefix));
    try {
      const group = Array.from({ length: 64 }, (_, i) => BigInt(5000 + i));
      const before = (await client.get('symfence-test/ready').exec()).header.revision;
      const input = 'c'.repeat(64);
      // A claim that asks about answers reads 128 records (the members' answer records too), and
      // compares 64: each member's lease record with its answer record.
      const claim = await targets.claimGroup(group, { path: 'x'.repeat(2000) }, { owner: 'c', nowMs: 10 * S, input });
      if (!claim.ok) throw new Error('claim failed');
      const revisions = new Set((await client.getAll().prefix(`${prefix}/target/r/`).exec()).kvs.map((kv) => String(kv.mod_revision)));
      expect(revisions.size).toBe(1); // all 64 written by one transaction
      expect(Number([...revisions][0])).toBeGreaterThan(Number(before));
      // Its release answers every member: 64 lease records deleted and 64 answer records written in one transaction.
      expect(await targets.releaseGroup(group, claim.token, { nowMs: 11 * S, answers: { input, settled: group } })).toEqual({ ok: true });
      const answers = (await client.getAll().prefix(`${prefix}/target/r/`).exec()).kvs;
      expect(answers.map((kv) => String(kv.key)).sort()).toEqual(group.map((t) => `${prefix}/target/r/${targetRecordId(t)}/${versionSuffix(1)}`).sort());
      expect(new Set(answers.map((kv) => String(kv.mod_revision))).size).toBe(1);
      // Answered again: 64 deletes and 64 new versions fill the transaction; the 64 replaced
      // versions go in one of their own after it.
      const again = await targets.claimGroup(group, { path: 'x' }, { owner: 'c', nowMs: 12 * S, input: 'e'.repeat(64) });
      if (!again.ok) throw new Error('claim failed');
      expect(await targets.releaseGroup(group, again.token, { nowMs: 13 * S, answers: { input: 'e'.repeat(64), settled: group } })).toEqual({ ok: true });
      const replaced = (await client.getAll().prefix(`${prefix}/target/r/`).exec()).kvs;
      expect(replaced.map((kv) => String(kv.key)).sort()).toEqual(group.map((t) => `${prefix}/target/r/${targetRecordId(t)}/${versionSuffix(2)}`).sort());

      const id = workIdOf({ job: 'big' });
      const held = await work.claim(id, { job: 1 }, { owner: 'c', nowMs: 10 * S });
      if (!held.ok) throw new Error('claim failed');
      const manifest = { findings: Array.from({ length: 12_000 }, (_, i) => `finding-${i}-${'y'.repeat(100)}`) };
      expect(await codeOfAsync(work.beginCommit(id, held.token, { nowMs: 11 * S, commit: manifest }))).toBe('ERR_LEASE_RECORD_TOO_LARGE');
      expect((await work.snapshotRecords())[0]?.record).toMatchObject({ status: 'leased', token: held.token });
    } finally {
      await targets.close();
      await work.close();
    }
  });

  it('counts the bytes of every operation of a batch against one transaction: the operation that would overflow it is refused alone, nothing of it written', async () => {
    const prefix = nextPrefix();
    const targets = await openTarget(await tempRoot(), base(prefix));
    try {
      // Four groups of 8 members, each record carrying a 50 KB payload: about 404 KB a group, so
      // three fit the 1.25 MiB of one transaction and the fourth does not.
      const groups = [0, 1, 2, 3].map((g) => Array.from({ length: 8 }, (_, i) => BigInt(7000 + g * 8 + i)));
      const payload = { path: 'z'.repeat(50_000) };
      const { outcomes } = await targets.executeBatch(groups.map((group) => targets.planClaimGroup(group, payload, { owner: 'c', nowMs: 10 * S })));
      expect(outcomes.slice(0, 3).map((o) => o.ok && (o.value as GroupClaimResult).ok)).toEqual([true, true, true]);
      const refused = outcomes[3]!;
      expect(refused.ok).toBe(false);
      expect(!refused.ok && (refused.error as { code?: string }).code).toBe('ERR_LEASE_RECORD_TOO_LARGE');
      const written = (await client.getAll().prefix(`${prefix}/target/r/`).keys()).sort();
      expect(written).toEqual(groups.slice(0, 3).flat().map((t) => leaseKey(prefix, t)).sort());
    } finally {
      await targets.close();
    }
  });

  it('records the store in the local root and in etcd, and refuses mismatches', async () => {
    const prefix = nextPrefix();
    const root = await tempRoot();
    const table = await openWork(root, base(prefix));
    await table.close();
    expect(await readTableMeta(nodeFsLayer, path.join(root, 'lease-table.json'))).toMatchObject({ schema: 2, kind: 'work', store: 'etcd' });
    expect(String(await client.get(`${prefix}/work/meta`))).toBe('{"kind":"work","schema":2,"store":"etcd"}\n');
    expect(await codeOfAsync(openWork(root, { store: 'files' }))).toBe('ERR_INVALID_OPTION');
    const auto = await openWork(root, { store: 'auto', etcdEndpoints: cluster.endpoints, etcdPrefix: prefix });
    expect(auto.store).toBe('etcd');
    await auto.close();
    await client.put(`${prefix}/target/meta`).value('garbage');
    expect(await codeOfAsync(openTarget(await tempRoot(), base(prefix)))).toBe('ERR_LEASE_CORRUPT');
  });

  it('lists an etcd table read-only for `symfence leases`', async () => {
    const prefix = nextPrefix();
    const root = await tempRoot();
    const table = await openWork(root, base(prefix));
    try {
      const ids = Array.from({ length: 300 }, (_, i) => workIdOf({ job: `scan-${i}` }));
      for (const id of ids) expect((await table.claim(id, { job: 1 }, { owner: 'c', nowMs: 10 * S })).ok).toBe(true);
      await client.put(`${prefix}/work/r/not-an-id`).value('{}');
      const meta = (await readTableMeta(nodeFsLayer, path.join(root, 'lease-table.json')))!;
      const entries = await scanTableRoot(root, meta, nodeFsLayer, LEASE_TABLE_OPTIONS.resolve(base(prefix)));
      expect(entries.filter((e) => e.state === 'valid')).toHaveLength(300);
      expect(entries.filter((e) => e.state === 'corrupt')).toMatchObject([{ id: undefined, path: `etcd:${prefix}/work/r/not-an-id` }]);
      // `symfence leases` on the local root reads the cluster the environment names.
      const cli = runCliProcess(['leases', root, '--json'], { env: { SYMFENCE_ETCD_ENDPOINTS: cluster.endpoints, SYMFENCE_ETCD_PREFIX: prefix } });
      const exit = await cli.exit;
      expect(exit.code, exit.stderr).toBe(0);
      const parsed = JSON.parse(exit.stdout) as { tables: { kind: string; counts: Record<string, number> }[] };
      expect(parsed.tables).toMatchObject([{ kind: 'work', counts: { leased: 300, corrupt: 1 } }]);
    } finally {
      await table.close();
    }
  });

  it('stages findings in etcd, so a survivor with another lease directory loads, verifies and discards them', async () => {
    const prefix = nextPrefix();
    const options = LEASE_TABLE_OPTIONS.resolve(base(prefix));
    const rootA = await tempRoot();
    const rootB = await tempRoot();
    const hostA = await EtcdStagedFindings.open(options, rootA);
    const hostB = await EtcdStagedFindings.open(options, rootB);
    try {
      const stagerA = await StagedFindings.open(rootA, hostA, hostA.readFile);
      const stagerB = await StagedFindings.open(rootB, hostB, hostB.readFile);
      const workId = workIdOf({ job: 'staged' });
      const solverOutput = path.join(rootA, 'output-1');
      await writeFile(solverOutput, Buffer.from('from a file'));
      const staged = await stagerA.stage(workId, [{ kind: 'queue', content: Buffer.from('finding one') }, { kind: 'crashes', content: { path: solverOutput } }], { status: 'ok', source: '000012' });
      const loaded = await stagerB.load(workId, staged.manifest);
      expect(loaded.findings.map((f) => Buffer.from(f.bytes).toString())).toEqual(['finding one', 'from a file']);
      expect((await hostB.listDir(path.join(rootB, STAGED_DIR))).sort()).toEqual(staged.manifest.items.map((i) => path.basename(i.path)).sort());
      expect(await stagerB.discard(staged.manifest)).toBe(2);
      expect(await codeOfAsync(stagerB.load(workId, staged.manifest))).toBe('ERR_STAGED_FINDING');
      const huge = new Uint8Array(MAX_ETCD_STAGED_BYTES + 1);
      expect(await codeOfAsync(stagerA.stage(workId, [{ kind: 'queue', content: huge }], { status: 'ok', source: '000012' }))).toBe('ERR_STAGED_FINDING_TOO_LARGE');
      expect(await hostA.listDir(path.join(rootA, STAGED_DIR))).toEqual([]);
    } finally {
      await hostA.close();
      await hostB.close();
    }
  });

  it('keeps a trace run\'s trace in etcd for a coordinator on another host, after its findings are discarded', async () => {
    const prefix = nextPrefix();
    const options = LEASE_TABLE_OPTIONS.resolve(base(prefix));
    const rootA = await tempRoot();
    const rootB = await tempRoot();
    const hostA = await EtcdStagedFindings.open(options, rootA);
    const hostB = await EtcdStagedFindings.open(options, rootB);
    try {
      const stagerA = await StagedFindings.open(rootA, hostA, hostA.readFile);
      const stagerB = await StagedFindings.open(rootB, hostB, hostB.readFile);
      const workId = workIdOf({ job: 'traced' });
      const trace = Buffer.from('{"schema":"symfence-telemetry/1"}');
      const staged = await stagerA.stage(workId, [{ kind: 'queue', content: Buffer.from('found on the way') }], { status: 'ok', source: '000003', trace });
      expect(staged.manifest.trace?.path).toBe(`${TRACES_DIR}/${workId}.${staged.manifest.trace?.sha256}`);
      await stagerA.discard(staged.manifest);
      expect(Buffer.from((await stagerB.loadTrace(workId, staged.manifest))!).toString()).toBe(trace.toString());
      expect(await hostB.listDir(path.join(rootB, TRACES_DIR))).toEqual([path.basename(staged.manifest.trace!.path)]);
      expect(await stagerB.sweep(new Set([workId]))).toBe(0);
      expect(await stagerB.loadTrace(workId, staged.manifest)).toBeDefined();
    } finally {
      await hostA.close();
      await hostB.close();
    }
  });

  describe('configuration', () => {
    it('takes endpoints, prefix, TLS files, user and password file from flags-and-env names of one schema', () => {
      const env = {
        SYMFENCE_LEASE_STORE: 'etcd',
        SYMFENCE_ETCD_ENDPOINTS: '10.0.0.1:2379,https://etcd.example:2379',
        SYMFENCE_ETCD_PREFIX: 'campaign-7',
        SYMFENCE_ETCD_CA_FILE: '/ca.pem',
        SYMFENCE_ETCD_CERT_FILE: '/cert.pem',
        SYMFENCE_ETCD_KEY_FILE: '/key.pem',
        SYMFENCE_ETCD_USER: 'fuzz',
        SYMFENCE_ETCD_PASSWORD_FILE: '/pw',
        SYMFENCE_ETCD_TIMEOUT: '2s',
      };
      const options = LEASE_TABLE_OPTIONS.resolve(optionsFromEnv(LEASE_TABLE_OPTIONS, env));
      expect(options).toMatchObject({ store: 'etcd', etcdPrefix: 'campaign-7', etcdRequestTimeoutMs: 2000 });
      expect(etcdClientConfig(options)).toEqual({
        endpoints: ['10.0.0.1:2379', 'https://etcd.example:2379'],
        caFile: '/ca.pem',
        certFile: '/cert.pem',
        keyFile: '/key.pem',
        user: 'fuzz',
        passwordFile: '/pw',
        requestTimeoutMs: 2000,
      });
      const flags = Object.fromEntries(Object.entries(LEASE_TABLE_OPTIONS.specs).filter(([k]) => k.startsWith('etcd')).map(([k, spec]) => [k, (spec as { flag?: string }).flag]));
      expect(flags).toEqual({
        etcdEndpoints: 'etcd-endpoints',
        etcdPrefix: 'etcd-prefix',
        etcdCaFile: 'etcd-ca-file',
        etcdCertFile: 'etcd-cert-file',
        etcdKeyFile: 'etcd-key-file',
        etcdUser: 'etcd-user',
        etcdPasswordFile: 'etcd-password-file',
        etcdRequestTimeoutMs: 'etcd-timeout',
      });
    });

    it('refuses malformed endpoints and half-given TLS or auth with ERR_INVALID_OPTION naming the option', () => {
      expect(codeOf(() => parseEndpoints(''))).toBe('ERR_INVALID_OPTION');
      expect(codeOf(() => parseEndpoints('127.0.0.1'))).toBe('ERR_INVALID_OPTION');
      expect(codeOf(() => parseEndpoints('127.0.0.1:99999'))).toBe('ERR_INVALID_OPTION');
      expect(codeOf(() => parseEndpoints('ftp://h:1'))).toBe('ERR_INVALID_OPTION');
      expect(parseEndpoints(' a:1 , [::1]:2,http://b:3')).toEqual(['a:1', '[::1]:2', 'http://b:3']);
      const resolve = (o: Record<string, unknown>) => () => etcdClientConfig(LEASE_TABLE_OPTIONS.resolve({ etcdEndpoints: '127.0.0.1:1', ...o }));
      expect(codeOf(resolve({ etcdCertFile: '/c' }))).toBe('ERR_INVALID_OPTION');
      expect(codeOf(resolve({ etcdPasswordFile: '/p' }))).toBe('ERR_INVALID_OPTION');
      expect(codeOf(() => LEASE_TABLE_OPTIONS.resolve({ store: 'zookeeper' }))).toBe('ERR_INVALID_OPTION');
    });

    it('fails to open with ERR_ETCD_UNAVAILABLE, within the request timeout, when no etcd answers', async () => {
      const port = await freePort();
      const startMs = performance.now();
      const error = await openWork(await tempRoot(), base(nextPrefix(), { etcdEndpoints: `127.0.0.1:${port}`, etcdRequestTimeoutMs: 500 })).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'ERR_ETCD_UNAVAILABLE', details: { endpoints: [`127.0.0.1:${port}`] } });
      expect(performance.now() - startMs).toBeLessThan(30_000);
      expect(await codeOfAsync(openWork(await tempRoot(), base(nextPrefix(), { etcdCaFile: '/nonexistent/ca.pem' })))).toBe('ERR_INVALID_OPTION');
    });

    it('passes user and password through (file or environment), and never prints the password', async () => {
      const auth = await startEtcd();
      const admin = new Etcd3({ hosts: auth.endpoints });
      try {
        await admin.user('root').create('s3cret-root');
        await admin.user('fuzz').create('s3cret-fuzz');
        const role = await admin.role('fuzzer').create();
        await role.grant({ permission: 'Readwrite', range: admin.range({ prefix: 'auth-' }) });
        await admin.user('fuzz').addRole('fuzzer');
        await admin.user('root').addRole('root');
        await admin.auth.authEnable({});
        const dir = await tempRoot();
        const good = path.join(dir, 'pw');
        const bad = path.join(dir, 'bad');
        await writeFile(good, 's3cret-fuzz\n');
        await writeFile(bad, 'wrong-password\n');
        const opts = { store: 'etcd', etcdEndpoints: auth.endpoints, etcdPrefix: 'auth-a', etcdUser: 'fuzz' };
        const table = await openWork(await tempRoot(), { ...opts, etcdPasswordFile: good });
        expect((await table.claim(workIdOf({ auth: 1 }), { job: 1 }, { owner: 'c', nowMs: 10 * S })).ok).toBe(true);
        await table.close();
        const refused = await openWork(await tempRoot(), { ...opts, etcdPasswordFile: bad, etcdRequestTimeoutMs: 2000 }).catch((e: unknown) => e);
        expect(refused).toMatchObject({ code: 'ERR_ETCD_UNAVAILABLE' });
        expect(JSON.stringify({ message: (refused as Error).message, details: (refused as { details?: unknown }).details })).not.toContain('wrong-password');
        process.env['SYMFENCE_ETCD_PASSWORD'] = 's3cret-fuzz';
        try {
          const fromEnv = await openWork(await tempRoot(), { ...opts, etcdPrefix: 'auth-b' });
          expect(fromEnv.store).toBe('etcd');
          await fromEnv.close();
        } finally {
          delete process.env['SYMFENCE_ETCD_PASSWORD'];
        }
        // No password anywhere: refused before connecting.
        expect(await codeOfAsync(openWork(await tempRoot(), { ...opts, etcdPrefix: 'auth-c' }))).toBe('ERR_INVALID_OPTION');
      } finally {
        admin.close();
        await auth.stop();
      }
    });
  });

  it.skipIf(spawnSync('openssl', ['version']).status !== 0)('passes TLS through: CA, client certificate and key; refuses a client without a certificate', async () => {
    const dir = await tempRoot();
    const f = (name: string): string => path.join(dir, name);
    const openssl = (...args: string[]): void => {
      const run = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
      if (run.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${run.stderr}`);
    };
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=symfence-test-ca', '-keyout', f('ca.key'), '-out', f('ca.pem'));
    await writeFile(f('san.cnf'), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n');
    for (const who of ['server', 'client']) {
      openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${who}`, '-keyout', f(`${who}.key`), '-out', f(`${who}.csr`));
      openssl('x509', '-req', '-in', f(`${who}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '1', '-extfile', f('san.cnf'), '-out', f(`${who}.pem`));
    }
    const secure = await startEtcd({ tls: { certFile: f('server.pem'), keyFile: f('server.key'), caFile: f('ca.pem'), client: { certFile: f('client.pem'), keyFile: f('client.key') } } });
    try {
      const opts = { store: 'etcd', etcdEndpoints: secure.endpoints, etcdPrefix: 'tls', etcdCaFile: f('ca.pem') };
      const table = await openWork(await tempRoot(), { ...opts, etcdCertFile: f('client.pem'), etcdKeyFile: f('client.key') });
      expect((await table.claim(workIdOf({ tls: 1 }), { job: 1 }, { owner: 'c', nowMs: 10 * S })).ok).toBe(true);
      await table.close();
      expect(await codeOfAsync(openWork(await tempRoot(), { ...opts, etcdRequestTimeoutMs: 2000 }))).toBe('ERR_ETCD_UNAVAILABLE');
      expect(await codeOfAsync(openWork(await tempRoot(), { ...opts, etcdEndpoints: secure.endpoints, etcdCaFile: undefined, etcdRequestTimeoutMs: 2000 }))).toBe('ERR_ETCD_UNAVAILABLE');
    } finally {
      await secure.stop();
    }
  });

  describe('connection loss', () => {
    it('answers a lost session\'s attached targets as lost while etcd is unreachable, a branch with answers too (its answers are in its answer record)', async () => {
      const lossy = await startEtcd();
      let clockMs = 0;
      const deps = { monotonicNowMs: () => performance.now() + clockMs };
      const table = await openTarget(await tempRoot(), { store: 'etcd', etcdEndpoints: lossy.endpoints, etcdPrefix: 'loss-targets', etcdRequestTimeoutMs: 300, leaseTtlMs: 10 * S }, deps);
      const member = lossy.members[0]!;
      const x = 'c'.repeat(64);
      try {
        const first = await table.claimGroup([41n], { path: 'g' }, { owner: 'c', nowMs: 10 * S, input: x });
        if (!first.ok) throw new Error('claim failed');
        expect(await table.releaseGroup([41n], first.token, { nowMs: 10 * S, answers: { input: x, settled: [41n] } })).toEqual({ ok: true });
        const answered = await table.claimGroup([41n], { path: 'g' }, { owner: 'c', nowMs: 11 * S, input: 'd'.repeat(64) });
        const plain = await table.claimGroup([42n], { path: 'g' }, { owner: 'c', nowMs: 11 * S });
        if (!answered.ok || !plain.ok) throw new Error('claims failed');
        await freezeMember(member);
        clockMs += 6 * S; // past the keep-alive deadline: the session is given up
        expect(await table.heartbeatGroup([42n], plain.token, { nowMs: 12 * S })).toMatchObject({ ok: false, reason: 'stale' });
        expect(await table.heartbeatGroup([41n], answered.token, { nowMs: 12 * S })).toMatchObject({ ok: false, reason: 'stale' });
      } finally {
        member.process?.kill('SIGCONT');
        await table.close();
        await lossy.stop();
      }
    });

    it('answers the records of a session past its keep-alive deadline as lost while etcd is unreachable, then recovers', async () => {
      const lossy = await startEtcd();
      let clockMs = 0;
      const deps = { monotonicNowMs: () => performance.now() + clockMs };
      const table = await openWork(await tempRoot(), { store: 'etcd', etcdEndpoints: lossy.endpoints, etcdPrefix: 'loss', etcdRequestTimeoutMs: 300, leaseTtlMs: 10 * S }, deps);
      const member = lossy.members[0]!;
      const losses: unknown[] = [];
      table.onSessionLost((event) => losses.push(event));
      try {
        const id = workIdOf({ job: 'loss' });
        const claim = await table.claim(id, { job: 1 }, { owner: 'c', nowMs: 10 * S });
        if (!claim.ok) throw new Error('claim failed');
        await freezeMember(member);
        // Unreachable, session still inside its deadline: the outcome is unknown, nothing aborts.
        const unknown = await table.heartbeatMany([[id, claim.token]], { nowMs: 11 * S }).catch((e: unknown) => e);
        expect(unknown).toMatchObject({ code: 'ERR_LEASE_IO' });
        // Past the keep-alive deadline (half the TTL without an acknowledgement): definitely lost.
        clockMs += 6 * S;
        expect(await table.heartbeatMany([[id, claim.token]], { nowMs: 12 * S })).toMatchObject({ renewed: [], lost: [id] });
        expect(await table.beginCommit(id, claim.token, { nowMs: 12 * S, commit: { findings: [] } })).toMatchObject({ ok: false, reason: 'stale' });
        member.process!.kill('SIGCONT');
        // Reachable again: the fence is the server's record (ours, unless the server expired it),
        // and a new session carries new claims.
        const other = workIdOf({ job: 'after' });
        // The client's circuit breaker reopens on its own schedule: retry as the coordinator does
        // (bounded; only a broken fixture reaches the deadline).
        let claimed: Awaited<ReturnType<typeof table.claim>> | undefined;
        const deadline = performance.now() + 30_000;
        while (claimed === undefined) {
          claimed = await table.claim(other, { job: 2 }, { owner: 'c', nowMs: 13 * S }).catch((error: unknown) => {
            if (performance.now() > deadline) throw error;
            return new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 100));
          });
        }
        expect(claimed.ok).toBe(true);
        if (claimed.ok) expect(await table.heartbeat(other, claimed.token, { nowMs: 14 * S })).toEqual({ ok: true });
        expect(losses).toEqual([expect.objectContaining({ sessionsLost: 1 })]);
      } finally {
        member.process?.kill('SIGCONT');
        await table.close();
        await lossy.stop();
      }
    });
  });
});
