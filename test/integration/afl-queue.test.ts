import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AflQueueReader, parseAflCommandLine, readAflTargetCommand } from '../../src/triage/afl-queue.js';

const dirs: string[] = [];
function queueWith(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-q-'));
  dirs.push(dir);
  for (const [name, content] of Object.entries(files)) writeFileSync(path.join(dir, name), content);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('AFL queue ranking', () => {
  it('prefers +cov, then orig:, then smaller, then newer entries', async () => {
    const dir = queueWith({
      'id:000000,orig:big': 'xxxxxxxxxx',
      'id:000001,orig:small': 'xx',
      'id:000002,src:000000,op:havoc': 'x',
      'id:000003,src:000001,op:havoc': 'y',
      'id:000004,src:000001,op:flip1,+cov': 'xxxxxxxxxxxxxxx',
      'id:000005,src:000001,op:flip1,+cov': 'xxxxx',
    });
    const ranked = (await new AflQueueReader(dir).next(10)).map((p) => p.entry.parsed.id);
    expect(ranked).toEqual([5, 4, 1, 0, 3, 2]);
  });

  it('lists only id: regular files, skipping staging files and directories', async () => {
    const dir = queueWith({ 'id:000001,orig:a': 'a', '.symfence-publish-1-1.tmp': 'partial', 'README.txt': 'r' });
    mkdirSync(path.join(dir, 'id:000002,orig:dir'));
    expect((await new AflQueueReader(dir).scan()).map((e) => e.name)).toEqual(['id:000001,orig:a']);
  });

  it('fails with ERR_AFL when the queue directory is missing', async () => {
    await expect(new AflQueueReader('/nonexistent/queue').scan()).rejects.toMatchObject({ code: 'ERR_AFL' });
  });
});

describe('AflQueueReader', () => {
  it('never hands out the same path or the same content twice', async () => {
    const dir = queueWith({ 'id:000000,orig:a': 'AAAA', 'id:000001,orig:b': 'BBBB' });
    const reader = new AflQueueReader(dir);
    const first = await reader.next(1);
    expect(first.map((p) => p.entry.name)).toEqual(['id:000001,orig:b']);
    // AFL imports a copy of b from a peer: same content, new name.
    writeFileSync(path.join(dir, 'id:000002,sync:symfence,src:000001'), 'BBBB');
    const second = await reader.next(10);
    expect(second.map((p) => p.entry.name)).toEqual(['id:000000,orig:a']);
    expect(await reader.next(10)).toEqual([]);
  });

  it('skips content marked as already handled', async () => {
    const dir = queueWith({ 'id:000000,orig:a': 'AAAA' });
    const reader = new AflQueueReader(dir);
    const [picked] = await new AflQueueReader(dir).next(1);
    reader.markSeenDigest(picked!.sha256);
    expect(await reader.next(1)).toEqual([]);
  });
});

describe('AFL target command', () => {
  it('takes everything after the first -- and detects file input and QEMU mode', () => {
    expect(parseAflCommandLine('/usr/bin/afl-fuzz -i in -o out -M main -- ./maze @@')).toEqual({ argv: ['./maze', '@@'], fileInput: true, qemu: false });
    expect(parseAflCommandLine('afl-fuzz -Q -i in -o out -- ./bin --flag')).toEqual({ argv: ['./bin', '--flag'], fileInput: false, qemu: true });
  });

  it('rejects a command line without a target after --', () => {
    expect(() => parseAflCommandLine('afl-fuzz -i in -o out ./maze')).toThrow(expect.objectContaining({ code: 'ERR_AFL' }));
    expect(() => parseAflCommandLine('afl-fuzz -i in --')).toThrow(expect.objectContaining({ code: 'ERR_AFL' }));
  });

  it('reads command_line from fuzzer_stats', async () => {
    const dir = queueWith({ fuzzer_stats: 'start_time        : 1\ncommand_line      : afl-fuzz -i in -o out -M m -- /t/maze @@\nexecs_done : 5\n' });
    expect((await readAflTargetCommand(dir)).argv).toEqual(['/t/maze', '@@']);
  });

  it('fails with ERR_AFL when fuzzer_stats is missing or has no command_line', async () => {
    await expect(readAflTargetCommand(queueWith({}))).rejects.toMatchObject({ code: 'ERR_AFL' });
    await expect(readAflTargetCommand(queueWith({ fuzzer_stats: 'x : 1\n' }))).rejects.toMatchObject({ code: 'ERR_AFL' });
  });
});
