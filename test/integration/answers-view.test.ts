/**
 * Each table's local view of the answer records (src/lease/answers-view.ts): a claim that names
 * its input reads the answer generation record and only the answer records its view does not hold
 * at that generation. On etcd, which versions the answer records, it reads those its view does not
 * hold at all; the commit checks that each version it decided from is still the newest, and after
 * a conflict the claim runs again reading every member's (src/lease/etcd/etcd-backend.ts "Answer
 * versions").
 */
import { expect, it, vi } from 'vitest';
import type { LeaseOperation } from '../../src/lease/lease-operation.js';
import type { GroupClaimResult } from '../../src/lease/lease-results.js';
import { answerGenerationRecordId, answerRecordId } from '../../src/lease/identity.js';
import { MAX_GENERATION_CHANGES } from '../../src/lease/lease-record.js';
import type { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { S, openTarget, tempRoot } from '../helpers/lease-fixtures.js';
import { describeEachStore } from '../helpers/lease-stores.js';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';

const input = (n: number): string => n.toString(16).padStart(64, '0');

describeEachStore('answers view', (store) => {
  const tables: FencedTargetLeaseTable[] = [];
  const open = async (root: string): Promise<FencedTargetLeaseTable> => {
    const table = await openTarget(root, store.options());
    tables.push(table);
    return table;
  };
  const closeAll = async (): Promise<void> => {
    await Promise.all(tables.splice(0).map((t) => t.close()));
  };
  const bounded = store.name === 'etcd';

  /** Claims `targets` on `on` through `table`; returns the outcome and the answer records the claim read. */
  async function claim(table: FencedTargetLeaseTable, targets: bigint[], on: string, owner: string, nowMs: number): Promise<{ result: GroupClaimResult; read: string[] }> {
    const op = table.planClaimGroup(targets, { t: 1 }, { owner, nowMs, input: on });
    const read: string[] = [];
    const spied: LeaseOperation<GroupClaimResult> = {
      ...op,
      ...(op.readMore
        ? {
            readMore: (view) => {
              const more = op.readMore!(view);
              read.push(...more.guarded, ...(more.pinned ?? []));
              return more;
            },
          }
        : {}),
    };
    const { outcomes } = await table.executeBatch([spied as LeaseOperation<unknown>]);
    const outcome = outcomes[0]!;
    if (!outcome.ok) throw outcome.error;
    return { result: outcome.value as GroupClaimResult, read: read.sort() };
  }

  async function answer(table: FencedTargetLeaseTable, targets: bigint[], on: string, settled: bigint[], nowMs: number): Promise<void> {
    const held = await table.claimGroup(targets, { t: 1 }, { owner: 'writer', nowMs });
    if (!held.ok) throw new Error(`claim failed: ${held.reason}`);
    expect(await table.releaseGroup(targets, held.token, { nowMs, answers: { input: on, settled } })).toEqual({ ok: true });
  }

  const ids = (targets: bigint[]): string[] => targets.map(answerRecordId).sort();

  it('reads only the answer records written since its view, and refuses a question another coordinator answered a moment ago', async () => {
    try {
      const root = await tempRoot();
      const a = await open(root);
      const b = await open(root);
      const group = [1n, 2n, 3n, 4n];
      // A first answer elsewhere starts the generation record's epoch (a view of none starts over then).
      await answer(b, [99n], input(9), [99n], 9 * S);
      // First claim: the view scans the store first, so it knows that no member has an answer
      // record and reads none (etcd: declares each at version 0, which its commit checks).
      const first = await claim(a, group, input(1), 'a', 10 * S);
      expect(first.result.ok).toBe(true);
      expect(first.read).toEqual([]);
      expect(a.answerScans).toEqual({ scans: 1, failed: 0 });
      if (first.result.ok) expect(await a.releaseGroup(group, first.result.token)).toEqual({ ok: true });
      // Nothing written since: the view answers for every member.
      const second = await claim(a, group, input(2), 'a', 11 * S);
      expect(second.read).toEqual([]);
      if (second.result.ok) expect(await a.releaseGroup(group, second.result.token)).toEqual({ ok: true });
      // b answers member 2 on input 1 and leaves member 5 open there.
      const held = await b.claimGroup([2n, 5n], { t: 1 }, { owner: 'b', nowMs: 12 * S });
      if (!held.ok) throw new Error('claim of b failed');
      expect(await b.releaseGroup([2n, 5n], held.token, { nowMs: 12 * S, answers: { input: input(1), settled: [2n], open: [5n] } })).toEqual({ ok: true });
      // a reads member 2's record again, and only it, and is refused on input 1. On etcd the version
      // its view declared for member 2 (none) fails the commit's compare: the claim runs again,
      // reading every member.
      const third = await claim(a, group, input(1), 'a', 13 * S);
      expect(third.result).toEqual({ ok: false, reason: 'answered', answered: [2n] });
      expect(third.read).toEqual(bounded ? ids(group) : ids([2n]));
      // A fresh table (a restarted coordinator) decides the same. Its scan lists member 2's answer
      // record, the only member's that exists, so that is all it reads.
      const fresh = await open(root);
      const cold = await claim(fresh, group, input(1), 'fresh', 14 * S);
      expect(cold.result).toEqual(third.result);
      expect(cold.read).toEqual(ids([2n]));
      // etcd: read afresh, the view holds every member again, refusals included.
      if (bounded) expect(await claim(a, group, input(1), 'a', 15 * S)).toEqual({ result: third.result, read: [] });
    } finally {
      await closeAll();
    }
  });

  it('starts over when more answers were written elsewhere than the generation record lists', async () => {
    try {
      const root = await tempRoot();
      const a = await open(root);
      const b = await open(root);
      const watched = [1n, 2n, 3n];
      const warm = await claim(a, watched, input(1), 'a', 10 * S);
      if (!warm.result.ok) throw new Error('claim failed');
      expect(await a.releaseGroup(watched, warm.result.token)).toEqual({ ok: true });
      // b answers member 1 on input 1, then so many other branches that the record no longer lists member 1.
      await answer(b, [1n], input(1), [1n], 11 * S);
      const others = Array.from({ length: MAX_GENERATION_CHANGES }, (_, i) => BigInt(1000 + i));
      for (let i = 0; i < others.length; i += 64) await answer(b, others.slice(i, i + 64), input(9), others.slice(i, i + 64), 12 * S);
      if (!bounded) {
        const generation = (await b.snapshotRecords()).find((e) => e.id === answerGenerationRecordId())!.record;
        expect((generation.changed as unknown[][]).some(([, t]) => t === '1')).toBe(false);
      }
      const after = await claim(a, watched, input(1), 'a', 13 * S);
      expect(after.result).toEqual({ ok: false, reason: 'answered', answered: [1n] });
      // etcd: the view's version of member 1 fails the commit's compare, and the claim runs again reading every member.
      expect(after.read).toEqual(ids(watched));
      // The view started over, so the next claim scans again and reads only member 1's record
      // (etcd: the versions just read are still the newest, and none is read).
      const next = await claim(a, watched, input(1), 'a', 14 * S);
      expect(next.result).toEqual(after.result);
      expect(next.read).toEqual(bounded ? [] : ids([1n]));
      // One scan that made the view complete: on files and SQLite the first one found no generation
      // record (nothing to vouch from), and this one; on etcd the listing never goes out of date (a
      // branch answered since costs a conflict), so it was the first.
      expect(a.answerScans).toEqual({ scans: 1, failed: 0 });
    } finally {
      await closeAll();
    }
  });

  it.skipIf(bounded)('with a corrupt generation record, decides from every answer record and writes no answer until an operator repairs it', async () => {
    try {
      const root = await tempRoot();
      const a = await open(root);
      await answer(a, [7n], input(1), [7n], 10 * S);
      const generation = answerGenerationRecordId();
      await store.writeRaw(root, generation, '{"schema":1');
      const before = await store.readRaw(root, answerRecordId(7n));
      const refused = await claim(a, [7n, 8n], input(1), 'a', 11 * S);
      expect(refused.result).toEqual({ ok: false, reason: 'answered', answered: [7n] });
      expect(refused.read).toEqual(ids([7n, 8n]));
      const held = await a.claimGroup([7n, 8n], { t: 1 }, { owner: 'a', nowMs: 12 * S, input: input(2) });
      if (!held.ok) throw new Error(`claim failed: ${held.reason}`);
      expect(await a.releaseGroup([7n, 8n], held.token, { nowMs: 13 * S, answers: { input: input(2), settled: [7n, 8n] } })).toEqual({ ok: false, reason: 'corrupt', corrupt: { id: generation, detail: expect.any(String) } });
      expect((await store.readRaw(root, answerRecordId(7n)))?.equals(before!)).toBe(true);
      expect(await store.readRaw(root, answerRecordId(8n))).toBeNull();
      expect((await store.readRaw(root, generation))?.toString()).toBe('{"schema":1');
    } finally {
      await closeAll();
    }
  });

  it.skipIf(store.name !== 'files')('scans without a lock, beside a release that has published its generation and not yet its answer records, and misses none of them', async () => {
    try {
      const root = await tempRoot();
      const faults = new FaultInjectingFsLayer();
      const writer = await openTarget(root, store.options(), { fsLayer: faults });
      tables.push(writer);
      const reader = await open(root);
      await answer(writer, [5n], input(1), [5n], 10 * S);
      // The writer's next answer stops after it published the generation that lists branch 6 and
      // before branch 6's answer record, holding the generation record's lock.
      const held = await writer.claimGroup([6n], { t: 1 }, { owner: 'writer', nowMs: 11 * S });
      if (!held.ok) throw new Error('claim failed');
      let paused!: () => void;
      const reached = new Promise<void>((resolve) => (paused = resolve));
      let go!: () => void;
      const gate = new Promise<void>((resolve) => (go = resolve));
      faults.hook({ op: 'rename', path: answerRecordId(6n), run: async () => { paused(); await gate; } });
      const release = writer.releaseGroup([6n], held.token, { nowMs: 11 * S, answers: { input: input(1), settled: [6n] } });
      await reached;
      // The reader scans meanwhile (no lock to wait for): its listing lacks branch 6, the generation
      // it read lists it. Refused on branch 5, having read only 5's record.
      const refused = await claim(reader, [5n, 7n], input(1), 'reader', 12 * S);
      expect(refused.result).toEqual({ ok: false, reason: 'answered', answered: [5n] });
      expect(refused.read).toEqual(ids([5n]));
      expect(reader.answerScans).toEqual({ scans: 1, failed: 0 });
      go();
      expect(await release).toEqual({ ok: true });
      // Branch 6 is known to have a record though the listing missed it: read, and refused.
      const six = await claim(reader, [6n, 7n], input(1), 'reader', 13 * S);
      expect(six.result).toEqual({ ok: false, reason: 'answered', answered: [6n] });
      expect(six.read).toEqual(ids([6n]));
    } finally {
      await closeAll();
    }
  });

  it.skipIf(store.name !== 'files')('a scan that cannot list a shard directory makes nothing complete', async () => {
    try {
      const root = await tempRoot();
      const writer = await open(root);
      await answer(writer, [5n], input(1), [5n], 10 * S);
      const faults = new FaultInjectingFsLayer();
      const reader = await openTarget(root, store.options(), { fsLayer: faults });
      tables.push(reader);
      faults.fail({ op: 'readdir', path: root, nth: 2 });
      const refused = await claim(reader, [5n, 7n], input(1), 'reader', 12 * S);
      expect(refused.result).toEqual({ ok: false, reason: 'answered', answered: [5n] });
      expect(refused.read).toEqual(ids([5n, 7n]));
      expect(reader.answerScans).toEqual({ scans: 0, failed: 1 });
      // The next claims do not scan again (no listing at all), and still decide right.
      faults.resetCounts();
      for (let i = 0; i < 4; i += 1) expect((await claim(reader, [5n, 8n + BigInt(i)], input(1), 'reader', 13 * S)).result).toMatchObject({ reason: 'answered' });
      expect(faults.count('readdir')).toBe(0);
    } finally {
      await closeAll();
    }
  });

  it.skipIf(bounded)('vouches for nothing while there is no generation record, also after an operator removed it', async () => {
    try {
      const root = await tempRoot();
      const a = await open(root);
      const b = await open(root);
      // A fresh store: no generation record, so the view is not complete and every member is read.
      const first = await claim(a, [7n, 8n], input(1), 'a', 10 * S);
      expect(first.read).toEqual(ids([7n, 8n]));
      expect(a.answerScans).toEqual({ scans: 0, failed: 0 });
      if (first.result.ok) expect(await a.releaseGroup([7n, 8n], first.result.token)).toEqual({ ok: true });
      await answer(b, [7n], input(1), [7n], 11 * S);
      // The generation record removed (the remedy for a corrupt one): the store reads as at the
      // start again, but branch 7's answer record is there.
      await store.removeRaw(root, answerGenerationRecordId());
      const again = await claim(a, [7n, 8n], input(1), 'a', 12 * S);
      expect(again.result).toEqual({ ok: false, reason: 'answered', answered: [7n] });
      expect(again.read).toEqual(ids([7n, 8n]));
      // The next answer starts a new epoch. The claim that reads it still reads every member; the
      // table scans before the one after, which reads 7's record only.
      await answer(b, [9n], input(1), [9n], 13 * S);
      const seen = await claim(a, [7n, 8n], input(1), 'a', 14 * S);
      expect(seen.result).toEqual(again.result);
      expect(seen.read).toEqual(ids([7n, 8n]));
      const after = await claim(a, [7n, 8n], input(1), 'a', 15 * S);
      expect(after.result).toEqual(again.result);
      expect(after.read).toEqual(ids([7n]));
      expect(a.answerScans).toEqual({ scans: 1, failed: 0 });
    } finally {
      await closeAll();
    }
  });

  it.skipIf(bounded)('with a corrupt generation record, scans once, not at every claim', async () => {
    try {
      const root = await tempRoot();
      const a = await open(root);
      await answer(a, [7n], input(1), [7n], 10 * S);
      await store.writeRaw(root, answerGenerationRecordId(), '{"schema":1');
      const reader = await open(root);
      const scans = vi.spyOn(Object.getPrototypeOf(reader) as { scanIntoView: () => unknown }, 'scanIntoView');
      try {
        for (let i = 0; i < 5; i += 1) expect((await claim(reader, [7n, 8n], input(1), 'reader', (11 + i) * S)).result).toMatchObject({ reason: 'answered', answered: [7n] });
        expect(scans).toHaveBeenCalledTimes(1);
      } finally {
        scans.mockRestore();
      }
    } finally {
      await closeAll();
    }
  });

  it('refuses a claim batched after a release or recordAnswers that answered its member on its input, though its view vouched for the member', async () => {
    try {
      const root = await tempRoot();
      const a = await open(root);
      // A first answer, so the view is complete and vouches for 7, 8 and 9 (no answer record).
      await answer(a, [50n], input(9), [50n], 1 * S);
      expect((await claim(a, [51n], input(9), 'a', 1 * S)).read).toEqual([]);
      const held = await a.claimGroup([7n], { t: 1 }, { owner: 'h', nowMs: 2 * S });
      if (!held.ok) throw new Error('claim failed');
      const release = a.planReleaseGroup([7n], held.token, { nowMs: 3 * S, answers: { input: input(1), settled: [7n] } });
      const first = a.planClaimGroup([7n, 8n], { t: 1 }, { owner: 'c', nowMs: 3 * S, input: input(1) });
      const together = await a.executeBatch([release, first] as LeaseOperation<unknown>[]);
      expect(together.outcomes.map((o) => (o.ok ? o.value : o.error))).toEqual([{ ok: true }, { ok: false, reason: 'answered', answered: [7n] }]);
      const recorded = a.planRecordAnswers({ input: input(2), settled: [8n] }, { owner: 'w', token: held.token, worker: 0 }, 4 * S);
      const second = a.planClaimGroup([8n, 9n], { t: 1 }, { owner: 'c', nowMs: 4 * S, input: input(2) });
      const after = await a.executeBatch([recorded, second] as LeaseOperation<unknown>[]);
      expect(after.outcomes.map((o) => (o.ok ? o.value : o.error))).toEqual([{ ok: true }, { ok: false, reason: 'answered', answered: [8n] }]);
    } finally {
      await closeAll();
    }
  });
});
