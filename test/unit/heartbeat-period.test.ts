import { describe, expect, it } from 'vitest';
import { heartbeatIntervalMs } from '../../src/coordinator/heartbeat-period.js';

describe('heartbeatIntervalMs', () => {
  it.each([
    { ttls: [120_000, 30_000], expected: 10_000, why: 'a third of the shorter TTL' },
    { ttls: [1_000], expected: 1_000 / 3, why: 'a third of a 1 s TTL, not rounded to the floor' },
    { ttls: [300_000, 600_000], expected: 30_000, why: 'capped at 30 s' },
    { ttls: [120_000, 120_000], expected: 30_000, why: 'default TTLs renew every 30 s, not 40 s' },
    { ttls: [150], expected: 100, why: 'floored at 0.1 s' },
    { ttls: [30_000, undefined], expected: 10_000, why: 'an unused table is ignored' },
    { ttls: [0, -5, Number.NaN, Number.POSITIVE_INFINITY, 9_000], expected: 3_000, why: 'invalid TTLs are ignored' },
    { ttls: [undefined, 0], expected: 1_000, why: 'no valid TTL means 3 s' },
    { ttls: [], expected: 1_000, why: 'no TTL at all means 3 s' },
  ])('gives $expected ms for $ttls: $why', ({ ttls, expected }) => {
    expect(heartbeatIntervalMs(...ttls)).toBeCloseTo(expected, 6);
  });
});
