import { describe, expect, it } from 'vitest';
import { TaskAbortCell } from '../../src/solver/abort-cell.js';

describe('TaskAbortCell', () => {
  it('wakes a waiting worker with true when the main thread requests an abort', async () => {
    const cell = new TaskAbortCell();
    const settled = cell.whenSettled();
    expect(cell.requestAbort()).toBe(true);
    await expect(settled).resolves.toBe(true);
    expect(cell.abortRequested).toBe(true);
  });

  it('resolves false once the worker finished, and a later abort request reports it was too late', async () => {
    const cell = new TaskAbortCell();
    const settled = cell.whenSettled();
    cell.finish();
    await expect(settled).resolves.toBe(false);
    expect(cell.requestAbort()).toBe(false);
    expect(cell.abortRequested).toBe(false);
  });

  it('keeps an abort that won the race against finish', async () => {
    const cell = new TaskAbortCell();
    cell.requestAbort();
    cell.finish();
    expect(cell.abortRequested).toBe(true);
    await expect(cell.whenSettled()).resolves.toBe(true);
  });

  it('is shared: a second view of the same buffer sees the request', () => {
    const main = new TaskAbortCell();
    const worker = new TaskAbortCell(main.buffer);
    main.requestAbort();
    expect(worker.abortRequested).toBe(true);
  });
});
