import { describe, expect, it } from 'vitest';
import { jobFromWorkPayload, jobWorkId, workPayloadOf } from '../../src/coordinator/work-identity.js';
import { untargetedJob } from '../../src/coordinator/seed-work-source.js';

const seed = { path: '/q/id:000001', sha256: 'a'.repeat(64), depth: 0, origin: 'afl' };

describe('work identity of trace-only runs', () => {
  it('gives a trace-only first run its own work id, so it never fences or is fenced by the solving run of the same input', () => {
    const trace = untargetedJob(seed, 'trace');
    const full = untargetedJob(seed, 'full');
    expect(trace.mode).toBe('trace');
    expect(full.mode).toBeUndefined();
    expect(jobWorkId(trace)).not.toBe(jobWorkId(full));
  });

  it('gives each coordinator its own trace of an input, and keeps the tracer through a payload', () => {
    const mine = untargetedJob(seed, 'trace', 'c1');
    const theirs = untargetedJob(seed, 'trace', 'c2');
    expect(jobWorkId(mine)).not.toBe(jobWorkId(theirs));
    expect(jobFromWorkPayload(workPayloadOf(mine)).tracer).toBe('c1');
    expect(jobWorkId(jobFromWorkPayload(workPayloadOf(mine)))).toBe(jobWorkId(mine));
  });

  it('keeps the ids of solving runs what they were (no mode field in their identity)', () => {
    expect(workPayloadOf(untargetedJob(seed))).not.toHaveProperty('mode');
  });

  it('round-trips the mode through a work payload, and refuses an unknown mode', () => {
    const trace = untargetedJob(seed, 'trace');
    const back = jobFromWorkPayload(workPayloadOf(trace));
    expect(back.mode).toBe('trace');
    expect(jobWorkId(back)).toBe(jobWorkId(trace));
    expect(() => jobFromWorkPayload({ ...workPayloadOf(trace), mode: 'fast' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_JOB' }));
  });
});
