/**
 * The I/O service: the only code in a process that mutates lease records and the AFL-visible
 * queue (docs/io-thread.md). It runs inside the I/O thread (`workers/io-worker.ts`) and, for tests and
 * benches, in any thread.
 *
 * Request flow. `submit()` puts a request into a bounded queue (callers wait while it is full).
 * One loop takes every queued request that may share a group commit (`createBatchAdmitter`: a
 * request touching a record already in the batch waits for the next batch, keeping its place),
 * plans each request through its kind (`requests/`, one file per kind, listed in
 * `requests/registry.ts`; bad input fails that request alone, before any I/O), then runs the
 * batch:
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
import { invalidOption } from '../config/values.js';
import type { InflightTargetSet } from '../inflight/inflight-target-set.js';
import type { LeaseOperation, OperationOutcome } from '../lease/lease-operation.js';
import type { TargetLeaseStore, WorkLeaseStore } from '../lease/table-contract.js';
import type { FileBarrierStrategy } from '../fs/durable-files.js';
import type { Logger } from '../telemetry/logger.js';
import { createBatchAdmitter } from './batch-planner.js';
import { BoundedQueue } from './bounded-queue.js';
import { ensureDirectoryTree, publishFiles, type PublicationJob } from './file-publication.js';
import { nodeFsLayer, type FsLayer } from '../fs/fs-layer.js';
import { effectiveFileBarrier, IO_OPTIONS, type IoOptions } from './io-options.js';
import type { IoAnswer, IoRequest, IoRequestKind, IoStats, RequestOf } from './io-requests.js';
import { MirrorCoherence } from './mirror-coherence.js';
import { keysOf, requestKindOf } from './requests/registry.js';
import type { BatchResults, PlanContext, Planned } from './requests/request-kind.js';

interface IoServiceDeps {
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
  readonly #context: PlanContext;
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
    this.#context = {
      coordinatorId: deps.coordinatorId,
      fsLayer: this.#fsLayer,
      fileBarrier: this.fileBarrier,
      mirror: this.#mirror,
      targetStore: () => this.#targetStore(),
      workStore: () => this.#workStore(),
      store: (table) => this.#store(table),
      lost: (token, targets, reason) => this.#lost(token, targets, reason),
      countBarriers: (report) => this.#countBarriers(report),
    };
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
    const scans = this.#deps.target?.answerScans;
    return { ...this.#stats, mirroredGroups: this.#mirror.grantCount, lostGroups: this.#mirror.lostCount, answerScans: scans?.scans ?? 0, answerScanFailures: scans?.failed ?? 0 };
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
      if (requestKindOf(pending.request.kind)?.readOnly) admitted = !heldBack && count < this.options.maxBatchRequests;
      else admitted = count < this.options.maxBatchRequests && keyed(pending);
      if (admitted) count += 1;
      else heldBack = true;
      return admitted;
    };
  }

  async #runBatch(batch: Pending[]): Promise<void> {
    let stage: { pending: Pending; plan: Planned }[] = [];
    for (const pending of batch) {
      try {
        stage.push({ pending, plan: this.#plan(pending.request) });
      } catch (error) {
        pending.reject(error);
      }
    }
    this.#stats.batches += 1;
    this.#stats.largestBatch = Math.max(this.#stats.largestBatch, batch.length);
    this.#stats.requests += stage.length;
    // A plan with a further stage (`then`) goes on to it once its stage committed; every request of
    // the batch at that point shares the next stage's passes, as in the first.
    while (stage.length > 0) {
      const results = await this.#runStage(stage.map((entry) => entry.plan));
      const next: typeof stage = [];
      for (const [index, { pending, plan }] of stage.entries()) {
        try {
          const further = plan.then?.(results[index]!);
          if (further !== undefined) {
            next.push({ pending, plan: further });
            continue;
          }
          const readValue = plan.read ? await plan.read() : undefined;
          pending.resolve(plan.finish(results[index]!, readValue));
        } catch (error) {
          pending.reject(error);
        }
      }
      stage = next;
    }
    const swept = this.#mirror.sweep(this.#latestNowMs);
    if (swept > 0) this.#logger?.warn({ groups: swept }, 'target leases expired without heartbeat; removed from the in-flight mirror');
  }

  /** One pass over `plans`: their directories, then their lease operations and publications, together. */
  async #runStage(plans: readonly Planned[]): Promise<BatchResults[]> {
    const targetOps: LeaseOperation<unknown>[] = [];
    const workOps: LeaseOperation<unknown>[] = [];
    const publications: PublicationJob[] = [];
    const spans = plans.map((plan) => {
      const jobs = plan.publication === undefined ? [] : Array.isArray(plan.publication) ? plan.publication : [plan.publication as PublicationJob];
      const span = { target: targetOps.length, work: workOps.length, publication: publications.length, publications: jobs.length };
      targetOps.push(...plan.target);
      workOps.push(...plan.work);
      publications.push(...jobs);
      return span;
    });
    const ensureErrors = new Map<string, Error>();
    for (const plan of plans) {
      if (!plan.ensureDir) continue;
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
    return plans.map((plan, index) => {
      const span = spans[index]!;
      return {
        target: targetOutcomes.slice(span.target, span.target + plan.target.length),
        work: workOutcomes.slice(span.work, span.work + plan.work.length),
        publication: (plan.ensureDir ? ensureErrors.get(plan.ensureDir) : undefined) ?? publicationErrors.slice(span.publication, span.publication + span.publications).find((e) => e !== null) ?? null,
      };
    });
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
    this.#countBarriers(report);
    return [...report.errors];
  }

  #countBarriers(report: { readonly fileBarriers: number; readonly directoryBarriers: number }): void {
    this.#stats.fileBarriers += report.fileBarriers;
    this.#stats.directoryBarriers += report.directoryBarriers;
  }

  #noteNow(nowMs: unknown): void {
    if (typeof nowMs === 'number' && Number.isFinite(nowMs) && nowMs > this.#latestNowMs) this.#latestNowMs = nowMs;
  }

  #targetStore(): TargetLeaseStore {
    if (!this.#deps.target) throw invalidOption('target', 'a target lease table given when this I/O service started', undefined);
    return this.#deps.target;
  }

  #workStore(): WorkLeaseStore {
    if (!this.#deps.work) throw invalidOption('work', 'a work lease table given when this I/O service started', undefined);
    return this.#deps.work;
  }

  #store(table: unknown): TargetLeaseStore | WorkLeaseStore {
    if (table === 'target') return this.#targetStore();
    if (table === 'work') return this.#workStore();
    throw invalidOption('table', "'work' or 'target'", table);
  }

  /** Validates a request and plans it through its kind (requests/). Throws (for this request only) on bad input. */
  #plan(request: IoRequest): Planned {
    if (typeof request !== 'object' || request === null) throw invalidOption('request', 'an I/O request object', request);
    this.#noteNow((request as { nowMs?: unknown }).nowMs);
    const definition = requestKindOf((request as { kind?: unknown }).kind);
    if (!definition) throw invalidOption('kind', 'a known I/O request kind', (request as { kind?: unknown }).kind);
    return definition.plan(request, this.#context);
  }

  #lost(token: string, targets: readonly bigint[], reason: string): void {
    this.#mirror.ended(token, targets, true);
    this.#logger?.warn({ targets: targets.map(String), reason }, 'target lease lost; removed from the in-flight mirror');
  }
}

/** Re-exported for admission tests: the keys come from each request kind. */
export { keysOf } from './requests/registry.js';
