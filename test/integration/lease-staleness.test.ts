// The one staleness rule (src/lease/lease-record.ts `leaseEndMs`, docs/lease-format.md "Expiry"):
// the rule itself, and the lease tables' own decisions (a record's expiry, a taken-over
// publication's and a committing result's silence) made with it, on a real work table.
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { rm } from 'node:fs/promises';
import { isActiveLease, isExpiredLease, isStaleSince, leaseEndMs, MAX_LEASE_TTL_MS, type LeaseRecord } from '../../src/lease/lease-record.js';
import { ID_A0, S, openWork, tempRoot } from '../helpers/lease-fixtures.js';

const SKEW_MS = 300_000;

describe('leaseEndMs', () => {
  it('ends a renewal one TTL later, the TTL capped, and a time beyond the clock skew at once', () => {
    expect(leaseEndMs(1_000, 500, 1_200)).toBe(1_500);
    expect(leaseEndMs(0, 10 * MAX_LEASE_TTL_MS, 0)).toBe(MAX_LEASE_TTL_MS);
    // Ahead of the reader's clock, but within the skew: judged as written.
    expect(leaseEndMs(1_000 + SKEW_MS, 500, 1_000)).toBe(1_000 + SKEW_MS + 500);
    // Beyond the skew: outside the clock assumption, ends now.
    expect(leaseEndMs(1_001 + SKEW_MS, 500, 1_000)).toBe(1_000);
    expect(leaseEndMs(2_000, 500, 1_000, 999)).toBe(1_000);
  });

  it('calls the end itself stale', () => {
    expect(isStaleSince(1_000, 500, 1_499)).toBe(false);
    expect(isStaleSince(1_000, 500, 1_500)).toBe(true);
    expect(isStaleSince(1_000, 0, 1_000)).toBe(true);
    expect(isStaleSince(1_001 + SKEW_MS, 500, 1_000)).toBe(true);
  });

  it('is the expiry of every leased record: expired exactly when stale since its update, with the holder’s TTL', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.integer({ min: -2 * SKEW_MS, max: 2 * MAX_LEASE_TTL_MS }),
        fc.option(fc.integer({ min: 1, max: 2 * MAX_LEASE_TTL_MS }), { nil: undefined }),
        fc.integer({ min: 1, max: 2 * MAX_LEASE_TTL_MS }),
        (updatedMs, ageMs, leaseTtlMs, readerTtlMs) => {
          const record = { status: 'leased', updatedMs, ...(leaseTtlMs !== undefined ? { leaseTtlMs } : {}) } as LeaseRecord;
          const nowMs = updatedMs + ageMs;
          const stale = isStaleSince(updatedMs, leaseTtlMs ?? readerTtlMs, nowMs);
          expect(isExpiredLease(record, nowMs, readerTtlMs)).toBe(stale);
          expect(isActiveLease(record, nowMs, readerTtlMs)).toBe(!stale);
        },
      ),
    );
  });
});

describe('the work table decides a publication’s silence by the same rule', () => {
  const roots: string[] = [];
  afterEach(async () => {
    for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
  });

  async function committing(): Promise<{ table: Awaited<ReturnType<typeof openWork>>; token: string }> {
    const root = await tempRoot();
    roots.push(root);
    const table = await openWork(root);
    const claim = await table.claim(ID_A0, { seed: 'a' }, { owner: 'owner', nowMs: 1 * S });
    if (!claim.ok) throw new Error('claim failed');
    expect((await table.beginCommit(ID_A0, claim.token, { nowMs: 2 * S, commit: { schema: 'test' } })).ok).toBe(true);
    return { table, token: claim.token };
  }

  it('leaves a committing result to its owner until it is stale since its last renewal, then replays it', async () => {
    const { table, token } = await committing();
    let published = 0;
    const publish = (): void => void (published += 1);
    // TTL 10 s, renewed at 2 s: live through 11.999 s, stale at 12 s.
    expect(await table.replayCommitOnce(ID_A0, token, publish, { nowMs: 12 * S - 1, minIdleMs: 10 * S })).toBe('live');
    expect(published).toBe(0);
    expect(await table.replayCommitOnce(ID_A0, token, publish, { nowMs: 12 * S, minIdleMs: 10 * S })).toBe('completed');
    expect(published).toBe(1);
  });

  /** A publication claim as the I/O service's publishCommitted runs it: one operation of a batch. */
  async function claimPublication(table: Awaited<ReturnType<typeof openWork>>, token: string, nowMs: number, minIdleMs: number): Promise<unknown> {
    const { outcomes } = await table.executeBatch([table.planClaimPublication(ID_A0, token, { nowMs, minIdleMs })]);
    const outcome = outcomes[0]!;
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  it('lets the owner publish its own result (minIdleMs 0) when its heartbeat renewed the record later than the publication\'s time', async () => {
    const { table, token } = await committing();
    // The heartbeat of the same I/O batch ran first, at 5 s; the publication was asked at 4 s.
    expect(await table.heartbeat(ID_A0, token, { nowMs: 5 * S })).toEqual({ ok: true });
    expect(await claimPublication(table, token, 4 * S, 0)).toMatchObject({ state: 'publish' });
    // A replayer asking at the same moment still finds the owner alive.
    expect(await claimPublication(table, token, 4 * S, 1)).toEqual({ state: 'live' });
  });

  it('keeps a taken-over publication live for one TTL from the takeover, and not at all when the takeover is dated beyond the clock skew', async () => {
    const { table, token } = await committing();
    const claimAt = 20 * S;
    expect(await claimPublication(table, token, claimAt, 10 * S)).toMatchObject({ state: 'publish', takenOverMs: claimAt });
    // Another replayer, its own silence check satisfied, still finds the takeover live for a TTL.
    expect(await claimPublication(table, token, claimAt + 10 * S - 1, 0)).toEqual({ state: 'live' });
    expect(await claimPublication(table, token, claimAt + 10 * S, 0)).toMatchObject({ state: 'publish' });

    const ahead = await committing();
    const far = 60 * S + SKEW_MS + 1;
    // A replayer whose clock runs far ahead takes the publication over …
    expect(await claimPublication(ahead.table, ahead.token, far, 10 * S)).toMatchObject({ state: 'publish', takenOverMs: far });
    // … and a replayer on the right clock is not held off by a time outside the clock assumption.
    expect(await claimPublication(ahead.table, ahead.token, 60 * S, 0)).toMatchObject({ state: 'publish' });
  });
});
