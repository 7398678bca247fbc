/**
 * An etcd past its backend quota (the NOSPACE alarm) against a real local member started with a
 * 2 MiB quota: a write is refused with `ERR_LEASE_IO`, and a new table at open with
 * `ERR_ETCD_UNAVAILABLE`, each saying what to do; nothing is lost (the refused write is checked,
 * and said, to be applied or not: etcd applies the write that crosses its quota and refuses it
 * all the same); the table still reads (the client does not stop talking to the member over a
 * refusal it cannot retry away); and it writes again once an operator has compacted,
 * defragmented and disarmed.
 */
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectLeaseTable } from '../../src/lease/lease-inspect.js';
import type { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { S, openTarget, tempRoot } from '../helpers/lease-fixtures.js';
import { etcdUnavailable, giveSpaceBack, startEtcd, type EtcdCluster } from '../helpers/etcd-server.js';

const unavailable = etcdUnavailable();
if (unavailable !== undefined && process.env['CI'] === 'true') throw new Error(`etcd tests cannot run in CI: ${unavailable}`);

const QUOTA_BYTES = 2 * 1024 * 1024;

describe.skipIf(unavailable !== undefined)('an etcd out of space', () => {
  let cluster: EtcdCluster;
  let client: Etcd3;
  beforeAll(async () => {
    cluster = await startEtcd({ extraArgs: ['--quota-backend-bytes', String(QUOTA_BYTES)] });
    client = new Etcd3({ hosts: cluster.endpoints });
  });
  afterAll(async () => {
    client?.close();
    await cluster?.stop();
  });

  /** Claims and releases fresh targets with a 60 KB payload until etcd refuses one; the error and the target. */
  async function fillUntilRefused(targets: FencedTargetLeaseTable): Promise<{ error: Error & { code?: string; details?: Record<string, unknown> }; target: bigint; step: 'claim' | 'release'; token?: string }> {
    const payload = { blob: 'x'.repeat(60_000) };
    // Each round leaves about 120 KB of history; the quota is reached within about 20 rounds.
    for (let i = 0; i < 200; i++) {
      const target = BigInt(1000 + i);
      const nowMs = 20 * S + i;
      let claim;
      try {
        claim = await targets.claimGroup([target], payload, { owner: 'filler', nowMs });
      } catch (error) {
        return { error: error as Error, target, step: 'claim' };
      }
      if (!claim.ok) throw new Error(`claim of ${target} refused: ${claim.reason}`);
      try {
        await targets.releaseGroup([target], claim.token, { nowMs });
      } catch (error) {
        return { error: error as Error, target, step: 'release', token: claim.token };
      }
    }
    throw new Error(`etcd took 200 rounds of 120 KB under a quota of ${QUOTA_BYTES} bytes`);
  }

  it('refuses a write (ERR_LEASE_IO) and a new table (ERR_ETCD_UNAVAILABLE), each saying what to do; loses nothing, still reads, and writes again once the space is given back', async () => {
    const root = await tempRoot();
    const storeOptions = { store: 'etcd', etcdEndpoints: cluster.endpoints, etcdPrefix: 'nospace' };
    const targets = await openTarget(root, storeOptions);
    try {
      const held = await targets.claimGroup([1n], { path: 'held' }, { owner: 'holder', nowMs: 10 * S });
      if (!held.ok) throw new Error('the first claim failed');

      const refused = await fillUntilRefused(targets);
      expect(refused.error.code).toBe('ERR_LEASE_IO');
      expect(refused.error.message).toContain('database space exceeded');
      expect(refused.error.message).toContain('NOSPACE');
      expect(refused.error.message).toContain('etcdctl alarm disarm');
      expect(refused.error.details?.['etcdAlarm']).toBe('NOSPACE');
      // etcd applies the one write that crosses its quota and answers it NOSPACE all the same; every
      // write after it is refused before it is applied. The check after the failure reads the
      // records back: a claim it finds applied succeeds (its records hold the bytes it wrote), so
      // a refused claim applied nothing; a release only deletes, which proves nothing, so it may
      // be either (`restored`: nothing applied), and the message says which.
      const restored = refused.error.details?.['restored'];
      expect(typeof restored).toBe('boolean');
      if (refused.step === 'claim') expect(restored).toBe(true);
      expect(refused.error.message.includes('nothing was written'), `${refused.step}: ${refused.error.message} ${JSON.stringify(refused.error.details)}`).toBe(restored);
      const alarms = await client.maintenance.alarm({ action: 'Get', memberID: 0, alarm: 'None' });
      expect(alarms.alarms.map((a) => a.alarm)).toEqual(['Nospace']);

      // Reads still work: a claim of the held target is refused `conflict` by a transaction of compares alone.
      const other = await targets.claimGroup([1n], { path: 'other' }, { owner: 'other', nowMs: 11 * S });
      expect(other).toMatchObject({ ok: false, reason: 'conflict' });
      // Nothing lost: the refused write left its target as the check said, as it was or as written.
      const claimedAtTheEnd = refused.step === 'claim' ? restored === false : restored === true;
      const leased = claimedAtTheEnd ? 2 : 1;
      expect(await client.getAll().prefix('nospace/target/r/').keys()).toHaveLength(leased);
      // What `symfence leases` shows is still there to see.
      const inspected = await inspectLeaseTable(root, { nowMs: 12 * S, leaseTtlMs: 30 * S, storeOptions });
      expect(inspected).toMatchObject({ counts: { leased, corrupt: 0 } });

      // A new table cannot be made: refused at open, before anything is claimed, saying what to do.
      const opening = await openTarget(await tempRoot(), { ...storeOptions, etcdPrefix: 'nospace-new' }).then(
        () => undefined,
        (error: unknown) => error as Error & { code?: string; details?: Record<string, unknown> },
      );
      expect(opening?.code).toBe('ERR_ETCD_UNAVAILABLE');
      expect(opening?.message).toContain('etcdctl alarm disarm');
      expect(opening?.details?.['etcdAlarm']).toBe('NOSPACE');

      // The operator gives the space back: compact the history, defragment, disarm.
      await giveSpaceBack(cluster.endpoints);

      // The same table writes again, on the same connection.
      if (refused.step === 'release' && restored === true) expect(await targets.releaseGroup([refused.target], refused.token!, { nowMs: 30 * S })).toEqual({ ok: true });
      const again = await targets.claimGroup([refused.target + 10_000n], { path: 'again' }, { owner: 'filler', nowMs: 31 * S });
      expect(again.ok).toBe(true);
      expect(await targets.releaseGroup([1n], held.token, { nowMs: 32 * S })).toEqual({ ok: true });
    } finally {
      await targets.close();
    }
  });
});
