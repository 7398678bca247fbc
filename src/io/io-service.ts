/**
 * The I/O service: the only code in a process that mutates lease records and the AFL-visible
 * queue (docs/io-thread.md). It runs inside the I/O thread (`workers/io-worker.ts`) and, for tests and
 * benches, in any thread.
 *
 * Request flow. `submit()` puts a request into a bounded queue (callers wait while it is full).
 * One loop takes every queued request that may share a group commit (`createBatchAdmitter`: a
 * request touching a record already in the batch waits for the next batch, keeping its place),
 * plans each request's lease operations (bad input fails that request alone, before any I/O),
 * then runs the batch:
 *
 *   target ops ──► one durability batch of the target table ─┐
 *   work ops   ──► one durability batch of the work table   ─┼─ concurrently; each: locks
 *   files      ──► one publication pass (file-publication)   ─┘  (ascending) → read/validate →
 *                                                                temps → ONE file barrier →
 *                                                                renames → one directory barrier
 *                                                                per touched shard → unlock
 *
 * and only then answers each request (reads — snapshots, counts, listings — run after the
 * commit and see it). Why one durability batch per table rather than one spanning both: the
 * batch is bound to one table's layout, record kind and locker (`DurabilityContext`), and a
 * coordinator round is dominated by target-group traffic; keeping the tables apart keeps the lease
 * code untouched, and costs at most one extra file barrier when a batch touches both tables.
 *
 * Coherence with the in-flight mirror is delegated to `MirrorCoherence` (see its rule).
 */
import path from 'node:path';
import { InvalidOptionError, toErrorData } from '../errors.js';
import { invalidOption } from '../config/values.js';
import type { InflightTargetSet } from '../inflight/inflight-target-set.js';
import type { LeaseOperation, OperationOutcome } from '../lease/lease-operation.js';
import type { TargetLeaseStore, WorkLeaseStore } from '../lease/lease-store.js';
import type { FenceResult, GroupClaimResult, HeartbeatBatchResult } from '../lease/lease-results.js';
import { MAX_HEARTBEAT_BATCH } from '../lease/work-lease-table.js';
import type { FileBarrierStrategy } from '../lease/durability-batch.js';
import type { Logger } from '../telemetry/logger.js';
import { createBatchAdmitter } from './batch-planner.js';
import { BoundedQueue } from './bounded-queue.js';
import { checkPublishedName, ensureDirectoryTree, publishFiles, type PublicationJob } from './file-publication.js';
import { errnoCode, nodeFsLayer, type FsLayer } from '../fs/fs-layer.js';
import { effectiveFileBarrier, IO_OPTIONS, type IoOptions } from './io-options.js';
import type { BatchClaimResult, IoAnswer, IoRequest, IoRequestKind, IoStats, PublishedFile, RequestOf } from './io-requests.js';
import { MirrorCoherence } from './mirror-coherence.js';

export interface IoServiceDeps {
  /** Lease owner of every claim made through this service (the coordinator id). */
  readonly coordinatorId: string;
  /** Work table; omitted = work requests are refused with `ERR_INVALID_OPTION`. */
  readonly work?: WorkLeaseStore | null;
  /** Target table; omitted = target requests are refused with `ERR_INVALID_OPTION`. */
  readonly target?: TargetLeaseStore | null;
  /** TTL of the target table, ms: when a mirrored grant counts as expired. Default 5 min. */
  readonly targetLeaseTtlMs?: number;
  /** The process's in-flight set (this thread's view of its buffer); omitted = no mirror. */
  readonly inflight?: InflightTargetSet | null;
  /** Filesystem of queue publication. Default: the real one. */
  readonly fsLayer?: FsLayer;
  readonly options?: Partial<Record<keyof IoOptions, unknown>>;
  readonly logger?: Logger;
}

interface Pending {
  readonly request: IoRequest;
  readonly keys: readonly string[];
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

interface BatchResults {
  readonly target: readonly OperationOutcome<unknown>[];
  readonly work: readonly OperationOutcome<unknown>[];
  readonly publication: Error | null;
}

/** One request turned into operations, plus how to build its answer from their outcomes. */
interface Planned {
  readonly target: LeaseOperation<unknown>[];
  readonly work: LeaseOperation<unknown>[];
  readonly publication?: PublicationJob;
  readonly ensureDir?: string;
  /** Runs after the commit (reads see this batch's writes). */
  readonly read?: () => Promise<unknown>;
  finish(results: BatchResults, readValue: unknown): unknown;
}

const READ_KINDS: ReadonlySet<IoRequestKind> = new Set(['recoverExpired', 'snapshotCounts', 'snapshotRecords', 'sweepExpired', 'listDir']);

function unwrap<R>(outcome: OperationOutcome<unknown> | undefined): R {
  if (!outcome) throw new Error('I/O service lost an operation outcome');
  if (!outcome.ok) throw outcome.error;
  return outcome.value as R;
}

export class IoService {
  readonly options: IoOptions;
  readonly fileBarrier: FileBarrierStrategy;
  readonly #deps: IoServiceDeps;
  readonly #fsLayer: FsLayer;
  readonly #queue: BoundedQueue<Pending>;
  readonly #mirror: MirrorCoherence;
  readonly #logger: Logger | undefined;
  #loop: Promise<void> | undefined;
  #latestNowMs = 0;
  #stats = { batches: 0, requests: 0, largestBatch: 0, fileBarriers: 0, directoryBarriers: 0 };

  private constructor(deps: IoServiceDeps) {
    if (typeof deps.coordinatorId !== 'string' || deps.coordinatorId === '') throw invalidOption('coordinatorId', 'a non-empty coordinator name', deps.coordinatorId);
    this.options = IO_OPTIONS.resolve(deps.options ?? {});
    this.fileBarrier = effectiveFileBarrier(this.options.fileBarrier);
    this.#deps = deps;
    this.#fsLayer = deps.fsLayer ?? nodeFsLayer;
    this.#queue = new BoundedQueue<Pending>(this.options.queueCapacity);
    this.#mirror = new MirrorCoherence(deps.inflight ?? null, deps.targetLeaseTtlMs ?? 300_000);
    this.#logger = deps.logger;
  }

  /**
   * Creates the service, rebuilds the mirror from this coordinator's live target records (at
   * `startNowMs`), and starts the batch loop. Rejects with `ERR_LEASE_CORRUPT` when the target
   * table holds a corrupt record (the rebuild fails closed rather than guess).
   */
  static async start(deps: IoServiceDeps, startNowMs: number = Date.now()): Promise<IoService> {
    const service = new IoService(deps);
    if (deps.inflight && deps.target) {
      const records = await deps.target.snapshotRecords();
      const mirrored = service.#mirror.rebuild(records.map((e) => e.record), deps.coordinatorId, startNowMs);
      service.#logger?.info({ mirrored }, 'in-flight mirror rebuilt from durable target leases');
    }
    service.#latestNowMs = startNowMs;
    service.#loop = service.#run();
    return service;
  }

  /** Requests waiting in the queue (not yet taken into a batch). */
  get queueLength(): number {
    return this.#queue.length;
  }

  stats(): IoStats {
    return { ...this.#stats, mirroredGroups: this.#mirror.grantCount, lostGroups: this.#mirror.lostCount };
  }

  /**
   * Queues a request and resolves with its answer once the batch that carried it is durable.
   * Waits while the queue is full. Rejects with `ERR_QUEUE_CLOSED` after `close()`.
   */
  async submit<K extends IoRequestKind>(request: RequestOf<K>): Promise<IoAnswer<K>> {
    const keys = keysOf(request as IoRequest);
    return new Promise<IoAnswer<K>>((resolve, reject) => {
      this.#queue.push({ request: request as IoRequest, keys, resolve: resolve as (v: unknown) => void, reject }).catch(reject);
    });
  }

  /** Stops accepting requests, answers every queued one, then stops the loop. Idempotent. */
  async close(): Promise<void> {
    this.#queue.close();
    await this.#loop;
  }

  async #run(): Promise<void> {
    for (;;) {
      try {
        await this.#queue.waitForItems();
      } catch {
        return; // closed and drained
      }
      // Linger one event-loop turn: requests that arrive as one burst of port messages (each
      // message is its own task) then share this commit instead of the first one going alone.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const batch = this.#queue.take(this.#admitter());
      if (batch.length === 0) continue;
      try {
        await this.#runBatch(batch);
      } catch (error) {
        // Only a bug can land here; answer everyone rather than leave callers hanging.
        this.#logger?.error({ err: error }, 'I/O batch failed unexpectedly');
        for (const pending of batch) pending.reject(error);
      }
    }
  }

  /** Keyed admission; a read joins only if nothing queued before it was held back. */
  #admitter(): (pending: Pending) => boolean {
    const keyed = createBatchAdmitter<Pending>((p) => p.keys, this.options.maxBatchRequests);
    let count = 0;
    let heldBack = false;
    return (pending) => {
      let admitted: boolean;
      if (READ_KINDS.has(pending.request.kind)) admitted = !heldBack && count < this.options.maxBatchRequests;
      else admitted = count < this.options.maxBatchRequests && keyed(pending);
      if (admitted) count += 1;
      else heldBack = true;
      return admitted;
    };
  }

  async #runBatch(batch: Pending[]): Promise<void> {
    const planned: (Planned | null)[] = batch.map((pending) => {
      try {
        return this.#plan(pending.request);
      } catch (error) {
        pending.reject(error);
        return null;
      }
    });
    const targetOps: LeaseOperation<unknown>[] = [];
    const workOps: LeaseOperation<unknown>[] = [];
    const publications: PublicationJob[] = [];
    const spans = planned.map((plan) => {
      if (!plan) return null;
      const span = { target: targetOps.length, work: workOps.length, publication: plan.publication ? publications.length : -1 };
      targetOps.push(...plan.target);
      workOps.push(...plan.work);
      if (plan.publication) publications.push(plan.publication);
      return span;
    });

    const ensureErrors = new Map<string, Error>();
    for (const plan of planned) {
      if (!plan?.ensureDir) continue;
      try {
        await ensureDirectoryTree(this.#fsLayer, plan.ensureDir);
      } catch (error) {
        ensureErrors.set(plan.ensureDir, error as Error);
      }
    }
    const [targetOutcomes, workOutcomes, publicationErrors] = await Promise.all([
      this.#execute(this.#deps.target, targetOps),
      this.#execute(this.#deps.work, workOps),
      this.#publish(publications),
    ]);
    this.#stats.batches += 1;
    this.#stats.largestBatch = Math.max(this.#stats.largestBatch, batch.length);

    for (const [index, pending] of batch.entries()) {
      const plan = planned[index];
      const span = spans[index];
      if (!plan || !span) continue;
      this.#stats.requests += 1;
      try {
        const results: BatchResults = {
          target: targetOutcomes.slice(span.target, span.target + plan.target.length),
          work: workOutcomes.slice(span.work, span.work + plan.work.length),
          publication: (plan.ensureDir ? ensureErrors.get(plan.ensureDir) : undefined) ?? (span.publication >= 0 ? publicationErrors[span.publication]! : null),
        };
        const readValue = plan.read ? await plan.read() : undefined;
        pending.resolve(plan.finish(results, readValue));
      } catch (error) {
        pending.reject(error);
      }
    }
    const swept = this.#mirror.sweep(this.#latestNowMs);
    if (swept > 0) this.#logger?.warn({ groups: swept }, 'target leases expired without heartbeat; removed from the in-flight mirror');
  }

  async #execute(store: TargetLeaseStore | WorkLeaseStore | null | undefined, ops: LeaseOperation<unknown>[]): Promise<OperationOutcome<unknown>[]> {
    if (ops.length === 0 || !store) return [];
    try {
      const { outcomes, report } = await store.executeBatch(ops);
      this.#stats.fileBarriers += report.fileBarriers;
      this.#stats.directoryBarriers += report.directoryBarriers;
      return [...outcomes];
    } catch (error) {
      // Lock phase failed (timeout, bad lock path): nothing was written for anyone in this table.
      return ops.map(() => ({ ok: false as const, error }));
    }
  }

  async #publish(jobs: PublicationJob[]): Promise<(Error | null)[]> {
    if (jobs.length === 0) return [];
    const report = await publishFiles(this.#fsLayer, this.fileBarrier, jobs);
    this.#stats.fileBarriers += report.fileBarriers;
    this.#stats.directoryBarriers += report.directoryBarriers;
    return [...report.errors];
  }

  #noteNow(nowMs: unknown): void {
    if (typeof nowMs === 'number' && Number.isFinite(nowMs) && nowMs > this.#latestNowMs) this.#latestNowMs = nowMs;
  }

  #targetStore(): TargetLeaseStore {
    if (!this.#deps.target) throw new InvalidOptionError('this I/O service has no target table (start it with a target lease directory)', { option: 'targetRoot' });
    return this.#deps.target;
  }

  #workStore(): WorkLeaseStore {
    if (!this.#deps.work) throw new InvalidOptionError('this I/O service has no work table (start it with a work lease directory)', { option: 'workRoot' });
    return this.#deps.work;
  }

  #store(table: unknown): TargetLeaseStore | WorkLeaseStore {
    if (table === 'target') return this.#targetStore();
    if (table === 'work') return this.#workStore();
    throw invalidOption('table', "'work' or 'target'", table);
  }

  /** Validates a request and turns it into operations. Throws (for this request only) on bad input. */
  #plan(request: IoRequest): Planned {
    if (typeof request !== 'object' || request === null) throw invalidOption('request', 'an I/O request object', request);
    this.#noteNow((request as { nowMs?: unknown }).nowMs);
    const none = { target: [], work: [] };
    switch (request.kind) {
      case 'claimGroup': {
        const claim = this.#planClaims([request], request.nowMs);
        return {
          target: claim.ops,
          work: [],
          finish: (r) => {
            const { results, errors } = claim.finish(r.target);
            if (errors[0] !== undefined) throw errors[0];
            return results[0];
          },
        };
      }
      case 'claimGroups': {
        if (!Array.isArray(request.groups)) throw invalidOption('groups', 'an array of { targets, payload, mirrorOwner }', request.groups);
        const claim = this.#planClaims(request.groups, request.nowMs);
        return { target: claim.ops, work: [], finish: (r) => claim.finish(r.target).results };
      }
      case 'heartbeatGroup': {
        const op = this.#targetStore().planHeartbeatGroup(request.targets, request.token, { nowMs: request.nowMs });
        return {
          target: [op],
          work: [],
          finish: (r) => {
            const result = unwrap<FenceResult>(r.target[0]);
            if (result.ok) this.#mirror.renewed(request.token, request.nowMs);
            else this.#lost(request.token, request.targets, result.reason);
            return result;
          },
        };
      }
      case 'releaseGroup':
      case 'releaseGroups': {
        const claims = request.kind === 'releaseGroup' ? [{ targets: request.targets, token: request.token }] : request.claims;
        if (!Array.isArray(claims)) throw invalidOption('claims', 'an array of { targets, token }', claims);
        const store = this.#targetStore();
        const ops = claims.map((c) => store.planReleaseGroup(c.targets, c.token));
        return {
          target: ops,
          work: [],
          finish: (r) => {
            const results = claims.map((c, i) => {
              const outcome = r.target[i];
              // An I/O failure restored the records: the lease is still ours, keep the mirror.
              if (outcome?.ok) this.#mirror.ended(c.token, c.targets, false);
              return outcome;
            });
            const values = results.map((o) => unwrap<FenceResult>(o));
            return request.kind === 'releaseGroup' ? values[0] : values;
          },
        };
      }
      case 'claim': {
        const op = this.#workStore().planClaim(request.workId, request.payload, {
          owner: this.#deps.coordinatorId,
          worker: request.worker,
          nowMs: request.nowMs,
          ...(request.leaseTtlMs !== undefined ? { leaseTtlMs: request.leaseTtlMs } : {}),
        });
        return { target: [], work: [op], finish: (r) => unwrap(r.work[0]) };
      }
      case 'heartbeatMany': {
        if (!Array.isArray(request.leases)) throw invalidOption('leases', 'an array of [workId, token] pairs', request.leases);
        const store = this.#workStore();
        const sorted = [...new Map<string, string>(request.leases).entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
        const ops: LeaseOperation<unknown>[] = [];
        for (let start = 0; start < sorted.length; start += MAX_HEARTBEAT_BATCH) {
          ops.push(store.planHeartbeatMany(sorted.slice(start, start + MAX_HEARTBEAT_BATCH), { nowMs: request.nowMs }));
        }
        return {
          target: [],
          work: ops,
          finish: (r) => {
            const merged = { renewed: [] as string[], lost: [] as string[], corrupt: [] as string[] };
            for (const outcome of r.work) {
              const part = unwrap<Omit<HeartbeatBatchResult, 'directoryBarriers'>>(outcome);
              merged.renewed.push(...part.renewed);
              merged.lost.push(...part.lost);
              merged.corrupt.push(...part.corrupt);
            }
            return merged;
          },
        };
      }
      case 'abandon':
        return { target: [], work: [this.#workStore().planAbandon(request.workId, request.token)], finish: (r) => unwrap(r.work[0]) };
      case 'beginCommit': {
        const op = this.#workStore().planBeginCommit(request.workId, request.token, { nowMs: request.nowMs, ...(request.commit !== undefined ? { commit: request.commit } : {}) });
        return { target: [], work: [op], finish: (r) => unwrap(r.work[0]) };
      }
      case 'completeOnce': {
        const op = this.#workStore().planCompleteOnce(request.workId, request.token, { nowMs: request.nowMs });
        return { target: [], work: [op], finish: (r) => unwrap(r.work[0]) };
      }
      case 'recoverExpired': {
        const store = this.#store(request.table);
        const options = { nowMs: request.nowMs, ...(request.leaseTtlMs !== undefined ? { leaseTtlMs: request.leaseTtlMs } : {}), ...(request.limit !== undefined ? { limit: request.limit } : {}) };
        return { ...none, read: () => store.recoverExpired(options), finish: (_r, value) => value };
      }
      case 'snapshotCounts': {
        const store = this.#store(request.table);
        return { ...none, read: () => store.snapshotCounts({ nowMs: request.nowMs }), finish: (_r, value) => value };
      }
      case 'snapshotRecords': {
        const store = this.#store(request.table);
        if (request.corrupt !== undefined && request.corrupt !== 'reject' && request.corrupt !== 'skip') throw invalidOption('corrupt', 'reject or skip', request.corrupt);
        const options = { ...(request.limit !== undefined ? { limit: request.limit } : {}), ...(request.corrupt !== undefined ? { corrupt: request.corrupt } : {}) };
        return { ...none, read: () => store.snapshotRecords(options), finish: (_r, value) => value };
      }
      case 'sweepExpired':
        return { ...none, read: async () => this.#mirror.sweep(request.nowMs), finish: (_r, value) => value };
      case 'ensureDir': {
        const dir = checkDir(request.dir);
        return {
          ...none,
          ensureDir: dir,
          finish: (r) => {
            if (r.publication) throw r.publication;
            return undefined;
          },
        };
      }
      case 'listDir': {
        const dir = checkDir(request.dir);
        return { ...none, read: () => this.#fsLayer.readdir(dir), finish: (_r, value) => value };
      }
      case 'publishFiles': {
        const dir = checkDir(request.dir);
        if (!Array.isArray(request.files)) throw invalidOption('files', 'an array of { name, bytes }', request.files);
        for (const file of request.files) {
          if (!(file?.bytes instanceof Uint8Array)) throw invalidOption('files[].bytes', 'a Uint8Array', file?.bytes);
        }
        return {
          ...none,
          publication: { dir, files: request.files },
          finish: (r) => {
            if (r.publication) throw r.publication;
            return undefined;
          },
        };
      }
      case 'stageFiles': {
        const dir = checkDir(request.dir);
        checkFiles(request.files);
        return {
          ...none,
          ensureDir: dir,
          publication: { dir, files: request.files, existing: 'keep' },
          finish: (r) => {
            if (r.publication) throw r.publication;
            return undefined;
          },
        };
      }
      case 'publishCommitted': {
        if (!Array.isArray(request.publications)) throw invalidOption('publications', 'an array of { dir, files }', request.publications);
        const jobs: PublicationJob[] = request.publications.map((p) => {
          checkFiles(p?.files);
          return { dir: checkDir(p.dir), files: p.files };
        });
        // The publication runs inside the record's lock (replayCommitOnce): a recovering
        // coordinator racing this one publishes either everything or nothing, never twice.
        const publish = async (): Promise<void> => {
          if (jobs.every((j) => j.files.length === 0)) return;
          const report = await publishFiles(this.#fsLayer, this.fileBarrier, jobs);
          this.#stats.fileBarriers += report.fileBarriers;
          this.#stats.directoryBarriers += report.directoryBarriers;
          const failed = report.errors.find((e) => e !== null);
          if (failed) throw failed;
        };
        const op = this.#workStore().planReplayCommitOnce(request.workId, request.token, publish, {
          nowMs: request.nowMs,
          ...(request.minIdleMs !== undefined ? { minIdleMs: request.minIdleMs } : {}),
        });
        return { target: [], work: [op], finish: (r) => unwrap(r.work[0]) };
      }
      case 'removeFiles': {
        const dir = checkDir(request.dir);
        if (!Array.isArray(request.names)) throw invalidOption('names', 'an array of file names', request.names);
        const names = request.names.map((n) => checkPublishedName(n));
        return {
          ...none,
          read: async () => {
            const results = await Promise.allSettled(names.map((n) => this.#fsLayer.unlink(path.join(dir, n))));
            const failed = results.find((r) => r.status === 'rejected' && errnoCode(r.reason) !== 'ENOENT') as PromiseRejectedResult | undefined;
            if (failed) throw failed.reason;
            return results.filter((r) => r.status === 'fulfilled').length;
          },
          finish: (_r, value) => value,
        };
      }
      default:
        throw invalidOption('kind', 'a known I/O request kind', (request as { kind?: unknown }).kind);
    }
  }

  /**
   * Target claims with mirror coherence: every operation is planned (validated) first, so a bad
   * group rejects the request before anything is reserved; then each group is reserved locally,
   * and settled after the commit.
   */
  #planClaims(groups: readonly { targets: readonly bigint[]; payload: object; mirrorOwner: number }[], nowMs: number) {
    const store = this.#targetStore();
    const planned = groups.map((g) => {
      const mirrorOwner = checkMirrorOwner(g?.mirrorOwner);
      return { group: g, mirrorOwner, op: store.planClaimGroup(g.targets, g.payload, { owner: this.#deps.coordinatorId, worker: mirrorOwner, nowMs }) };
    });
    const prepared = planned.map((p) => ({ ...p, local: this.#mirror.prepareClaim(p.group.targets, p.mirrorOwner) }));
    const ops = prepared.filter((p) => p.local.ok).map((p) => p.op as LeaseOperation<unknown>);
    return {
      ops,
      /** Per group: the claim's result, or (I/O failure, lock timeout) a `failed` entry and its error. */
      finish: (outcomes: readonly OperationOutcome<unknown>[]): { results: BatchClaimResult[]; errors: unknown[] } => {
        let next = 0;
        const results: BatchClaimResult[] = [];
        const errors: unknown[] = [];
        for (const p of prepared) {
          if (!p.local.ok) {
            results.push(p.local);
            errors.push(undefined);
            continue;
          }
          const outcome = outcomes[next++];
          const result = outcome?.ok ? (outcome.value as GroupClaimResult) : undefined;
          this.#mirror.settleClaim(p.group.targets, p.mirrorOwner, p.local.selfReserved, result, nowMs);
          if (result) {
            results.push(result);
            errors.push(undefined);
            continue;
          }
          const error = outcome ? (outcome as { error: unknown }).error : new Error('I/O service lost a claim outcome');
          const data = toErrorData(error);
          results.push({ ok: false, reason: 'failed', code: data.code, message: data.message });
          errors.push(error);
        }
        return { results, errors };
      },
    };
  }

  #lost(token: string, targets: readonly bigint[], reason: string): void {
    this.#mirror.ended(token, targets, true);
    this.#logger?.warn({ targets: targets.map(String), reason }, 'target lease lost; removed from the in-flight mirror');
  }
}

function checkDir(dir: unknown): string {
  if (typeof dir !== 'string' || dir === '') throw invalidOption('dir', 'a directory path', dir);
  return path.resolve(dir);
}

function checkFiles(files: unknown): asserts files is readonly PublishedFile[] {
  if (!Array.isArray(files)) throw invalidOption('files', 'an array of { name, bytes }', files);
  for (const file of files) {
    if (!(file?.bytes instanceof Uint8Array)) throw invalidOption('files[].bytes', 'a Uint8Array', file?.bytes);
  }
}

function checkMirrorOwner(owner: unknown): number {
  if (typeof owner !== 'number' || !Number.isInteger(owner) || owner < 1 || owner > 0xffff_ffff) {
    throw invalidOption('mirrorOwner', 'an integer in 1..2^32−1 (the in-flight set owner number)', owner);
  }
  return owner;
}

/** The records (or directories) a request touches, for batch admission. */
export function keysOf(request: IoRequest): string[] {
  const targetKeys = (targets: unknown): string[] => (Array.isArray(targets) ? targets.map((t) => `t:${String(t)}`) : []);
  switch (request?.kind) {
    case 'claimGroup':
    case 'heartbeatGroup':
    case 'releaseGroup':
      return targetKeys(request.targets);
    case 'claimGroups':
      return Array.isArray(request.groups) ? request.groups.flatMap((g) => targetKeys(g?.targets)) : [];
    case 'releaseGroups':
      return Array.isArray(request.claims) ? request.claims.flatMap((c) => targetKeys(c?.targets)) : [];
    case 'claim':
    case 'abandon':
    case 'beginCommit':
    case 'completeOnce':
      return [`w:${request.workId}`];
    case 'publishCommitted':
      return [
        `w:${request.workId}`,
        ...(Array.isArray(request.publications) ? request.publications.flatMap((p) => (typeof p?.dir === 'string' ? [`d:${path.resolve(p.dir)}`] : [])) : []),
      ];
    case 'heartbeatMany':
      return Array.isArray(request.leases) ? request.leases.map((l) => `w:${l?.[0]}`) : [];
    case 'ensureDir':
    case 'listDir':
    case 'publishFiles':
    case 'stageFiles':
    case 'removeFiles':
      return typeof request.dir === 'string' ? [`d:${path.resolve(request.dir)}`] : [];
    default:
      return [];
  }
}
