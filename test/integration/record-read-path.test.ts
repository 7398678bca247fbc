// The record read path: one fstat (type and size checked before any byte is read), one read for a
// small file, whole files of any size, and non-regular files at a record path read as corrupt
// (never block, never pass).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { nodeFsLayer } from '../../src/fs/fs-layer.js';
import { readRecord } from '../../src/lease/files/record-files.js';
import { tempRoot } from '../helpers/lease-fixtures.js';

const ID = 'a'.repeat(64);

async function readWhole(file: string): Promise<Buffer> {
  const fd = await nodeFsLayer.open(file, fs.constants.O_RDONLY);
  try {
    return await nodeFsLayer.readAll(fd);
  } finally {
    await nodeFsLayer.close(fd);
  }
}

describe('record read path', () => {
  it('reads whole files of every size around the first read buffer', async () => {
    const root = await tempRoot('symfence-readpath-');
    for (const size of [0, 1, 520, 4094, 4095, 4096, 8190, 8191, 16 * 1024, 200_000]) {
      const bytes = Buffer.alloc(size);
      for (let i = 0; i < size; i += 1) bytes[i] = (i * 31 + 7) & 0xff;
      const file = path.join(root, `f${size}`);
      await writeFile(file, bytes);
      expect((await readWhole(file)).equals(bytes)).toBe(true);
    }
  });

  it('stops reading one byte past the bound it is given', async () => {
    const root = await tempRoot('symfence-readpath-');
    const file = path.join(root, 'big');
    await writeFile(file, Buffer.alloc(100_000, 7));
    const fd = await nodeFsLayer.open(file, fs.constants.O_RDONLY);
    try {
      expect((await nodeFsLayer.readAll(fd, 10_000)).length).toBe(10_001);
      expect((await nodeFsLayer.readAll(fd, 100_000)).length).toBe(100_000);
    } finally {
      await nodeFsLayer.close(fd);
    }
  });

  it('opens, checks type and size with one fstat, reads once and closes a record', async () => {
    const root = await tempRoot('symfence-readpath-');
    const file = path.join(root, `${ID}.json`);
    await writeFile(file, '{"not":"a record"}');
    const fsLayer = new FaultInjectingFsLayer();
    const read = await readRecord(fsLayer, file, ID, 'target');
    expect(read.state).toBe('corrupt');
    expect(fsLayer.calls.map((c) => c.op)).toEqual(['open', 'fstat', 'read', 'close']);
  });

  it('reads a directory at the record path as corrupt', async () => {
    const root = await tempRoot('symfence-readpath-');
    const file = path.join(root, `${ID}.json`);
    await mkdir(file);
    expect((await readRecord(nodeFsLayer, file, ID, 'target')).state).toBe('corrupt');
  });

  it('reads a FIFO at the record path as corrupt without blocking on it', async () => {
    const root = await tempRoot('symfence-readpath-');
    const file = path.join(root, `${ID}.json`);
    execFileSync('mkfifo', [file]);
    expect((await readRecord(nodeFsLayer, file, ID, 'target')).state).toBe('corrupt');
  });

  it('reads a symlink at the record path as corrupt without following it', async () => {
    const root = await tempRoot('symfence-readpath-');
    const file = path.join(root, `${ID}.json`);
    const target = path.join(root, 'elsewhere');
    await writeFile(target, '{}');
    fs.symlinkSync(target, file);
    expect((await readRecord(nodeFsLayer, file, ID, 'target')).state).toBe('corrupt');
  });
});
