import { describe, expect, it } from 'vitest';
import { formatActionFile, normalizeActions, normalizeJob, targetGroup } from '../../src/scheduler/replay-job.js';
import { toBranchId, MAX_BRANCH_ID } from '../../src/scheduler/branch-id.js';
import type { SymfenceError } from '../../src/errors.js';

describe('branch ids', () => {
  it.each([
    [true, 0n],
    [Number.NaN, 0n],
    [Number.POSITIVE_INFINITY, 0n],
    [-1, 0n],
    [1.5, 0n],
    [2 ** 64, 0n],
    ['18446744073709551616', 0n],
    [{}, 0n],
    [null, 0n],
    ['0x10', 0n],
    ['77', 77n],
    [77, 77n],
    ['18446744073709551615', MAX_BRANCH_ID],
    [MAX_BRANCH_ID, MAX_BRANCH_ID],
  ] as [unknown, bigint][])('maps case %# to the expected id', (raw, expected) => {
    expect(toBranchId(raw)).toBe(expected);
  });
});

describe('job normalisation', () => {
  it('keeps the first action per branch, lower-cases kinds and drops invalid ids and kinds', () => {
    const actions = normalizeActions([
      [10, 'SOLVE'],
      [10, 'sample'],
      [20, 'sample'],
      [30, 'skip'],
      [0, 'solve'],
      [40, 'bad'],
    ]);
    expect(actions).toEqual([
      { branch: 10n, kind: 'solve' },
      { branch: 20n, kind: 'sample' },
      { branch: 30n, kind: 'skip' },
    ]);
    expect(formatActionFile(actions)).toBe('10 solve\n20 sample\n30 skip\n');
  });

  it('caps the action plan at 64 entries', () => {
    const raw = Array.from({ length: 100 }, (_, i) => ({ branch: String(i + 1), kind: 'solve' }));
    expect(normalizeActions(raw)).toHaveLength(64);
  });

  it('turns an invalid primary target into an untargeted job', () => {
    const job = normalizeJob({ seed: 's', targetBranch: -5, actions: [] });
    expect(job.targetBranch).toBe(0n);
    expect(targetGroup(job)).toEqual([]);
  });

  it.each([
    [{ seed: '' }, 'empty seed'],
    [{ seed: 7 }, 'numeric seed'],
    [{ seed: 's', actions: 'solve 10' }, 'actions not a list'],
  ])('rejects %j (%s) with ERR_INVALID_JOB', (raw) => {
    let error: SymfenceError | undefined;
    try {
      normalizeJob(raw as never);
    } catch (e) {
      error = e as SymfenceError;
    }
    expect(error?.code).toBe('ERR_INVALID_JOB');
  });
});

describe('target group', () => {
  it('excludes skips and keeps the primary first', () => {
    const job = normalizeJob({ seed: 's', targetBranch: 77, actions: [[88, 'sample'], [77, 'solve'], [99, 'skip']] });
    expect(targetGroup(job)).toEqual([77n, 88n]);
  });

  it('uses the first non-skip action as key when there is no primary', () => {
    const job = normalizeJob({ seed: 's', targetBranch: 0, actions: [[88, 'solve'], [99, 'skip']] });
    expect(targetGroup(job)).toEqual([88n]);
  });

  it('treats a skip-only job as untargeted', () => {
    expect(targetGroup(normalizeJob({ seed: 's', actions: [[99, 'skip']] }))).toEqual([]);
  });

  it('caps the group at 64 members', () => {
    const actions = Array.from({ length: 64 }, (_, i) => [i + 100, 'solve']);
    const job = normalizeJob({ seed: 's', targetBranch: 1, actions });
    expect(targetGroup(job)).toHaveLength(64);
    expect(targetGroup(job)[0]).toBe(1n);
  });
});
