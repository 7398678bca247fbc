/**
 * The inputs whose whole-input run (a trace, or a full first run) the scheduler has learnt from,
 * saved with the lanes (docs/scheduler.md "Lane state file"). It answers one question for a
 * coordinator restarted on its out-dir: do my lanes still know this input? A trace run of ours
 * that committed after the last save (a SIGKILL before the next one) is missing from the saved
 * lanes, and the work table refuses to run it again (`done`); the coordinator then adopts its own
 * stored trace instead (docs/campaign.md "Shared traces").
 *
 * Bounded, oldest forgotten first: a forgotten input is one whose own trace may be learnt a second
 * time if it is met again, which costs a read of that trace and the lanes seeing it twice.
 */
import { strings } from './lanes/state-codec.js';

export class TracedInputs {
  readonly #inputs = new Set<string>();
  readonly #maxInputs: number;

  constructor(maxInputs: number) {
    this.#maxInputs = Math.max(1, Math.floor(maxInputs));
  }

  has(input: string): boolean {
    return this.#inputs.has(input);
  }

  /** Records `input` as the newest learnt. */
  add(input: string): void {
    this.#inputs.delete(input);
    this.#inputs.add(input);
    if (this.#inputs.size > this.#maxInputs) this.#inputs.delete(this.#inputs.values().next().value as string);
  }

  get size(): number {
    return this.#inputs.size;
  }

  /** Oldest first (the eviction order). */
  toJSON(): string[] {
    return [...this.#inputs];
  }

  /**
   * Replaces the set with a `toJSON` document (the newest kept when it is over this set's bound).
   * All or nothing: anything but an array of strings is `ERR_LANE_STATE` naming `traced`.
   */
  restore(document: unknown): void {
    const inputs = TracedInputs.check(document);
    this.#inputs.clear();
    for (const input of inputs.slice(-this.#maxInputs)) this.add(input);
  }

  /** Validates a `toJSON` document without touching any set (the dry run of a restore). */
  static check(document: unknown): string[] {
    return strings(document, 'traced');
  }
}
