import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, canonicalJsonBytes } from '../../src/lease/canonical-json.js';
import { answerRecordId, groupMembers, isRecordId, shardDirName, shardOf, targetRecordId, workIdOf } from '../../src/lease/identity.js';
import { parseRecord, recordProblem, serializeRecord, type LeaseRecord } from '../../src/lease/lease-record.js';
import { codeOf } from '../helpers/error-code.js';

const sample: LeaseRecord = {
  schema: 1,
  kind: 'work',
  id: 'a'.repeat(64),
  status: 'leased',
  payload: { path: 'seed' },
  owner: 'master',
  previousOwner: '',
  worker: 0,
  token: 'master:0:1:1:ff',
  updatedMs: 1000,
  attempts: 1,
  steals: 0,
};

describe('canonical JSON', () => {
  it('sorts keys recursively and writes no whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1}');
  });

  it('writes the same bytes whatever the key insertion order', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (value) => {
        const reversed = Object.fromEntries(Object.entries(value).reverse());
        expect(canonicalJson(reversed)).toBe(canonicalJson(value));
        expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
      }),
    );
  });

  it('escapes non-ASCII so the bytes are pure ASCII', () => {
    const text = canonicalJson({ name: 'héllo ☃ 𝄞' });
    expect(text).toBe('{"name":"h\\u00e9llo \\u2603 \\ud834\\udd1e"}');
    expect(JSON.parse(text)).toEqual({ name: 'héllo ☃ 𝄞' });
  });

  it('writes bigints as decimal strings without losing precision', () => {
    expect(canonicalJson({ t: (1n << 64n) - 1n })).toBe('{"t":"18446744073709551615"}');
  });

  it('refuses values JSON cannot represent faithfully', () => {
    class Thing {}
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    for (const bad of [{ x: Number.NaN }, { x: Number.POSITIVE_INFINITY }, { x: undefined }, { x: () => 1 }, { x: Symbol('s') }, { x: new Thing() }, { x: new Date(0) }, cyclic]) {
      expect(codeOf(() => canonicalJson(bad))).toBe('ERR_INVALID_JOB');
    }
  });

  it('ends a record file with one newline', () => {
    expect(canonicalJsonBytes({ a: 1 }).toString()).toBe('{"a":1}\n');
  });
});

describe('identities', () => {
  it('derives the work id from the canonical payload', () => {
    const expected = createHash('sha256').update('{"a":1,"b":"x"}').digest('hex');
    expect(workIdOf({ b: 'x', a: 1 })).toBe(expected);
    expect(isRecordId(expected)).toBe(true);
  });

  it('derives the target record id from target:<decimal>', () => {
    expect(targetRecordId(101n)).toBe(createHash('sha256').update('target:101').digest('hex'));
  });

  it('places ids by their first 32 bits and names shards with at least 3 digits', () => {
    expect(shardOf(`00000000${'a'.repeat(56)}`, 4)).toBe(0);
    expect(shardOf(`00000004${'b'.repeat(56)}`, 4)).toBe(0);
    expect(shardOf(`00000001${'c'.repeat(56)}`, 4)).toBe(1);
    expect(shardOf(`ffffffff${'c'.repeat(56)}`, 1000)).toBe(0xffffffff % 1000);
    expect([shardDirName(0), shardDirName(255), shardDirName(1000)]).toEqual(['000', '255', '1000']);
  });

  it('rejects ids that are not 64 lowercase hex characters', () => {
    for (const bad of ['A'.repeat(64), 'a'.repeat(63), `${'a'.repeat(63)}g`, '']) {
      expect(isRecordId(bad)).toBe(false);
      expect(codeOf(() => shardOf(bad, 4))).toBe('ERR_INVALID_JOB');
    }
  });

  it('orders group members by record id', () => {
    const members = groupMembers([3n, 1n, 2n]);
    expect(members.map((m) => m.id)).toEqual([...members.map((m) => m.id)].sort());
  });
});

describe('record validation', () => {
  it('accepts a well-formed record and round-trips its bytes', () => {
    const bytes = serializeRecord(sample);
    const read = parseRecord(bytes, sample.id, 'work');
    expect(read.state).toBe('valid');
    if (read.state === 'valid') expect(serializeRecord(read.record)).toEqual(bytes);
  });

  it('keeps unknown extra fields', () => {
    expect(recordProblem({ ...sample, futureField: { x: 1 } }, sample.id, 'work')).toBeUndefined();
  });

  it.each([
    ['wrong schema', { schema: 2 }],
    ['boolean schema', { schema: true }],
    ['other kind', { kind: 'target' }],
    ['redirected id', { id: 'b'.repeat(64) }],
    ['unknown status', { status: 'held' }],
    ['payload array', { payload: [] }],
    ['empty token', { token: '' }],
    ['empty owner', { owner: '' }],
    ['NaN-like time string', { updatedMs: '12' }],
    ['negative time', { updatedMs: -1 }],
    ['fractional worker', { worker: 1.5 }],
    ['negative attempts', { attempts: -1 }],
    ['commit not object', { commit: 'x' }],
    ['negative completion', { completedMs: -5 }],
  ])('calls a record with %s corrupt', (_name, patch) => {
    expect(recordProblem({ ...sample, ...patch }, sample.id, 'work')).toBeTypeOf('string');
  });

  it('calls unparseable bytes and non-objects corrupt', () => {
    expect(parseRecord(Buffer.from('{"schema":1'), sample.id, 'work').state).toBe('corrupt');
    expect(parseRecord(Buffer.from('[1]'), sample.id, 'work').state).toBe('corrupt');
    expect(parseRecord(Buffer.from('{"updatedMs":NaN}'), sample.id, 'work').state).toBe('corrupt');
  });

  it('checks that a target record hashes to its id', () => {
    const id = targetRecordId(5n);
    const target = { ...sample, kind: 'target' as const, id, target: '5', targets: ['5'] };
    expect(recordProblem(target, id, 'target')).toBeUndefined();
    expect(recordProblem({ ...target, target: '6', targets: ['6'] }, id, 'target')).toMatch(/hash/);
    expect(recordProblem({ ...target, targets: ['7'] }, id, 'target')).toBeTypeOf('string');
    expect(recordProblem({ ...target, status: 'done' }, id, 'target')).toBeTypeOf('string');
  });

  it('takes an answer version only on an answer record, as a positive integer, and refuses a done lease record without answers', () => {
    const id = targetRecordId(5n);
    const lease = { ...sample, kind: 'target' as const, id, status: 'leased' as const, payload: {}, target: '5', targets: ['5'] };
    expect(recordProblem(lease, id, 'target')).toBeUndefined();
    expect(recordProblem({ ...lease, version: 1 }, id, 'target')).toMatch(/answer version/);
    // A released lease record is gone on every store: a done lease record must carry answers.
    expect(recordProblem({ ...lease, status: 'done' }, id, 'target')).toMatch(/carries no answer/);
    const answerId = answerRecordId(5n);
    const answers = { ...lease, id: answerId, status: 'done' as const, role: 'answers', targets: undefined, answered: true, settled: ['a'.repeat(64)] };
    expect(recordProblem(answers, answerId, 'target')).toBeUndefined();
    expect(recordProblem({ ...answers, version: 3 }, answerId, 'target')).toBeUndefined();
    for (const bad of [0, -1, 1.5, '2', Number.MAX_SAFE_INTEGER + 1]) expect(recordProblem({ ...answers, version: bad }, answerId, 'target')).toMatch(/version is not a positive integer/);
    // A hostile version the next release could not count past reads as corrupt (fails closed).
    expect(recordProblem({ ...answers, version: Number.MAX_SAFE_INTEGER }, answerId, 'target')).toMatch(/version leaves no room for a next one/);
    expect(recordProblem({ ...answers, version: Number.MAX_SAFE_INTEGER - 1 }, answerId, 'target')).toBeUndefined();
  });
});
