/**
 * The executor's protocol for optimistic stores (lease-operation.ts "Retries", backend-contract.ts):
 * a commit that conflicts re-runs the whole batch from a fresh read, until the store's retry time
 * is spent (then ERR_LOCK_TIMEOUT); a store's batch size splits long runs of operations in order; a store that never
 * conflicts runs every batch once.
 */
import { describe, expect, it } from 'vitest';
import { executeOperations, type LeaseOperation } from '../../src/lease/lease-operation.js';
import type { LeaseRecord, RecordRead } from '../../src/lease/lease-record.js';
import { BatchConflictError, EMPTY_BATCH_REPORT, type RecordBackend, type StagedChange, type StoreBatch } from '../../src/lease/backend-contract.js';

interface FakeOptions {
  /** Commits that conflict before one succeeds (Infinity: always). */
  conflicts: number;
  conflictRetryMs?: number;
  maxBatchRecords?: number;
}

function fakeBackend(options: FakeOptions) {
  const log = { begins: 0, commits: 0, batches: [] as string[][] };
  let conflictsLeft = options.conflicts;
  const backend: RecordBackend = {
    store: 'etcd',
    kind: 'work',
    root: '/fake',
    ...(options.conflictRetryMs !== undefined ? { conflictRetryMs: options.conflictRetryMs } : {}),
    ...(options.maxBatchRecords !== undefined ? { maxBatchRecords: options.maxBatchRecords } : {}),
    begin(): StoreBatch {
      log.begins += 1;
      let ids: string[] = [];
      return {
        async lock(lockIds: readonly string[]) {
          ids = [...lockIds];
        },
        // Every record exists, so that each writer's removal is a change to commit.
        fetch: async (fetchIds: readonly string[]) => new Map(fetchIds.map((id): [string, RecordRead] => [id, { state: 'valid', record: { id } as unknown as LeaseRecord }])),
        async commit(changes: readonly StagedChange[]) {
          log.commits += 1;
          log.batches.push(ids);
          if (changes.length > 0 && conflictsLeft > 0) {
            conflictsLeft -= 1;
            throw new BatchConflictError(changes.map((c) => c.id));
          }
          return { ...EMPTY_BATCH_REPORT, published: changes.length };
        },
        async release() {},
      };
    },
    scan: async () => [],
    close: async () => {},
  };
  return { backend, log };
}

function writer(id: string, applied: { count: number }): LeaseOperation<string> {
  return {
    name: `write-${id}`,
    lockIds: [id],
    apply(view) {
      applied.count += 1;
      view.remove(id);
      return id;
    },
  };
}

describe('executeOperations with an optimistic store', () => {
  it('re-runs a conflicting batch from a fresh read until it commits', async () => {
    const { backend, log } = fakeBackend({ conflicts: 3, conflictRetryMs: 60_000 });
    const applied = { count: 0 };
    const result = await executeOperations(backend, [writer('a', applied)]);
    expect(result.outcomes).toEqual([{ ok: true, value: 'a' }]);
    expect(log.begins).toBe(4);
    expect(applied.count).toBe(4);
    expect(result.report.published).toBe(1);
  });

  it('gives up with ERR_LOCK_TIMEOUT once the retry time is spent', async () => {
    const { backend, log } = fakeBackend({ conflicts: Number.POSITIVE_INFINITY, conflictRetryMs: 30 });
    await expect(executeOperations(backend, [writer('a', { count: 0 })])).rejects.toMatchObject({ code: 'ERR_LOCK_TIMEOUT', details: { ids: ['a'] } });
    expect(log.begins).toBeGreaterThan(1);
  });

  it('splits a run of operations into batches of the store\'s size, in order, and refuses one that alone is too big', async () => {
    const { backend, log } = fakeBackend({ conflicts: 0, maxBatchRecords: 2 });
    const applied = { count: 0 };
    const tooBig: LeaseOperation<string> = { name: 'big', lockIds: ['x', 'y', 'z'], apply: () => 'never' };
    const result = await executeOperations(backend, [writer('a', applied), writer('b', applied), writer('c', applied), tooBig, writer('a', applied)]);
    expect(log.batches).toEqual([['a', 'b'], ['c'], ['a']]);
    expect(result.outcomes.map((o) => o.ok)).toEqual([true, true, true, false, true]);
    expect(result.outcomes[3]).toMatchObject({ ok: false, error: { code: 'ERR_INVALID_JOB' } });
    expect(result.report.published).toBe(4);
  });

  it('runs a batch of a store that never conflicts exactly once', async () => {
    const { backend, log } = fakeBackend({ conflicts: 0 });
    const applied = { count: 0 };
    await executeOperations(backend, [writer('a', applied), writer('b', applied)]);
    expect(log.begins).toBe(1);
    expect(applied.count).toBe(2);
  });
});
