import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Worker } from 'node:worker_threads';
import { releaseRemote, wrapPort, type Remote } from '../../src/io/rpc.js';
import { builtFile } from '../../src/util/paths.js';
import { LeaseCorruptError, LockTimeoutError, SymfenceError } from '../../src/errors.js';
import type { RpcEchoApi } from '../fixtures/rpc-echo-worker.js';

describe('comlink RPC with symfence error transport', () => {
  let worker: Worker;
  let remote: Remote<RpcEchoApi>;

  beforeAll(() => {
    worker = new Worker(builtFile('test/fixtures/rpc-echo-worker.js'));
    remote = wrapPort<RpcEchoApi>(worker);
  });

  afterAll(async () => {
    releaseRemote(remote);
    await worker.terminate();
  });

  it('returns values, bigints included', async () => {
    expect(await remote.echo({ target: 2n ** 64n - 1n, list: [1, 'a'] })).toEqual({ target: 2n ** 64n - 1n, list: [1, 'a'] });
  });

  it('rethrows a lease error raised in the thread as the same class with the same code', async () => {
    const error = await remote.corrupt('88').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(LeaseCorruptError);
    expect((error as SymfenceError).code).toBe('ERR_LEASE_CORRUPT');
    expect((error as SymfenceError).details).toEqual({ target: '88' });
  });

  it('rethrows synchronous throws too', async () => {
    await expect(remote.lockTimeout()).rejects.toBeInstanceOf(LockTimeoutError);
    await expect(remote.lockTimeout()).rejects.toMatchObject({ code: 'ERR_LOCK_TIMEOUT', details: { waitedMs: 5 } });
  });

  it('keeps the code of a non-symfence error', async () => {
    await expect(remote.plain()).rejects.toMatchObject({ code: 'EIO', message: 'disk on fire' });
  });
});
