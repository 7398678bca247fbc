// The incremental AFL++ queue scan: only new names are parsed and stat'ed, at most a bounded number
// per scan, the unseen entries stay ranked between scans, and subscribers see each new entry once.
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AflQueueReader, type AflQueueEntry } from '../../src/triage/afl-queue.js';

const dirs: string[] = [];
function queueWith(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-qi-'));
  dirs.push(dir);
  for (const [name, content] of Object.entries(files)) writeFileSync(path.join(dir, name), content);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const names = (entries: readonly AflQueueEntry[]): string[] => entries.map((e) => e.name).sort();

describe('incremental AFL++ queue scan', () => {
  it('stats at most maxNewEntriesPerScan new names per scan and finds each entry once', async () => {
    const files = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`id:00000${i},orig:s${i}`, `seed${i}`]));
    const dir = queueWith({ ...files, 'README.txt': 'not an entry' });
    const reader = new AflQueueReader(dir, { maxNewEntriesPerScan: 2 });
    const found: string[] = [];
    for (let scan = 0; scan < 5; scan++) found.push(...names(await reader.scan()));
    expect(found.sort()).toEqual(Object.keys(files).sort());
    expect(reader.unseenCount).toBe(5);
    // Nothing new: a scan finds nothing, however often it runs.
    expect(await reader.scan()).toEqual([]);
  });

  it('lists the directory again only when its mtime moved or is too close to the last listing to tell', async () => {
    const dir = queueWith({ 'id:000000,orig:a': 'A' });
    const tick = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000); // a whole second, a minute ago
    const addKeepingMtime = (name: string): void => {
      writeFileSync(path.join(dir, name), name);
      utimesSync(dir, tick, tick); // as if the write fell in the listing's timestamp tick
    };
    utimesSync(dir, tick, tick);

    // Listed long after its mtime: an unchanged mtime then proves nothing was added, and the scan
    // costs one stat (a write hidden in the same tick is, deliberately here, not seen).
    const settled = new AflQueueReader(dir);
    expect(names(await settled.scan(tick.getTime() + 5_000))).toEqual(['id:000000,orig:a']);
    addKeepingMtime('id:000001,src:000000');
    expect(await settled.scan(tick.getTime() + 6_000)).toEqual([]);

    // Listed within the racy window of its mtime: listed again, and the entry is found.
    const racy = new AflQueueReader(dir);
    expect(names(await racy.scan(tick.getTime() + 100))).toEqual(['id:000000,orig:a', 'id:000001,src:000000']);
    addKeepingMtime('id:000002,src:000000');
    expect(names(await racy.scan(tick.getTime() + 200))).toEqual(['id:000002,src:000000']);

    // A moved mtime is always listed.
    writeFileSync(path.join(dir, 'id:000003,src:000000'), 'D');
    expect(names(await settled.scan())).toEqual(['id:000001,src:000000', 'id:000002,src:000000', 'id:000003,src:000000']);
  });

  it('keeps unseen entries ranked across scans: a later +cov entry runs before earlier plain ones', async () => {
    const dir = queueWith({ 'id:000000,src:000000,op:havoc': 'xx', 'id:000001,src:000000,op:havoc': 'yy' });
    const reader = new AflQueueReader(dir);
    await reader.scan();
    writeFileSync(path.join(dir, 'id:000002,src:000001,op:flip1,+cov'), 'zzzzzz');
    const picked = await reader.next(3);
    expect(picked.map((p) => p.entry.name)).toEqual(['id:000002,src:000001,op:flip1,+cov', 'id:000001,src:000000,op:havoc', 'id:000000,src:000000,op:havoc']);
  });

  it('tells subscribers about each new entry once, handed out or not, and stops after unsubscribing', async () => {
    const dir = queueWith({ 'id:000000,orig:a': 'A', 'id:000001,orig:b': 'B' });
    const reader = new AflQueueReader(dir);
    const seen: string[] = [];
    const unsubscribe = reader.onNewEntries((entries) => seen.push(...names(entries)));
    reader.onNewEntries(() => {
      throw new Error('a broken listener');
    });
    expect(await reader.next(1)).toHaveLength(1);
    expect(seen).toEqual(['id:000000,orig:a', 'id:000001,orig:b']);
    writeFileSync(path.join(dir, 'id:000002,src:000000'), 'C');
    await reader.next(0); // limit 0 scans nothing
    await reader.scan();
    expect(seen).toEqual(['id:000000,orig:a', 'id:000001,orig:b', 'id:000002,src:000000']);
    unsubscribe();
    writeFileSync(path.join(dir, 'id:000003,src:000000'), 'D');
    await reader.scan();
    expect(seen).toHaveLength(3);
  });

  it('skips directories and hidden staging files, and fails with ERR_AFL when the queue is gone', async () => {
    const dir = queueWith({ '.symfence-publish-1-1.tmp': 'partial', 'id:000001,orig:a': 'a' });
    mkdirSync(path.join(dir, 'id:000002,orig:dir'));
    const reader = new AflQueueReader(dir);
    expect(names(await reader.scan())).toEqual(['id:000001,orig:a']);
    rmSync(dir, { recursive: true });
    await expect(reader.scan()).rejects.toMatchObject({ code: 'ERR_AFL' });
  });
});
