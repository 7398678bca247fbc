/**
 * Publishes findings where AFL++ imports them: `<afl-out>/<name>/queue/` (interesting inputs),
 * `crashes/` and `hangs/`, named `id:NNNNNN,src:NNNNNN` as AFL++ names its own (docs/campaign.md "Output directory").
 *
 * - Ids are strictly increasing per directory and resume after a restart: the next id is one past
 *   the highest `id:` name found at `open()` (AFL's sync cursor skips ids below the last one it
 *   took, so reusing a lower id would hide the entry from AFL forever).
 * - Every file is complete and durable before its `id:` name appears (through `DurableWriter`).
 * - This coordinator is the only writer of these directories; calls are serialised here so ids
 *   are assigned in publication order.
 * - Content already published to a directory (same SHA-256) is not published there again.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { AflError } from '../errors.js';
import type { FindingItem, FindingSink, PublishedEntry } from '../core/findings.js';
import { MAX_AFL_ID, formatAflId, nextAflId, sourceIdOf } from './afl-names.js';
import type { DurableFile, DurableWriter } from './durable-writer.js';

type FindingKind = PublishedEntry['kind'];
const KINDS: readonly FindingKind[] = ['queue', 'crashes', 'hangs'];

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

export class QueuePublisher implements FindingSink {
  readonly #baseDir: string;
  readonly #writer: DurableWriter;
  readonly #nextId = new Map<FindingKind, number>();
  readonly #digests = new Map<FindingKind, Set<string>>();
  #chain: Promise<unknown> = Promise.resolve();

  private constructor(baseDir: string, writer: DurableWriter) {
    this.#baseDir = baseDir;
    this.#writer = writer;
  }

  /**
   * Opens `<baseDir>/{queue,crashes,hangs}`, creating them if needed, and resumes each id counter
   * and digest set from what is already there.
   */
  static async open(baseDir: string, writer: DurableWriter): Promise<QueuePublisher> {
    const publisher = new QueuePublisher(baseDir, writer);
    for (const kind of KINDS) {
      const dir = publisher.dirOf(kind);
      await writer.ensureDir(dir);
      const names = await writer.list(dir);
      publisher.#nextId.set(kind, nextAflId(names));
      const digests = new Set<string>();
      for (const name of names) {
        if (!name.startsWith('id:')) continue;
        try {
          digests.add(sha256(await readFile(path.join(dir, name))));
        } catch {
          // unreadable entries simply do not take part in de-duplication
        }
      }
      publisher.#digests.set(kind, digests);
    }
    return publisher;
  }

  dirOf(kind: FindingKind): string {
    return path.join(this.#baseDir, kind);
  }

  /** The id the next entry of `kind` will get. */
  nextId(kind: FindingKind): number {
    return this.#nextId.get(kind) ?? 0;
  }

  publish(items: readonly FindingItem[], parentPath: string): Promise<ReadonlyArray<PublishedEntry | null>> {
    return this.#serially(() => this.#publish(items, parentPath));
  }

  /** Runs publications one after another, so ids are assigned in publication order. */
  #serially<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(task);
    this.#chain = run.catch(() => {}); // keeps the chain going; each task's caller gets its own result or error
    return run;
  }

  /**
   * Publishes one committed result's findings through `write`, which makes the planned files
   * appear (one job per directory) or refuses to: it answers true when it wrote them, false when
   * a guard (the work record's fence) said the result is not to be published by us — then
   * nothing was written and no id or digest is consumed. `source` is the parent's `src:` digits.
   * A throwing `write` may have published some names: the id counters are resynced from the
   * directories and the error propagates.
   */
  publishGuarded(
    items: readonly { readonly kind: FindingKind; readonly bytes: Uint8Array }[],
    source: string,
    write: (jobs: readonly { readonly dir: string; readonly files: readonly DurableFile[] }[]) => Promise<boolean>,
  ): Promise<GuardedPublication> {
    return this.#serially(async (): Promise<GuardedPublication> => {
      const plan = this.#plan(items, source);
      const jobs = [...plan.perDir].map(([kind, list]) => ({ dir: this.dirOf(kind), files: list.map((l) => l.file) }));
      let written: boolean;
      try {
        written = await write(jobs);
      } catch (error) {
        for (const kind of plan.perDir.keys()) await this.#afterFailure(kind, plan, error);
        throw error;
      }
      if (!written) return { written: false, entries: new Array(items.length).fill(null) };
      for (const kind of plan.perDir.keys()) this.#accept(kind, plan);
      return { written: true, entries: plan.answers };
    });
  }

  async #publish(items: readonly FindingItem[], parentPath: string): Promise<Array<PublishedEntry | null>> {
    const resolved: { kind: FindingKind; bytes: Uint8Array }[] = [];
    for (const item of items) resolved.push({ kind: item.kind, bytes: item.content instanceof Uint8Array ? item.content : await readFile(item.content.path) });
    const plan = this.#plan(resolved, sourceIdOf(path.basename(parentPath)));
    for (const [kind, list] of plan.perDir) {
      try {
        await this.#writer.publish(this.dirOf(kind), list.map((l) => l.file));
      } catch (error) {
        await this.#afterFailure(kind, plan, error);
        throw error;
      }
      this.#accept(kind, plan);
    }
    return plan.answers;
  }

  /** Assigns names and ids to the new (not yet published) items; mutates nothing. */
  #plan(items: readonly { kind: FindingKind; bytes: Uint8Array }[], src: string): PublicationPlan {
    const answers: Array<PublishedEntry | null> = new Array(items.length).fill(null);
    const perDir = new Map<FindingKind, Array<{ index: number; file: DurableFile; entry: PublishedEntry }>>();
    const nextIds = new Map(this.#nextId);
    const batchDigests = new Map<FindingKind, Set<string>>();
    for (const [index, item] of items.entries()) {
      const digest = sha256(item.bytes);
      const known = this.#digests.get(item.kind)!;
      const inBatch = batchDigests.get(item.kind) ?? new Set<string>();
      batchDigests.set(item.kind, inBatch);
      if (known.has(digest) || inBatch.has(digest)) continue;
      inBatch.add(digest);
      const id = nextIds.get(item.kind) ?? 0;
      if (id > MAX_AFL_ID) throw new AflError(`AFL ${item.kind} id space is exhausted in ${this.dirOf(item.kind)}`, { kind: item.kind });
      nextIds.set(item.kind, id + 1);
      const name = `id:${formatAflId(id)},src:${src}`;
      const entry: PublishedEntry = { kind: item.kind, id, path: path.join(this.dirOf(item.kind), name), sha256: digest };
      const list = perDir.get(item.kind) ?? [];
      list.push({ index, file: { name, bytes: item.bytes }, entry });
      perDir.set(item.kind, list);
    }
    return { answers, perDir, nextIds };
  }

  /** The plan's entries of `kind` are on disk: advance the id counter, remember the digests. */
  #accept(kind: FindingKind, plan: PublicationPlan): void {
    this.#nextId.set(kind, plan.nextIds.get(kind)!);
    for (const { index, entry } of plan.perDir.get(kind) ?? []) {
      this.#digests.get(kind)!.add(entry.sha256);
      plan.answers[index] = entry;
    }
  }

  /**
   * A publication that failed at or after its renames (`details.step` of the I/O thread's
   * PublishError) may have shown its `id:` names before they were taken back, and AFL's sync may
   * have imported them and moved its cursor past them: those ids are never handed out again (a
   * reused id below AFL's cursor would hide the new entry from AFL for good). A failure before
   * any rename showed nothing, so its ids stay free. Then the counters are resynced from disk.
   */
  async #afterFailure(kind: FindingKind, plan: PublicationPlan, error: unknown): Promise<void> {
    const step = (error as { details?: { step?: unknown } } | null)?.details?.step;
    if (step === 'rename' || step === 'directory-barrier') this.#nextId.set(kind, Math.max(this.nextId(kind), plan.nextIds.get(kind) ?? 0));
    await this.#resync(kind);
  }

  /**
   * Some names may have appeared before a failure: keep the next id above every existing one, and
   * learn the digests of what is there, so a retry of the same result does not publish it twice.
   */
  async #resync(kind: FindingKind): Promise<void> {
    const names = await this.#writer.list(this.dirOf(kind)).catch(() => [] as string[]);
    this.#nextId.set(kind, Math.max(this.nextId(kind), nextAflId(names)));
    const digests = this.#digests.get(kind)!;
    for (const name of names) {
      if (!name.startsWith('id:')) continue;
      try {
        digests.add(sha256(await readFile(path.join(this.dirOf(kind), name))));
      } catch {
        // unreadable entries simply do not take part in de-duplication
      }
    }
  }
}

interface PublicationPlan {
  readonly answers: Array<PublishedEntry | null>;
  readonly perDir: Map<FindingKind, Array<{ index: number; file: DurableFile; entry: PublishedEntry }>>;
  readonly nextIds: Map<FindingKind, number>;
}

/** What `publishGuarded` did: `entries` per item, `null` for content already published there. */
interface GuardedPublication {
  readonly written: boolean;
  readonly entries: ReadonlyArray<PublishedEntry | null>;
}
