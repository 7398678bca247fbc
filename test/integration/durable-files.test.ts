import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { barrierFiles, createTempFile, replaceFileDurably, writeFileAtomic, writeFileAtomicSync, writeFileDurably } from '../../src/fs/durable-files.js';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';

const dirs: string[] = [];
function tmp(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-durable-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);

describe('durable-file steps', () => {
  it('replaces a file only after its new content passed a file barrier', async () => {
    const dir = tmp();
    const final = path.join(dir, 'record');
    writeFileSync(final, 'old');
    const fsLayer = new FaultInjectingFsLayer();
    let fileBarriersAtRename = -1;
    fsLayer.hook({ op: 'rename', run: () => void (fileBarriersAtRename = fsLayer.barriers().file) });
    await replaceFileDurably(fsLayer, path.join(dir, '.record.tmp'), final, bytes('new'));
    expect(fileBarriersAtRename).toBe(1);
    expect(readFileSync(final, 'utf8')).toBe('new');
    expect(readdirSync(dir)).toEqual(['record']);
  });

  it('leaves the exact previous bytes and no temp when the file barrier fails', async () => {
    const dir = tmp();
    const final = path.join(dir, 'record');
    writeFileSync(final, 'previous bytes');
    const fsLayer = new FaultInjectingFsLayer();
    fsLayer.fail({ op: 'fsync', code: 'EIO' });
    await expect(replaceFileDurably(fsLayer, path.join(dir, '.record.tmp'), final, bytes('new'))).rejects.toMatchObject({ code: 'EIO' });
    expect(readFileSync(final, 'utf8')).toBe('previous bytes');
    expect(readdirSync(dir)).toEqual(['record']);
  });

  it('removes a temp whose write failed, and never touches a name another writer created', async () => {
    const dir = tmp();
    const fsLayer = new FaultInjectingFsLayer();
    fsLayer.fail({ op: 'write', code: 'ENOSPC' });
    await expect(createTempFile(fsLayer, path.join(dir, '.a.tmp'), bytes('a'))).rejects.toMatchObject({ code: 'ENOSPC' });
    expect(readdirSync(dir)).toEqual([]);
    writeFileSync(path.join(dir, '.b.tmp'), 'theirs');
    await expect(createTempFile(fsLayer, path.join(dir, '.b.tmp'), bytes('mine'))).rejects.toMatchObject({ code: 'EEXIST' });
    expect(readFileSync(path.join(dir, '.b.tmp'), 'utf8')).toBe('theirs');
  });

  it('reports a failed fsync pass after every barrier settled, counting one barrier per file', async () => {
    const dir = tmp();
    const fsLayer = new FaultInjectingFsLayer();
    const fds = [await createTempFile(fsLayer, path.join(dir, '.a.tmp'), bytes('a')), await createTempFile(fsLayer, path.join(dir, '.b.tmp'), bytes('b'))];
    fsLayer.fail({ op: 'fsync', path: '.a.tmp', code: 'EIO' });
    const pass = await barrierFiles(fsLayer, 'fsync', fds);
    expect(pass.barriers).toBe(2);
    expect(pass.failure?.reason).toMatchObject({ code: 'EIO' });
    expect(fsLayer.count('fsync')).toBe(2);
    for (const fd of fds) await fsLayer.close(fd);
  });
});

describe('single-file writes', () => {
  it('writeFileDurably syncs the directory only after the rename, and keeps the old bytes and no temp when a barrier fails', async () => {
    const dir = tmp();
    const final = path.join(dir, 'state.json');
    writeFileSync(final, 'old');
    const fsLayer = new FaultInjectingFsLayer();
    let renamedAtDirectoryBarrier = false;
    fsLayer.hook({ op: 'syncDirectory', run: () => void (renamedAtDirectoryBarrier = readFileSync(final, 'utf8') === 'new') });
    await writeFileDurably(fsLayer, final, bytes('new'));
    expect(renamedAtDirectoryBarrier).toBe(true);
    expect(fsLayer.barriers()).toMatchObject({ file: 1, directory: 1 });
    expect(readdirSync(dir)).toEqual(['state.json']);

    fsLayer.fail({ op: 'fsync', code: 'EIO' });
    await expect(writeFileDurably(fsLayer, final, bytes('newer'))).rejects.toMatchObject({ code: 'EIO' });
    expect(readFileSync(final, 'utf8')).toBe('new');
    expect(readdirSync(dir)).toEqual(['state.json']);
  });

  it('writeFileDurably writes a text as UTF-8 in chunks, never splitting a surrogate pair, and keeps the old bytes when a later chunk fails', async () => {
    const dir = tmp();
    const final = path.join(dir, 'report.html');
    writeFileSync(final, 'old');
    // The first chunk (2^20 code units) would end between the two halves of U+1F600.
    const text = `${'a'.repeat((1 << 20) - 1)}\u{1F600}é${'b'.repeat(1 << 20)}\u{1F600}`;
    const fsLayer = new FaultInjectingFsLayer();
    await writeFileDurably(fsLayer, final, text);
    expect(readFileSync(final).equals(Buffer.from(text, 'utf8'))).toBe(true);
    expect(fsLayer.count('write')).toBe(3);
    expect(readdirSync(dir)).toEqual(['report.html']);

    fsLayer.fail({ op: 'write', nth: 2, code: 'ENOSPC' });
    await expect(writeFileDurably(fsLayer, final, `${text}more`)).rejects.toMatchObject({ code: 'ENOSPC' });
    expect(readFileSync(final).equals(Buffer.from(text, 'utf8'))).toBe(true);
    expect(readdirSync(dir)).toEqual(['report.html']);
  });

  it('writeFileAtomicSync replaces the content whole and leaves no temp, also when the rename fails', () => {
    const dir = tmp();
    const final = path.join(dir, 'stats.json');
    writeFileSync(final, 'old');
    writeFileAtomicSync(final, 'new');
    expect(readFileSync(final, 'utf8')).toBe('new');
    expect(readdirSync(dir)).toEqual(['stats.json']);
    // A directory in the way: the rename fails, the temp goes, nothing else changes.
    const blocked = path.join(dir, 'blocked');
    mkdirSync(path.join(blocked, 'child'), { recursive: true });
    expect(() => writeFileAtomicSync(blocked, 'x')).toThrow();
    expect(readdirSync(dir).sort()).toEqual(['blocked', 'stats.json']);
  });

  it('writeFileAtomic does the same off the caller\'s thread', async () => {
    const dir = tmp();
    const final = path.join(dir, 'stats.json');
    writeFileSync(final, 'old');
    await writeFileAtomic(final, 'new');
    expect(readFileSync(final, 'utf8')).toBe('new');
    expect(readdirSync(dir)).toEqual(['stats.json']);
    const blocked = path.join(dir, 'blocked');
    mkdirSync(path.join(blocked, 'child'), { recursive: true });
    await expect(writeFileAtomic(blocked, 'x')).rejects.toMatchObject({ code: expect.stringMatching(/^E/) });
    expect(readdirSync(dir).sort()).toEqual(['blocked', 'stats.json']);
  });
});

