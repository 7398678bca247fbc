// The lease-store fault log: the first failure of a spell in full, the rest summed up once per
// summary period, one line when the store answers again; every failure counted.
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { StoreFaults, isTransientError } from '../../src/coordinator/store-faults.js';
import { ManualClock } from '../helpers/coordinator-fakes.js';

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const text of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(text) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

const ioError = (n: number): Error => Object.assign(new Error(`etcd out of space #${n}`), { code: 'ERR_LEASE_IO' });

describe('lease-store faults', () => {
  it('logs the first failure of a spell in full, sums up the rest every 30 s, and ends the spell at the next answer', () => {
    const clock = new ManualClock();
    const { logger, lines } = capture();
    const faults = new StoreFaults(logger, clock);
    faults.answered(); // outside a spell: nothing to say
    expect(lines).toEqual([]);

    faults.failed(ioError(1), 'work lease claim failed', { workId: 'w1' });
    expect(faults.failing).toBe(true);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, workId: 'w1', err: { message: 'etcd out of space #1', code: 'ERR_LEASE_IO' } });
    expect(String(lines[0]!.msg)).toMatch(/^work lease claim failed; further lease-store failures are summed up every 30 s/);

    for (let i = 2; i <= 40; i++) {
      clock.advance(500); // 19.5 s of failures: none logged
      faults.failed(ioError(i), 'target lease renewal failed');
    }
    expect(lines).toHaveLength(1);
    clock.advance(10_500); // 30 s after the first line
    faults.failed(ioError(41), 'work lease claim failed');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ level: 40, msg: 'the lease store is still failing', failures: 40, failingForMs: 30_000, last: 'work lease claim failed: etcd out of space #41' });
    clock.advance(1000);
    faults.failed(ioError(42), 'work lease claim failed');
    expect(lines).toHaveLength(2);

    clock.advance(2000);
    faults.answered();
    expect(faults.failing).toBe(false);
    expect(lines[2]).toMatchObject({ level: 30, msg: 'the lease store answers again', failures: 42, failedForMs: 33_000 });
    faults.answered();
    expect(lines).toHaveLength(3);
    expect(faults.failures).toBe(42);

    // A new spell starts with a full line again.
    faults.failed(ioError(43), 'beginCommit failed');
    expect(lines).toHaveLength(4);
    expect(lines[3]).toMatchObject({ level: 50, err: { message: 'etcd out of space #43' } });
  });

  it('tells the errors a retry may pass (the store failed) from those it meets again (the work did)', () => {
    const coded = (code: string): Error => Object.assign(new Error(code), { code });
    for (const code of ['ERR_LEASE_IO', 'ERR_ETCD_UNAVAILABLE', 'ERR_LOCK_TIMEOUT', 'ERR_PUBLISH', 'EIO', 'ENOSPC', 'EROFS']) expect(isTransientError(coded(code)), code).toBe(true);
    for (const code of ['ERR_LEASE_CORRUPT', 'ERR_LEASE_RECORD_TOO_LARGE', 'ERR_LEASE_STORE_REPLACED', 'ERR_STAGED_FINDING_TOO_LARGE', 'ENOENT', 'EFBIG', 'EINVAL']) expect(isTransientError(coded(code)), code).toBe(false);
    // A bug is no store failure: retrying it would only hold the work forever.
    expect(isTransientError(new TypeError('x is undefined'))).toBe(false);
  });
});
