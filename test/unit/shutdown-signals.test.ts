import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { installShutdownSignals, type SignalProcess } from '../../src/cli/shutdown-signals.js';

function fakeProcess() {
  const emitter = new EventEmitter();
  const exits: number[] = [];
  const proc: SignalProcess = {
    on: (e, l) => emitter.on(e, l),
    off: (e, l) => emitter.off(e, l),
    exit: (code) => void exits.push(code),
  };
  return { emitter, exits, proc };
}

describe('shutdown signals', () => {
  it('stops cleanly on the first signal and forces exit on the second', async () => {
    const { emitter, exits, proc } = fakeProcess();
    let stops = 0;
    const lines: string[] = [];
    installShutdownSignals(() => void stops++, (l) => lines.push(l), proc);
    emitter.emit('SIGTERM');
    await Promise.resolve();
    expect(stops).toBe(1);
    expect(exits).toEqual([]);
    emitter.emit('SIGINT');
    expect(exits).toEqual([130]);
    expect(stops).toBe(1);
    expect(lines).toHaveLength(2);
  });

  it('removes its handlers when uninstalled', () => {
    const { emitter, proc } = fakeProcess();
    const uninstall = installShutdownSignals(() => {}, () => {}, proc);
    expect(emitter.listenerCount('SIGINT')).toBe(1);
    uninstall();
    expect(emitter.listenerCount('SIGINT') + emitter.listenerCount('SIGTERM')).toBe(0);
  });

  it('survives a stop function that rejects', async () => {
    const { emitter, exits, proc } = fakeProcess();
    installShutdownSignals(() => Promise.reject(new Error('boom')), () => {}, proc);
    emitter.emit('SIGINT');
    await new Promise((r) => setImmediate(r));
    expect(exits).toEqual([]);
  });
});
