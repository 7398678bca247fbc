/**
 * What the I/O thread runs (`workers/io-worker.ts` only calls `runIoWorker`): open the lease
 * tables named in the startup data, attach the in-flight set, start the service, and serve it on
 * the parent port and on every port a client connects later (solver threads).
 *
 * Startup handshake: the thread posts `{ type: 'io-ready' }` once the service runs, or
 * `{ type: 'io-startup-error', error }` (error data, rebuilt with class and code by the client).
 */
import type { MessagePort } from 'node:worker_threads';
import { toErrorData } from '../errors.js';
import { InflightTargetSet } from '../inflight/inflight-target-set.js';
import { FencedTargetLeaseTable } from '../lease/target-lease-table.js';
import { FencedWorkLeaseTable } from '../lease/work-lease-table.js';
import { createLogger, componentLogger, LOGGER_OPTIONS, silentLogger, type Logger } from '../telemetry/logger.js';
import { forwardingLogger } from './io-log-channel.js';
import { effectiveFileBarrier, IO_OPTIONS } from './io-options.js';
import type { IoRequest, IoStats } from './io-requests.js';
import { IoService } from './io-service.js';
import { exposeOnPort } from './rpc.js';
import { serveSubmits } from './submit-channel.js';

/** Startup data of the I/O thread (structured-clone safe). */
export interface IoWorkerData {
  readonly coordinatorId: string;
  readonly targetRoot?: string;
  readonly workRoot?: string;
  /** Lease table options applied to both tables (`LEASE_TABLE_OPTIONS`). */
  readonly leaseOptions?: Readonly<Record<string, unknown>>;
  /** I/O options (`IO_OPTIONS`). */
  readonly ioOptions?: Readonly<Record<string, unknown>>;
  /** The buffer of the process's `InflightTargetSet`. */
  readonly inflightBuffer?: SharedArrayBuffer;
  /** Clock reading for the mirror rebuild, ms since the epoch. */
  readonly startNowMs?: number;
  /** pino level for the thread's own logs (stderr, or `logPort`); default `silent`. */
  readonly logLevel?: string;
  /** Where log records go (io-log-channel.ts), instead of stderr; transferred at start. */
  readonly logPort?: MessagePort;
  /** The channel's pending/dropped counters (io-log-channel.ts). */
  readonly logCounters?: SharedArrayBuffer;
}

/** What the thread serves over comlink. */
export interface IoRemoteApi {
  submit(request: IoRequest): Promise<unknown>;
  stats(): IoStats;
  /** Serves this API on another port (for a solver thread). */
  connect(port: MessagePort): void;
  /** Serves `submit` alone on `port`, without comlink (submit-channel.ts): the per-job path. */
  connectSubmits(port: MessagePort): void;
  /** Drains the queue, answers everything, stops the service. Idempotent. */
  close(): Promise<void>;
}

/**
 * The thread's logger: forwarded to the main thread when it sent a log port (the main side adds
 * the `io` component there), else on stderr at `logLevel`, else silent.
 */
async function threadLogger(data: IoWorkerData): Promise<Logger> {
  const level = data.logLevel ?? 'silent';
  if (level === 'silent') return silentLogger();
  if (data.logPort !== undefined && data.logCounters !== undefined) return forwardingLogger(data.logPort, data.logCounters, level);
  return componentLogger(await createLogger(LOGGER_OPTIONS.resolve({ level, pretty: 'never' }), false), 'io');
}

export async function runIoWorker(data: IoWorkerData, parent: MessagePort): Promise<void> {
  try {
    const ioOptions = IO_OPTIONS.resolve(data.ioOptions ?? {});
    const leaseOptions = { fileBarrier: effectiveFileBarrier(ioOptions.fileBarrier), ...(data.leaseOptions ?? {}) };
    const [target, work] = await Promise.all([
      data.targetRoot ? FencedTargetLeaseTable.open(data.targetRoot, leaseOptions) : null,
      data.workRoot ? FencedWorkLeaseTable.open(data.workRoot, leaseOptions) : null,
    ]);
    const logger = await threadLogger(data);
    // Both tables share one session of a store that has them (etcd): log each loss once. The
    // coordinator's next heartbeat answers those leases as lost and aborts their solver runs.
    (work ?? target)?.onSessionLost(({ reason, sessionsLost }) => {
      logger.warn({ reason, sessionsLost }, 'lease store session lost: its leased records are no longer ours; a new session carries new claims');
    });
    const service = await IoService.start(
      {
        coordinatorId: data.coordinatorId,
        target,
        work,
        targetLeaseTtlMs: target?.options.leaseTtlMs,
        inflight: data.inflightBuffer ? InflightTargetSet.attach(data.inflightBuffer) : null,
        options: ioOptions,
        logger,
      },
      data.startNowMs,
    );
    const api: IoRemoteApi = {
      submit: (request) => service.submit(request as never),
      stats: () => service.stats(),
      connect: (port) => exposeOnPort(api, port),
      connectSubmits: (port) => serveSubmits(port, (request) => service.submit(request as never)),
      close: async () => {
        await service.close();
        // Close the lock fds the tables keep open between batches while the thread is still
        // orderly; do not rely on Node closing a terminated worker's unmanaged fds.
        await Promise.all([target?.close(), work?.close()]);
      },
    };
    exposeOnPort(api, parent);
    parent.postMessage({ type: 'io-ready' });
  } catch (error) {
    parent.postMessage({ type: 'io-startup-error', error: toErrorData(error) });
  }
}
