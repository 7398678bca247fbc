import { MessageChannel } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaseCorruptError, LockTimeoutError } from '../../src/errors.js';
import type { IoRequest } from '../../src/io/io-requests.js';
import { serveSubmits, SubmitChannel } from '../../src/io/submit-channel.js';
import { codeOfAsync } from '../helpers/error-code.js';

const channels: SubmitChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) channel.close();
});

/** A client over a fresh port pair whose other end `submit` serves (in this thread). */
function connected(submit: (request: IoRequest) => Promise<unknown>): SubmitChannel {
  const { port1, port2 } = new MessageChannel();
  serveSubmits(port2, submit);
  port2.unref();
  const channel = new SubmitChannel(port1);
  channels.push(channel);
  return channel;
}

const request = (workId: string): IoRequest => ({ kind: 'abandon', workId, token: 't' }) as IoRequest;

describe('SubmitChannel', () => {
  it('answers each request with its own value, bigints included, whatever order the answers come in', async () => {
    const release: (() => void)[] = [];
    const channel = connected(async (r) => {
      const workId = (r as { workId: string }).workId;
      if (workId === 'slow') await new Promise<void>((resolve) => release.push(resolve));
      return { workId, target: 2n ** 64n - 1n };
    });
    const slow = channel.submit(request('slow'));
    expect(await channel.submit(request('fast'))).toEqual({ workId: 'fast', target: 2n ** 64n - 1n });
    release[0]!();
    expect(await slow).toEqual({ workId: 'slow', target: 2n ** 64n - 1n });
  });

  it('rejects with the class and code the thread threw, from a rejected answer or a synchronous throw', async () => {
    const rejecting = connected(() => Promise.reject(new LeaseCorruptError('bad record', { target: '88' })));
    const failure = await rejecting.submit(request('w')).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(LeaseCorruptError);
    expect(failure).toMatchObject({ code: 'ERR_LEASE_CORRUPT', details: { target: '88' } });
    const throwing = connected(() => {
      throw new LockTimeoutError('lock', { waitedMs: 5 });
    });
    expect(await codeOfAsync(throwing.submit(request('w')))).toBe('ERR_LOCK_TIMEOUT');
  });

  it('answers an answer that cannot cross the thread boundary with that error instead of leaving the caller waiting', async () => {
    const channel = connected(async () => ({ callback: () => undefined }));
    expect(await codeOfAsync(channel.submit(request('w')))).toBe('ERR_INTERNAL');
  });

  it('answers a fence once every request sent before it has reached the thread, before their own answers', async () => {
    const received: string[] = [];
    const channel = connected((r) => {
      received.push((r as { workId: string }).workId);
      return new Promise(() => {});
    });
    // Never answered: the channel's close at the end rejects them.
    const left = [channel.submit(request('a')), channel.submit(request('b'))].map((p) => p.catch(() => undefined));
    await channel.fence();
    expect(received).toEqual(['a', 'b']);
    channel.close();
    await Promise.all(left);
  });

  it('rejects the requests still waiting and every later one with ERR_CLOSED once closed, and drained() resolves', async () => {
    const channel = connected(() => new Promise(() => {}));
    const waiting = channel.submit(request('w'));
    const drained = channel.drained();
    channel.close();
    expect(await codeOfAsync(waiting)).toBe('ERR_CLOSED');
    await drained;
    expect(await codeOfAsync(channel.submit(request('later')))).toBe('ERR_CLOSED');
  });
});
