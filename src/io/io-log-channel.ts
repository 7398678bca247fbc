/**
 * Log records of the I/O thread, forwarded to the main thread and emitted there on the campaign's
 * logger (as its `{ component: 'io' }` child), so a warning or error inside the thread reaches the
 * user like any other line.
 *
 * The thread side is a pino logger whose destination posts each JSON line on a dedicated
 * MessagePort; the main side parses the line and re-emits it at the same level. Bounded and never
 * blocking: a shared counter holds the records posted but not yet emitted; past
 * `MAX_PENDING_LOG_RECORDS` the thread drops records (counting them) instead of queueing more, and
 * the main side reports the number dropped with the next record it emits. `postMessage` itself
 * never waits, so the I/O loop is never held up by logging.
 *
 *   counters (Int32Array over a SharedArrayBuffer):
 *   +-----------------+-----------------+
 *   | [0] pending     | [1] dropped     |
 *   +-----------------+-----------------+
 */
import type { MessagePort } from 'node:worker_threads';
import { pino, type Logger } from 'pino';

export const MAX_PENDING_LOG_RECORDS = 1024;
const PENDING = 0;
const DROPPED = 1;

/** A fresh counter buffer for one channel. */
export function createLogCounters(): SharedArrayBuffer {
  return new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT);
}

/** Thread side: a pino logger at `level` whose records go over `port`. */
export function forwardingLogger(port: MessagePort, counters: SharedArrayBuffer, level: string): Logger {
  const cells = new Int32Array(counters);
  const destination = {
    write(line: string): void {
      if (Atomics.load(cells, PENDING) >= MAX_PENDING_LOG_RECORDS) {
        Atomics.add(cells, DROPPED, 1);
        return;
      }
      Atomics.add(cells, PENDING, 1);
      port.postMessage(line);
    },
  };
  // No base fields: pid and hostname are the main logger's to add.
  return pino({ level, base: null, timestamp: false }, destination);
}

const OWN_FIELDS = new Set(['level', 'msg', 'time']);

/**
 * Main side: emits every record arriving on `port` on `logger` at its level. The port does not
 * keep the process alive; it ends when the thread's end closes.
 */
export function receiveLogRecords(port: MessagePort, counters: SharedArrayBuffer, logger: Logger): void {
  const cells = new Int32Array(counters);
  port.on('message', (line: unknown) => {
    Atomics.sub(cells, PENDING, 1);
    const dropped = Atomics.exchange(cells, DROPPED, 0);
    if (dropped > 0) logger.warn({ dropped }, 'I/O thread log records dropped (the main thread fell behind)');
    emitRecord(logger, line);
  });
  port.unref();
}

function emitRecord(logger: Logger, line: unknown): void {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(String(line)) as Record<string, unknown>;
  } catch {
    logger.warn({ line: String(line).slice(0, 200) }, 'I/O thread sent an unreadable log record');
    return;
  }
  const label = typeof record['level'] === 'number' ? pino.levels.labels[record['level']] : undefined;
  const fields = Object.fromEntries(Object.entries(record).filter(([key]) => !OWN_FIELDS.has(key)));
  const msg = typeof record['msg'] === 'string' ? record['msg'] : '';
  const method = label !== undefined && label in logger ? (label as 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace') : 'info';
  logger[method](fields, msg);
}
