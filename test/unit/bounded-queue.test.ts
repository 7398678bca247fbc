import { describe, expect, it } from 'vitest';
import { BoundedQueue } from '../../src/io/bounded-queue.js';
import { createBatchAdmitter } from '../../src/io/batch-planner.js';

describe('BoundedQueue', () => {
  it('makes producers wait while full and lets them in as the consumer takes', async () => {
    const queue = new BoundedQueue<number>(2);
    await queue.push(1);
    await queue.push(2);
    let thirdIn = false;
    const third = queue.push(3).then(() => (thirdIn = true));
    await Promise.resolve();
    expect(thirdIn).toBe(false);
    expect(queue.length).toBe(2);
    expect(queue.take()).toEqual([1, 2]);
    await third;
    expect(thirdIn).toBe(true);
    expect(queue.take()).toEqual([3]);
  });

  it('never holds more than its capacity under a burst', async () => {
    const queue = new BoundedQueue<number>(4);
    const pushes = Array.from({ length: 50 }, (_, i) => queue.push(i));
    const seen: number[] = [];
    while (seen.length < 50) {
      expect(queue.length).toBeLessThanOrEqual(4);
      await queue.waitForItems();
      seen.push(...queue.take());
      await Promise.resolve();
    }
    await Promise.all(pushes);
    expect(seen).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  it('keeps the items the predicate refuses, in order', async () => {
    const queue = new BoundedQueue<number>(10);
    for (const n of [1, 2, 3, 4, 5]) await queue.push(n);
    expect(queue.take((n) => n % 2 === 0)).toEqual([2, 4]);
    expect(queue.take()).toEqual([1, 3, 5]);
  });

  it('wakes a waiting consumer on push', async () => {
    const queue = new BoundedQueue<string>(1);
    const woken = queue.waitForItems();
    await queue.push('a');
    await woken;
    expect(queue.take()).toEqual(['a']);
  });

  it('rejects waiting producers and later pushes with ERR_QUEUE_CLOSED once closed', async () => {
    const queue = new BoundedQueue<number>(1);
    await queue.push(1);
    const blocked = queue.push(2);
    queue.close();
    await expect(blocked).rejects.toMatchObject({ code: 'ERR_QUEUE_CLOSED' });
    await expect(queue.push(3)).rejects.toMatchObject({ code: 'ERR_QUEUE_CLOSED' });
    expect(queue.take()).toEqual([1]);
    await expect(queue.waitForItems()).rejects.toMatchObject({ code: 'ERR_QUEUE_CLOSED' });
  });

  it('rejects a bad capacity', () => {
    expect(() => new BoundedQueue(0)).toThrow(RangeError);
  });
});

describe('batch admission', () => {
  const keys = (item: { keys: string[] }) => item.keys;

  it('holds back a request overlapping one already in the batch', () => {
    const admit = createBatchAdmitter(keys, 100);
    expect(admit({ keys: ['a', 'b'] })).toBe(true);
    expect(admit({ keys: ['b', 'c'] })).toBe(false);
    expect(admit({ keys: ['d'] })).toBe(true);
  });

  it('never lets a request overtake a held-back request on the same record', () => {
    const admit = createBatchAdmitter(keys, 100);
    expect(admit({ keys: ['a'] })).toBe(true);
    expect(admit({ keys: ['a', 'x'] })).toBe(false);
    // 'x' does not overlap the batch, but it overlaps the held-back request: it must wait too.
    expect(admit({ keys: ['x'] })).toBe(false);
    expect(admit({ keys: ['y'] })).toBe(true);
  });

  it('caps the batch size', () => {
    const admit = createBatchAdmitter(keys, 2);
    expect([admit({ keys: ['a'] }), admit({ keys: ['b'] }), admit({ keys: ['c'] })]).toEqual([true, true, false]);
  });

  it('admits requests that touch no record (untargeted) freely', () => {
    const admit = createBatchAdmitter(keys, 10);
    expect(admit({ keys: [] })).toBe(true);
    expect(admit({ keys: [] })).toBe(true);
  });
});
