import { describe, expect, it } from 'vitest';
import { effectiveFileBarrier, IO_OPTIONS } from '../../src/io/io-options.js';
import { keysOf } from '../../src/io/io-service.js';

describe('I/O options', () => {
  it('has documented defaults', () => {
    expect(IO_OPTIONS.defaults).toEqual({ queueCapacity: 1024, maxBatchRequests: 256, fileBarrier: 'auto' });
  });

  it('names the option and the value when one is invalid', () => {
    expect(() => IO_OPTIONS.resolve({ queueCapacity: 0 })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION', details: expect.objectContaining({ option: 'queueCapacity' }) }));
    expect(() => IO_OPTIONS.resolve({ fileBarrier: 'fdatasync' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION', details: expect.objectContaining({ option: 'fileBarrier' }) }));
    expect(() => IO_OPTIONS.resolve({ batch: 3 })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
  });

  it('resolves auto to syncfs only when the native addon is available', () => {
    expect(effectiveFileBarrier('auto', true)).toBe('syncfs');
    expect(effectiveFileBarrier('auto', false)).toBe('fsync');
    expect(effectiveFileBarrier('fsync', true)).toBe('fsync');
    expect(effectiveFileBarrier('syncfs', false)).toBe('syncfs');
  });
});

describe('batch admission keys', () => {
  it('keys target requests by target, work requests by work id and publications by directory', () => {
    expect(keysOf({ kind: 'claimGroup', targets: [1n, 2n], payload: {}, mirrorOwner: 1, nowMs: 0 })).toEqual(['t:1', 't:2']);
    expect(keysOf({ kind: 'releaseGroups', claims: [{ targets: [3n], token: 'a' }, { targets: [4n], token: 'b' }], nowMs: 0 })).toEqual(['t:3', 't:4']);
    expect(keysOf({ kind: 'heartbeatMany', leases: [['w1', 'a']], nowMs: 0 })).toEqual(['w:w1']);
    expect(keysOf({ kind: 'publishFiles', dir: '/x/queue', files: [] })).toEqual(['d:/x/queue']);
    expect(keysOf({ kind: 'snapshotCounts', table: 'work', nowMs: 0 })).toEqual([]);
  });
});
