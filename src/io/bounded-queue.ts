/**
 * A bounded FIFO of requests with backpressure: `push` resolves once the item is queued, and
 * waits while the queue is full, so a burst of callers cannot grow memory without bound. The
 * consumer (the I/O thread's batch loop) takes items with `take`, which hands over everything the
 * predicate admits in one call — that is what turns a burst of requests into one group commit.
 */
import { QueueClosedError } from '../errors.js';

interface Waiter {
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

export class BoundedQueue<T> {
  readonly capacity: number;
  #items: T[] = [];
  #spaceWaiters: Waiter[] = [];
  #itemWaiters: Waiter[] = [];
  #closed = false;

  constructor(capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`queue capacity must be a positive integer, got ${capacity}`);
    this.capacity = capacity;
  }

  get length(): number {
    return this.#items.length;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Queues `item`, waiting for space while the queue is full. Rejects once the queue is closed. */
  async push(item: T): Promise<void> {
    while (this.#items.length >= this.capacity) {
      if (this.#closed) throw new QueueClosedError('request queue is closed');
      await new Promise<void>((resolve, reject) => this.#spaceWaiters.push({ resolve, reject }));
    }
    if (this.#closed) throw new QueueClosedError('request queue is closed');
    this.#items.push(item);
    this.#itemWaiters.shift()?.resolve();
  }

  /** Resolves when at least one item is queued (or rejects when closed and empty). */
  async waitForItems(): Promise<void> {
    if (this.#items.length > 0) return;
    if (this.#closed) throw new QueueClosedError('request queue is closed');
    await new Promise<void>((resolve, reject) => this.#itemWaiters.push({ resolve, reject }));
  }

  /**
   * Removes and returns, in FIFO order, every queued item `admit` accepts; the others keep their
   * place. `admit` sees items in queue order and may keep state across calls within one take.
   */
  take(admit: (item: T) => boolean = () => true): T[] {
    const taken: T[] = [];
    const kept: T[] = [];
    for (const item of this.#items) (admit(item) ? taken : kept).push(item);
    this.#items = kept;
    const freed = Math.min(taken.length, this.#spaceWaiters.length);
    for (const waiter of this.#spaceWaiters.splice(0, freed)) waiter.resolve();
    return taken;
  }

  /** Stops accepting items; waiting producers and consumers are rejected. Queued items remain takeable. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const error = new QueueClosedError('request queue is closed');
    for (const waiter of this.#spaceWaiters.splice(0)) waiter.reject(error);
    if (this.#items.length === 0) for (const waiter of this.#itemWaiters.splice(0)) waiter.reject(error);
  }
}
