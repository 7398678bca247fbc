/**
 * Lease-store faults as the log shows them (docs/campaign.md "When the lease store fails").
 *
 * While the store cannot be read or written (an etcd out of space or unreachable, a lease
 * directory gone read-only), every claim and renewal fails, several times a second. The first
 * failure of such a spell is logged at error with its whole error (its message says what to do);
 * the ones after it are only counted, and a warn line sums them up once per `summaryMs` while the
 * spell lasts. The first write that succeeds again ends the spell with one info line: how long it
 * lasted and how many operations failed. A refusal does not end it: an etcd out of space still
 * answers reads, so claims are refused `conflict` while every write fails.
 *
 * Contract: every failure is counted in `failures` and reaches the log, in full or in a sum; no
 * failure is logged in full twice in one spell; `answered()` outside a spell logs nothing.
 */
import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { codeOf } from '../errors.js';

/**
 * Errors of a store that cannot be read or written right now, which a later try may pass: the
 * lease store's (`ERR_LEASE_IO`, `ERR_ETCD_UNAVAILABLE`, `ERR_LOCK_TIMEOUT`), a durable write's
 * (`ERR_PUBLISH`: staging under the lease root), and the errno of a full, read-only or failing
 * disk. Work that failed with one of them was not refused, only not run or not committed, and is
 * kept or given back. Any other error (a corrupt record, a finding that is gone or too large, a
 * bug) a retry would meet again: that work is dropped, as refused work is.
 */
const TRANSIENT_CODES: ReadonlySet<string> = new Set([
  'ERR_LEASE_IO',
  'ERR_ETCD_UNAVAILABLE',
  'ERR_LOCK_TIMEOUT',
  'ERR_PUBLISH',
  'EIO',
  'ENOSPC',
  'EDQUOT',
  'EROFS',
  'EAGAIN',
  'EBUSY',
  'EINTR',
  'ETIMEDOUT',
  'EMFILE',
  'ENFILE',
]);

/** May a later try of the work that failed with `error` pass (the store failed, not the work)? */
export function isTransientError(error: unknown): boolean {
  const code = codeOf(error);
  return code !== undefined && TRANSIENT_CODES.has(code);
}

/** Least time between two summary lines of one spell, ms. */
export const STORE_FAULT_SUMMARY_MS = 30_000;

export interface StoreFaultSink {
  /** A store operation failed with an I/O error (`msg` says which; `fields` go on the log line). */
  failed(error: unknown, msg: string, fields?: Readonly<Record<string, unknown>>): void;
  /** A store operation wrote (a claim granted, a lease renewed, a commit step done). */
  answered(): void;
}

interface Spell {
  readonly sinceMs: number;
  /** Failures since the spell's last line, and the last of them. */
  unlogged: number;
  lastMessage: string;
  lastLineMs: number;
  total: number;
}

export class StoreFaults implements StoreFaultSink {
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #summaryMs: number;
  #spell: Spell | undefined;
  #failures = 0;

  constructor(log: Logger, clock: Clock, summaryMs = STORE_FAULT_SUMMARY_MS) {
    this.#log = log;
    this.#clock = clock;
    this.#summaryMs = summaryMs;
  }

  /** Store operations that failed with an I/O error, in all. */
  get failures(): number {
    return this.#failures;
  }

  /** Is the store failing right now (a failure not yet followed by an answer)? */
  get failing(): boolean {
    return this.#spell !== undefined;
  }

  failed(error: unknown, msg: string, fields: Readonly<Record<string, unknown>> = {}): void {
    this.#failures += 1;
    const now = this.#clock.now();
    const spell = this.#spell;
    if (spell === undefined) {
      this.#spell = { sinceMs: now, unlogged: 0, lastMessage: msg, lastLineMs: now, total: 1 };
      this.#log.error({ ...fields, err: error }, `${msg}; further lease-store failures are summed up every ${Math.round(this.#summaryMs / 1000)} s until the store answers again`);
      return;
    }
    spell.total += 1;
    spell.unlogged += 1;
    spell.lastMessage = `${msg}: ${(error as Error)?.message ?? String(error)}`;
    if (now - spell.lastLineMs < this.#summaryMs) return;
    this.#log.warn({ failures: spell.unlogged, failingForMs: now - spell.sinceMs, last: spell.lastMessage }, 'the lease store is still failing');
    spell.unlogged = 0;
    spell.lastLineMs = now;
  }

  answered(): void {
    const spell = this.#spell;
    if (spell === undefined) return;
    this.#spell = undefined;
    this.#log.info({ failures: spell.total, failedForMs: this.#clock.now() - spell.sinceMs }, 'the lease store answers again');
  }
}
