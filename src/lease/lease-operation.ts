/**
 * Lease operations as data, and the executor that runs one or many of them through a single
 * batch of the table's record backend (record-backend.ts), whatever the store.
 *
 * A table method is split in two: `plan…()` validates the arguments and builds a `LeaseOperation`
 * without touching the store (so bad input — a bad time, an unserialisable payload — throws
 * before any lock file, shard directory or transaction exists), and `executeOperations()` runs the
 * batch phases. `apply()` sees every record it named in `lockIds`, already locked and read, and stages
 * its writes; staged writes only reach the store in the batch's commit, so an operation that
 * returns a negative result (conflict, stale, corrupt) has mutated nothing.
 *
 * Several operations in one batch (the I/O thread's cross-request group commit) share the lock
 * phase (the union of their ids, ascending), the barrier pass, and the outcome of the commit: if
 * the commit fails, every operation that staged a write fails with that `LeaseIoError` and its
 * records are restored, and so does every later operation that read a record staged before it;
 * the other operations keep their (read-only) results.
 */
import { invalidOption } from '../config/values.js';
import { EMPTY_BATCH_REPORT, type BatchReport, type RecordBackend, type StagedRecord } from './record-backend.js';
import { canonicalJsonMemo } from './canonical-json.js';
import { serializeRecord, type LeaseRecord, type RecordRead } from './lease-record.js';

/** What an operation sees under its locks. */
export interface RecordView {
  /** The record as read under the lock (overlaid with earlier operations of the same batch). */
  get(id: string): RecordRead;
  /** Stages a new record; serialised now, so a bad value throws before any mutation. */
  put(record: LeaseRecord): void;
  /** Stages the deletion of a record. */
  remove(id: string): void;
}

export interface LeaseOperation<R> {
  /** For logs and errors. */
  readonly name: string;
  /** Every record the operation reads or writes. */
  readonly lockIds: readonly string[];
  /** Decides under the locks. Must stage nothing before it has validated everything it needs. */
  apply(view: RecordView): R | Promise<R>;
}

export type OperationOutcome<R> = { readonly ok: true; readonly value: R } | { readonly ok: false; readonly error: unknown };

export interface ExecutionResult {
  readonly outcomes: readonly OperationOutcome<unknown>[];
  readonly report: BatchReport;
}

/**
 * Runs `operations` in one batch of `backend`. Lock-phase failures (timeout, bad lock path) reject
 * the whole call (nothing was written). Per-operation failures in `apply` fail that operation only.
 */
export async function executeOperations(backend: RecordBackend, operations: readonly LeaseOperation<unknown>[]): Promise<ExecutionResult> {
  const batch = backend.begin();
  // Group records repeat their frozen `targets` and payload: their text is written once per batch.
  const memo = canonicalJsonMemo();
  try {
    const ids = operations.flatMap((op) => op.lockIds);
    await batch.lock(ids);
    await batch.read(ids);
    const outcomes: OperationOutcome<unknown>[] = [];
    // Operations whose outcome rests on this batch's commit: the writers, and every later
    // operation that read a record an earlier one had staged (its answer — `already`, `conflict`
    // — describes a state that only exists if the commit lands).
    const dependsOnCommit: number[] = [];
    const stagedIds = new Set<string>();
    for (const [index, op] of operations.entries()) {
      const readStaged = op.lockIds.some((id) => stagedIds.has(id));
      const staged = new Map<string, StagedRecord | null>();
      const allowed = new Set(op.lockIds);
      const view: RecordView = {
        get: (id) => {
          if (staged.has(id)) {
            const next = staged.get(id);
            return next ? { state: 'valid', record: next.record, bytes: next.bytes } : { state: 'absent' };
          }
          return batch.view(id);
        },
        put: (record) => {
          if (!allowed.has(record.id)) throw new Error(`${op.name} staged ${record.id} outside its lock set`);
          staged.set(record.id, { record, bytes: serializeRecord(record, memo) });
        },
        remove: (id) => {
          if (!allowed.has(id)) throw new Error(`${op.name} staged ${id} outside its lock set`);
          staged.set(id, null);
        },
      };
      try {
        const value = await op.apply(view);
        batch.stageAll(staged);
        for (const id of staged.keys()) stagedIds.add(id);
        if (staged.size > 0 || readStaged) dependsOnCommit.push(index);
        outcomes.push({ ok: true, value });
      } catch (error) {
        outcomes.push({ ok: false, error });
      }
    }
    try {
      const report = await batch.commit();
      return { outcomes, report };
    } catch (error) {
      for (const index of dependsOnCommit) outcomes[index] = { ok: false, error };
      return { outcomes, report: EMPTY_BATCH_REPORT };
    }
  } finally {
    await batch.release();
  }
}

/**
 * Latest accepted injected time, 2200-01-01 UTC: a plausible epoch clock. A larger value (1e308)
 * would be stored as `updatedMs` and date a record beyond any reader's clock.
 */
export const MAX_NOW_MS = Date.UTC(2200, 0, 1);

/** Validates an injected time: milliseconds since the epoch, 0..`MAX_NOW_MS`. */
export function checkNowMs(nowMs: unknown, name = 'nowMs'): number {
  if (typeof nowMs !== 'number' || !Number.isFinite(nowMs) || nowMs < 0 || nowMs > MAX_NOW_MS) {
    throw invalidOption(name, `milliseconds since the epoch, 0..${MAX_NOW_MS} (year 2200)`, nowMs);
  }
  return nowMs;
}
