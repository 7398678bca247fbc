/**
 * Answer pins: how a claim on the etcd store knows each member's answer record without reading it
 * or comparing it at commit (docs/lease-format.md "Answer pins", docs/leases.md "Shared answers").
 *
 * The etcd store has no answer generation record (answers-view.ts): a release of a 64-member group
 * that answers every member already writes 128 records, etcd's bound. Instead each lease record
 * there names the version of its branch's answer record, its *answer pin* (`answerToken`): the
 * answer record's `token` (the lease token of the release that wrote it, so no two writes of one
 * answer record share it), or `""` when there is none. A release keeps the lease record, as a
 * `done` *released lease record* holding the pin, instead of deleting it, so the next claim of the
 * branch finds the pin.
 *
 * Why a pin is exact: whenever a lease record with a pin exists, the branch's answer record is the
 * one it names. Every write keeps that true:
 *   - a release that writes the answer record writes the lease record (released) in the same
 *     transaction, pinned to its own token, which it wrote into the answer record;
 *   - every other write of a lease record (a claim, a heartbeat, a release that answers nothing)
 *     takes the pin of the lease record it read and compares that one at commit, so the pin it
 *     copies was current at the commit; a claim that read the answer record itself, compared or
 *     pinned, writes that record's token; one that knows neither writes no pin;
 *   - only a release writes an answer record, and never without the lease record;
 *   - the server deleting a leased record with its holder's session leaves no pin to trust.
 * So a claim whose commit finds its lease record unchanged (etcd compares it) saw the pin of the
 * answer record as it is at that commit: any copy of the answer record with that token is the
 * current one — the table's view (`PinnedAnswers`, this file), or a read of the server that no
 * commit compares. A claim refused without a write decided at its read: a lease record taken from
 * the store's cache is compared then (etcd-batch.ts), one read from the server was current at its
 * read, with the answer record it pins. A lease record without a pin (absent, written by a
 * version before pins or by a claim that did not ask about answers) proves nothing: that member's
 * answer record is read guarded and compared at commit.
 */
import { AnswerEntry } from './answers-view.js';
import type { RecordRead } from './lease-record.js';

/** Answer records `PinnedAnswers` keeps; the least recently learnt goes first. */
export const PINNED_ANSWERS_ENTRIES = 8192;

/** The answer pin of a read lease record: undefined when it is not a valid record with one. */
export function pinOf(read: RecordRead): string | undefined {
  return read.state === 'valid' ? read.record.answerToken : undefined;
}

/** The pin a read answer record matches: its token, `""` when absent; undefined when corrupt. */
export function pinOfAnswer(read: RecordRead): string | undefined {
  if (read.state === 'absent') return '';
  return read.state === 'valid' ? read.record.token : undefined;
}

/** What a pin of `""` says: the branch has no answer record. */
export const NO_ANSWERS = new AnswerEntry({ state: 'absent' });

/**
 * A table's answer records, any version: a lookup returns one only when its token is the pin a
 * claim read, so holding an old one is never wrong, only useless. Dropping an entry is always safe.
 */
export class PinnedAnswers {
  /** Valid answer records by target, least recently learnt first. */
  readonly #entries = new Map<bigint, AnswerEntry>();

  constructor(private readonly capacity = PINNED_ANSWERS_ENTRIES) {}

  /** Entries held. */
  get size(): number {
    return this.#entries.size;
  }

  /** The answer record of `target` that `pin` names, when the view holds it. */
  lookup(target: bigint, pin: string): AnswerEntry | undefined {
    if (pin === '') return NO_ANSWERS;
    const entry = this.#entries.get(target);
    return entry !== undefined && entry.read.state === 'valid' && entry.read.record.token === pin ? entry : undefined;
  }

  /**
   * Keeps `read`, an answer record as the store held it (read from it, or committed by this
   * table), as `target`'s. Never a staged record whose commit failed: a retried release writes
   * the same token again, maybe with other times.
   */
  learn(target: bigint, read: RecordRead): void {
    if (read.state !== 'valid') return;
    this.#entries.delete(target);
    if (this.#entries.size >= this.capacity) this.#entries.delete(this.#entries.keys().next().value as bigint);
    this.#entries.set(target, new AnswerEntry({ state: 'valid', record: read.record }));
  }
}
