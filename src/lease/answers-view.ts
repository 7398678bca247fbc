/**
 * The answer generation record and each table's local view of the answer records
 * (docs/lease-format.md "Answer generation", docs/leases.md "Shared answers").
 *
 * A claim that names its input must know each member's answer record as the store holds it when
 * the claim commits. Reading every member's answer record in every claim costs the claim a second
 * record per member. Instead, one record counts every write of any answer record: the *answer
 * generation record* (`answerGenerationRecordId()`), which each release that writes answer records
 * locks and rewrites in the same batch, one generation further, listing the targets it wrote.
 *
 * A table keeps the answer records it has read or written (`AnswersView`), valid as of one
 * generation. A claim reads the generation record; when the view is at that generation, the view's
 * entries are the store's answer records and only the members the view does not hold are read
 * (a second read in the same batch, `LeaseOperation.readMore`), and of those, on a complete view,
 * only the ones that have an answer record (`AnswersView`, "Complete views"). When the store has moved on, the
 * view drops exactly the targets the record lists as written since (`changed`), so another
 * coordinator's answers cost this one a read of the branches they touched, not of everything. A
 * view older than the record's list reaches (`since`) starts over.
 *
 * Why the view is exact: every write of an answer record bumps the generation in the same atomic
 * batch, and a claim reads the generation record under its members' locks (files) or checks it
 * at commit (SQLite re-reads it in the write transaction, etcd compares its revision). A view entry
 * is only added from a read made after the generation it is filed under was read (the member reads
 * come in the second read), or from a committed write. A generation never repeats within an
 * `epoch`; a record written afresh (none yet, or a new table) starts a new random epoch, and a view
 * of another epoch starts over. No generation record (epoch `""`) vouches for nothing: the record
 * may have been removed (an operator's repair of a corrupt one) with answer records left, and a
 * claim that reads it absent reads every member's answer record.
 */
import { randomBytes } from 'node:crypto';
import { answerGenerationRecordId, answerRecordId, targetRecordId } from './identity.js';
import { MAX_GENERATION_CHANGES, isDecimalTarget, type LeaseRecord, type RecordRead } from './lease-record.js';
/** Answer records a table's view keeps; the least recently learnt goes first. */
export const ANSWERS_VIEW_ENTRIES = 8192;

/** `[generation, target (decimal)]`: the target's answer record was last written at that generation. */
export type GenerationChange = readonly [number, string];

/** What a generation record says (an absent record: epoch `""`, generation 0). */
export interface AnswerGeneration {
  readonly epoch: string;
  readonly generation: number;
  /** Every answer write after this generation is in `changed`. */
  readonly since: number;
  readonly changed: readonly GenerationChange[];
}

const NO_GENERATION: AnswerGeneration = Object.freeze({ epoch: '', generation: 0, since: 0, changed: Object.freeze([]) });

/** The generation a read of the generation record shows; undefined when it is corrupt. */
export function generationOf(read: RecordRead): AnswerGeneration | undefined {
  if (read.state === 'absent') return NO_GENERATION;
  if (read.state === 'corrupt') return undefined;
  const record = read.record as LeaseRecord & Partial<AnswerGeneration>;
  return { epoch: record.epoch!, generation: record.generation!, since: record.since!, changed: record.changed! };
}

/**
 * The generation record after a release wrote the answer records of `targets`: one generation
 * further (a new epoch when there was none), `targets` listed at it, the oldest entries dropped
 * beyond `MAX_GENERATION_CHANGES` (and `since` moved past them).
 */
export function nextGeneration(previous: AnswerGeneration, targets: readonly bigint[], writer: { readonly owner: string; readonly token: string; readonly worker: number; readonly nowMs: number }): LeaseRecord {
  const fresh = previous.epoch === '';
  const epoch = fresh ? randomBytes(8).toString('hex') : previous.epoch;
  const generation = fresh ? 1 : previous.generation + 1;
  const written = new Set(targets.map((t) => t.toString(10)));
  let changed: GenerationChange[] = fresh ? [] : previous.changed.filter(([, t]) => !written.has(t));
  // Frozen rows: the next generation of the same batch keeps them by identity, and a batch's
  // canonical-JSON memo writes each one's text once however many releases rewrite the record.
  for (const t of written) changed.push(Object.freeze([generation, t] as const));
  let since = fresh ? 0 : previous.since;
  if (changed.length > MAX_GENERATION_CHANGES) {
    since = changed[changed.length - MAX_GENERATION_CHANGES - 1]![0];
    // Every entry of a generation goes with it: `since` means "all of it is listed, or none".
    changed = changed.filter(([g]) => g > since);
  }
  // Keys in canonical order (canonical-json.ts).
  return {
    attempts: 0,
    changed,
    epoch,
    generation,
    id: answerGenerationRecordId(),
    kind: 'target',
    owner: writer.owner,
    payload: {},
    previousOwner: '',
    role: 'answers-generation',
    schema: 1,
    since,
    status: 'done',
    steals: 0,
    token: writer.token,
    updatedMs: writer.nowMs,
    worker: writer.worker,
  } as LeaseRecord;
}

/** The first 32 bits of an input's SHA-256 (lowercase hex): what `AnswerEntry.settles` compares first. */
export function inputKey(input: string): number {
  let key = 0;
  for (let i = 0; i < 8; i += 1) {
    const c = input.charCodeAt(i);
    key = key * 16 + (c <= 57 ? c - 48 : c - 87);
  }
  return key;
}

/** An answer record in the view, with what a claim compares kept together. */
export class AnswerEntry {
  /**
   * `inputKey` of each input of `settled`, sorted. A claim looks its input up in every member's
   * list: one small array per branch, searched by halves, instead of up to `MAX_SETTLED_INPUTS`
   * strings spread over the heap, each a likely cache miss by the time a claim comes (most of a
   * lookup's cost).
   */
  readonly #keys: Uint32Array;
  /** The record's `version` (0: none), read once: a claim declares it for every member. */
  readonly version: number;

  constructor(readonly read: RecordRead & { state: 'valid' | 'absent' }) {
    const settled = read.state === 'valid' ? (read.record.settled ?? []) : [];
    this.#keys = new Uint32Array(settled.length);
    settled.forEach((input, i) => {
      this.#keys[i] = inputKey(input);
    });
    this.#keys.sort();
    this.version = read.state === 'valid' ? (read.record.version ?? 0) : 0;
  }

  /** True when the record lists `input` (whose `inputKey` is `key`) as settled. */
  settles(input: string, key: number): boolean {
    const keys = this.#keys;
    let low = 0;
    let high = keys.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (keys[mid]! < key) low = mid + 1;
      else high = mid;
    }
    // Another input may share the first 32 bits: the record's own list decides.
    return low < keys.length && keys[low] === key && this.read.state === 'valid' && this.read.record.settled!.includes(input);
  }
}

/** The entry of a branch that has no answer record: what a complete view answers for a branch it does not list. */
export const NO_ANSWER = new AnswerEntry({ state: 'absent' });

/** Branches a complete view tracks (listed and written since) before it gives completeness up. */
export const COMPLETE_VIEW_BRANCHES = 1 << 20;

/**
 * A table's answer records as of one generation (file comment). Dropping an entry is always safe.
 *
 * **Complete views.** Most branches a campaign asks about have no answer record yet. A view that
 * only held records it had read would read each of them again on its first claim. So a view can
 * also be *complete*: it knows every branch that has an answer record at its generation, and
 * answers `NO_ANSWER` for any other without a read. It becomes complete from a scan
 * (`complete()`): the generation record, and every record that may be an answer record, listed
 * together with no answer write in between (`StoreBatch.scanAnswers`, backend-contract.ts). A
 * listed record whose own `target` hashes to its id is filed under that target (`#present`); any
 * other (the file store lists ids only, and a damaged record names no target) is kept by id
 * (`#listedIds`), and a branch is then looked up by its answer record id too. From then on every
 * target a newer generation lists as written joins `#present`. An entry that leaves (evicted,
 * or written since) leaves its branch answering "read me" through `#present` or `#listedIds` if it
 * has a record. A view that starts over (another epoch, or behind what the generation record lists)
 * is no longer complete until the next scan. An answer record that appears without a new
 * generation (written by hand) is not seen by a complete view until it starts over or its table is
 * reopened and scans.
 */
export class AnswersView {
  #epoch: string | undefined;
  #generation = 0;
  /** Answer records (valid or absent) by target, least recently learnt first. */
  readonly #entries = new Map<bigint, AnswerEntry>();
  /** Complete views only: ids of listed records that may be answer records of unknown target. */
  #listedIds: ReadonlySet<string> | undefined;
  /** Complete views only: targets that have an answer record (listed, or written since). */
  readonly #present = new Set<bigint>();

  constructor(
    private readonly capacity = ANSWERS_VIEW_ENTRIES,
    private readonly completeCapacity = COMPLETE_VIEW_BRANCHES,
  ) {}

  /** Entries held. */
  get size(): number {
    return this.#entries.size;
  }

  /** True when the view knows every branch that has an answer record (class comment). */
  get isComplete(): boolean {
    return this.#listedIds !== undefined;
  }

  /** True when the view is exactly at `g`: its entries are the store's answer records then. */
  at(g: AnswerGeneration): boolean {
    return this.#epoch === g.epoch && this.#generation === g.generation;
  }

  /**
   * Moves the view forward to `g`, a generation record read from the store or committed by this
   * table: drops the targets written since the view's generation, or everything when `g` is of
   * another epoch or lists too little. An older `g` (a slower batch's read) changes nothing.
   */
  advance(g: AnswerGeneration): void {
    if (this.#epoch === g.epoch) {
      if (g.generation <= this.#generation) return;
      if (this.#generation >= g.since) {
        for (const [at, target] of g.changed) {
          if (at <= this.#generation) continue;
          const t = BigInt(target);
          this.#entries.delete(t);
          if (this.#listedIds !== undefined) this.#present.add(t);
        }
        if (this.#present.size + (this.#listedIds?.size ?? 0) > this.completeCapacity) this.#incomplete();
      } else this.#startOver();
    } else this.#startOver();
    this.#epoch = g.epoch;
    this.#generation = g.generation;
  }

  /**
   * Makes the view complete at `g` from a scan (class comment): `listed` holds every record that
   * may be an answer record, each as its id and the `target` it names (undefined if none could be
   * read). Exact at `g` when `before` is undefined (one snapshot, SQLite); else `before` is the
   * generation record as read before the listing (files), and `g` must list every branch written
   * from `before`'s generation on, which join the branches with a record. Never at no generation
   * record (epoch `""`): nothing tells a view at `("", 0)` from one after the record was removed.
   * `behind`: the view has moved past `g`, or `g` does not reach back to `before`; `too-large`:
   * past the bound; `none`: no generation record.
   */
  complete(g: AnswerGeneration, listed: readonly (readonly [string, unknown])[], before?: AnswerGeneration): 'complete' | 'behind' | 'too-large' | 'none' {
    this.advance(g);
    if (g.epoch === '') return 'none';
    if (!this.at(g)) return 'behind';
    // Written from this generation on: listed by `g`, when it reaches back that far.
    let from = g.generation + 1;
    if (before !== undefined) {
      from = before.epoch === g.epoch ? before.generation : before.epoch === '' ? 0 : -1;
      if (from < 0 || g.since >= Math.max(from, 1)) return 'behind';
    }
    if (listed.length > this.completeCapacity) return 'too-large';
    const ids = new Set<string>();
    this.#present.clear();
    for (const [id, target] of listed) {
      const t = typeof target === 'string' && isDecimalTarget(target) ? BigInt(target) : undefined;
      // A record's own word for its target counts only when its id is that target's answer record
      // id; a lease record (a SQLite scan lists those too) is known by its own id.
      if (t !== undefined && answerRecordId(t) === id) this.#present.add(t);
      else if (t !== undefined && targetRecordId(t) === id) continue;
      else if (id !== answerGenerationRecordId()) ids.add(id);
    }
    for (const [at, target] of g.changed) if (at >= from) this.#present.add(BigInt(target));
    this.#listedIds = ids;
    return 'complete';
  }

  /** Where the view is: its epoch and generation (before any: `"-"`). */
  get position(): string {
    return this.#epoch === undefined ? '-' : `${this.#epoch}/${this.#generation}`;
  }

  /**
   * The answer record of `target` as the view knows it: its entry, `NO_ANSWER` when the view is
   * complete and the branch has none, undefined when it must be read.
   */
  lookup(target: bigint): AnswerEntry | undefined {
    const entry = this.#entries.get(target);
    if (entry !== undefined || this.#listedIds === undefined || this.#present.has(target)) return entry;
    // Hashed only when the scan listed records of unknown target (the file store's names).
    return this.#listedIds.size > 0 && this.#listedIds.has(answerRecordId(target)) ? undefined : NO_ANSWER;
  }

  /** Files `read` (read after `g` was, or written at `g`) under `target` when the view is at `g`. */
  learn(g: AnswerGeneration, target: bigint, read: RecordRead): void {
    if (!this.at(g) || read.state === 'corrupt') return;
    this.#entries.delete(target);
    if (this.#entries.size >= this.capacity) this.#entries.delete(this.#entries.keys().next().value as bigint);
    this.#entries.set(target, new AnswerEntry(read.state === 'valid' ? { state: 'valid', record: read.record } : read));
  }

  #incomplete(): void {
    this.#listedIds = undefined;
    this.#present.clear();
  }

  #startOver(): void {
    this.#entries.clear();
    this.#incomplete();
  }
}

/**
 * A table's answer records on a store that versions them itself (etcd, `RecordBackend.relateAnswers`):
 * the last version of each this table read or wrote, by target, valid or absent. A claim decides
 * from an entry and declares its version (`MoreReads.declared`); the store's commit checks that no
 * newer version exists (etcd-batch.ts), so an old entry costs a conflict and a read, never a wrong
 * decision. Dropping an entry is always safe.
 *
 * Complete: once the store has listed the branches that have an answer record
 * (`RecordBackend.answeredBranches`, by lease record id), any other branch is answered `NO_ANSWER`
 * (declared at version 0) without a read. A branch answered elsewhere since costs the same
 * conflict and read as an old entry; then, and whenever this table writes one, it joins the list.
 */
export class VersionedAnswers {
  /** Answer records (valid or absent) by target, least recently learnt first. */
  readonly #entries = new Map<bigint, AnswerEntry>();
  /** Lease record ids of the branches known to have an answer record, once listed. */
  #answered: Set<string> | undefined;

  constructor(
    private readonly capacity = ANSWERS_VIEW_ENTRIES,
    private readonly completeCapacity = COMPLETE_VIEW_BRANCHES,
  ) {}

  /** True once the store listed the branches that have an answer record (class comment). */
  get isComplete(): boolean {
    return this.#answered !== undefined;
  }

  /** Takes the store's list of branches with an answer record (lease record ids); ignored past the bound. */
  complete(answered: ReadonlySet<string>): void {
    this.#answered = answered.size > this.completeCapacity ? undefined : new Set(answered);
  }

  /**
   * The answer record of `target` (lease record `leaseId`) the view holds: its entry, `NO_ANSWER`
   * when the view is complete and does not list the branch, undefined when it must be read.
   */
  lookup(target: bigint, leaseId: string): AnswerEntry | undefined {
    const entry = this.#entries.get(target);
    if (entry !== undefined || this.#answered === undefined || this.#answered.has(leaseId)) return entry;
    return NO_ANSWER;
  }

  /** Keeps `read`, an answer record as the store holds it (read from it, or committed by this table), as `target`'s (lease record `leaseId`). */
  learn(target: bigint, leaseId: string, read: RecordRead): void {
    if (read.state === 'corrupt') return;
    this.#entries.delete(target);
    if (this.#entries.size >= this.capacity) this.#entries.delete(this.#entries.keys().next().value as bigint);
    this.#entries.set(target, new AnswerEntry(read.state === 'valid' ? { state: 'valid', record: read.record } : read));
    if (read.state === 'valid' && this.#answered !== undefined) {
      this.#answered.add(leaseId);
      if (this.#answered.size > this.completeCapacity) this.#answered = undefined;
    }
  }
}
