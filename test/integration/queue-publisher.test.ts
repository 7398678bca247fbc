import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FsDirectWriter, realBarriers, type BarrierOps } from '../helpers/fs-direct-writer.js';
import { QueuePublisher } from '../../src/triage/queue-publisher.js';
import { PublishError } from '../../src/errors.js';

const dirs: string[] = [];
function tmp(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-pub-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const PARENT = '/afl/main/queue/id:000123,orig:seed';

function countingBarriers(): BarrierOps & { files: number; dirs: number; failFileAt?: number } {
  const c = {
    files: 0,
    dirs: 0,
    failFileAt: undefined as number | undefined,
    async fsyncFile(handle: { sync(): Promise<void> }) {
      c.files++;
      if (c.failFileAt === c.files) throw Object.assign(new Error('injected ENOSPC'), { code: 'ENOSPC' });
      await realBarriers.fsyncFile(handle);
    },
    async fsyncDir(dir: string) {
      c.dirs++;
      await realBarriers.fsyncDir(dir);
    },
  };
  return c;
}

describe('QueuePublisher', () => {
  it('names entries id:NNNNNN,src:<parent id> with increasing ids per directory', async () => {
    const base = tmp();
    const pub = await QueuePublisher.open(base, new FsDirectWriter());
    const first = await pub.publish([{ kind: 'queue', content: bytes('a') }, { kind: 'crashes', content: bytes('c') }], PARENT);
    const second = await pub.publish([{ kind: 'queue', content: bytes('b') }], PARENT);
    expect(first.map((e) => e && path.basename(e.path))).toEqual(['id:000000,src:000123', 'id:000000,src:000123']);
    expect(second.map((e) => e && path.basename(e.path))).toEqual(['id:000001,src:000123']);
    expect(readdirSync(path.join(base, 'queue')).sort()).toEqual(['id:000000,src:000123', 'id:000001,src:000123']);
    expect(readFileSync(path.join(base, 'queue', 'id:000001,src:000123'), 'utf8')).toBe('b');
    expect(readdirSync(path.join(base, 'hangs'))).toEqual([]);
  });

  it('resumes ids after a restart above every existing entry', async () => {
    const base = tmp();
    mkdirSync(path.join(base, 'queue'), { recursive: true });
    writeFileSync(path.join(base, 'queue', 'id:000041,src:000001'), 'old');
    writeFileSync(path.join(base, 'queue', 'notes.txt'), 'not an entry');
    const pub = await QueuePublisher.open(base, new FsDirectWriter());
    expect(pub.nextId('queue')).toBe(42);
    const [entry] = await pub.publish([{ kind: 'queue', content: bytes('new') }], 'seed-without-id');
    expect(path.basename(entry!.path)).toBe('id:000042,src:000000');
  });

  it('makes a batch durable with one file barrier per entry and one directory barrier', async () => {
    const barriers = countingBarriers();
    const pub = await QueuePublisher.open(tmp(), new FsDirectWriter(barriers));
    barriers.files = 0;
    barriers.dirs = 0;
    await pub.publish([{ kind: 'queue', content: bytes('a') }, { kind: 'queue', content: bytes('b') }], PARENT);
    expect({ files: barriers.files, dirs: barriers.dirs }).toEqual({ files: 2, dirs: 1 });
  });

  it('leaves no id: name and no staging file behind when a barrier fails, and does not consume ids', async () => {
    const base = tmp();
    const barriers = countingBarriers();
    const pub = await QueuePublisher.open(base, new FsDirectWriter(barriers));
    barriers.files = 0;
    barriers.failFileAt = 2;
    await expect(pub.publish([{ kind: 'queue', content: bytes('a') }, { kind: 'queue', content: bytes('b') }], PARENT)).rejects.toMatchObject({ code: 'ENOSPC' });
    expect(readdirSync(path.join(base, 'queue'))).toEqual([]);
    expect(pub.nextId('queue')).toBe(0);
    barriers.failFileAt = undefined;
    const [entry] = await pub.publish([{ kind: 'queue', content: bytes('a') }], PARENT);
    expect(entry!.id).toBe(0);
  });

  it('never hands out again the ids of a publication that failed after its names may have been visible', async () => {
    const base = tmp();
    const direct = new FsDirectWriter();
    let failStep: string | undefined;
    // A writer that fails like the I/O thread: names taken back, the step in the error's details.
    const writer = Object.assign(Object.create(direct) as FsDirectWriter, {
      publish: async (dir: string, files: readonly { name: string; bytes: Uint8Array }[]) => {
        if (failStep !== undefined) throw new PublishError(`publication failed during ${failStep}`, { step: failStep });
        return direct.publish(dir, files);
      },
      ensureDir: (dir: string) => direct.ensureDir(dir),
      list: (dir: string) => direct.list(dir),
    });
    const pub = await QueuePublisher.open(base, writer);
    failStep = 'file-barrier'; // before any rename: nothing was ever visible, the ids stay free
    await expect(pub.publish([{ kind: 'queue', content: bytes('a') }], PARENT)).rejects.toMatchObject({ code: 'ERR_PUBLISH' });
    expect(pub.nextId('queue')).toBe(0);
    failStep = 'directory-barrier'; // renamed, then taken back: AFL may have seen id 0 and 1
    await expect(pub.publish([{ kind: 'queue', content: bytes('a') }, { kind: 'queue', content: bytes('b') }], PARENT)).rejects.toMatchObject({ code: 'ERR_PUBLISH' });
    failStep = undefined;
    const [entry] = await pub.publish([{ kind: 'queue', content: bytes('a') }], PARENT);
    expect(entry!.id).toBe(2);
  });

  it('publishes the same content to a directory only once, also across a restart', async () => {
    const base = tmp();
    const pub = await QueuePublisher.open(base, new FsDirectWriter());
    const answers = await pub.publish([{ kind: 'queue', content: bytes('same') }, { kind: 'queue', content: bytes('same') }, { kind: 'hangs', content: bytes('same') }], PARENT);
    expect(answers.map((a) => a?.kind ?? null)).toEqual(['queue', null, 'hangs']);
    const again = await QueuePublisher.open(base, new FsDirectWriter());
    expect(await again.publish([{ kind: 'queue', content: bytes('same') }], PARENT)).toEqual([null]);
  });

  it('copies a parent file given by path', async () => {
    const base = tmp();
    const parent = path.join(base, 'id:000007,orig:crashy');
    writeFileSync(parent, 'CRASH');
    const pub = await QueuePublisher.open(path.join(base, 'out'), new FsDirectWriter());
    const [entry] = await pub.publish([{ kind: 'crashes', content: { path: parent } }], parent);
    expect(path.basename(entry!.path)).toBe('id:000000,src:000007');
    expect(readFileSync(entry!.path, 'utf8')).toBe('CRASH');
  });

  it('keeps ids strictly increasing under concurrent publish calls', async () => {
    const pub = await QueuePublisher.open(tmp(), new FsDirectWriter());
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => pub.publish([{ kind: 'queue', content: bytes(`x${i}`) }], PARENT)));
    expect(results.map((r) => r[0]!.id)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });
});
