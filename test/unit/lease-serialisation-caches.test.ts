// The three caches on the lease hot path give exactly what the uncached path gives: the
// canonical-JSON memo (frozen values written once per batch), the parsed-record cache (a parse
// reused only for identical bytes) and the recent target-id map.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalJson, canonicalJsonMemo } from '../../src/lease/canonical-json.js';
import { targetRecordId } from '../../src/lease/identity.js';
import { serializeRecord, type LeaseRecord } from '../../src/lease/lease-record.js';
import { RecordReadCache } from '../../src/lease/record-read-cache.js';

function targetRecord(target: bigint, targets: readonly string[], payload: object): LeaseRecord {
  return {
    schema: 1,
    kind: 'target',
    id: targetRecordId(target),
    status: 'leased',
    payload: payload as LeaseRecord['payload'],
    owner: 'c1',
    worker: 0,
    token: 'c1:0:1:1000:abcd',
    updatedMs: 1000,
    leaseTtlMs: 60_000,
    attempts: 1,
    steals: 0,
    previousOwner: '',
    target: target.toString(10),
    targets,
  } as LeaseRecord;
}

describe('canonical JSON memo', () => {
  it('writes the same bytes with and without the memo, for every record of a group', () => {
    const targets = Object.freeze(['7', '8', '9']);
    const payload = Object.freeze({ seed: 'é', nested: Object.freeze({ list: Object.freeze([1, 2]) }) });
    const memo = canonicalJsonMemo();
    for (const t of [7n, 8n, 9n]) {
      const record = targetRecord(t, targets, payload);
      expect(serializeRecord(record, memo).equals(serializeRecord(record))).toBe(true);
    }
  });

  it('does not reuse the text of a value that is not frozen (it may have changed)', () => {
    const list = [1, 2];
    const memo = canonicalJsonMemo();
    expect(canonicalJson({ list }, { memo })).toBe('{"list":[1,2]}');
    list.push(3);
    expect(canonicalJson({ list }, { memo })).toBe('{"list":[1,2,3]}');
  });

  it('still applies the depth and length bounds to a reused text', () => {
    const deep = Object.freeze([Object.freeze([Object.freeze([1])])]);
    const memo = canonicalJsonMemo();
    expect(canonicalJson(deep, { memo, maxDepth: 3 })).toBe('[[[1]]]');
    expect(() => canonicalJson([deep], { memo, maxDepth: 3 })).toThrow(/nesting deeper than 3/);
    const long = Object.freeze(['x'.repeat(50)]);
    expect(canonicalJson(long, { memo })).toHaveLength(54);
    expect(() => canonicalJson({ a: long }, { memo, maxBytes: 40 })).toThrow(/longer than 40 bytes/);
  });

  it('keeps the escaping form a text was written in apart from the other form', () => {
    const memo = canonicalJsonMemo();
    const value = Object.freeze({ s: 'é' });
    expect(canonicalJson(value, { memo })).toBe('{"s":"\\u00e9"}');
    expect(canonicalJson(value, { memo, nonAscii: 'utf8' })).toBe('{"s":"é"}');
  });
});

describe('parsed-record cache', () => {
  const record = targetRecord(7n, ['7'], { seed: 'a' });
  const bytes = serializeRecord(record);

  it('returns a frozen record equal to a fresh parse, and parses again when the bytes change', () => {
    const cache = new RecordReadCache('target');
    const first = cache.parse(bytes, record.id);
    expect(first).toMatchObject({ state: 'valid', record });
    const again = cache.parse(Buffer.from(bytes), record.id);
    expect(again.state === 'valid' && first.state === 'valid' && again.record === first.record).toBe(true);
    expect(Object.isFrozen(first.state === 'valid' ? first.record : null)).toBe(true);
    const changed = Buffer.from(bytes.toString('utf8').replace('"leased"', '"lease"'));
    expect(cache.parse(changed, record.id).state).toBe('corrupt');
    // The corrupt read replaced the entry: the old bytes are parsed afresh, not served stale.
    expect(cache.parse(bytes, record.id)).toMatchObject({ state: 'valid', record });
  });

  it('serves a remembered write and forgets a deleted record', () => {
    const cache = new RecordReadCache('target');
    cache.remember(record.id, bytes, { ...record });
    expect(cache.parse(bytes, record.id)).toMatchObject({ state: 'valid', record });
    cache.forget(record.id);
    expect(cache.parse(Buffer.from('{}'), record.id).state).toBe('corrupt');
  });

  it('keeps at most its capacity, dropping the least recently used', () => {
    const cache = new RecordReadCache('target', 2);
    const records = [1n, 2n, 3n].map((t) => targetRecord(t, [t.toString(10)], {}));
    const objectOf = (r: LeaseRecord): unknown => {
      const read = cache.parse(serializeRecord(r), r.id);
      return read.state === 'valid' ? read.record : undefined;
    };
    const first = records.map(objectOf);
    // 3 still cached: the same object. 1 was evicted by 3: a new parse, a new object.
    expect(objectOf(records[2]!)).toBe(first[2]);
    expect(objectOf(records[0]!)).not.toBe(first[0]);
  });
});

describe('parsed-record cache bounds', () => {
  it('keeps no record above the per-record bound and stays within its byte budget', () => {
    const cache = new RecordReadCache('target', 4096, 10_000);
    const big = targetRecord(1n, ['1'], { blob: 'x'.repeat(70 * 1024) });
    cache.parse(serializeRecord(big), big.id);
    expect(cache.heldBytes).toBe(0);
    const small = [2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n].map((t) => targetRecord(t, [t.toString(10)], { blob: 'y'.repeat(2000) }));
    for (const r of small) cache.parse(serializeRecord(r), r.id);
    expect(cache.heldBytes).toBeGreaterThan(0);
    expect(cache.heldBytes).toBeLessThanOrEqual(10_000);
  });
});

describe('recent target ids', () => {
  it('gives the SHA-256 record id of every target, across many generations of the map', () => {
    const direct = (t: bigint): string => createHash('sha256').update(`target:${t}`).digest('hex');
    for (let t = 1n; t <= 20_000n; t += 1n) targetRecordId(t);
    for (const t of [1n, 2n, 8191n, 8192n, 8193n, 19_999n, 20_000n, 2n ** 64n - 1n]) {
      expect(targetRecordId(t)).toBe(direct(t));
      expect(targetRecordId(t)).toBe(direct(t));
    }
  });
});
