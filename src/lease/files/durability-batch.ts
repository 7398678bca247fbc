/**
 * A durability batch: the unit of "lock, decide, make durable, publish, release" that every
 * mutating lease operation runs through — one call's worth today, many requests' worth once the
 * I/O thread groups commits (docs/io-thread.md "Barrier pass"). Phases, in this order and no other:
 *
 *   1. lock      every record lock of the batch, ascending record id (no deadlock between
 *                coordinators: everyone takes overlapping locks in the same order)
 *   2. read      every record, validated (the caller decides on these, before any mutation)
 *   3. stage     write each new record's bytes to a fresh temp file next to it
 *   4. file barrier  make every temp file's content durable: one fsync per file, issued in
 *                parallel, or one syncfs for the whole filesystem
 *   5. publish   rename each temp over its record / unlink deleted records (all at once in
 *                `batched` mode; one by one in ascending id order in `scalar` mode)
 *   6. directory barrier  one per touched shard directory (or one after every publication in
 *                `scalar` mode, the pre-batching protocol kept for comparison)
 *   7. release   every lock — only now, so no one reads a published name whose
 *                durability is still unknown and builds on it
 *
 * Content is durable before its name is published (4 before 5), and every name is durable before
 * success is reported (6 before returning). On a failure in 3–4 nothing was published: temp
 * files are removed. On a failure in 5–6 the exact previous bytes of every mutated record are
 * restored (or the record removed again if it did not exist), under the same locks, followed by a
 * fresh barrier pass, and the batch rejects with `LeaseIoError` (`details.restored` says whether
 * the restore itself went through; if not, leftover records carry a token nobody received and
 * expire after their TTL).
 *
 * One exception: a record that announces changes (`announcesChanges`: the answer generation
 * record, docs/lease-format.md "Answer generation") is read without its lock, so it is published
 * and its directory made durable before any other record of the batch, and it is never put back.
 * A crash, or a failure, after it leaves it saying more changed than did, which only makes
 * readers read those records again; the other order, or putting it back after a reader saw it,
 * would let a reader keep a record it must read again.
 */
import { InternalError } from '../../errors.js';
import { leaseIoError } from '../lease-io-error.js';
import { barrierDirectories, barrierFiles, closeFiles, createTempFile, replaceFileDurably, type FileBarrierStrategy } from '../../fs/durable-files.js';
import { errnoCode, type FsLayer } from '../../fs/fs-layer.js';
import { RECORD_SUFFIX, type LeaseLayout } from '../table-layout.js';
import { announcesChanges, type RecordKind, type RecordRead } from '../lease-record.js';
import { EMPTY_BATCH_REPORT, type AnswerScan, type BatchReport, type StagedChange, type StagedRecord, type StoreBatch } from '../backend-contract.js';
import type { LockHandle, RecordLocker } from './record-lock.js';
import { readRecord } from './record-files.js';
import { shardNames } from './record-scan.js';
import type { RecordReadCache } from '../record-read-cache.js';

export type { FileBarrierStrategy } from '../../fs/durable-files.js';
/** `batched`: one directory barrier per touched shard. `scalar`: one per rename/unlink. */
export type DirectoryBarrierMode = 'batched' | 'scalar';

export interface DurabilityContext {
  readonly fsLayer: FsLayer;
  readonly locker: RecordLocker;
  readonly layout: LeaseLayout;
  readonly kind: RecordKind;
  readonly fileBarrier: FileBarrierStrategy;
  readonly directoryBarrier: DirectoryBarrierMode;
  /** Makes a shard directory exist durably (cached by the table). */
  ensureDirectory(dir: string): Promise<void>;
  /** Parsed records reused while their bytes are unchanged (record-read-cache.ts). */
  readonly readCache?: RecordReadCache;
}

interface Mutation {
  readonly id: string;
  readonly dir: string;
  readonly recordPath: string;
  /** Bytes before the batch (null: no record). Restored verbatim on failure. */
  readonly previous: Buffer | null;
  readonly next: StagedRecord | null;
  temp?: string;
}

const RECORD_MODE = 0o644;

type BatchState = 'open' | 'committed' | 'failed' | 'released';

/**
 * The file store's batch (`StoreBatch`): record files under `flock`, phases as above. What every
 * store's batch shares (views, staging, the corrupt-record rule) is the batch overlay's.
 */
export class DurabilityBatch implements StoreBatch {
  private readonly locks: LockHandle[] = [];
  private readonly locked = new Set<string>();
  private highestLocked = '';
  private state: BatchState = 'open';

  constructor(private readonly ctx: DurabilityContext) {}

  /**
   * Phase 1: takes the locks of `ids` in ascending order. A new id below the highest held one is
   * a programming error (it would break the global lock order). On failure (timeout, bad lock
   * path, I/O) every lock taken so far is released and the error propagates; nothing has been
   * written.
   */
  async lock(ids: readonly string[]): Promise<void> {
    this.assertState('open');
    const wanted = [...new Set(ids)].filter((id) => !this.locked.has(id)).sort();
    if (wanted.length > 0 && wanted[0]! < this.highestLocked) {
      throw new InternalError(`lock order violation: ${wanted[0]} after ${this.highestLocked}`);
    }
    try {
      for (const dir of [...new Set(wanted.map((id) => this.ctx.layout.dirOf(id)))]) await this.ctx.ensureDirectory(dir);
      // Ascending order is kept by acquireAll; only the lock-file opens run in parallel.
      const lockPaths = wanted.map((id) => this.ctx.layout.lockPath(id));
      const idOf = new Map(wanted.map((id, i) => [lockPaths[i]!, id]));
      const handles = await this.ctx.locker.acquireAll(lockPaths, (lockPath) => `fenced lease lock: ${idOf.get(lockPath)}`);
      for (const [i, handle] of handles.entries()) {
        this.locks.push(handle);
        this.locked.add(wanted[i]!);
        this.highestLocked = wanted[i]!;
      }
    } catch (error) {
      await this.release();
      throw error;
    }
  }

  /** Phase 2: reads the records of locked ids, in parallel. */
  async fetch(ids: readonly string[]): Promise<Map<string, RecordRead>> {
    this.assertState('open');
    const results = await Promise.all(ids.map((id) => readRecord(this.ctx.fsLayer, this.ctx.layout.recordPath(id), id, this.ctx.kind, this.ctx.readCache)));
    return new Map(ids.map((id, i) => [id, results[i]!]));
  }

  /**
   * `StoreBatch.scanAnswers`, without a lock: the generation record, the record files of every
   * shard, the generation record again. A release publishes the generation record before its
   * answer records and holds its lock until all are published, so every answer record written at a
   * generation older than the first read is listed; the second read lists every branch written at
   * the first read's generation or later (answers-view.ts). Every record id is listed, lease records
   * too (a superset is all a view needs), by name only: reading each for its target would cost a
   * read per record.
   */
  async scanAnswers(generationId: string): Promise<AnswerScan> {
    this.assertState('open');
    const { fsLayer, layout } = this.ctx;
    const readGeneration = (): Promise<RecordRead> => readRecord(fsLayer, layout.recordPath(generationId), generationId, this.ctx.kind, this.ctx.readCache);
    const before = await readGeneration();
    const listed: (readonly [string, undefined])[] = [];
    for (let shard = 0; shard < layout.shardCount; shard += 1) {
      const dir = layout.shardDir(shard);
      const names = await shardNames(fsLayer, dir).catch((error: unknown) => {
        throw leaseIoError(`cannot list ${dir}: ${(error as Error).message}`, { path: dir, errno: errnoCode(error), step: 'read' }, error);
      });
      for (const name of names) if (name.endsWith(RECORD_SUFFIX)) listed.push([name.slice(0, -RECORD_SUFFIX.length), undefined]);
    }
    return { before, generation: await readGeneration(), listed };
  }

  /**
   * Phases 3–6. Resolves once every staged mutation is published and durable; rejects with
   * `LeaseIoError` after restoring the pre-batch bytes (see the file comment).
   */
  async commit(changes: readonly StagedChange[]): Promise<BatchReport> {
    this.assertState('open');
    const all = changes.map((change) => this.mutationOf(change)).sort((a, b) => (a.id < b.id ? -1 : 1));
    if (all.length === 0) {
      this.state = 'committed';
      return EMPTY_BATCH_REPORT;
    }
    const fileBarriers = await this.stageTemps(all);
    // Announcements first, durable, and never restored (see the file comment).
    const announcements = all.filter((m) => m.next !== null && announcesChanges(m.next.record));
    let directoryBarriers = announcements.length === 0 ? 0 : await this.announce(announcements, all);
    const list = announcements.length === 0 ? all : all.filter((m) => !announcements.includes(m));
    const directories = [...new Set(list.map((m) => m.dir))].sort();
    const published: Mutation[] = [];
    if (this.ctx.directoryBarrier === 'batched') {
      // Every name of the batch becomes durable at the directory barriers below and nobody can
      // read them before the locks go, so the publication order inside the batch does not
      // matter: publish all at once. On any failure every mutation is restored (restoring one
      // that did not take effect rewrites the same bytes, or unlinks a name that is absent).
      const results = await Promise.allSettled(list.map((m) => this.publishOne(m)));
      const failedIndex = results.findIndex((r) => r.status === 'rejected');
      if (failedIndex >= 0) {
        await this.removeTemps(list);
        const failed = list[failedIndex]!;
        throw await this.failAfterPublish(list, 'publish', failed.recordPath, (results[failedIndex] as PromiseRejectedResult).reason, [failed.dir]);
      }
      published.push(...list);
    }
    for (const mutation of this.ctx.directoryBarrier === 'scalar' ? list : []) {
      try {
        if (mutation.next) await this.ctx.fsLayer.rename(mutation.temp!, mutation.recordPath);
        else await this.ctx.fsLayer.unlink(mutation.recordPath);
        mutation.temp = undefined;
        published.push(mutation);
        if (this.ctx.directoryBarrier === 'scalar') {
          directoryBarriers += 1;
          await this.ctx.fsLayer.syncDirectory(mutation.dir);
        }
      } catch (error) {
        // The failed mutation may or may not have taken effect: restore it too (idempotent).
        if (!published.includes(mutation)) published.push(mutation);
        await this.removeTemps(list);
        throw await this.failAfterPublish(published, 'publish', mutation.recordPath, error, [mutation.dir]);
      }
    }
    if (this.ctx.directoryBarrier === 'batched') {
      const results = await barrierDirectories(this.ctx.fsLayer, directories);
      directoryBarriers += directories.length;
      const failedIndex = results.findIndex((r) => r.status === 'rejected');
      if (failedIndex >= 0) {
        const failedDirs = directories.filter((_, i) => results[i]!.status === 'rejected');
        throw await this.failAfterPublish(list, 'directory-barrier', directories[failedIndex]!, (results[failedIndex] as PromiseRejectedResult).reason, failedDirs);
      }
    }
    this.state = 'committed';
    for (const m of all) {
      if (m.next) this.ctx.readCache?.remember(m.id, m.next.bytes, m.next.record);
      else this.ctx.readCache?.forget(m.id);
    }
    return { published: all.length, fileBarriers, directoryBarriers, directories: [...new Set(all.map((m) => m.dir))].sort() };
  }

  /**
   * Publishes `announcements` and barriers their directories, before anything else of the batch
   * is published; returns the directory barriers issued. On a failure nothing else is published
   * and the batch rejects with `restored: true`: an announcement that may have taken effect stays
   * (a reader may already have seen it), and says only that records changed which did not.
   */
  private async announce(announcements: readonly Mutation[], all: Mutation[]): Promise<number> {
    const dirs = [...new Set(announcements.map((m) => m.dir))].sort();
    let step = 'publish';
    let at = announcements[0]!.recordPath;
    try {
      for (const mutation of announcements) {
        at = mutation.recordPath;
        await this.publishOne(mutation);
      }
      step = 'directory-barrier';
      for (const dir of dirs) {
        at = dir;
        await this.ctx.fsLayer.syncDirectory(dir);
      }
      return dirs.length;
    } catch (error) {
      await this.removeTemps(all);
      this.state = 'failed';
      throw leaseIoError(`lease write failed during ${step} at ${at}: ${(error as Error)?.message ?? String(error)}; nothing else was published`, {
        step,
        path: at,
        errno: errnoCode(error),
        restored: true,
      }, error);
    }
  }

  private mutationOf({ id, before, next }: StagedChange): Mutation {
    return {
      id,
      dir: this.ctx.layout.dirOf(id),
      recordPath: this.ctx.layout.recordPath(id),
      // A record file's read always carries its bytes (record-files.ts).
      previous: before.state === 'valid' ? before.bytes! : null,
      next,
    };
  }

  private async publishOne(mutation: Mutation): Promise<void> {
    if (mutation.next) await this.ctx.fsLayer.rename(mutation.temp!, mutation.recordPath);
    else await this.ctx.fsLayer.unlink(mutation.recordPath);
    mutation.temp = undefined;
  }

  /** Phase 7: releases every lock. Idempotent; never throws. */
  async release(): Promise<void> {
    if (this.state === 'released') return;
    this.state = 'released';
    // Releasing takes no lock, so order does not matter for deadlock freedom: release all at once.
    await Promise.all(this.locks.map((handle) => handle.release()));
    this.locks.length = 0;
  }

  private assertState(expected: BatchState): void {
    if (this.state !== expected) throw new InternalError(`durability batch is ${this.state}, expected ${expected}`);
  }

  /** Phases 3–4. Returns the number of file barriers; on failure removes every temp and rejects. */
  private async stageTemps(list: Mutation[]): Promise<number> {
    const { fsLayer, layout } = this.ctx;
    const writes = list.filter((m) => m.next !== null);
    const fds: number[] = [];
    let step = 'stage';
    try {
      const opened = await Promise.allSettled(
        writes.map(async (m) => {
          const temp = layout.tempPath(m.id);
          // A temp whose write failed is already removed; one that was never opened is not ours.
          const fd = await createTempFile(fsLayer, temp, m.next!.bytes, RECORD_MODE);
          m.temp = temp;
          fds.push(fd);
        }),
      );
      const failed = opened.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined;
      if (failed) throw failed.reason;
      step = 'file-barrier';
      const pass = await barrierFiles(fsLayer, this.ctx.fileBarrier, fds);
      if (pass.failure) throw pass.failure.reason;
      step = 'close';
      const closes = await closeFiles(fsLayer, fds.splice(0));
      const closeFailed = closes.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined;
      if (closeFailed) throw closeFailed.reason;
      return pass.barriers;
    } catch (error) {
      await closeFiles(fsLayer, fds);
      await this.removeTemps(list);
      this.state = 'failed';
        throw leaseIoError(`lease write failed during ${step}: ${(error as Error).message}; nothing was published`, {
        step,
        path: (error as { path?: unknown } | null)?.path ?? null,
        errno: errnoCode(error),
        restored: true,
      }, error);
    }
  }

  private async removeTemps(list: Mutation[]): Promise<void> {
    await Promise.allSettled(
      list.filter((m) => m.temp !== undefined).map(async (m) => {
        const temp = m.temp!;
        m.temp = undefined;
        await this.ctx.fsLayer.unlink(temp);
      }),
    );
  }

  /**
   * Restores the previous bytes of `touched` under the held locks, then barriers every directory
   * involved (the failed ones first), and returns the error to throw.
   */
  private async failAfterPublish(touched: Mutation[], step: string, failedPath: string, error: unknown, failedDirs: string[]): Promise<Error> {
    this.state = 'failed';
    const restored = await this.restore(touched, failedDirs);
    const outcome = restored ? 'pre-call records restored' : 'restore incomplete; leftover records expire after their TTL';
    return leaseIoError(`lease write failed during ${step} at ${failedPath}: ${(error as Error)?.message ?? String(error)}; ${outcome}`, {
      step,
      path: failedPath,
      errno: errnoCode(error),
      restored,
    }, error);
  }

  private async restore(touched: Mutation[], failedDirs: string[]): Promise<boolean> {
    const { fsLayer, layout } = this.ctx;
    let ok = true;
    const dirs = new Set<string>(failedDirs);
    for (const mutation of touched) {
      dirs.add(mutation.dir);
      if (mutation.previous === null) {
        try {
          await fsLayer.unlink(mutation.recordPath);
        } catch (error) {
          if (errnoCode(error) !== 'ENOENT') ok = false;
        }
        continue;
      }
      try {
        // The exact previous bytes, durable before they take the record's name again.
        await replaceFileDurably(fsLayer, layout.tempPath(mutation.id), mutation.recordPath, mutation.previous, RECORD_MODE);
      } catch {
        ok = false;
      }
    }
    for (const dir of dirs) {
      try {
        await fsLayer.syncDirectory(dir);
      } catch {
        ok = false;
      }
    }
    return ok;
  }
}
