import { describe, expect, it } from 'vitest';
import { DispatchTransaction } from '../../src/coordinator/dispatch-transaction.js';

function threeUndos(log: string[]): DispatchTransaction {
  const tx = new DispatchTransaction();
  tx.register('first', () => void log.push('before first'), () => void log.push('after first'));
  tx.register('middle', () => {
    log.push('before middle');
    throw new Error('undo failed');
  }, () => {
    log.push('after middle');
    throw new Error('undo failed');
  });
  tx.register('last', async () => void log.push('before last'), async () => void log.push('after last'));
  return tx;
}

describe('DispatchTransaction', () => {
  it('rolls a sent transaction back with the after-send undos, newest first, past a failing one', async () => {
    const log: string[] = [];
    const tx = threeUndos(log);
    tx.markSent();
    expect(await tx.rollback()).toEqual({ attempted: 3, failed: ['middle'] });
    expect(log).toEqual(['after last', 'after middle', 'after first']);
    expect(tx.state).toBe('rolled-back');
  });

  it('does nothing on a second rollback', async () => {
    const log: string[] = [];
    const tx = threeUndos(log);
    await tx.rollback();
    log.length = 0;
    expect(await tx.rollback()).toEqual({ attempted: 0, failed: [] });
    expect(log).toEqual([]);
  });

  it('uses the before-send undos while the job was not sent', async () => {
    const log: string[] = [];
    const tx = threeUndos(log);
    await tx.rollback();
    expect(log).toEqual(['before last', 'before middle', 'before first']);
  });

  it('falls back to the before-send undo when no after-send undo was given', async () => {
    const log: string[] = [];
    const tx = new DispatchTransaction();
    tx.register('only', () => void log.push('only'));
    tx.markSent();
    await tx.rollback();
    expect(log).toEqual(['only']);
  });

  it('does nothing when rolled back after commit', async () => {
    const log: string[] = [];
    const tx = threeUndos(log);
    tx.markSent();
    tx.commit();
    expect(await tx.rollback()).toEqual({ attempted: 0, failed: [] });
    expect(log).toEqual([]);
  });

  it('refuses registrations after it was finished', async () => {
    const tx = new DispatchTransaction();
    tx.commit();
    expect(() => tx.register('late', () => {})).toThrow();
  });
});
