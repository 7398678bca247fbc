import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AdmittedWork, CoordinatorJob, JobFeedback, SeedInput, TargetScheduler } from '../../src/coordinator/ports.js';
import { SeedWorkSource, untargetedJob } from '../../src/coordinator/seed-work-source.js';
import { AflQueueReader } from '../../src/triage/afl-queue.js';
import { makeJob, sha } from '../helpers/coordinator-fakes.js';

const dirs: string[] = [];
function queueWith(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-src-'));
  dirs.push(dir);
  for (const [name, content] of Object.entries(files)) writeFileSync(path.join(dir, name), content);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

class FakeScheduler implements TargetScheduler {
  seeds: SeedInput[] = [];
  observed: JobFeedback[] = [];
  ready: AdmittedWork[] = [];
  reopened: string[] = [];
  /** Make the next admissions throw (the shared target table failed). */
  admitError: Error | undefined;
  addSeed(seed: SeedInput): void {
    this.seeds.push(seed);
  }
  async admit(limit: number): Promise<readonly AdmittedWork[]> {
    if (this.admitError) throw this.admitError;
    return this.ready.splice(0, limit);
  }
  reopen(job: CoordinatorJob): void {
    this.reopened.push(`${job.origin} ${job.targetBranch}`);
  }
  observe(feedback: JobFeedback): void {
    this.observed.push(feedback);
  }
}

const finding = (name: string, content: string) => ({ kind: 'queue' as const, path: `/out/queue/${name}`, id: 0, sha256: sha(content) });

describe('SeedWorkSource', () => {
  it('takes findings deepest first, then seeds, then AFL’s best entries, then scheduler admissions', async () => {
    const queue = queueWith({ 'id:000000,orig:a': 'A', 'id:000001,src:000000,+cov': 'B' });
    const scheduler = new FakeScheduler();
    const targeted = { job: makeJob('t', 5n), owner: 1, targetToken: 'tok' };
    scheduler.ready.push(targeted);
    const seed: SeedInput = { path: '/seeds/s', sha256: sha('S'), depth: 0, origin: 'seed' };
    const source = new SeedWorkSource({ afl: new AflQueueReader(queue), scheduler, initialSeeds: [seed] });
    source.observe({ job: untargetedJob({ ...seed, depth: 0 }), workId: 'w0', status: 'ok', findings: [finding('d1', 'x1')] }, 0);
    source.observe({ job: untargetedJob({ ...seed, depth: 2 }), workId: 'w1', status: 'ok', findings: [finding('d3', 'x3')] }, 0);

    const taken = await source.take(10, 0);
    expect(taken.map((w) => w.job.inputPath)).toEqual([
      '/out/queue/d3',
      '/out/queue/d1',
      '/seeds/s',
      path.join(queue, 'id:000001,src:000000,+cov'),
      path.join(queue, 'id:000000,orig:a'),
      '/afl/queue/t',
    ]);
    expect(taken[5]).toBe(targeted);
    expect(taken.slice(0, 5).every((w) => w.job.group.length === 0 && w.job.targetBranch === 0n)).toBe(true);
    expect(taken.map((w) => w.job.depth)).toEqual([3, 1, 0, 0, 0, 0]);
    expect(scheduler.seeds.map((s) => s.origin)).toEqual(['feedback', 'feedback', 'seed', 'afl', 'afl']);
    expect(scheduler.observed).toHaveLength(2);
    expect(await source.take(10, 1_000)).toEqual([]);
  });

  it('gives the scheduler a quarter of the slots while fresh inputs wait, even one slot at a time', async () => {
    const scheduler = new FakeScheduler();
    for (let i = 0; i < 20; i++) scheduler.ready.push({ job: makeJob(`t${i}`, BigInt(i + 1)), owner: i + 1, targetToken: `tok${i}` });
    const seeds: SeedInput[] = Array.from({ length: 20 }, (_, i) => ({ path: `/seeds/${i}`, sha256: sha(`s${i}`), depth: 0, origin: 'seed' as const }));
    const source = new SeedWorkSource({ scheduler, initialSeeds: seeds });
    const kinds: string[] = [];
    for (let i = 0; i < 8; i++) for (const w of await source.take(1, 0)) kinds.push(w.job.group.length > 0 ? 'S' : 'f');
    expect(kinds.join('')).toBe('fffSfffS');
    // Nothing fresh left: the scheduler may fill every slot.
    await source.take(100, 0);
    for (let i = 20; i < 23; i++) scheduler.ready.push({ job: makeJob(`t${i}`, BigInt(i + 1)), owner: i + 1, targetToken: `tok${i}` });
    expect((await source.take(3, 0)).map((w) => w.job.group.length > 0)).toEqual([true, true, true]);
  });

  it('never takes more than the limit', async () => {
    const source = new SeedWorkSource({ afl: new AflQueueReader(queueWith({ 'id:000000,orig:a': 'A', 'id:000001,orig:b': 'B' })) });
    expect(await source.take(1, 0)).toHaveLength(1);
    expect(await source.take(0, 1_000)).toHaveLength(0);
    expect(await source.take(5, 2_000)).toHaveLength(1);
  });

  it('scans AFL’s queue at most once per poll interval', async () => {
    const queue = queueWith({ 'id:000000,orig:a': 'A' });
    const source = new SeedWorkSource({ afl: new AflQueueReader(queue), aflPollMs: 500 });
    expect(await source.take(5, 0)).toHaveLength(1);
    writeFileSync(path.join(queue, 'id:000001,src:000000,+cov'), 'B');
    expect(await source.take(5, 499)).toEqual([]);
    expect(await source.take(5, 500)).toHaveLength(1);
  });

  it('does not run AFL’s re-import of our own finding', async () => {
    const queue = queueWith({});
    const source = new SeedWorkSource({ afl: new AflQueueReader(queue) });
    source.observe({ job: untargetedJob({ path: '/p', sha256: sha('p'), depth: 0, origin: 'afl' }), workId: 'w', status: 'ok', findings: [finding('f', 'FOUND')] }, 0);
    expect((await source.take(5, 0)).map((w) => w.job.origin)).toEqual(['feedback']);
    writeFileSync(path.join(queue, 'id:000007,sync:symfence,src:000000'), 'FOUND');
    expect(await source.take(5, 1_000)).toEqual([]);
  });

  it('drops findings beyond the maximum depth', async () => {
    const source = new SeedWorkSource({ maxDepth: 1 });
    source.observe({ job: untargetedJob({ path: '/p', sha256: sha('p'), depth: 1, origin: 'feedback' }), workId: 'w', status: 'ok', findings: [finding('f', 'deep')] }, 0);
    expect(await source.take(5, 0)).toEqual([]);
  });

  describe('work given back after the lease store failed', () => {
    const seedOf = (name: string): SeedInput => ({ path: `/seeds/${name}`, sha256: sha(name), depth: 0, origin: 'seed' });

    it('offers an input run again after a delay that doubles per failure, up to 30 s, and forgets it once it ran', async () => {
      const source = new SeedWorkSource({ initialSeeds: [seedOf('a')] });
      const [work] = await source.take(1, 0);
      let now = 0;
      for (const delay of [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]) {
        source.giveBack(work!, now);
        expect(source.backlog).toBe(1);
        expect(await source.take(1, now + delay - 1)).toEqual([]);
        now += delay;
        const again = await source.take(1, now);
        expect(again.map((w) => w.job.inputPath)).toEqual(['/seeds/a']);
      }
      // It ran: the next failure of the same input starts again at 1 s.
      source.observe({ job: work!.job, workId: 'w', status: 'ok', findings: [] }, now);
      source.giveBack(work!, now);
      expect((await source.take(1, now + 1000)).map((w) => w.job.inputPath)).toEqual(['/seeds/a']);
    });

    it('hands a scheduler job back to the scheduler, not to the input queue', async () => {
      const scheduler = new FakeScheduler();
      const source = new SeedWorkSource({ scheduler });
      const targeted = { job: { ...makeJob('t', 5n), origin: 'scheduler:frontier' }, owner: 1, targetToken: 'tok' };
      source.giveBack(targeted, 0);
      expect(scheduler.reopened).toEqual(['scheduler:frontier 5']);
      expect(source.backlog).toBe(0);
    });

    it('keeps the inputs it took when the admission after them fails, and reports the failure at the next take', async () => {
      const scheduler = new FakeScheduler();
      const source = new SeedWorkSource({ scheduler, initialSeeds: [seedOf('a'), seedOf('b')], schedulerShare: 0 });
      scheduler.admitError = Object.assign(new Error('etcd out of space'), { code: 'ERR_LEASE_IO' });
      const taken = await source.take(4, 0);
      expect(taken.map((w) => w.job.inputPath)).toEqual(['/seeds/a', '/seeds/b']);
      await expect(source.take(4, 1)).rejects.toThrow('etcd out of space');
      scheduler.admitError = undefined;
      expect(await source.take(4, 2)).toEqual([]);
    });
  });
});
