/**
 * The lease stores the conformance suite runs against. A scenario written once with
 * `describeEachStore` runs against every store here; a store that needs a server starts it once per
 * test file in `start` and stops it in `stop`.
 *
 * A store that cannot run on this machine is skipped locally and fails in CI (`CI=true`): CI
 * installs what every store needs, and a silently skipped store would be an untested one.
 */
import { afterAll, beforeAll, beforeEach, describe } from 'vitest';
import { etcdUnavailable, startEtcd, type EtcdCluster } from './etcd-server.js';

export interface LeaseStoreUnderTest {
  /** `files`, … — also the value of the table option `store`. */
  readonly name: string;
  /** Why the store cannot run here (a missing binary), or undefined when it can. */
  unavailable?(): string | undefined;
  /** Starts what the store needs; resolves to the table options that select it. */
  start(): Promise<Record<string, unknown>>;
  stop?(): Promise<void>;
  /**
   * The options of one test, from the started ones (default: unchanged). A shared server gives
   * every test its own namespace here, as every test has its own temp directory.
   */
  perTest?(options: Record<string, unknown>): Record<string, unknown>;
}

let etcd: EtcdCluster | undefined;
let etcdTests = 0;

export const LEASE_STORES_UNDER_TEST: readonly LeaseStoreUnderTest[] = [
  { name: 'files', start: async () => ({ store: 'files' }) },
  {
    name: 'etcd',
    unavailable: etcdUnavailable,
    async start() {
      etcd = await startEtcd();
      return { store: 'etcd', etcdEndpoints: etcd.endpoints };
    },
    async stop() {
      await etcd?.stop();
      etcd = undefined;
    },
    perTest: (options) => ({ ...options, etcdPrefix: `test-${process.pid}-${++etcdTests}` }),
  },
];

/** What a scenario body gets: the store's name and its table options (valid once the suite started). */
export interface StoreContext {
  readonly name: string;
  options(): Record<string, unknown>;
}

/** `describe(title)` once per store, with the store started before and stopped after its tests. */
export function describeEachStore(title: string, body: (store: StoreContext) => void, stores: readonly LeaseStoreUnderTest[] = LEASE_STORES_UNDER_TEST): void {
  for (const store of stores) {
    const reason = store.unavailable?.();
    if (reason !== undefined && process.env['CI'] === 'true') throw new Error(`lease store ${store.name} cannot run in CI: ${reason}`);
    const run = reason === undefined ? describe : describe.skip;
    run(`${title} [${store.name} store]`, () => {
      let started: Record<string, unknown> | undefined;
      let options: Record<string, unknown> | undefined;
      beforeAll(async () => {
        started = await store.start();
        options = started;
      });
      beforeEach(() => {
        if (started !== undefined) options = store.perTest?.(started) ?? started;
      });
      afterAll(async () => {
        await store.stop?.();
      });
      body({
        name: store.name,
        options: () => {
          if (options === undefined) throw new Error(`lease store ${store.name} was not started`);
          return options;
        },
      });
    });
  }
}
