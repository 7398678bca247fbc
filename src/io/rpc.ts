/**
 * comlink over `worker_threads` ports, with symfence's error transport.
 *
 * comlink's default "throw" handler sends only `{ message, name, stack }`, so a lease conflict
 * raised in the I/O thread would arrive as a bare `Error` without its `code`. `installErrorTransport`
 * replaces that handler (in the thread that calls it) with one that sends `toErrorData(error)`
 * and rebuilds the registered class with `fromErrorData`. Both ends must call it; `exposeOnPort`
 * and `wrapPort` do.
 */
import * as Comlink from 'comlink';
import type { MessagePort, Worker } from 'node:worker_threads';
import { fromErrorData, InternalError, isErrorData, toErrorData } from '../errors.js';

export type Remote<T> = Comlink.Remote<T>;

type Port = MessagePort | Worker;
type Listener = ((event: { data: unknown }) => void) | { handleEvent(event: { data: unknown }): void };

/**
 * comlink speaks the DOM `addEventListener` dialect; Node ports emit `message` with the data
 * itself. This adapts one to the other (comlink reads `event.data`).
 */
function nodeEndpoint(port: Port): Comlink.Endpoint {
  const wrappers = new WeakMap<Listener, (data: unknown) => void>();
  return {
    postMessage: (message: unknown, transfer?: readonly unknown[]) => port.postMessage(message, transfer as never),
    addEventListener: (_type: string, listener: Listener) => {
      const wrapper = (data: unknown): void => {
        if (typeof listener === 'function') listener({ data });
        else listener.handleEvent({ data });
      };
      wrappers.set(listener, wrapper);
      port.on('message', wrapper);
    },
    removeEventListener: (_type: string, listener: Listener) => {
      const wrapper = wrappers.get(listener);
      if (!wrapper) return;
      port.off('message', wrapper);
      wrappers.delete(listener);
    },
    start: 'start' in port ? () => port.start() : undefined,
  } as unknown as Comlink.Endpoint;
}

const thrown = Symbol.for('symfence.errorTransportInstalled');

interface ThrownWrapper {
  readonly value: unknown;
}

function installErrorTransport(): void {
  const registry = Comlink.transferHandlers as Map<string, Comlink.TransferHandler<unknown, unknown>> & { [thrown]?: true };
  if (registry[thrown]) return;
  const original = registry.get('throw');
  if (!original) throw new InternalError('comlink has no throw handler to replace');
  registry.set('throw', {
    canHandle: (value: unknown): value is unknown => original.canHandle(value),
    serialize: (wrapper: unknown) => [toErrorData((wrapper as ThrownWrapper).value), []],
    deserialize: (data: unknown) => {
      throw isErrorData(data) ? fromErrorData(data) : data;
    },
  });
  registry[thrown] = true;
}

/** Serves `api` on a port (or on `parentPort` from inside a worker). */
export function exposeOnPort(api: object, port: Port): void {
  installErrorTransport();
  Comlink.expose(api, nodeEndpoint(port));
}

/** A typed proxy for an API exposed on the other end of `port`. */
export function wrapPort<T>(port: Port): Remote<T> {
  installErrorTransport();
  return Comlink.wrap<T>(nodeEndpoint(port));
}

/** Detaches the proxy from its port so the thread can exit. */
export function releaseRemote(remote: Remote<unknown>): void {
  remote[Comlink.releaseProxy]();
}
