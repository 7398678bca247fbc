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

  it('gives an input one trace per campaign: the trace work names no coordinator', () => {
    const trace = untargetedJob(seed, 'trace');
    expect(trace).not.toHaveProperty('tracer');
    expect(workPayloadOf(trace)).not.toHaveProperty('tracer');
  });

  it('keeps the tracer of trace work written by an older version through a payload, so its id stays', () => {
    const older = { ...untargetedJob(seed, 'trace'), tracer: 'c1' };
    expect(jobWorkId(older)).not.toBe(jobWorkId(untargetedJob(seed, 'trace')));
    expect(jobFromWorkPayload(workPayloadOf(older)).tracer).toBe('c1');
    expect(jobWorkId(jobFromWorkPayload(workPayloadOf(older)))).toBe(jobWorkId(older));
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
