import { describe, expect, it } from 'vitest';
import { classifyExit } from '../../src/solver/exit-classification.js';

describe('classifyExit', () => {
  it.each(['SIGSEGV', 'SIGABRT', 'SIGBUS', 'SIGFPE', 'SIGILL', 'SIGTRAP'])('treats a direct %s as a crash', (signal) => {
    expect(classifyExit(null, signal, false)).toEqual({ kind: 'crash', fatalSignal: signal });
  });

  it.each([
    [139, 'SIGSEGV'],
    [134, 'SIGABRT'],
    [135, 'SIGBUS'],
    [136, 'SIGFPE'],
    [132, 'SIGILL'],
    [133, 'SIGTRAP'],
  ])('treats exit code %i (128+n from a wrapper) as a crash by %s', (code, signal) => {
    expect(classifyExit(code, null, false)).toEqual({ kind: 'crash', fatalSignal: signal });
  });

  it('lets our own timer win over whatever signal ended the process', () => {
    expect(classifyExit(null, 'SIGKILL', true)).toEqual({ kind: 'timeout' });
    expect(classifyExit(null, 'SIGSEGV', true)).toEqual({ kind: 'timeout' });
  });

  it('never treats SIGTERM, SIGKILL, SIGINT or their 128+n codes as crashes', () => {
    for (const signal of ['SIGTERM', 'SIGKILL', 'SIGINT']) expect(classifyExit(null, signal, false).kind).toBe('normal');
    for (const code of [143, 137, 130, 124]) expect(classifyExit(code, null, false).kind).toBe('normal');
  });

  it('reports exit 255 as the runtime refusing to run', () => {
    expect(classifyExit(255, null, false)).toEqual({ kind: 'runtime-refused' });
  });

  it('treats ordinary exit codes, zero or not, as a normal completion', () => {
    expect(classifyExit(0, null, false).kind).toBe('normal');
    expect(classifyExit(1, null, false).kind).toBe('normal');
  });
});
