import { describe, expect, it } from 'vitest';
import { Worker } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import {
  SymfenceError,
  InvalidOptionError,
  LeaseCorruptError,
  LockTimeoutError,
  fromErrorData,
  isErrorData,
  registeredErrorCodes,
  toErrorData,
} from '../../src/errors.js';
import { builtFile } from '../../src/util/paths.js';

describe('SymfenceError', () => {
  it('carries a stable code and details on every subclass', () => {
    const error = new LeaseCorruptError('target 88 record is corrupt', { target: '88' });
    expect(error).toBeInstanceOf(SymfenceError);
    expect(error).toBeInstanceOf(Error);
    expect(error.code).toBe('ERR_LEASE_CORRUPT');
    expect(error.name).toBe('LeaseCorruptError');
    expect(error.details).toEqual({ target: '88' });
    expect(LeaseCorruptError.code).toBe('ERR_LEASE_CORRUPT');
  });

  it('registers each code once', () => {
    const codes = registeredErrorCodes();
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) expect(code).toMatch(/^ERR_[A-Z_]+$/);
  });

  it('registers a class for every code of the union as errors.ts loads, whatever else was imported', async () => {
    // A fresh worker that imports only errors.js: registration must not depend on import order.
    const errorsUrl = pathToFileURL(builtFile('src/errors.js')).href;
    const worker = new Worker(
      `import { parentPort } from 'node:worker_threads';
       const { registeredErrorCodes, ERROR_CODES } = await import(${JSON.stringify(errorsUrl)});
       parentPort.postMessage({ registered: registeredErrorCodes(), union: [...ERROR_CODES] });`,
      { eval: true, type: 'module' } as never,
    );
    const { registered, union } = await new Promise<{ registered: string[]; union: string[] }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    expect(registered).toEqual(union.filter((code) => code !== 'ERR_SYMFENCE').sort());
    expect(registered).toEqual(expect.arrayContaining(['ERR_ETCD_UNAVAILABLE', 'ERR_LEASE_RECORD_TOO_LARGE', 'ERR_STAGED_FINDING_TOO_LARGE']));
  });

  it('exports every registered class from the package root by its name', async () => {
    const root = (await import('../../src/index.js')) as Record<string, unknown>;
    const exported = Object.values(root).filter((value): value is { code: string } => typeof value === 'function' && typeof (value as { code?: unknown }).code === 'string');
    expect(exported.map((cls) => cls.code).sort()).toEqual(registeredErrorCodes());
  });

  it.each([
    [new LeaseCorruptError('bad record', { path: '/x' }), LeaseCorruptError, 'ERR_LEASE_CORRUPT'],
    [new LockTimeoutError('lock busy'), LockTimeoutError, 'ERR_LOCK_TIMEOUT'],
    [new InvalidOptionError('bad'), InvalidOptionError, 'ERR_INVALID_OPTION'],
  ] as const)('rebuilds %s from its data', (error, cls, code) => {
    const rebuilt = fromErrorData(structuredClone(toErrorData(error)));
    expect(rebuilt).toBeInstanceOf(cls);
    expect(rebuilt.code).toBe(code);
    expect(rebuilt.message).toBe(error.message);
    expect(rebuilt.details).toEqual(error.details);
  });

  it('keeps the code of foreign errors and of non-errors', () => {
    const enoent = Object.assign(new Error('no such file'), { code: 'ENOENT' });
    const rebuilt = fromErrorData(toErrorData(enoent));
    expect(rebuilt).toBeInstanceOf(SymfenceError);
    expect(rebuilt.code).toBe('ENOENT');
    expect(toErrorData('boom')).toEqual({ code: 'ERR_INTERNAL', message: 'boom' });
    expect(toErrorData(new Error('plain')).code).toBe('ERR_INTERNAL');
  });

  it('recognises error data', () => {
    expect(isErrorData({ code: 'ERR_X', message: 'm' })).toBe(true);
    expect(isErrorData({ code: 1, message: 'm' })).toBe(false);
    expect(isErrorData(null)).toBe(false);
  });

  it('loses class and code in a plain structured clone, which is why errors travel as data', () => {
    const cloned = structuredClone(new LeaseCorruptError('x')) as Error & { code?: string };
    expect(cloned).not.toBeInstanceOf(LeaseCorruptError);
    expect(cloned.code).toBeUndefined();
  });

  it('keeps class and code across a real worker_threads round trip', async () => {
    const errorsUrl = pathToFileURL(builtFile('src/errors.js')).href;
    const worker = new Worker(
      `import { parentPort } from 'node:worker_threads';
       const { LockTimeoutError, toErrorData } = await import(${JSON.stringify(errorsUrl)});
       try { throw new LockTimeoutError('lock busy past the deadline', { id: 'abc' }); }
       catch (e) { parentPort.postMessage(toErrorData(e)); }`,
      { eval: true, type: 'module' } as never,
    );
    const data = await new Promise<unknown>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    expect(isErrorData(data)).toBe(true);
    const rebuilt = fromErrorData(data as never);
    // The worker loaded its own copy of the module graph; the registry maps the code back to ours.
    const { LockTimeoutError } = await import('../../src/errors.js');
    expect(rebuilt).toBeInstanceOf(LockTimeoutError);
    expect(rebuilt.code).toBe('ERR_LOCK_TIMEOUT');
    expect(rebuilt.details).toEqual({ id: 'abc' });
  });
});
