/**
 * Parsed records by id, reused when the stored bytes are the same bytes again. A record is read
 * and validated on every batch that names it; the records this process wrote are read back by
 * its own next batch (a release after a claim, a heartbeat after a heartbeat), and parsing plus
 * validating a 64-target group record is most of a batch's CPU. A hit costs one byte comparison:
 * equal bytes parse to an equal record, so the result is the one a fresh parse would give.
 *
 * Cached records are deeply frozen, so no caller can change what a later hit returns. Bounded:
 * the least recently used entry goes first. One cache per table (one record kind).
 */
import { parseRecord, type LeaseRecord, type RecordKind, type RecordRead } from './lease-record.js';
import { deepFreeze } from './deep-freeze.js';

/** Entries kept per table: 4096 records of at most a few KiB each. */
export const RECORD_READ_CACHE_ENTRIES = 4096;

interface Entry {
  readonly bytes: Buffer;
  readonly record: LeaseRecord;
}

export class RecordReadCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly kind: RecordKind,
    private readonly capacity = RECORD_READ_CACHE_ENTRIES,
  ) {}

  /** `parseRecord(bytes, id, kind)`, from the cache when `bytes` equal the cached bytes. */
  parse(bytes: Buffer, id: string): RecordRead {
    const hit = this.entries.get(id);
    if (hit !== undefined && hit.bytes.equals(bytes)) {
      this.entries.delete(id);
      this.entries.set(id, hit);
      return { state: 'valid', record: hit.record, bytes: hit.bytes };
    }
    const read = parseRecord(bytes, id, this.kind);
    if (read.state === 'valid') this.remember(id, read.bytes, read.record);
    else this.entries.delete(id);
    return read;
  }

  /** Records what a committed write stored under `id`. */
  remember(id: string, bytes: Buffer, record: LeaseRecord): void {
    this.entries.delete(id);
    if (this.capacity === 0) return;
    if (this.entries.size >= this.capacity) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(id, { bytes, record: deepFreeze(record) });
  }

  forget(id: string): void {
    this.entries.delete(id);
  }
}
