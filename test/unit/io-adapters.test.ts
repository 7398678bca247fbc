import { describe, expect, it } from 'vitest';
import { LeaseIoError } from '../../src/errors.js';
import { IoSharedTargetClaims, type TargetClaimsClient } from '../../src/io/io-adapters.js';
import type { BatchClaimResult, GroupClaimRequest } from '../../src/io/io-requests.js';

function fakeClient(answer: (groups: readonly GroupClaimRequest[]) => Promise<BatchClaimResult[]>): TargetClaimsClient & { calls: GroupClaimRequest[][] } {
  const calls: GroupClaimRequest[][] = [];
  return {
    calls,
    claimGroups: async (groups) => {
      calls.push([...groups]);
      return answer(groups);
    },
    releaseGroups: async () => undefined,
  };
}

describe('IoSharedTargetClaims', () => {
  it('maps every claim answer onto the scheduler\'s outcome shape in order, in one request', async () => {
    const client = fakeClient(async () => [
      { ok: true, token: 't1', ids: [] },
      { ok: false, reason: 'conflict', holders: [{ id: 'x', target: 2n, status: 'leased', owner: 'b', updatedMs: 0 }] },
      { ok: false, reason: 'local-conflict', targets: [3n] },
      { ok: false, reason: 'corrupt', corrupt: [{ id: 'y', target: 4n, detail: 'bad json' }] },
      { ok: false, reason: 'failed', code: 'ERR_LEASE_IO', message: 'disk' },
    ]);
    const claims = new IoSharedTargetClaims(client);
    const outcomes = await claims.claimGroups([[1n], [2n], [3n], [4n], [5n]], 10);
    expect(client.calls).toHaveLength(1);
    expect(outcomes.map((o) => (o.ok ? o.token : o.reason))).toEqual(['t1', 'conflict', 'conflict', 'corrupt', 'error']);
    expect(client.calls[0]!.map((g) => g.mirrorOwner)).toEqual([1, 1, 1, 1, 1]);
  });

  it('answers error for every group when the whole request fails, and for an empty group without sending it', async () => {
    const client = fakeClient(async () => {
      throw new LeaseIoError('lock phase failed', {});
    });
    const outcomes = await new IoSharedTargetClaims(client).claimGroups([[1n], []], 10);
    expect(outcomes).toEqual([
      { ok: false, reason: 'error', detail: 'ERR_LEASE_IO: lock phase failed' },
      { ok: false, reason: 'error', detail: 'empty target group' },
    ]);
    expect(client.calls[0]).toHaveLength(1);
  });

  it('passes the owner the scheduler reserved the group under', async () => {
    const client = fakeClient(async (groups) => groups.map(() => ({ ok: true, token: 't', ids: [] }) as BatchClaimResult));
    const inflight = { ownerOf: (t: bigint) => (t === 7n ? 33 : 0) };
    await new IoSharedTargetClaims(client, { inflight: inflight as never, defaultMirrorOwner: 9 }).claimGroups([[7n, 8n], [8n]], 1);
    expect(client.calls[0]!.map((g) => g.mirrorOwner)).toEqual([33, 9]);
  });
});
