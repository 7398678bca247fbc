/**
 * Parsed records by id, reused when the stored bytes are the same bytes again. A record is read
 * and validated on every batch that names it; the records this process wrote are read back by
 * its own next batch (a release after a claim, a heartbeat after a heartbeat), and parsing plus
 * validating a 64-target group record is most of a batch's CPU. A hit costs one byte comparison:
 * equal bytes parse to an equal record, so the result is the one a fresh parse would give.
 *
 * Cached records are deeply frozen, so no caller can change what a later hit returns. Bounded by
 * entries and by bytes (a work record may carry a manifest of megabytes): the least recently used
 * entry goes first, and a record above `RECORD_READ_CACHE_MAX_RECORD_BYTES` is never kept. One
 * cache per table (one record kind). Used by the file store; the SQLite store keeps its
 * rows as known instead (docs/leases.md "SQLite caches").
 */
import { parseRecord, type LeaseRecord, type RecordKind, type RecordRead } from './lease-record.js';
import { deepFreeze } from './deep-freeze.js';

/** Entries kept per table. */
const RECORD_READ_CACHE_ENTRIES = 4096;
/** Stored bytes kept per table (the parsed records cost about as much again). */
const RECORD_READ_CACHE_BYTES = 16 * 1024 * 1024;
/** Largest record kept: a 64-target record is a few KiB; bigger ones are parsed every time. */
const RECORD_READ_CACHE_MAX_RECORD_BYTES = 64 * 1024;

/** A record as stored (a record file's bytes) and as parsed from them. */
interface Entry {
  readonly stored: Buffer;
  readonly record: LeaseRecord;
}

export class RecordReadCache {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(
    private readonly kind: RecordKind,
    private readonly capacity = RECORD_READ_CACHE_ENTRIES,
    private readonly capacityBytes = RECORD_READ_CACHE_BYTES,
  ) {}

  /** Bytes of the records held (for tests). */
  get heldBytes(): number {
    return this.bytes;
  }

  /** `parseRecord(bytes, id, kind)`, from the cache when `bytes` equal the cached bytes. */
  parse(bytes: Buffer, id: string): RecordRead {
    const hit = this.lookup(id, bytes);
    if (hit !== undefined) return { state: 'valid', record: hit, bytes };
    const read = parseRecord(bytes, id, this.kind);
    if (read.state === 'valid') this.remember(id, bytes, read.record);
    else this.forget(id);
    return read;
  }

  /** The cached record of `id` when it was cached with exactly these bytes. */
  lookup(id: string, stored: Buffer): LeaseRecord | undefined {
    const hit = this.entries.get(id);
    if (hit === undefined || !hit.stored.equals(stored)) return undefined;
    this.entries.delete(id);
    this.entries.set(id, hit);
    return hit.record;
  }

  /** Records what a committed write stored under `id` (or what a read found there). */
  remember(id: string, stored: Buffer, record: LeaseRecord): void {
    this.forget(id);
    const size = stored.length;
    if (this.capacity === 0 || size > RECORD_READ_CACHE_MAX_RECORD_BYTES || size > this.capacityBytes) return;
    while (this.entries.size >= this.capacity || this.bytes + size > this.capacityBytes) this.forget(this.entries.keys().next().value as string);
    this.entries.set(id, { stored, record: deepFreeze(record) });
    this.bytes += size;
  }

  forget(id: string): void {
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    this.entries.delete(id);
    this.bytes -= entry.stored.length;
  }
}
