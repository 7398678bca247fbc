/**
 * A typed facade over Node's EventEmitter: `on('finding', (entry) => …)` is checked against the
 * event map, so embedders get their payload types without casts.
 */
import { EventEmitter } from 'node:events';

type EventMap = Record<string, (...args: never[]) => void>;
type Listener = (...args: unknown[]) => void;

export class TypedEmitter<E extends EventMap> {
  readonly #emitter = new EventEmitter();

  on<K extends keyof E & string>(event: K, listener: E[K]): this {
    this.#emitter.on(event, listener as unknown as Listener);
    return this;
  }

  once<K extends keyof E & string>(event: K, listener: E[K]): this {
    this.#emitter.once(event, listener as unknown as Listener);
    return this;
  }

  off<K extends keyof E & string>(event: K, listener: E[K]): this {
    this.#emitter.off(event, listener as unknown as Listener);
    return this;
  }

  listenerCount<K extends keyof E & string>(event: K): number {
    return this.#emitter.listenerCount(event);
  }

  /** Emits to the listeners; returns false when there were none. */
  protected emit<K extends keyof E & string>(event: K, ...args: Parameters<E[K]>): boolean {
    return this.#emitter.emit(event, ...args);
  }
}
