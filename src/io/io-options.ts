/**
 * Options of the I/O thread. One schema: library input, `--io-*` flags and `SYMFENCE_IO_*`
 * variables resolve through it.
 */
import { defineOptionSchema, type ResolvedOptions } from '../config/schema.js';
import type { FileBarrierStrategy } from '../lease/files/durability-batch.js';
import { loadNative } from '../native/bindings.js';

export const IO_OPTIONS = defineOptionSchema('io', {
  /**
   * Requests that may wait in the I/O thread's queue; a caller beyond that waits for space
   * (backpressure, never an unbounded array). Default 1024.
   */
  queueCapacity: {
    kind: 'integer',
    default: 1024,
    min: 1,
    max: 1_048_576,
    flag: 'io-queue-capacity',
    env: 'SYMFENCE_IO_QUEUE_CAPACITY',
    description: 'requests that may wait for the I/O thread before callers block',
  },
  /** Most requests one group commit (batch) takes. Default 256. */
  maxBatchRequests: {
    kind: 'integer',
    default: 256,
    min: 1,
    max: 65_536,
    flag: 'io-max-batch',
    env: 'SYMFENCE_IO_MAX_BATCH',
    description: 'most requests that share one group commit',
  },
  /**
   * How a batch makes its temp files durable before any rename: `syncfs` (one native syncfs
   * per batch — measured fastest here, see docs/io-thread.md), `fsync` (one fsync per file, in
   * parallel), or `auto` (syncfs when the native addon is built, else fsync). Default `auto`.
   */
  fileBarrier: {
    kind: 'enum',
    values: ['auto', 'syncfs', 'fsync'],
    default: 'auto',
    flag: 'io-file-barrier',
    env: 'SYMFENCE_IO_FILE_BARRIER',
    description: 'file barrier of a batch: auto (syncfs if the addon is built), syncfs, or fsync',
  },
});

export type IoOptions = ResolvedOptions<typeof IO_OPTIONS.specs>;

/** The concrete strategy for `fileBarrier`; `auto` picks syncfs only when the addon loads. */
export function effectiveFileBarrier(choice: IoOptions['fileBarrier'], nativeAvailable = loadNative() !== null): FileBarrierStrategy {
  if (choice === 'auto') return nativeAvailable ? 'syncfs' : 'fsync';
  return choice;
}
