/**
 * Publishes findings where AFL++ imports them: `<afl-out>/<name>/queue/` (interesting inputs),
 * `crashes/` and `hangs/`, named `id:NNNNNN,src:NNNNNN` (reference/driver.md §2.4).
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
import type { FindingItem, FindingSink, PublishedEntry } from '../coordinator/ports.js';
import { MAX_AFL_ID, formatAflId, nextAflId, sourceIdOf } from './afl-names.js';
import type { DurableFile, DurableWriter } from './durable-writer.js';

export type FindingKind = PublishedEntry['kind'];
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
    const run = this.#chain.then(() => this.#publish(items, parentPath));
    this.#chain = run.catch(() => {});
    return run;
  }

  async #publish(items: readonly FindingItem[], parentPath: string): Promise<Array<PublishedEntry | null>> {
    const src = sourceIdOf(path.basename(parentPath));
    const answers: Array<PublishedEntry | null> = new Array(items.length).fill(null);
    const perDir = new Map<FindingKind, Array<{ index: number; file: DurableFile; entry: PublishedEntry }>>();
    const nextIds = new Map(this.#nextId);
    const batchDigests = new Map<FindingKind, Set<string>>();

    for (const [index, item] of items.entries()) {
      const bytes = item.content instanceof Uint8Array ? item.content : await readFile(item.content.path);
      const digest = sha256(bytes);
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
      list.push({ index, file: { name, bytes }, entry });
      perDir.set(item.kind, list);
    }

    for (const [kind, list] of perDir) {
      try {
        await this.#writer.publish(this.dirOf(kind), list.map((l) => l.file));
      } catch (error) {
        // Some names may have appeared before the failure: resync the counter from the directory
        // so the next id is still above every existing one.
        this.#nextId.set(kind, Math.max(this.nextId(kind), nextAflId(await this.#writer.list(this.dirOf(kind)).catch(() => []))));
        throw error;
      }
      this.#nextId.set(kind, nextIds.get(kind)!);
      for (const { index, entry } of list) {
        this.#digests.get(kind)!.add(entry.sha256);
        answers[index] = entry;
      }
    }
    return answers;
  }
}
