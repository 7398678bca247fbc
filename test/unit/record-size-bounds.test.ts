// The record bound follows from the schema: the largest payload plus the largest commit manifest
// fits in a work record, so a writer never stores what a reader would refuse as oversized.
import { describe, expect, it } from 'vitest';
import { buildCommitManifest, manifestJson, MAX_MANIFEST_ITEMS, MAX_STAGED_BYTES } from '../../src/commit/commit-manifest.js';
import { canonicalJsonBytes } from '../../src/lease/canonical-json.js';
import { MAX_COMMIT_BYTES, MAX_PAYLOAD_BYTES, maxRecordBytes, serializeRecord, type LeaseRecord } from '../../src/lease/lease-record.js';

const ID = 'a'.repeat(64);

function record(payload: Record<string, unknown>, commit?: Record<string, unknown>): LeaseRecord {
  return {
    schema: 1,
    kind: 'work',
    id: ID,
    status: 'committing',
    payload,
    owner: 'o'.repeat(256),
    previousOwner: 'p'.repeat(256),
    worker: 0,
    token: 't'.repeat(512),
    updatedMs: Date.UTC(2199, 0, 1),
    leaseTtlMs: 86_400_000,
    attempts: Number.MAX_SAFE_INTEGER,
    steals: Number.MAX_SAFE_INTEGER,
    ...(commit ? { commit } : {}),
  };
}

describe('record size bounds', () => {
  it('fits a manifest of the most items of the longest form, with the largest payload, in one work record', () => {
    const items = Array.from({ length: MAX_MANIFEST_ITEMS }, (_, i) => ({ kind: 'crashes' as const, sha256: i.toString(16).padStart(64, '0'), size: MAX_STAGED_BYTES }));
    const commit = manifestJson(buildCommitManifest(ID, 'timeout', '9999999999', items));
    expect(canonicalJsonBytes(commit).length).toBeLessThan(MAX_COMMIT_BYTES);
    const payload = { blob: 'x'.repeat(MAX_PAYLOAD_BYTES - 16) };
    expect(canonicalJsonBytes(payload).length).toBeLessThanOrEqual(MAX_PAYLOAD_BYTES);
    expect(serializeRecord(record(payload, commit)).length).toBeLessThanOrEqual(maxRecordBytes('work'));
  });

  it('refuses to serialise a record over its bound with ERR_INVALID_JOB', () => {
    const payload = { blob: 'x'.repeat(maxRecordBytes('target')) };
    expect(() => serializeRecord({ ...record(payload), kind: 'target' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_JOB' }));
  });
});
