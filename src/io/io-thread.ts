/**
 * The main-thread side of the I/O thread.
 *
 * `IoClient` is a typed facade over the comlink proxy: one async method per request kind, each
 * resolving once the batch that carried the request is durable. Errors raised in the I/O thread
 * arrive with their class and `code` (rpc.ts). A solver thread gets its own client through a
 * port: `await io.createPort()` in the main thread, transfer the port, `IoClient.fromPort(port)`.
 *
 * `IoThread` owns the worker: `IoThread.start(options)` spawns it and waits for its startup
 * handshake (a failure to open the tables rejects with the thread's error, class and code kept);
 * `close()` is idempotent, answers every queued request, then stops the thread.
 */
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import * as Comlink from 'comlink';
import { ClosedError, fromErrorData, isErrorData, SymfenceError } from '../errors.js';
import { invalidOption } from '../config/values.js';
import type { InflightTargetSet } from '../inflight/inflight-target-set.js';
import type { JsonObject } from '../lease/lease-record.js';
import type { AnswerWriter, GroupAnswers } from '../lease/table-contract.js';
import { answerClaimOptions } from '../lease/target-lease-table.js';
import type { ClaimAsk } from '../scheduler/admission-ports.js';
import { workerEntry } from '../util/paths.js';
import type { DirectoryFiles, IoAnswer, IoRequest, IoRequestKind, IoStats, GroupClaimRequest, GroupFence, PublishedFile, RequestOf } from './io-requests.js';
import type { IoRemoteApi, IoWorkerData } from './io-worker-main.js';
import { releaseRemote, wrapPort, type Remote } from './rpc.js';
import { SubmitChannel } from './submit-channel.js';
import { createLogCounters, receiveLogRecords } from './io-log-channel.js';
import type { Logger } from '../telemetry/logger.js';

type Table = 'work' | 'target';

export class IoClient {
  readonly #remote: Remote<IoRemoteApi>;
  /** Where requests go when the thread serves them on a port of their own (submit-channel.ts). */
  readonly #channel: SubmitChannel | undefined;
  #detached = false;

  protected constructor(remote: Remote<IoRemoteApi>, channel?: SubmitChannel) {
    this.#remote = remote;
    this.#channel = channel;
  }

  /** A client over a port made by `IoThread.createPort()` (typically inside a solver thread). */
  static fromPort(port: MessagePort): IoClient {
    return new IoClient(wrapPort<IoRemoteApi>(port));
  }

  protected get remote(): Remote<IoRemoteApi> {
    return this.#remote;
  }

  /** Sends one request; resolves with its answer. Prefer the typed methods below. */
  async request<K extends IoRequestKind>(request: RequestOf<K>): Promise<IoAnswer<K>> {
    if (this.#detached) throw new ClosedError('I/O client is closed', { kind: request.kind });
    if (this.#channel !== undefined) return (await this.#channel.submit(request as IoRequest)) as IoAnswer<K>;
    return (await this.#remote.submit(request as IoRequest)) as IoAnswer<K>;
  }

  /** Claims one target group for this coordinator; see docs/io-thread.md for `mirrorOwner`. */
  claimGroup(targets: readonly bigint[], payload: object, mirrorOwner: number, nowMs: number, ask?: ClaimAsk): Promise<IoAnswer<'claimGroup'>> {
    return this.request({ kind: 'claimGroup', targets, payload, mirrorOwner, nowMs, ...answerClaimOptions(ask) });
  }

  /** Claims several groups in one request (one admission round → one group commit). */
  claimGroups(groups: readonly GroupClaimRequest[], nowMs: number): Promise<IoAnswer<'claimGroups'>> {
    return this.request({ kind: 'claimGroups', groups, nowMs });
  }

  heartbeatGroup(targets: readonly bigint[], token: string, nowMs: number): Promise<IoAnswer<'heartbeatGroup'>> {
    return this.request({ kind: 'heartbeatGroup', targets, token, nowMs });
  }

  releaseGroup(targets: readonly bigint[], token: string, nowMs: number, answers?: GroupAnswers): Promise<IoAnswer<'releaseGroup'>> {
    return this.request({ kind: 'releaseGroup', targets, token, nowMs, ...(answers !== undefined ? { answers } : {}) });
  }

  /** Writes a committed run's answers without its lease (the target table's `recordAnswers`). */
  recordAnswers(answers: GroupAnswers, writer: AnswerWriter, nowMs: number): Promise<IoAnswer<'recordAnswers'>> {
    return this.request({ kind: 'recordAnswers', answers, writer, nowMs });
  }

  releaseGroups(claims: readonly GroupFence[], nowMs: number): Promise<IoAnswer<'releaseGroups'>> {
    return this.request({ kind: 'releaseGroups', claims, nowMs });
  }

  claimWork(workId: string, payload: object, nowMs: number, options: { readonly worker?: number; readonly leaseTtlMs?: number; readonly doneCommit?: boolean } = {}): Promise<IoAnswer<'claim'>> {
    return this.request({ kind: 'claim', workId, payload, nowMs, ...options });
  }

  heartbeatWork(leases: readonly (readonly [string, string])[], nowMs: number): Promise<IoAnswer<'heartbeatMany'>> {
    return this.request({ kind: 'heartbeatMany', leases, nowMs });
  }

  abandonWork(workId: string, token: string): Promise<IoAnswer<'abandon'>> {
    return this.request({ kind: 'abandon', workId, token });
  }

  beginCommit(workId: string, token: string, nowMs: number, commit?: JsonObject): Promise<IoAnswer<'beginCommit'>> {
    return this.request({ kind: 'beginCommit', workId, token, nowMs, ...(commit !== undefined ? { commit } : {}) });
  }

  completeOnce(workId: string, token: string, nowMs: number): Promise<IoAnswer<'completeOnce'>> {
    return this.request({ kind: 'completeOnce', workId, token, nowMs });
  }

  /** True when `completeOnce` answers `completed` or `already`. */
  async completeWork(workId: string, token: string, nowMs: number): Promise<boolean> {
    const result = await this.completeOnce(workId, token, nowMs);
    return result === 'completed' || result === 'already';
  }

  recoverExpired(table: Table, nowMs: number, options: { readonly leaseTtlMs?: number; readonly limit?: number } = {}): Promise<IoAnswer<'recoverExpired'>> {
    return this.request({ kind: 'recoverExpired', table, nowMs, ...options });
  }

  snapshotCounts(table: Table, nowMs: number): Promise<IoAnswer<'snapshotCounts'>> {
    return this.request({ kind: 'snapshotCounts', table, nowMs });
  }

  snapshotRecords(table: Table, options: { readonly limit?: number; readonly corrupt?: 'reject' | 'skip' } = {}): Promise<IoAnswer<'snapshotRecords'>> {
    return this.request({ kind: 'snapshotRecords', table, ...options });
  }

  /** Drops mirrored grants that went a whole TTL without a heartbeat; returns how many. */
  sweepExpired(nowMs: number): Promise<number> {
    return this.request({ kind: 'sweepExpired', nowMs });
  }

  ensureDir(dir: string): Promise<void> {
    return this.request({ kind: 'ensureDir', dir });
  }

  listDir(dir: string): Promise<string[]> {
    return this.request({ kind: 'listDir', dir });
  }

  /** Durable publication (hidden temp, file barrier, rename, directory barrier). */
  publishFiles(dir: string, files: readonly PublishedFile[]): Promise<void> {
    return this.request({ kind: 'publishFiles', dir, files });
  }

  /** Durable content-addressed staging into `dir` (created durably); existing names are kept. */
  stageFiles(dir: string, files: readonly PublishedFile[]): Promise<void> {
    return this.request({ kind: 'stageFiles', dir, files });
  }

  /**
   * Publishes a committed result's files and marks the work record done, both under the record's
   * lock and only while it is `committing` with `token`: `completed` (published now), `already`
   * (done earlier with this token: nothing published), `stale` or `corrupt` (nothing published),
   * `live` (renewed within `minIdleMs`: its owner is alive; nothing published).
   * Rejects when the publication failed (the record then stays `committing`).
   */
  publishCommitted(workId: string, token: string, publications: readonly DirectoryFiles[], nowMs: number, minIdleMs = 0): Promise<IoAnswer<'publishCommitted'>> {
    return this.request({ kind: 'publishCommitted', workId, token, publications, nowMs, ...(minIdleMs > 0 ? { minIdleMs } : {}) });
  }

  /** Unlinks `names` in `dir` (missing names are fine); resolves with how many were removed. */
  removeFiles(dir: string, names: readonly string[]): Promise<number> {
    return this.request({ kind: 'removeFiles', dir, names });
  }

  stats(): Promise<IoStats> {
    return this.#remote.stats();
  }

  /** Resolves once every request sent has its answer (immediately without a request channel). */
  protected drained(): Promise<void> {
    return this.#channel?.drained() ?? Promise.resolve();
  }

  /** Resolves once the thread has received every request sent so far (submit-channel.ts, fences). */
  protected fenced(): Promise<void> {
    return this.#channel?.fence() ?? Promise.resolve();
  }

  /** Detaches this client from its port (the thread keeps running). Idempotent. */
  detach(): void {
    if (this.#detached) return;
    this.#detached = true;
    this.#channel?.close();
    releaseRemote(this.#remote);
  }
}

interface IoThreadOptions {
  /** Lease owner of every claim (the coordinator id). */
  readonly coordinatorId: string;
  /** Target table root; omitted = no target requests. */
  readonly targetRoot?: string;
  /** Work table root; omitted = no work requests. */
  readonly workRoot?: string;
  /** Lease table options for both tables (`LEASE_TABLE_OPTIONS`); `fileBarrier` defaults to the I/O choice. */
  readonly leaseOptions?: Readonly<Record<string, unknown>>;
  /** `IO_OPTIONS` input. */
  readonly ioOptions?: Readonly<Record<string, unknown>>;
  /** The process's in-flight set; the thread keeps it coherent with the grants it makes. */
  readonly inflight?: InflightTargetSet;
  /** Clock reading for the mirror rebuild, ms since the epoch. Default `Date.now()`. */
  readonly startNowMs?: number;
  /** pino level of the thread's own logs on stderr. Default `silent`. Ignored with `logger`. */
  readonly logLevel?: string;
  /**
   * Where the thread's log records go: each is emitted on this logger at its own level (pass
   * the campaign's `{ component: 'io' }` child). The thread logs at this logger's level.
   */
  readonly logger?: Logger;
}

export class IoThread extends IoClient {
  readonly #worker: Worker;
  #closing: Promise<void> | undefined;

  private constructor(remote: Remote<IoRemoteApi>, worker: Worker, channel: SubmitChannel) {
    super(remote, channel);
    this.#worker = worker;
  }

  /** Spawns the I/O thread and resolves once its tables are open and its service runs. */
  static async start(options: IoThreadOptions): Promise<IoThread> {
    if (typeof options !== 'object' || options === null) throw invalidOption('options', 'an object', options);
    if (typeof options.coordinatorId !== 'string' || options.coordinatorId === '') throw invalidOption('coordinatorId', 'a non-empty coordinator name', options.coordinatorId);
    const data: IoWorkerData = {
      coordinatorId: options.coordinatorId,
      ...(options.targetRoot !== undefined ? { targetRoot: options.targetRoot } : {}),
      ...(options.workRoot !== undefined ? { workRoot: options.workRoot } : {}),
      ...(options.leaseOptions !== undefined ? { leaseOptions: options.leaseOptions } : {}),
      ...(options.ioOptions !== undefined ? { ioOptions: options.ioOptions } : {}),
      ...(options.inflight !== undefined ? { inflightBuffer: options.inflight.buffer } : {}),
      startNowMs: options.startNowMs ?? Date.now(),
      logLevel: options.logger !== undefined ? options.logger.level : (options.logLevel ?? 'silent'),
    };
    let worker: Worker;
    if (options.logger !== undefined && options.logger.level !== 'silent') {
      const { port1, port2 } = new MessageChannel();
      const logCounters = createLogCounters();
      receiveLogRecords(port1, logCounters, options.logger);
      worker = new Worker(workerEntry('io-worker'), { workerData: { ...data, logPort: port2, logCounters }, transferList: [port2] });
    } else {
      worker = new Worker(workerEntry('io-worker'), { workerData: data });
    }
    try {
      await handshake(worker);
    } catch (error) {
      await worker.terminate();
      throw error;
    }
    const remote = wrapPort<IoRemoteApi>(worker);
    const { port1, port2 } = new MessageChannel();
    try {
      await remote.connectSubmits(Comlink.transfer(port2, [port2 as never]));
    } catch (error) {
      port1.close();
      releaseRemote(remote);
      await worker.terminate();
      throw error;
    }
    return new IoThread(remote, worker, new SubmitChannel(port1));
  }

  /** A new port served by the I/O thread; hand it to a solver thread (`IoClient.fromPort`). */
  async createPort(): Promise<MessagePort> {
    if (this.#closing) throw new ClosedError('I/O thread is closed', {});
    const { port1, port2 } = new MessageChannel();
    await this.remote.connect(Comlink.transfer(port2, [port2 as never]));
    return port1;
  }

  /** Answers every queued request, then stops the thread. Idempotent; later calls reject `ERR_CLOSED`. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      try {
        // Requests travel on their own port, which close's port may overtake: the thread must
        // have queued every request sent before close() so that close answers them.
        await this.fenced();
        await this.remote.close();
        // Every queued request was answered before close() returned, but on the request
        // channel's own port: those answers may still be on their way here.
        await this.drained();
      } finally {
        this.detach();
        await this.#worker.terminate();
      }
    })();
    return this.#closing;
  }
}

function handshake(worker: Worker): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const cleanup = (): void => {
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
    };
    const onMessage = (message: unknown): void => {
      const type = (message as { type?: unknown } | null)?.type;
      if (type === 'io-ready') {
        cleanup();
        resolve();
      } else if (type === 'io-startup-error') {
        cleanup();
        const data = (message as { error: unknown }).error;
        reject(isErrorData(data) ? fromErrorData(data) : new SymfenceError(String(data)));
      }
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const onExit = (code: number): void => {
      cleanup();
      reject(new ClosedError(`I/O thread exited (code ${code}) before it was ready`, { exitCode: code }));
    };
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
  });
}
