/**
 * The batch overlay every store's batch runs under (src/lease/batch-overlay.ts): views over what
 * was read and staged, staging all-or-nothing, the corrupt-record rule, the operation scope, and
 * what reaches the store's commit. A recording store stands in for files, SQLite and etcd.
 */
import { describe, expect, it } from 'vitest';
import { BatchOverlay } from '../../src/lease/batch-overlay.js';
import type { FetchedRead, StagedChange, StagedRecord, StoreBatch } from '../../src/lease/backend-contract.js';
import type { LeaseRecord } from '../../src/lease/lease-record.js';

const record = (id: string, holder = 'a'): LeaseRecord => ({ id, owner: holder }) as unknown as LeaseRecord;
const staged = (id: string, holder = 'b'): StagedRecord => ({ record: record(id, holder), bytes: Buffer.from(`${id}:${holder}`) });

function recordingStore(reads: Record<string, FetchedRead>, admit?: StoreBatch['admit']) {
  const log = { locks: [] as string[][], fetches: [] as string[][], commits: [] as StagedChange[][], releases: 0 };
  const store: StoreBatch = {
    async lock(ids) {
      log.locks.push([...ids]);
    },
    async fetch(ids) {
      log.fetches.push([...ids]);
      return new Map(ids.map((id) => [id, reads[id] ?? { state: 'absent' }]));
    },
    ...(admit ? { admit } : {}),
    async commit(changes) {
      log.commits.push([...changes]);
      return { published: changes.length, fileBarriers: 1, directoryBarriers: 0, directories: [] };
    },
    async release() {
      log.releases += 1;
    },
  };
  return { store, log };
}

describe('BatchOverlay', () => {
  it('locks each id once (the store orders its own locks), reads each once, and shows staged changes over the reads', async () => {
    const { store, log } = recordingStore({ b: { state: 'valid', record: record('b') } });
    const batch = new BatchOverlay(store);
    await batch.lock(['c', 'b', 'c']);
    await batch.lock(['b', 'a']);
    await batch.read(['b', 'c']);
    await batch.read(['c', 'a']);
    expect(log.locks).toEqual([['c', 'b'], ['a']]);
    expect(log.fetches).toEqual([['b', 'c'], ['a']]);
    batch.stageAll([['c', staged('c')], ['b', null]]);
    expect(batch.view('b')).toEqual({ state: 'absent' });
    expect(batch.view('c')).toEqual({ state: 'valid', record: record('c', 'b') });
    expect(batch.view('a')).toEqual({ state: 'absent' });
    await batch.commit();
    expect(log.commits[0]!.map((c) => [c.id, c.before.state, c.next === null ? null : 'put'])).toEqual([
      ['c', 'absent', 'put'],
      ['b', 'valid', null],
    ]);
  });

  it('refuses, whole, a set of changes that would write over a corrupt record, and never hands it to the store', async () => {
    const { store, log } = recordingStore({ bad: { state: 'corrupt', reason: 'does not parse' } });
    const batch = new BatchOverlay(store);
    await batch.lock(['bad', 'ok']);
    await batch.read(['bad', 'ok']);
    expect(() => batch.stageAll([['ok', staged('ok')], ['bad', null]])).toThrow(/corrupt records are never overwritten/);
    expect(batch.view('ok')).toEqual({ state: 'absent' });
    await batch.commit();
    expect(log.commits).toEqual([[]]);
  });

  it('drops a deletion of an absent record, and a record staged then deleted again, before the commit', async () => {
    const { store, log } = recordingStore({});
    const batch = new BatchOverlay(store);
    await batch.lock(['x', 'y']);
    await batch.read(['x', 'y']);
    batch.stageAll([['x', null]]);
    batch.stageAll([['y', staged('y')]]);
    batch.stageAll([['y', null]]);
    expect(batch.view('y')).toEqual({ state: 'absent' });
    await batch.commit();
    expect(log.commits).toEqual([[]]);
  });

  it('refuses ids used out of phase: a read before its lock, a stage before its read', async () => {
    const { store } = recordingStore({});
    const batch = new BatchOverlay(store);
    await expect(batch.read(['x'])).rejects.toThrow(/without its lock/);
    await batch.lock(['x']);
    expect(() => batch.stageAll([['x', staged('x')]])).toThrow(/was not read/);
    expect(() => batch.view('x')).toThrow(/was not read/);
  });

  it('reads a guarded id without its lock, and still refuses to stage it', async () => {
    const { store, log } = recordingStore({ g: { state: 'valid', record: record('g') } });
    const batch = new BatchOverlay(store);
    await batch.lock(['x']);
    await expect(batch.read(['x', 'y'], new Set(['g']))).rejects.toThrow(/read of y without its lock/);
    await batch.read(['x', 'g'], new Set(['g']));
    expect(log.locks).toEqual([['x']]);
    expect(log.fetches).toEqual([['x', 'g']]);
    expect(batch.view('g')).toEqual({ state: 'valid', record: record('g') });
    expect(() => batch.stageAll([['g', staged('g')]])).toThrow(/without its lock/);
  });

  it('lets the store refuse changes before any is staged', async () => {
    const { store } = recordingStore({}, (changes) => {
      if (changes.length > 1) throw new Error('too big');
    });
    const batch = new BatchOverlay(store);
    await batch.lock(['x', 'y']);
    await batch.read(['x', 'y']);
    expect(() => batch.stageAll([['x', staged('x')], ['y', staged('y')]])).toThrow('too big');
    expect(batch.view('x')).toEqual({ state: 'absent' });
  });

  it('fails a look at an unreadable record with ERR_LEASE_IO, keeping the store\'s error as cause', async () => {
    const cause = new Error('connection refused');
    const { store } = recordingStore({ x: { state: 'unreadable', error: cause } });
    const batch = new BatchOverlay(store);
    await batch.lock(['x']);
    await batch.read(['x']);
    let error: unknown;
    try {
      batch.view('x');
    } catch (thrown) {
      error = thrown;
    }
    expect((error as { code?: string }).code).toBe('ERR_LEASE_IO');
    expect((error as { cause?: unknown }).cause).toBe(cause);
  });

  it('keeps an operation\'s changes apart until it stages them, and refuses ids outside its lock set', async () => {
    const { store } = recordingStore({ a: { state: 'valid', record: record('a') } });
    const batch = new BatchOverlay(store);
    await batch.lock(['a', 'b']);
    await batch.read(['a', 'b']);
    const view = batch.scope('op', ['a'], (r) => ({ record: r, bytes: Buffer.from('x') }));
    view.remove('a');
    expect(view.get('a')).toEqual({ state: 'absent' });
    expect(batch.view('a')).toEqual({ state: 'valid', record: record('a') });
    expect(() => view.put(record('b'))).toThrow(/outside its lock set/);
    view.stageOwn();
    expect(batch.view('a')).toEqual({ state: 'absent' });
    expect([...view.stagedIds]).toEqual(['a']);
  });

  it('releases the store once, and refuses use after release', async () => {
    const { store, log } = recordingStore({});
    const batch = new BatchOverlay(store);
    await batch.release();
    await batch.release();
    expect(log.releases).toBe(1);
    await expect(batch.lock(['x'])).rejects.toThrow(/ended/);
  });
});
