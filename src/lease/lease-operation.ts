/**
 * Lease operations as data, and the executor that runs one or many of them through a single
 * batch of the table's record backend (backend-contract.ts), whatever the store.
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
 *
 * Retries (optimistic stores, backend-contract.ts): a commit that rejects with `BatchConflictError`
 * wrote nothing, so the whole batch — read, every `apply`, commit — runs again from `begin()`,
 * with a short randomised back-off, until it commits or `backend.conflictRetryMs` (measured on the
 * monotonic clock from the first attempt) has passed; then the call rejects with
 * `LockTimeoutError`, as a lock wait past its deadline does. Operations are plans: `apply` decides
 * from what it reads, synchronously, and acts on nothing outside the store, so it can run again.
 * A store that never conflicts (files) runs every batch once.
 *
 * Size: a backend with `maxBatchRecords` gets runs of consecutive operations whose records fit
 * (order kept, so a later operation still sees an earlier one's result, committed or not). The
 * records a store checks at commit are counted: `lockIds`, `readIds` and, once read, the guarded
 * ids of `readMore` (pinned ones cost no check). A run that the second read takes past the bound
 * has written nothing: it is split in two and each half runs again, in order.
 */
import { invalidOption } from '../config/values.js';
import { InvalidJobError, LockTimeoutError } from '../errors.js';
import { BatchConflictError, EMPTY_BATCH_REPORT, type BatchReport, type DeclaredAnswer, type RecordBackend, type StagedRecord } from './backend-contract.js';
import { BatchOverlay, type RecordView } from './batch-overlay.js';
import { canonicalJsonMemo } from './canonical-json.js';
import { serializeRecord, type LeaseRecord } from './lease-record.js';


export interface LeaseOperation<R> {
  /** For logs and errors. */
  readonly name: string;
  /** Every record the operation writes, and those it reads that need its own lock. */
  readonly lockIds: readonly string[];
  /**
   * The ids of `lockIds` that are target lease records, never an answer record or the answer
   * generation: the store may read them where lease records live alone (`StoreBatch.leaseRecords`).
   * An id another operation of the batch names without listing it here is read as usual.
   */
  readonly leaseRecordIds?: readonly string[];
  /**
   * Records the operation only reads, without locking them: each is written only by operations
   * that lock one of this operation's `lockIds` as well, so that lock already orders the writes
   * and this read (a target's answer record, written only under its lease record's lock: by a
   * release, or by `recordAnswers`, which locks it without writing it: target-lease-table.ts). Read in the same batch as the rest, at the same snapshot or revision.
   */
  readonly readIds?: readonly string[];
  /**
   * On a store that versions answer records (`RecordBackend.relateAnswers`): the answer records
   * among `lockIds`, each with its lease record's id. Told to the store just before the batch reads,
   * so that it finds them (an operation planned long before its batch runs cannot lose them).
   */
  readonly answerRelations?: readonly (readonly [string, string])[];
  /**
   * On a store that versions answer records: answer records `readMore` will probably ask for, each
   * with its lease record's id among `lockIds` (a claim that names its input, for members its
   * table's view does not hold). A store that reads such a lease record from the server reads the
   * answer record in the same request, at the same revision, and answers `readMore`'s read of it
   * from there: one round trip, not two. Not read otherwise.
   */
  readonly readAlong?: readonly (readonly [string, string])[];
  /**
   * Runs before the batch this operation is in begins, once per `executeOperations` call, with
   * nothing locked or read: a claim that names its input has its table's view of the answer records
   * made complete first (a scan, answers-view.ts "Complete views"), so it reads none of the answer
   * records the view can vouch for. Rejects only on a programming error: what it prepares only
   * saves reads.
   */
  prepare?(): Promise<void>;
  /**
   * Records to read once the first reads (`lockIds`, `readIds`) are in, before any operation's
   * `apply`: a second read in the same batch (a claim reads the answer records its table's view
   * does not hold at the answer generation it just read, answers-view.ts, or, on a store that
   * versions answer records, every member's). Sees the records as read, nothing staged yet; may
   * run again with the batch.
   */
  readMore?(view: RecordView): MoreReads;
  /**
   * Called after the batch this operation's `apply` last ran in has committed, in operation order.
   * `changed`: the commit wrote something, so every record the batch read was checked at commit
   * by an optimistic store. Not called when the commit failed. Acts on nothing but memory.
   */
  committed?(changed: boolean): void;
  /**
   * Decides under the locks, synchronously and without acting outside the store (a publication
   * runs between two operations, never inside one), so an optimistic store may run it again.
   * Must stage nothing before it has validated everything it needs.
   */
  apply(view: RecordView): R;
}

/** What `LeaseOperation.readMore` asks for. */
export interface MoreReads {
  /** Read as `readIds` are: each guarded by a record the operation locks (`StoreBatch.fetch`). */
  readonly guarded: readonly string[];
  /**
   * Read like `guarded` on a store that versions answer records (`RecordBackend.relateAnswers`):
   * answer records whose lease record, which the operation locks, was read absent. The store checks
   * each in that lease record's compare, so they cost an optimistic store no compare of their own
   * and do not count against `maxBatchRecords` (`StoreBatch.fetch`).
   */
  readonly pinned?: readonly string[];
  /**
   * Answer records the operation decided from without reading them, on a store that versions them
   * (`RecordBackend.relateAnswers`): each with the version the operation's own view holds. Only
   * for a lease record the operation locks and read absent; the store checks each version at
   * commit in that lease record's compare, as it does `pinned` reads (`StoreBatch.declare`).
   */
  readonly declared?: readonly DeclaredAnswer[];
  /** The answer records among `guarded` and `pinned`, each with its lease record's id (as `LeaseOperation.answerRelations`). */
  readonly answerRelations?: readonly (readonly [string, string])[];
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
  for (const op of operations) if (op.prepare !== undefined) await op.prepare();
  const limit = backend.maxBatchRecords;
  if (limit === undefined) return executeWithRetries(backend, operations);
  const outcomes: OperationOutcome<unknown>[] = [];
  const reports: BatchReport[] = [];
  let run: LeaseOperation<unknown>[] = [];
  let runIds = new Set<string>();
  const flush = async (): Promise<void> => {
    if (run.length === 0) return;
    const result = await executeSplitting(backend, run);
    outcomes.push(...result.outcomes);
    reports.push(result.report);
    run = [];
    runIds = new Set();
  };
  for (const op of operations) {
    const own = new Set(op.readIds ? [...op.lockIds, ...op.readIds] : op.lockIds);
    if (own.size > limit) {
      await flush();
      outcomes.push({ ok: false, error: new InvalidJobError(`${op.name} touches ${own.size} lease records; the ${backend.store} store takes at most ${limit} in one transaction`, { records: own.size, limit }) });
      continue;
    }
    const union = new Set([...runIds, ...own]);
    if (union.size > limit) {
      await flush();
      runIds = own;
    } else runIds = union;
    run.push(op);
  }
  await flush();
  return { outcomes, report: mergeReports(reports) };
}

/**
 * The second read of a batch (`readMore`) took it past the store's `maxBatchRecords`: nothing was
 * decided or written. Never escapes the executor, which splits the run (`executeSplitting`).
 */
class BatchTooLargeError extends Error {
  constructor(readonly records: number, readonly limit: number) {
    super(`a lease batch would check ${records} records; the store takes at most ${limit}`);
  }
}

/** Runs `run` as one batch, or, when its second read takes it past the bound, as two halves in order. */
async function executeSplitting(backend: RecordBackend, run: readonly LeaseOperation<unknown>[]): Promise<ExecutionResult> {
  try {
    return await executeWithRetries(backend, run);
  } catch (error) {
    if (!(error instanceof BatchTooLargeError)) throw error;
    if (run.length === 1) {
      const op = run[0]!;
      return { outcomes: [{ ok: false, error: new InvalidJobError(`${op.name} touches ${error.records} lease records; the ${backend.store} store takes at most ${error.limit} in one transaction`, { records: error.records, limit: error.limit }) }], report: EMPTY_BATCH_REPORT };
    }
    const half = run.length >> 1;
    const first = await executeSplitting(backend, run.slice(0, half));
    const second = await executeSplitting(backend, run.slice(half));
    return { outcomes: [...first.outcomes, ...second.outcomes], report: mergeReports([first.report, second.report]) };
  }
}

function mergeReports(reports: readonly BatchReport[]): BatchReport {
  if (reports.length === 1) return reports[0]!;
  return {
    published: reports.reduce((n, r) => n + r.published, 0),
    fileBarriers: reports.reduce((n, r) => n + r.fileBarriers, 0),
    directoryBarriers: reports.reduce((n, r) => n + r.directoryBarriers, 0),
    directories: [...new Set(reports.flatMap((r) => r.directories))].sort(),
  };
}

/** Runs one batch, again from `begin()` while an optimistic commit conflicts (file comment "Retries"). */
async function executeWithRetries(backend: RecordBackend, operations: readonly LeaseOperation<unknown>[]): Promise<ExecutionResult> {
  const startMs = performance.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await executeOnce(backend, operations);
    } catch (error) {
      if (!(error instanceof BatchConflictError)) throw error;
      const elapsedMs = performance.now() - startMs;
      if (elapsedMs >= (backend.conflictRetryMs ?? 0)) {
        throw new LockTimeoutError(`lease records kept changing under ${operations.map((op) => op.name).join(', ')} for ${Math.round(elapsedMs)} ms (${attempt} attempts)`, {
          ids: error.ids,
          attempts: attempt,
          waitedMs: Math.round(elapsedMs),
        });
      }
      // Randomised, growing back-off so that contenders that conflicted stop colliding.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(100, 2 ** attempt)));
    }
  }
}

async function executeOnce(backend: RecordBackend, operations: readonly LeaseOperation<unknown>[]): Promise<ExecutionResult> {
  const batch = new BatchOverlay(backend.begin());
  // Group records repeat their frozen `targets` and payload: their text is written once per batch.
  const memo = canonicalJsonMemo();
  const encode = backend.encoder?.(memo) ?? ((record: LeaseRecord): StagedRecord => ({ record, bytes: serializeRecord(record, memo) }));
  try {
    const ids = operations.flatMap((op) => op.lockIds);
    const readOnly = operations.flatMap((op) => op.readIds ?? []);
    await batch.lock(ids);
    const leaseIds = leaseRecordIds(operations);
    if (leaseIds.size > 0) batch.leaseRecords(leaseIds);
    for (const op of operations) if (op.answerRelations !== undefined) backend.relateAnswers?.(op.answerRelations);
    if (backend.relateAnswers !== undefined) {
      const along = operations.flatMap((op) => op.readAlong ?? []);
      if (along.length > 0) {
        backend.relateAnswers(along);
        batch.readAlong(along);
      }
    }
    await batch.read(readOnly.length > 0 ? [...ids, ...readOnly] : ids, new Set(readOnly));
    await readMore(backend, batch, operations, encode, ids, readOnly);
    const { outcomes, dependsOnCommit } = decide(batch, operations, encode);
    let report: BatchReport;
    try {
      report = await batch.commit();
    } catch (error) {
      if (error instanceof BatchConflictError) throw error;
      for (const index of dependsOnCommit) outcomes[index] = { ok: false, error };
      return { outcomes, report: EMPTY_BATCH_REPORT };
    }
    const changed = report.published > 0;
    for (const [index, op] of operations.entries()) if (outcomes[index]!.ok) op.committed?.(changed);
    return { outcomes, report };
  } finally {
    await batch.release();
  }
}

/** Ids every operation that names them lists as lease records (`LeaseOperation.leaseRecordIds`). */
function leaseRecordIds(operations: readonly LeaseOperation<unknown>[]): Set<string> {
  const leaseIds = new Set<string>();
  for (const op of operations) for (const id of op.leaseRecordIds ?? []) leaseIds.add(id);
  if (leaseIds.size === 0) return leaseIds;
  for (const op of operations) {
    // A claim's or heartbeat's list is its `lockIds` itself: nothing to take out.
    if (op.leaseRecordIds !== op.lockIds) {
      const listed = new Set(op.leaseRecordIds);
      for (const id of op.lockIds) if (!listed.has(id)) leaseIds.delete(id);
    }
    for (const id of op.readIds ?? []) leaseIds.delete(id);
  }
  return leaseIds;
}

/**
 * The second read of a batch (`LeaseOperation.readMore`). On a store with `maxBatchRecords`, the
 * guarded ids count against the bound with the first reads (file comment "Size"); past it, the
 * batch stops here with `BatchTooLargeError`, before any `apply`.
 */
async function readMore(
  backend: RecordBackend,
  batch: BatchOverlay,
  operations: readonly LeaseOperation<unknown>[],
  encode: (record: LeaseRecord) => StagedRecord,
  lockIds: readonly string[],
  readIds: readonly string[],
): Promise<void> {
  const guarded = new Set<string>();
  const pinned = new Set<string>();
  const declared: DeclaredAnswer[] = [];
  for (const op of operations) {
    if (!op.readMore) continue;
    const more = op.readMore(batch.scope(op.name, [], encode));
    for (const id of more.guarded) guarded.add(id);
    for (const id of more.pinned ?? []) pinned.add(id);
    if (more.declared !== undefined) declared.push(...more.declared);
    if (more.answerRelations !== undefined) backend.relateAnswers?.(more.answerRelations);
  }
  if (declared.length > 0) batch.declare(declared);
  // An id another operation reads guarded is checked for both.
  for (const id of guarded) pinned.delete(id);
  if (guarded.size === 0 && pinned.size === 0) return;
  const limit = backend.maxBatchRecords;
  if (limit !== undefined && guarded.size > 0) {
    const checked = new Set([...lockIds, ...readIds, ...guarded]).size;
    if (checked > limit) throw new BatchTooLargeError(checked, limit);
  }
  await batch.read([...guarded, ...pinned], guarded, pinned);
}

/**
 * Runs every operation's `apply` against the batch, in order, synchronously. Returns the outcomes
 * and the operations whose outcome rests on the batch's commit: the writers, and every later
 * operation whose `apply` read a record an earlier one had staged (its answer — `already`,
 * `conflict`, `answered` — describes a state that only exists if the commit lands). A record only
 * locked or listed in `readIds`, but not read by `apply`, does not count: a claim that read the
 * answer generation before the batch staged anything, and decided from answer records no earlier
 * operation touched, keeps its refusal when another operation's write fails.
 */
function decide(batch: BatchOverlay, operations: readonly LeaseOperation<unknown>[], encode: (record: LeaseRecord) => StagedRecord): { outcomes: OperationOutcome<unknown>[]; dependsOnCommit: number[] } {
  const outcomes: OperationOutcome<unknown>[] = [];
  const dependsOnCommit: number[] = [];
  for (const [index, op] of operations.entries()) {
    const view = batch.scope(op.name, op.lockIds, encode);
    try {
      const value = op.apply(view);
      view.stageOwn();
      if (view.staged || view.readStaged) dependsOnCommit.push(index);
      outcomes.push({ ok: true, value });
    } catch (error) {
      outcomes.push({ ok: false, error });
    }
  }
  return { outcomes, dependsOnCommit };
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
