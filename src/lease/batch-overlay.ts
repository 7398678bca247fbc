/**
 * The batch overlay: what every store's batch has in common, written once. A store supplies the
 * four steps only it can do (`StoreBatch`: lock, fetch, commit, release; backend-contract.ts);
 * the overlay keeps, for every store alike:
 *
 * - which ids the batch names (`lock` first, then `read`, then staging — in that order, per id);
 * - the records read, and the changes staged over them, so that `view` shows a record as this
 *   batch will leave it;
 * - the corrupt-record rule: nothing is ever staged over a record that read as corrupt (an
 *   operator has to look at it; lease-record.ts), and a batch of changes is refused whole when one
 *   of them would be;
 * - the operation scope (`OperationView`): an operation's own changes are kept apart until its
 *   `apply` returns, then staged together, so an operation that throws half-way stages nothing.
 *
 * A deletion of a record that is absent and was not staged is no change at all; the store's
 * `commit` only ever receives real changes, each with the record as read before the batch.
 */
import { InternalError } from '../errors.js';
import { leaseIoError } from './lease-io-error.js';
import type { LeaseRecord, RecordRead } from './lease-record.js';
import type { BatchReport, DeclaredAnswer, FetchedRead, StagedChange, StagedRecord, StoreBatch } from './backend-contract.js';

/** What an operation sees under its locks. */
export interface RecordView {
  /** The record as read under the lock (overlaid with earlier operations of the same batch). */
  get(id: string): RecordRead;
  /** Stages a new record; serialised now, so a bad value throws before any mutation. */
  put(record: LeaseRecord): void;
  /** Stages the deletion of a record. */
  remove(id: string): void;
  /** As `get`, for a record this batch may not have read: undefined when it has not. */
  peek(id: string): RecordRead | undefined;
  /** True when an earlier operation of the batch staged an answer record (or the answer generation). */
  readonly answersStaged: boolean;
}

const NO_IDS: ReadonlySet<string> = new Set();

/** A programming error in the use of a batch (an id used out of phase): never a store failure. */
function misuse(message: string): Error {
  return new InternalError(`lease batch misuse: ${message}`);
}

export class BatchOverlay {
  private readonly named = new Set<string>();
  private readonly reads = new Map<string, FetchedRead>();
  /** Staged changes in staging order; null: delete. */
  private readonly staged = new Map<string, StagedRecord | null>();
  #answersStaged = false;
  private ended = false;

  constructor(private readonly store: StoreBatch) {}

  /** Takes the store's exclusive access to `ids` not yet named by this batch. */
  async lock(ids: Iterable<string>): Promise<void> {
    this.assertOpen();
    const wanted = new Set<string>();
    for (const id of ids) if (!this.named.has(id)) wanted.add(id);
    if (wanted.size === 0) return;
    const list = [...wanted];
    await this.store.lock(list);
    for (const id of list) this.named.add(id);
  }

  /**
   * Reads the records of `ids` not read yet in this batch: each locked, or in `guarded`, the ids
   * whose writers another lock of the batch orders (lease-operation.ts, `readIds`), or in
   * `pinned`, ids an operation checks against a record it locks (`StoreBatch.fetch`).
   */
  async read(ids: Iterable<string>, guarded: ReadonlySet<string> = NO_IDS, pinned: ReadonlySet<string> = NO_IDS): Promise<void> {
    this.assertOpen();
    const wanted = new Set<string>();
    const guardedAgain: string[] = [];
    for (const id of ids) {
      if (this.reads.has(id)) {
        // Read earlier under a lock that wrote nothing: guarded now, it is checked at commit all the same.
        if (guarded.has(id)) guardedAgain.push(id);
        continue;
      }
      if (!this.named.has(id) && !guarded.has(id) && !pinned.has(id)) throw misuse(`read of ${id} without its lock`);
      wanted.add(id);
    }
    if (guardedAgain.length > 0) this.store.guard?.(guardedAgain);
    if (wanted.size === 0) return;
    const pending = [...wanted];
    const fetched = await this.store.fetch(pending, guarded, pinned);
    for (const id of pending) {
      const read = fetched.get(id);
      if (read === undefined) throw misuse(`the store returned no read of ${id}`);
      this.reads.set(id, read);
    }
  }

  /** Ids known to be lease records (`StoreBatch.leaseRecords`), before the first read. */
  leaseRecords(ids: ReadonlySet<string>): void {
    this.assertOpen();
    this.store.leaseRecords?.(ids);
  }

  /** Answer records to read with their lease records (`LeaseOperation.readAlong`), where the store can. */
  readAlong(pairs: readonly (readonly [string, string])[]): void {
    this.assertOpen();
    this.store.readAlong?.(pairs);
  }

  /** Answer records operations decided from at versions they knew (`MoreReads.declared`): the store checks them at commit. */
  declare(declared: readonly DeclaredAnswer[]): void {
    this.assertOpen();
    if (this.store.declare === undefined) throw misuse('declared answer versions on a store that does not version answer records');
    this.store.declare(declared);
  }

  /** True when this batch has read `id`. */
  hasRead(id: string): boolean {
    return this.reads.has(id);
  }

  /** True when an operation of this batch staged a change of `id`. */
  hasStaged(id: string): boolean {
    return this.staged.has(id);
  }

  /** A read record, overlaid with what this batch staged. */
  view(id: string): RecordRead {
    const next = this.staged.get(id);
    if (next !== undefined) return next === null ? { state: 'absent' } : { state: 'valid', record: next.record };
    return this.readOf(id);
  }

  /**
   * Stages writes (a record) and deletions (null), all-or-nothing: every id is checked — locked,
   * read, not corrupt, admitted by the store — before the first is staged.
   */
  stageAll(changes: Iterable<readonly [string, StagedRecord | null]>): void {
    this.assertOpen();
    const list = [...changes];
    for (const [id] of list) {
      if (!this.named.has(id)) throw misuse(`stage of ${id} without its lock`);
      const read = this.readOf(id);
      if (read.state === 'corrupt') throw misuse(`stage over corrupt record ${id}: corrupt records are never overwritten`);
    }
    this.store.admit?.(list);
    for (const [id, next] of list) {
      if (next === null && !this.staged.has(id) && this.readOf(id).state === 'absent') continue;
      this.staged.set(id, next);
      // Answer records and the answer generation carry a role; lease and work records none.
      if (next !== null && next.record.role !== undefined) this.#answersStaged = true;
    }
  }

  /** True when an operation of this batch staged an answer record (or the answer generation). */
  get answersStaged(): boolean {
    return this.#answersStaged;
  }

  /** The real changes of the batch (a record staged then deleted again is none), in staging order. */
  changes(): StagedChange[] {
    const list: StagedChange[] = [];
    for (const [id, next] of this.staged) {
      const before = this.reads.get(id) as RecordRead;
      if (next === null && before.state === 'absent') continue;
      list.push({ id, before, next });
    }
    return list;
  }

  /** Makes every staged change durable, all-or-nothing (the store's `commit`). */
  commit(): Promise<BatchReport> {
    this.assertOpen();
    return this.store.commit(this.changes());
  }

  /** Ends the batch (the store rolls back an uncommitted one). Idempotent; never throws. */
  async release(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    await this.store.release();
  }

  /** The scope of one operation (file comment): its changes reach the batch only through `stageOwn`. */
  scope(name: string, lockIds: readonly string[], encode: (record: LeaseRecord) => StagedRecord): OperationView {
    return new OperationView(this, name, new Set(lockIds), encode);
  }

  private readOf(id: string): RecordRead {
    const read = this.reads.get(id);
    if (read === undefined) throw misuse(`record ${id} was not read in this batch`);
    if (read.state === 'unreadable') throw leaseIoError(`lease record ${id} could not be read: ${messageOf(read.error)}`, { step: 'read', ids: [id], restored: true }, read.error);
    return read;
  }

  private assertOpen(): void {
    if (this.ended) throw misuse('the batch has ended');
  }
}

/** One operation's view of a batch: its own staged changes over the batch's overlay. */
class OperationView implements RecordView {
  private readonly own = new Map<string, StagedRecord | null>();
  /** Whether this operation read a record an earlier operation of the batch staged (`readStaged`). */
  #readStaged = false;

  constructor(
    private readonly batch: BatchOverlay,
    private readonly name: string,
    private readonly allowed: ReadonlySet<string>,
    private readonly encode: (record: LeaseRecord) => StagedRecord,
  ) {}

  get(id: string): RecordRead {
    const next = this.own.get(id);
    if (next !== undefined) return next === null ? { state: 'absent' } : { state: 'valid', record: next.record };
    if (this.batch.hasStaged(id)) this.#readStaged = true;
    return this.batch.view(id);
  }

  /**
   * Did this operation read a record an earlier operation of the batch staged? Then what it decided
   * describes a state that exists only if the batch commits.
   */
  get readStaged(): boolean {
    return this.#readStaged;
  }

  get answersStaged(): boolean {
    return this.batch.answersStaged;
  }

  peek(id: string): RecordRead | undefined {
    // Staged implies read (a stage needs the lock and the read).
    return this.batch.hasRead(id) ? this.get(id) : undefined;
  }

  put(record: LeaseRecord): void {
    this.check(record.id);
    this.own.set(record.id, this.encode(record));
  }

  remove(id: string): void {
    this.check(id);
    this.own.set(id, null);
  }

  /** Did this operation stage anything? */
  get staged(): boolean {
    return this.own.size > 0;
  }

  /** Ids this operation staged. */
  get stagedIds(): Iterable<string> {
    return this.own.keys();
  }

  /** Stages the operation's changes in the batch, all-or-nothing. */
  stageOwn(): void {
    this.batch.stageAll(this.own);
  }

  private check(id: string): void {
    if (!this.allowed.has(id)) throw misuse(`${this.name} staged ${id} outside its lock set`);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
