// The I/O thread's log records reach the main thread's logger (the campaign's `io` child).
import path from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogCounters, forwardingLogger, MAX_PENDING_LOG_RECORDS, receiveLogRecords } from '../../src/io/io-log-channel.js';
import { IoThread } from '../../src/io/io-thread.js';
import { componentLogger } from '../../src/telemetry/logger.js';
import { tempRoot } from '../helpers/lease-fixtures.js';

const threads: IoThread[] = [];
afterEach(async () => {
  await Promise.all(threads.splice(0).map((t) => t.close()));
});

/** A pino logger whose lines are collected; `waitFor` resolves once a line matches. */
function capture(level = 'info') {
  const lines: Record<string, unknown>[] = [];
  const waiters: { match: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void }[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const text of String(chunk).split('\n').filter(Boolean)) {
        const line = JSON.parse(text) as Record<string, unknown>;
        lines.push(line);
        for (const w of waiters.splice(0)) {
          if (w.match(line)) w.resolve(line);
          else waiters.push(w);
        }
      }
      done();
    },
  });
  const logger = pino({ level }, stream);
  const waitFor = (match: (l: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> =>
    new Promise((resolve) => {
      const found = lines.find(match);
      if (found) resolve(found);
      else waiters.push({ match, resolve });
    });
  return { logger, lines, waitFor };
}

describe('I/O thread logging', () => {
  it('emits a warning raised inside the I/O thread on the campaign logger as its io component', async () => {
    const root = await tempRoot('symfence-io-logs-');
    const { logger, waitFor } = capture();
    const campaignLog = componentLogger(logger, 'campaign', { coordinator: 'c-log' });
    const io = await IoThread.start({
      coordinatorId: 'c-log',
      targetRoot: path.join(root, 'targets'),
      leaseOptions: { shardCount: 4, verifyFilesystem: false },
      logger: componentLogger(campaignLog, 'io'),
    });
    threads.push(io);
    // A heartbeat with a token nobody holds is a lost lease: the thread warns about it.
    const result = await io.heartbeatGroup([5n], 'no-such-token', Date.now());
    expect(result.ok).toBe(false);
    const line = await waitFor((l) => l['msg'] === 'target lease lost; removed from the in-flight mirror');
    expect(line).toMatchObject({ level: 40, component: 'campaign.io', coordinator: 'c-log', targets: ['5'] });
  });
});

describe('log channel', () => {
  it('drops records past the pending bound instead of queueing them, and reports how many', async () => {
    const { port1, port2 } = new MessageChannel();
    const counters = createLogCounters();
    const { logger, lines, waitFor } = capture();
    receiveLogRecords(port1, counters, logger);
    const thread = forwardingLogger(port2, counters, 'info');
    // All written before the receiver runs once: the bound is what keeps the queue finite.
    for (let i = 0; i < MAX_PENDING_LOG_RECORDS + 10; i++) thread.info({ i }, 'record');
    await waitFor((l) => l['i'] === MAX_PENDING_LOG_RECORDS - 1);
    thread.error({ err: new Error('disk on fire') }, 'I/O batch failed unexpectedly');
    const failed = await waitFor((l) => l['msg'] === 'I/O batch failed unexpectedly');
    expect(lines.filter((l) => l['msg'] === 'record')).toHaveLength(MAX_PENDING_LOG_RECORDS);
    expect(lines.find((l) => l['dropped'] !== undefined)).toMatchObject({ level: 40, dropped: 10 });
    expect(failed).toMatchObject({ level: 50, err: { message: 'disk on fire' } });
    port1.close();
  });
});
