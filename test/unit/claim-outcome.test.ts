import { describe, expect, it } from 'vitest';
import { claimOutcomeOfAnswer } from '../../src/io/io-adapters.js';
import { groupClaimOutcome, workClaimOutcome } from '../../src/lease/claim-outcome.js';

const holder = (status: 'leased' | 'committing' | 'done') => ({ id: 'a'.repeat(64), status, owner: 'c2', updatedMs: 5 });

describe('claim outcomes from the lease tables to the ports', () => {
  it('keeps only the token of a granted work claim', () => {
    expect(workClaimOutcome({ ok: true, token: 't1', attempts: 2, steals: 1, previousOwner: 'c2' })).toEqual({ ok: true, token: 't1' });
  });

  it('refuses a work claim held by a done record with done naming who finished it, and one held by a live or committing record with conflict', () => {
    expect(workClaimOutcome({ ok: false, reason: 'conflict', holder: holder('done') })).toEqual({ ok: false, reason: 'done', finished: { owner: 'c2' } });
    // A done holder read with doneCommit carries its manifest: the refusal names it (a shared trace).
    expect(workClaimOutcome({ ok: false, reason: 'conflict', holder: { ...holder('done'), commit: { schema: 'm' } } })).toEqual({ ok: false, reason: 'done', finished: { owner: 'c2', commit: { schema: 'm' } } });
    expect(workClaimOutcome({ ok: false, reason: 'conflict', holder: holder('leased') })).toEqual({ ok: false, reason: 'conflict' });
    expect(workClaimOutcome({ ok: false, reason: 'conflict', holder: holder('committing') })).toEqual({ ok: false, reason: 'conflict' });
    expect(workClaimOutcome({ ok: false, reason: 'corrupt', corrupt: { id: 'b'.repeat(64), detail: 'bad json' } })).toEqual({ ok: false, reason: 'corrupt' });
  });

  it('maps a group claim the same way directly and through the I/O thread, the thread adding a detail for logs', () => {
    const conflict = { ok: false, reason: 'conflict', holders: [{ ...holder('leased'), target: 7n }] } as const;
    expect(groupClaimOutcome({ ok: true, token: 't2', ids: ['c'.repeat(64)] })).toEqual({ ok: true, token: 't2' });
    expect(claimOutcomeOfAnswer({ ok: true, token: 't2', ids: ['c'.repeat(64)] })).toEqual({ ok: true, token: 't2' });
    expect(groupClaimOutcome(conflict)).toEqual({ ok: false, reason: 'conflict' });
    expect(claimOutcomeOfAnswer(conflict)).toEqual({ ok: false, reason: 'conflict', detail: '7@c2' });
    expect(claimOutcomeOfAnswer({ ok: false, reason: 'local-conflict', targets: [7n] })).toMatchObject({ ok: false, reason: 'conflict' });
    expect(claimOutcomeOfAnswer({ ok: false, reason: 'failed', code: 'ERR_LEASE_IO', message: 'EIO' })).toEqual({ ok: false, reason: 'error', detail: 'ERR_LEASE_IO: EIO' });
  });
});
