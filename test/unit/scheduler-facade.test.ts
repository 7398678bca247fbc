import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { MapLocalReservations } from '../../src/scheduler/map-local-reservations.js';
import type { SymfenceError } from '../../src/errors.js';
import { parseTelemetry } from '../../src/scheduler/telemetry.js';
import { scheduler, sha, tel } from './scheduler-fixtures.js';
import { codeOf } from '../helpers/error-code.js';

describe('Scheduler facade', () => {
  it('rejects an unknown or repeated lane name naming the option', () => {
    for (const lanes of ['prefix,bogus', 'prefix,prefix']) {
      let error: SymfenceError | undefined;
      try {
        new Scheduler({ local: new MapLocalReservations(), options: { lanes } });
      } catch (e) {
        error = e as SymfenceError;
      }
      expect(error?.code).toBe('ERR_INVALID_OPTION');
      expect(error?.details.option).toBe('lanes');
    }
  });

  it('rejects a malformed seed registration and feedback for an unknown seed', () => {
    const { s } = scheduler(['a']);
    expect(codeOf(() => s.addSeed('', { bytes: 1, sha256: sha(1), path: '/x' }, 0))).toBe('ERR_INVALID_JOB');
    expect(codeOf(() => s.addSeed('b', { bytes: -1, sha256: sha(1), path: '/x' }, 0))).toBe('ERR_INVALID_JOB');
    expect(codeOf(() => s.addSeed('b', { bytes: 1, sha256: 'nothex', path: '/x' }, 0))).toBe('ERR_INVALID_JOB');
    expect(codeOf(() => s.observe({ seed: 'nobody', telemetry: null, reward: 0 }, 0))).toBe('ERR_INVALID_JOB');
    expect(codeOf(() => s.observe({ seed: 'a', telemetry: null, reward: Number.NaN }, 0))).toBe('ERR_INVALID_JOB');
  });

  it('lets only the fallback lane learn from a run without telemetry', () => {
    const { s } = scheduler(['a']);
    s.observe({ seed: 'a', telemetry: null, reward: 0.5 }, 0);
    expect(s.stats().laneSizes).toEqual({ prefix: 0, cstg: 0, concurrency: 0, edge: 0, fallback: 1 });
  });

  it('counts runs whose telemetry was rejected and learns only their reward', () => {
    const { s } = scheduler(['a']);
    let rejection: unknown;
    try {
      parseTelemetry('{"schema":"symfence-telemetry/1"}');
    } catch (e) {
      rejection = e;
    }
    s.observe({ seed: 'a', telemetry: null, reward: 0.3, telemetryError: rejection }, 0);
    expect(s.stats().telemetryRejected).toBe(1);
    expect(s.stats().laneSizes.prefix).toBe(0);
    expect(s.stats().laneSizes.fallback).toBe(1);
  });

  it('feeds every lane from a run with telemetry and reports the backlog depth', () => {
    const { s } = scheduler(['a']);
    s.observe({ seed: 'a', telemetry: tel({ open: [3], trace: [[1, 2, 3, 4, 1, 0]] }), reward: 0.5 }, 0);
    const sizes = s.stats().laneSizes;
    expect(sizes.prefix).toBe(2);
    expect(sizes.cstg).toBe(1);
    expect(sizes.edge).toBe(1);
    expect(s.backlogDepth()).toBe(2);
  });

  it('rejects a negative admission limit', () => {
    const { s } = scheduler(['a']);
    expect(codeOf(() => s.admit(-1, 0))).toBe('ERR_INVALID_OPTION');
  });

  it('refuses a non-finite clock reading or proposal limit before touching any lane state', async () => {
    const { s } = scheduler(['a']);
    s.observe({ seed: 'a', telemetry: tel({ open: [3], trace: [[1, 2, 3, 4, 1, 0]] }), reward: 0.5 }, 0);
    const before = s.toJSON(1_000);
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(codeOf(() => s.admit(1, bad))).toBe('ERR_INVALID_OPTION');
      expect(codeOf(() => s.observe({ seed: 'a', telemetry: null, reward: 0.5 }, bad))).toBe('ERR_INVALID_OPTION');
      expect(codeOf(() => s.toJSON(bad))).toBe('ERR_INVALID_OPTION');
      expect(codeOf(() => s.restore(before, bad))).toBe('ERR_INVALID_OPTION');
      expect(codeOf(() => s.addSeed('b', { bytes: 1, sha256: 'a'.repeat(64), path: '/b' }, bad))).toBe('ERR_INVALID_OPTION');
    }
    for (const bad of [Number.NaN, -1, 1.5]) expect(codeOf(() => s.admit(1, 1_000, bad))).toBe('ERR_INVALID_OPTION');
    expect(s.toJSON(1_000)).toEqual(before);
    expect(await s.admit(1, 1_000)).toHaveLength(1);
  });
});
