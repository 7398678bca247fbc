// The I/O service's commit requests: content-addressed staging (existing names kept, the directory
// barrier still issued), fenced publication (published and done under the record's lock only while
// committing with the token; nothing published otherwise; a failed publication leaves no name and
// the record committing), and removal of staged files.
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { IoService } from '../../src/io/io-service.js';
import { codeOfAsync } from '../helpers/error-code.js';
import { ID_A0, openWork, S, tempRoot } from '../helpers/lease-fixtures.js';

async function setup() {
  const root = await tempRoot('symfence-io-commit-');
  const fsLayer = new FaultInjectingFsLayer();
  const work = await openWork(path.join(root, 'work'), { fileBarrier: 'fsync' }, { fsLayer });
  const service = await IoService.start({ coordinatorId: 'me', work, fsLayer, options: { fileBarrier: 'fsync' } }, 0);
  return { root, fsLayer, work, service };
}

async function committing(work: Awaited<ReturnType<typeof openWork>>): Promise<string> {
  const claim = await work.claim(ID_A0, { input: 'x' }, { owner: 'me', nowMs: 1 * S });
  if (!claim.ok) throw new Error('claim refused');
  expect((await work.beginCommit(ID_A0, claim.token, { nowMs: 2 * S, commit: { schema: 'test' } })).ok).toBe(true);
  return claim.token;
}

const files = [{ name: 'id:000000,src:000001', bytes: Buffer.from('finding') }];

describe('I/O commit requests', () => {
  it('stages into a new directory durably, keeps existing names and still barriers the directory', async () => {
    const { root, fsLayer, service } = await setup();
    const staged = path.join(root, 'staged');
    await service.submit({ kind: 'stageFiles', dir: staged, files: [{ name: 'a', bytes: Buffer.from('one') }] });
    expect(await readFile(path.join(staged, 'a'), 'utf8')).toBe('one');
    fsLayer.resetCounts();
    await service.submit({ kind: 'stageFiles', dir: staged, files: [{ name: 'a', bytes: Buffer.from('one') }, { name: 'b', bytes: Buffer.from('two') }] });
    expect((await readdir(staged)).sort()).toEqual(['a', 'b']);
    expect(fsLayer.barriers()).toEqual({ file: 1, filesystem: 0, directory: 1 });
    fsLayer.resetCounts();
    await service.submit({ kind: 'stageFiles', dir: staged, files: [{ name: 'a', bytes: Buffer.from('one') }] });
    expect(fsLayer.barriers()).toEqual({ file: 0, filesystem: 0, directory: 1 });
    expect(await service.submit({ kind: 'removeFiles', dir: staged, names: ['a', 'missing'] })).toBe(1);
    expect(await readdir(staged)).toEqual(['b']);
    await service.close();
  });

  it('publishes and completes a committing record with its token, then answers already without publishing again', async () => {
    const { root, work, service } = await setup();
    const token = await committing(work);
    const queue = path.join(root, 'out', 'queue');
    await service.submit({ kind: 'ensureDir', dir: queue });
    expect(await service.submit({ kind: 'publishCommitted', workId: ID_A0, token, publications: [{ dir: queue, files }], nowMs: 3 * S })).toBe('completed');
    expect(await readdir(queue)).toEqual([files[0]!.name]);
    expect((await work.snapshotRecords())[0]!.record).toMatchObject({ status: 'done', completedMs: 3 * S });
    const again = [{ name: 'id:000001,src:000001', bytes: Buffer.from('finding') }];
    expect(await service.submit({ kind: 'publishCommitted', workId: ID_A0, token, publications: [{ dir: queue, files: again }], nowMs: 4 * S })).toBe('already');
    expect(await readdir(queue)).toEqual([files[0]!.name]);
    await service.close();
  });

  it('publishes nothing for a stale token', async () => {
    const { root, work, service } = await setup();
    await committing(work);
    const queue = path.join(root, 'out', 'queue');
    await service.submit({ kind: 'ensureDir', dir: queue });
    expect(await service.submit({ kind: 'publishCommitted', workId: ID_A0, token: 'me:0:1:1:ffff', publications: [{ dir: queue, files }], nowMs: 3 * S })).toBe('stale');
    expect(await readdir(queue)).toEqual([]);
    expect((await work.snapshotRecords())[0]!.record.status).toBe('committing');
    await service.close();
  });

  it('leaves no published name and the record committing when the publication fails', async () => {
    const { root, fsLayer, work, service } = await setup();
    const token = await committing(work);
    const queue = path.join(root, 'out', 'queue');
    await service.submit({ kind: 'ensureDir', dir: queue });
    fsLayer.fail({ op: 'syncDirectory', path: (p) => p.endsWith('/queue') });
    expect(await codeOfAsync(service.submit({ kind: 'publishCommitted', workId: ID_A0, token, publications: [{ dir: queue, files }], nowMs: 3 * S }))).toBe('ERR_PUBLISH');
    expect((await readdir(queue)).filter((n) => !n.startsWith('.'))).toEqual([]);
    expect((await work.snapshotRecords())[0]!.record.status).toBe('committing');
    // Retried later, it goes through.
    expect(await service.submit({ kind: 'publishCommitted', workId: ID_A0, token, publications: [{ dir: queue, files }], nowMs: 5 * S })).toBe('completed');
    await service.close();
  });
});
