/**
 * Work ids name durable records (work-lease files, staged results, jobs.jsonl): a change to how
 * they are computed would orphan every record on disk. These literals were computed before the
 * work identity and the lease tables shared one canonical JSON, and must never change.
 */
import { describe, expect, it } from 'vitest';
import { jobWorkId, workPayloadOf } from '../../src/coordinator/work-identity.js';
import type { CoordinatorJob } from '../../src/coordinator/ports.js';

const base: CoordinatorJob = { inputPath: '/q/id:000001', inputSha256: '0123456789abcdef'.repeat(4), targetBranch: 0n, actions: [], group: [], origin: 'afl', depth: 0 };
const targeted: CoordinatorJob = {
  ...base,
  targetBranch: 18446744073709551615n,
  actions: [
    { branch: 88n, kind: 'solve' },
    { branch: 7n, kind: 'sample' },
    { branch: 9n, kind: 'skip' },
  ],
  group: [18446744073709551615n, 88n, 7n],
};

describe('work ids of fixed jobs', () => {
  it('keeps the id of an untargeted solving job', () => {
    expect(jobWorkId(base)).toBe('089634ed7879cbc3fd4dd163d15f364cf80ddabce3c46db108fd24393c725c16');
  });

  it('keeps the id of a targeted job with solve, sample and skip actions on u64 branches', () => {
    expect(jobWorkId(targeted)).toBe('6e1135001174f545506a8438f4c5cab2c4f2cbef1d1238fc0cea71829d3f540f');
  });

  it('keeps the ids of trace runs, with and without a tracer, including a non-ASCII tracer', () => {
    expect(jobWorkId({ ...base, mode: 'trace' })).toBe('a0d5ca8d3b7138c83abd9ecb853235fdb5d56bb0a53e25830d166424368963a5');
    expect(jobWorkId({ ...base, mode: 'trace', tracer: 'host:42' })).toBe('878731bc93920d2f43e16900fc7966ab6efa96a7ea423cc869ed692eff6e9f38');
    expect(jobWorkId({ ...base, mode: 'trace', tracer: 'hôte-☃-𝄞' })).toBe('fa7adecdd061b015ee8f63f4ac91e1f6bbf0d9b639f1740574b073c8d2adb936');
  });

  it('leaves the input path, group, origin and depth out of the id while the stored payload carries them', () => {
    const moved: CoordinatorJob = { ...targeted, inputPath: '/elsewhere/id:000999', group: [88n], origin: 'feedback', depth: 3 };
    expect(jobWorkId(moved)).toBe(jobWorkId(targeted));
    expect(workPayloadOf(moved)).toMatchObject({ path: '/elsewhere/id:000999', group: ['88'], origin: 'feedback', depth: 3 });
  });
});
