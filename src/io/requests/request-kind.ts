/**
 * What one I/O request kind is (docs/io-thread.md "Adding a request kind"): its lock keys for
 * batch admission, whether it only reads, and its plan — the lease operations, publication or
 * read it adds to a group commit, and how its answer is built from their outcomes. The I/O service
 * (io-service.ts) runs every kind through this one shape; each kind lives in its own file next to
 * this one and is listed once in registry.ts.
 */
import { InternalError } from '../../errors.js';
import path from 'node:path';
import { invalidOption } from '../../config/values.js';
import type { FsLayer } from '../../fs/fs-layer.js';
import type { FileBarrierStrategy } from '../../fs/durable-files.js';
import type { LeaseOperation, OperationOutcome } from '../../lease/lease-operation.js';
import type { TargetLeaseStore, WorkLeaseStore } from '../../lease/table-contract.js';
import type { PublicationJob } from '../file-publication.js';
import type { PublishedFile } from '../io-requests.js';
import type { MirrorCoherence } from '../mirror-coherence.js';

/** What the batch did for one request: its slice of each table's outcomes, its publication error (the first of its jobs). */
export interface BatchResults {
  readonly target: readonly OperationOutcome<unknown>[];
  readonly work: readonly OperationOutcome<unknown>[];
  readonly publication: Error | null;
}

/** One request turned into operations, plus how to build its answer from their outcomes. */
export interface Planned<Answer = unknown> {
  readonly target: LeaseOperation<unknown>[];
  readonly work: LeaseOperation<unknown>[];
  /** Files to publish in this stage's pass: one directory's job, or several (answered by the first error). */
  readonly publication?: PublicationJob | readonly PublicationJob[];
  readonly ensureDir?: string;
  /** Runs after the commit (reads see this batch's writes). */
  readonly read?: () => Promise<unknown>;
  /**
   * A further stage, planned from this one's results once they are committed, and run in a pass
   * of its own (shared with the other requests of the batch at that stage); its `finish` answers
   * the request. Undefined: this stage's `finish` answers. Throws: the request fails.
   */
  readonly then?: (results: BatchResults) => Planned | undefined;
  finish(results: BatchResults, readValue: unknown): Answer;
}

/** What a plan may use of the service that runs it. */
export interface PlanContext {
  /** Lease owner of every claim made through the service. */
  readonly coordinatorId: string;
  readonly fsLayer: FsLayer;
  readonly fileBarrier: FileBarrierStrategy;
  readonly mirror: MirrorCoherence;
  /** The target table; throws `ERR_INVALID_OPTION` when the service has none. */
  targetStore(): TargetLeaseStore;
  /** The work table; throws `ERR_INVALID_OPTION` when the service has none. */
  workStore(): WorkLeaseStore;
  /** `'work'` or `'target'` → that table; anything else throws `ERR_INVALID_OPTION`. */
  store(table: unknown): TargetLeaseStore | WorkLeaseStore;
  /** A target lease was found lost: drop it from the mirror and warn. */
  lost(token: string, targets: readonly bigint[], reason: string): void;
  /** Adds barriers a plan issued itself (outside the batch's own passes) to the service stats. */
  countBarriers(report: { readonly fileBarriers: number; readonly directoryBarriers: number }): void;
}

export interface RequestKind<Req extends { readonly kind: string }, Answer> {
  readonly kind: Req['kind'];
  /**
   * Read-only kinds carry no lock keys and join a batch only if nothing queued before them was
   * held back, so a read never overtakes a write it should see.
   */
  readonly readOnly: boolean;
  /** The records (`t:<target>`, `w:<workId>`) or directories (`d:<path>`) the request touches. */
  keys(request: Req): string[];
  /** Validates the request and plans it. Throws (for this request only) on bad input, before any I/O. */
  plan(request: Req, ctx: PlanContext): Planned<Answer>;
}

/** A plan with no lease operations. */
export const NO_OPERATIONS = { target: [], work: [] } as const satisfies Pick<Planned, 'target' | 'work'>;

export function unwrap<R>(outcome: OperationOutcome<unknown> | undefined): R {
  if (!outcome) throw new InternalError('I/O service lost an operation outcome');
  if (!outcome.ok) throw outcome.error;
  return outcome.value as R;
}

/** Answers a plan's publication (or directory creation) error, else nothing. */
export function finishPublication(results: BatchResults): void {
  if (results.publication) throw results.publication;
}

export function targetKeys(targets: unknown): string[] {
  return Array.isArray(targets) ? targets.map((t) => `t:${String(t)}`) : [];
}

export function dirKeys(dir: unknown): string[] {
  return typeof dir === 'string' ? [`d:${path.resolve(dir)}`] : [];
}

export function checkDir(dir: unknown): string {
  if (typeof dir !== 'string' || dir === '') throw invalidOption('dir', 'a directory path', dir);
  return path.resolve(dir);
}

export function checkFiles(files: unknown): asserts files is readonly PublishedFile[] {
  if (!Array.isArray(files)) throw invalidOption('files', 'an array of { name, bytes }', files);
  for (const file of files) {
    if (!(file?.bytes instanceof Uint8Array)) throw invalidOption('files[].bytes', 'a Uint8Array', file?.bytes);
  }
}
