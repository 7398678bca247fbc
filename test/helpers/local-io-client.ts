/**
 * An `IoClient` over an in-process `IoService` (no thread): lets a test drive the real request
 * handling with a fault-injecting filesystem layer and inspect the bytes on disk.
 */
import { IoClient } from '../../src/io/io-thread.js';
import type { IoService } from '../../src/io/io-service.js';
import type { IoRemoteApi } from '../../src/io/io-worker-main.js';
import type { Remote } from '../../src/io/rpc.js';

export class LocalIoClient extends IoClient {
  constructor(service: IoService) {
    const api = {
      submit: (request: never) => service.submit(request),
      stats: async () => service.stats(),
    };
    super(api as unknown as Remote<IoRemoteApi>);
  }
}
