// Durable queue publication through the I/O service: content before names, names before answers,
// and no `id:` name without its complete content under a fault at any step.
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FaultInjectingFsLayer, type FaultRule } from '../../src/fs/fault-fs-layer.js';
import { IoService } from '../../src/io/io-service.js';
import { IoDurableWriter } from '../../src/io/io-adapters.js';
import { loadNative } from '../../src/native/bindings.js';
import { tempRoot } from '../helpers/lease-fixtures.js';

const hasNative = loadNative() !== null;

async function setup(fileBarrier: 'fsync' | 'syncfs' = 'fsync') {
  const root = await tempRoot('symfence-io-pub-');
  const fsLayer = new FaultInjectingFsLayer();
  const service = await IoService.start({ coordinatorId: 'coord-a', fsLayer, options: { fileBarrier } }, 0);
  const writer = new IoDurableWriter({
    ensureDir: (dir) => service.submit({ kind: 'ensureDir', dir }),
    listDir: (dir) => service.submit({ kind: 'listDir', dir }),
    publishFiles: (dir, files) => service.submit({ kind: 'publishFiles', dir, files }),
  });
  const queue = path.join(root, 'out', 'symfence', 'queue');
  await writer.ensureDir(queue);
  return { root, queue, fsLayer, service, writer };
}

const files = [
  { name: 'id:000000,src:000003', bytes: Buffer.from('first input bytes') },
  { name: 'id:000001,src:000003', bytes: Buffer.from('second, a little longer input') },
];

describe('queue publication through the I/O service', () => {
  it('creates the directory tree durably and publishes complete files under their final names', async () => {
    const { queue, writer, fsLayer, service } = await setup();
    expect(await writer.list(queue)).toEqual([]);
    fsLayer.resetCounts();
    await writer.publish(queue, files);
    expect((await readdir(queue)).sort()).toEqual(files.map((f) => f.name));
    for (const file of files) expect(await readFile(path.join(queue, file.name))).toEqual(file.bytes);
    // Two parallel fsyncs before any rename, then one directory barrier.
    expect(fsLayer.barriers()).toEqual({ file: 2, filesystem: 0, directory: 1 });
    const order = fsLayer.calls.map((c) => c.op).filter((op) => op === 'fsync' || op === 'rename' || op === 'syncDirectory');
    expect(order).toEqual(['fsync', 'fsync', 'rename', 'rename', 'syncDirectory']);
    expect(fsLayer.calls.filter((c) => c.op === 'rename').map((c) => path.basename(c.path))).toEqual(files.map((f) => f.name));
    await service.close();
  });

  it.skipIf(!hasNative)('shares one syncfs among the publications of a batch', async () => {
    const { root, queue, writer, fsLayer, service } = await setup('syncfs');
    const crashes = path.join(root, 'out', 'symfence', 'crashes');
    await writer.ensureDir(crashes);
    fsLayer.resetCounts();
    await Promise.all([writer.publish(queue, files), writer.publish(crashes, [{ name: 'id:000000,sig:11', bytes: Buffer.from('boom') }])]);
    expect(fsLayer.barriers()).toEqual({ file: 0, filesystem: 1, directory: 2 });
    await service.close();
  });

  it('refuses to publish over an existing name, writing nothing', async () => {
    const { queue, writer, service } = await setup();
    await writer.publish(queue, [files[0]!]);
    await expect(writer.publish(queue, [files[1]!, { name: files[0]!.name, bytes: Buffer.from('other') }])).rejects.toMatchObject({ code: 'ERR_PUBLISH' });
    expect(await readdir(queue)).toEqual([files[0]!.name]);
    expect(await readFile(path.join(queue, files[0]!.name))).toEqual(files[0]!.bytes);
    await expect(writer.publish(queue, [{ name: '.hidden', bytes: Buffer.from('x') }])).rejects.toMatchObject({ code: 'ERR_PUBLISH' });
    await expect(writer.publish(queue, [{ name: 'a/b', bytes: Buffer.from('x') }])).rejects.toMatchObject({ code: 'ERR_PUBLISH' });
    await service.close();
  });

  const faults: { step: string; rule: FaultRule }[] = [
    { step: 'temp write', rule: { op: 'write', nth: 2 } },
    { step: 'file barrier', rule: { op: 'fsync', nth: 2 } },
    { step: 'close of a temp', rule: { op: 'close' } },
    { step: 'second rename', rule: { op: 'rename', nth: 2 } },
    { step: 'rename that took effect but reported failure', rule: { op: 'rename', nth: 1, when: 'after' } },
    { step: 'directory barrier', rule: { op: 'syncDirectory' } },
  ];
  for (const { step, rule } of faults) {
    it(`leaves no id: name and no temp file behind after a fault at the ${step}`, async () => {
      const { queue, writer, fsLayer, service } = await setup();
      fsLayer.fail(rule);
      await expect(writer.publish(queue, files)).rejects.toMatchObject({ code: 'ERR_PUBLISH' });
      fsLayer.clearRules();
      expect(await readdir(queue)).toEqual([]);
      // A retry then publishes normally.
      await writer.publish(queue, files);
      expect((await readdir(queue)).sort()).toEqual(files.map((f) => f.name));
      await service.close();
    });
  }

  it('has every temp complete on disk when its name is published', async () => {
    const { queue, writer, fsLayer, service } = await setup();
    const seen: Buffer[] = [];
    fsLayer.hook({ op: 'rename', nth: 1, run: async () => {
      const temps = (await readdir(queue)).filter((n) => n.startsWith('.symfence-io-')).sort();
      for (const temp of temps) seen.push(await readFile(path.join(queue, temp)));
    } });
    await writer.publish(queue, files);
    expect(seen.map((b) => b.toString()).sort()).toEqual(files.map((f) => f.bytes.toString()).sort());
    await service.close();
  });
});
