/**
 * Every side effect of a dispatch (shared target token, local reservation, exact-work lease) is
 * registered here together with how to undo it, so that any failure — before the solver starts,
 * or when its result turns out stale — rolls the whole dispatch back and leaves nothing held.
 *
 * An undo may differ once the job was sent to a solver (`afterSend`): before sending, the work
 * lease is abandoned; after, the same abandon still applies but e.g. a run must be aborted first.
 * Rollback runs undos in reverse registration order (last acquired, first released), records a
 * failing undo and carries on with the others, and happens at most once. `commit()` forgets the
 * undos: the caller has taken over responsibility for every resource.
 */
import { InternalError } from '../errors.js';

type Undo = () => void | Promise<void>;

interface Registration {
  readonly name: string;
  readonly beforeSend: Undo;
  readonly afterSend: Undo | undefined;
}

type TransactionState = 'preparing' | 'sent' | 'committed' | 'rolled-back';

interface RollbackReport {
  readonly attempted: number;
  /** Names of the undos that threw, in the order they ran. */
  readonly failed: readonly string[];
}

const NOTHING_DONE: RollbackReport = Object.freeze({ attempted: 0, failed: Object.freeze([]) });

export class DispatchTransaction {
  #state: TransactionState = 'preparing';
  #undos: Registration[] = [];

  get state(): TransactionState {
    return this.#state;
  }

  /**
   * Registers an acquired resource. `afterSend` replaces `beforeSend` once `markSent()` was called;
   * omitted, `beforeSend` applies in both phases.
   */
  register(name: string, beforeSend: Undo, afterSend?: Undo): void {
    if (this.#state === 'committed' || this.#state === 'rolled-back') {
      throw new InternalError(`dispatch transaction is ${this.#state}; cannot register ${name}`);
    }
    this.#undos.push({ name, beforeSend, afterSend });
  }

  /** The job was handed to a solver: later rollbacks use the after-send undos. */
  markSent(): void {
    if (this.#state !== 'preparing') throw new InternalError(`dispatch transaction is ${this.#state}; cannot mark sent`);
    this.#state = 'sent';
  }

  /** Ownership of every resource passed to the caller; rollback becomes a no-op. */
  commit(): void {
    if (this.#state === 'rolled-back') throw new InternalError('dispatch transaction was rolled back; cannot commit');
    this.#state = 'committed';
    this.#undos = [];
  }

  /**
   * Undoes only the newest registration, which must be `name`, and forgets it; the others stay
   * registered. Contract: only while preparing (a job not yet sent); resolves false — nothing
   * undone — when the newest registration has another name. A throwing undo propagates, and the
   * registration is forgotten all the same (its resource is then left to TTL).
   */
  async undoNewest(name: string): Promise<boolean> {
    if (this.#state !== 'preparing') throw new InternalError(`dispatch transaction is ${this.#state}; cannot undo ${name} alone`);
    const newest = this.#undos.at(-1);
    if (newest === undefined || newest.name !== name) return false;
    this.#undos.pop();
    await newest.beforeSend();
    return true;
  }

  /**
   * Undoes every registration, newest first. Contract: runs each undo exactly once even when an
   * earlier one throws; a second call, or a call after `commit()`, does nothing.
   */
  async rollback(): Promise<RollbackReport> {
    if (this.#state === 'committed' || this.#state === 'rolled-back') return NOTHING_DONE;
    const sent = this.#state === 'sent';
    this.#state = 'rolled-back';
    const undos = this.#undos.reverse();
    this.#undos = [];
    const failed: string[] = [];
    for (const undo of undos) {
      try {
        await (sent && undo.afterSend ? undo.afterSend : undo.beforeSend)();
      } catch {
        failed.push(undo.name);
      }
    }
    return { attempted: undos.length, failed };
  }
}
