import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { targetRecordId } from '../../src/lease/identity.js';
import { ensureDirectoryDurable } from '../../src/lease/files/record-files.js';
import type { LeaseOperation } from '../../src/lease/lease-operation.js';
import { S, bytesOf, exists, openTarget, openWork, recordFiles, snapshotTree, tempRoot } from '../helpers/lease-fixtures.js';

function range(from: number, to: number): bigint[] {
  return Array.from({ length: to - from + 1 }, (_, i) => BigInt(from + i));
}

describe('durability batches', () => {
  it('creates nested directories durably, syncing each new component and its parent (D19)', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const nested = path.join(root, 'first', 'nested');
    await ensureDirectoryDurable(fsLayer, nested);
    expect(fsLayer.directoryBarrierPaths).toEqual([path.join(root, 'first'), root, nested, path.join(root, 'first')]);
    fsLayer.resetCounts();
    await ensureDirectoryDurable(fsLayer, nested);
    expect(fsLayer.barriers().directory).toBe(0);
  });

  it('commits several requests with one barrier pass for their union', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, { shardCount: 8 }, { fsLayer });
    await table.claimGroup(range(900, 931), { warm: true }, { owner: 'warm', nowMs: 1 }); // creates every shard dir
    fsLayer.resetCounts();
    const ops = [
      table.planClaimGroup(range(1, 8), { job: 1 }, { owner: 'a', nowMs: 10 * S }),
      table.planClaimGroup(range(9, 16), { job: 2 }, { owner: 'b', nowMs: 10 * S }),
      table.planClaimGroup(range(17, 24), { job: 3 }, { owner: 'c', nowMs: 10 * S }),
    ];
    const { outcomes, report } = await table.executeBatch(ops);
    expect(outcomes.every((o) => o.ok && (o.value as { ok: boolean }).ok)).toBe(true);
    const dirs = new Set(range(1, 24).map((t) => table.shardDirOf(targetRecordId(t))));
    expect(report).toMatchObject({ published: 24, fileBarriers: 24, directoryBarriers: dirs.size });
    expect(fsLayer.barriers()).toEqual({ file: 24, filesystem: 0, directory: dirs.size });
  });

  it('fails every writing request of a batch whose barrier failed, restores them, and keeps read-only answers', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openTarget(root, { shardCount: 2 }, { fsLayer });
    await mkdir(path.join(root, '000'), { recursive: true });
    await mkdir(path.join(root, '001'), { recursive: true });
    const held = await table.claimGroup([50n], { held: true }, { owner: 'holder', nowMs: 10 * S });
    expect(held.ok).toBe(true);
    const before = await snapshotTree(root);
    fsLayer.fail({ op: 'syncDirectory' });
    const { outcomes } = await table.executeBatch([
      table.planClaimGroup([1n, 2n], { job: 1 }, { owner: 'a', nowMs: 11 * S }),
      table.planClaimGroup([50n, 51n], { job: 2 }, { owner: 'b', nowMs: 11 * S }),
    ]);
    expect(outcomes[0]).toMatchObject({ ok: false, error: { code: 'ERR_LEASE_IO' } });
    expect(outcomes[1]).toMatchObject({ ok: true, value: { ok: false, reason: 'conflict' } });
    const after = new Map([...(await snapshotTree(root))].filter(([f]) => !f.endsWith('.lock')));
    expect(after).toEqual(new Map([...before].filter(([f]) => !f.endsWith('.lock'))));
  });

  it('lets a later request in the batch see an earlier one (claim then release in one pass)', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { shardCount: 2 });
    const claim = table.planClaimGroup([7n], { job: 1 }, { owner: 'a', nowMs: 10 * S });
    const { outcomes } = await table.executeBatch([claim]);
    const token = (outcomes[0] as { value: { token: string } }).value.token;
    const result = await table.executeBatch([table.planHeartbeatGroup([7n], token, { nowMs: 12 * S }), table.planReleaseGroup([7n], token)]);
    expect(result.outcomes.map((o) => (o as { value: { ok: boolean } }).value.ok)).toEqual([true, true]);
    expect(await exists(table.recordPath(targetRecordId(7n)))).toBe(false);
    expect(await recordFiles(root)).toEqual([]);
  });

  it('stages nothing of an operation that tries to overwrite a corrupt record, even after staging a healthy one, while its batch mates commit', async () => {
    const root = await tempRoot();
    const table = await openTarget(root, { shardCount: 2 });
    const healthy = targetRecordId(1n);
    const corrupt = targetRecordId(2n);
    await mkdir(table.shardDirOf(corrupt), { recursive: true });
    await writeFile(table.recordPath(corrupt), 'not json');
    // A faulty operation (the built-in ones check for corruption first): it stages the healthy
    // member, then asks to overwrite the corrupt one. Staging must refuse the whole operation.
    const rogue: LeaseOperation<string> = {
      name: 'rogue',
      lockIds: [healthy, corrupt],
      apply: (view) => {
        const base = { schema: 1 as const, kind: 'target' as const, status: 'leased' as const, payload: {}, owner: 'r', previousOwner: '', worker: 0, token: 'rogue', updatedMs: 5, attempts: 1, steals: 0, targets: ['1', '2'] };
        view.put({ ...base, id: healthy, target: '1' });
        view.put({ ...base, id: corrupt, target: '2' });
        return 'applied';
      },
    };
    const { outcomes } = await table.executeBatch([rogue, table.planClaimGroup([3n], { job: 3 }, { owner: 'c', nowMs: 10 * S })]);
    expect(outcomes[0]!.ok).toBe(false);
    expect(outcomes[1]).toMatchObject({ ok: true, value: { ok: true } });
    expect(await exists(table.recordPath(healthy))).toBe(false);
    expect(await bytesOf(table.recordPath(corrupt))).toEqual(Buffer.from('not json'));
    expect(await exists(table.recordPath(targetRecordId(3n)))).toBe(true);
  });

  it('fails a read-only answer that rested on a write of the same batch when that batch fails, instead of reporting an undone completion', async () => {
    const root = await tempRoot();
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openWork(root, { shardCount: 2 }, { fsLayer });
    const id = 'a'.repeat(64);
    const claim = await table.claim(id, { p: 1 }, { owner: 'm', nowMs: 10 * S });
    if (!claim.ok) throw new Error('setup');
    expect(await table.beginCommit(id, claim.token, { nowMs: 11 * S, commit: { c: 1 } })).toEqual({ ok: true });
    const before = await bytesOf(table.recordPath(id));
    fsLayer.fail({ op: 'syncDirectory' });
    const { outcomes } = await table.executeBatch([
      table.planCompleteOnce(id, claim.token, { nowMs: 12 * S }),
      table.planCompleteOnce(id, claim.token, { nowMs: 12 * S }),
    ]);
    // The second saw the first's staged `done` and would have said `already`.
    expect(outcomes.map((o) => (o.ok ? o.value : (o.error as { code?: string }).code))).toEqual(['ERR_LEASE_IO', 'ERR_LEASE_IO']);
    expect(await bytesOf(table.recordPath(id))).toEqual(before);
    expect(await table.completeOnce(id, claim.token, { nowMs: 13 * S })).toBe('completed');
  });
});
