import { describe, expect, it } from 'vitest';
import { applyHints, claimDispatchGroup } from '../../src/scheduler/target-contract.js';
import { HintFile, parseHint } from '../../src/scheduler/hints.js';
import { normalizeJob } from '../../src/scheduler/replay-job.js';
import { MapLocalReservations } from '../../src/scheduler/map-local-reservations.js';
import type { SymfenceError } from '../../src/errors.js';
import { REJECT, ScriptedSharedClaims, scheduler, sha, tel } from './scheduler-fixtures.js';

const leasedJob = normalizeJob({ seed: 's', targetBranch: 77, actions: [[77, 'solve'], [88, 'sample'], [99, 'skip']] });

function hintError(fn: () => unknown): SymfenceError {
  try {
    fn();
  } catch (e) {
    return e as SymfenceError;
  }
  throw new Error('expected ERR_HINT_INVALID');
}

describe('target contract', () => {
  it('restores the leased target and actions after a hint but keeps its strategy and focus', () => {
    const hint = parseHint({ targetBranch: '999', actions: [['999', 'solve'], ['1000', 'sample']], strategy: 6, focus: { lo: 2, hi: 9 } });
    const out = applyHints({ job: leasedJob, strategy: 1 }, [hint]);
    expect(out.plan.job).toBe(leasedJob);
    expect(out.group).toEqual([77n, 88n]);
    expect(out.plan.strategy).toBe(6);
    expect(out.plan.focus).toEqual({ kind: 'range', lo: 2, hi: 9 });
    expect(out.needsClaim).toBe(false);
  });

  it('lets an untargeted job gain a target from a hint and asks for a dispatch-time claim', () => {
    const plain = normalizeJob({ seed: 's' });
    const out = applyHints({ job: plain }, [undefined, parseHint({ targetBranch: '500', actions: [['500', 'solve'], ['501', 'skip']] })]);
    expect(out.plan.job).toMatchObject({ seed: 's', targetBranch: 500n });
    expect(out.group).toEqual([500n]);
    expect(out.needsClaim).toBe(true);
  });

  it('drops hint actions that do not fit the 64-member group, so every solved branch is leased', () => {
    const plain = normalizeJob({ seed: 's' });
    const actions = Array.from({ length: 64 }, (_, i) => [String(i + 1), 'solve']);
    // Primary 1000 plus 64 distinct solve actions: 65 branches for a group of at most 64.
    const out = applyHints({ job: plain }, [parseHint({ targetBranch: '1000', actions })]);
    expect(out.group).toHaveLength(64);
    expect(out.group[0]).toBe(1000n);
    const solved = out.plan.job.actions.filter((a) => a.kind !== 'skip').map((a) => a.branch);
    expect(solved).toHaveLength(63);
    expect(solved.every((b) => out.group.includes(b))).toBe(true);
    // Skip actions are never leased and always kept.
    const withSkip = applyHints({ job: plain }, [parseHint({ targetBranch: '1000', actions: [['2000', 'skip'], ...actions.slice(0, 63)] })]);
    expect(withSkip.plan.job.actions).toHaveLength(64);
  });

  it('forces the sampling strategy when the plan carries a sample action', () => {
    expect(applyHints({ job: leasedJob, strategy: 0 }, []).plan.strategy).toBe(6);
  });

  it('claims a hint-given group locally then in the shared table', async () => {
    const local = new MapLocalReservations();
    const shared = new ScriptedSharedClaims();
    const claim = await claimDispatchGroup([500n], 7, { local, shared }, 0);
    expect(claim).toEqual({ ok: true, group: [500n], owner: 7, token: 'tok-1' });
    expect(local.ownerOf(500n)).toBe(7);
  });

  it('releases the local reservation when the shared table rejects the dispatch claim', async () => {
    const local = new MapLocalReservations();
    const claim = await claimDispatchGroup([500n, 501n], 7, { local, shared: new ScriptedSharedClaims(() => REJECT) }, 0);
    expect(claim).toEqual({ ok: false, reason: 'conflict' });
    expect(local.reserved().size).toBe(0);
  });

  it('releases the local reservation before a shared-claim exception propagates', async () => {
    const local = new MapLocalReservations();
    await expect(claimDispatchGroup([500n], 7, { local, shared: new ScriptedSharedClaims(() => 'throw') }, 0)).rejects.toMatchObject({ code: 'EIO' });
    expect(local.reserved().size).toBe(0);
  });

  it('does not ask the shared table when the group is busy locally', async () => {
    const local = new MapLocalReservations();
    local.tryReserveGroup([501n], 1);
    const shared = new ScriptedSharedClaims();
    expect(await claimDispatchGroup([500n, 501n], 7, { local, shared }, 0)).toEqual({ ok: false, reason: 'local-conflict' });
    expect(shared.calls).toEqual([]);
    expect(local.has(500n)).toBe(false);
  });
});

describe('hint files', () => {
  it('finds hints by sha256 before path', () => {
    const file = new HintFile([
      { path: '/q/a', strategy: 1 },
      { sha256: sha(1), strategy: 2 },
    ]);
    expect(file.hintFor({ seed: 'a', sha256: sha(1), path: '/q/a' })?.strategy).toBe(2);
    expect(file.hintFor({ seed: 'a', sha256: sha(9), path: '/q/a' })?.strategy).toBe(1);
    expect(file.hintFor({ seed: 'b', sha256: sha(9), path: '/q/b' })).toBeUndefined();
  });

  it.each([
    ['not a list', { sha256: sha(1) }, '$'],
    ['no key', [{ strategy: 1 }], '[0]'],
    ['bad sha256', [{ sha256: 'ABC' }], '[0].sha256'],
    ['unknown field', [{ path: '/q', target_branch: '5' }], '[0].target_branch'],
    ['zero target', [{ path: '/q', targetBranch: '0' }], '[0].targetBranch'],
    ['strategy out of range', [{ path: '/q', strategy: 9 }], '[0].strategy'],
    ['inverted focus', [{ path: '/q', focus: { lo: 5, hi: 2 } }], '[0].focus'],
    ['actions not a list', [{ path: '/q', actions: '5 solve' }], '[0].actions'],
  ])('rejects %s with ERR_HINT_INVALID naming the entry', (_name, raw, where) => {
    const error = hintError(() => new HintFile(raw));
    expect(error.code).toBe('ERR_HINT_INVALID');
    expect(error.details.where).toBe(where);
  });
});

describe('Scheduler.planDispatch', () => {
  it('applies registered hints to an admitted job under the target contract', async () => {
    const hints = new HintFile([{ sha256: sha(1), targetBranch: '5', strategy: 3, focus: [4, 4, 2] }]);
    const { s } = scheduler(['seed'], { lanes: 'fallback', hints: [hints] });
    s.observe({ seed: 'seed', telemetry: tel({ open: [91] }), reward: 0.5 }, 0);
    const [job] = await s.admit(1, 100_000);
    const out = s.planDispatch(job!);
    expect(out.plan.job.targetBranch).toBe(91n);
    expect(out.plan.strategy).toBe(3);
    expect(out.plan.focus).toEqual({ kind: 'set', offsets: [2, 4] });
    expect(out.needsClaim).toBe(false);
  });

  it('claims the target a hint gave an untargeted job at dispatch and releases it afterwards', async () => {
    const hints = new HintFile([{ path: '/queue/seed', targetBranch: '700', actions: [['700', 'solve'], ['701', 'sample']] }]);
    const shared = new ScriptedSharedClaims();
    const local = new MapLocalReservations();
    const { s } = scheduler(['seed'], { lanes: 'fallback', hints: [hints], shared, local });
    s.observe({ seed: 'seed', telemetry: null, reward: 0.5 }, 0);
    const [job] = await s.admit(1, 100_000);
    expect(job!.group).toEqual([]);
    const out = s.planDispatch(job!);
    expect(out).toMatchObject({ needsClaim: true, group: [700n, 701n] });
    expect(out.plan.strategy).toBe(6);
    const claim = await claimDispatchGroup(out.group, job!.owner, { local, shared }, 100_000);
    expect(claim).toMatchObject({ ok: true, token: 'tok-1' });
    expect(local.ownerOf(701n)).toBe(job!.owner);
    if (claim.ok) s.release(claim);
    expect(local.reserved().size).toBe(0);
  });
});
