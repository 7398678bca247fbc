import fs from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { exists, tempRoot } from '../helpers/lease-fixtures.js';

describe('FaultInjectingFsLayer', () => {
  it('fails only the nth matching call, for the requested number of calls', async () => {
    const root = await tempRoot();
    const layer = new FaultInjectingFsLayer();
    layer.fail({ op: 'mkdir', path: 'x', nth: 2, times: 2, code: 'ENOSPC' });
    await layer.mkdir(path.join(root, 'x1'));
    await expect(layer.mkdir(path.join(root, 'x2'))).rejects.toMatchObject({ code: 'ENOSPC' });
    await expect(layer.mkdir(path.join(root, 'x3'))).rejects.toMatchObject({ code: 'ENOSPC' });
    await layer.mkdir(path.join(root, 'x4'));
    await layer.mkdir(path.join(root, 'y1'));
    expect(await exists(path.join(root, 'x2'))).toBe(false);
    expect(await exists(path.join(root, 'x4'))).toBe(true);
  });

  it("runs the operation before failing when asked to fail 'after'", async () => {
    const root = await tempRoot();
    await writeFile(path.join(root, 'a'), 'content');
    const layer = new FaultInjectingFsLayer();
    layer.fail({ op: 'rename', when: 'after' });
    await expect(layer.rename(path.join(root, 'a'), path.join(root, 'b'))).rejects.toMatchObject({ code: 'EIO' });
    expect(await exists(path.join(root, 'b'))).toBe(true);
  });

  it('counts file, filesystem and directory barriers exactly, and matches fd operations on their path', async () => {
    const root = await tempRoot();
    await mkdir(path.join(root, 'd'));
    const layer = new FaultInjectingFsLayer();
    const fd = await layer.open(path.join(root, 'd', 'f'), fs.constants.O_WRONLY | fs.constants.O_CREAT);
    await layer.writeAll(fd, Buffer.from('x'));
    await layer.fsync(fd);
    layer.fail({ op: 'fsync', path: '/d/f' });
    await expect(layer.fsync(fd)).rejects.toMatchObject({ code: 'EIO' });
    await layer.close(fd);
    await layer.syncDirectory(path.join(root, 'd'));
    expect(layer.barriers()).toEqual({ file: 1, filesystem: 0, directory: 1 });
    expect(layer.count('fsync')).toBe(2);
    expect(layer.directoryBarrierPaths).toEqual([path.join(root, 'd')]);
  });
});
