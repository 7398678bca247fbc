import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { componentLogger, createLogger, LOGGER_OPTIONS, silentLogger } from '../../src/telemetry/logger.js';

describe('logger', () => {
  it('writes JSON lines with the component to a file, synchronously', async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'symfence-log-')), 'nested', 'run.log');
    const logger = await createLogger(LOGGER_OPTIONS.resolve({ file, level: 'debug' }));
    componentLogger(logger, 'io').warn({ workId: 'abc' }, 'lease lost');
    logger.debug('detail');
    // sync destination: the bytes are on disk before the call returns, no flush needed.
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ level: 40, component: 'io', workId: 'abc', msg: 'lease lost' });
    expect(lines[1]).toMatchObject({ level: 20, msg: 'detail' });
  });

  it('respects the level', async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'symfence-log-')), 'run.log');
    const logger = await createLogger(LOGGER_OPTIONS.resolve({ file, level: 'error' }));
    logger.warn('hidden');
    logger.error('shown');
    expect(readFileSync(file, 'utf8').trim().split('\n')).toHaveLength(1);
  });

  it('provides a silent logger for embedders who pass none', () => {
    expect(silentLogger().isLevelEnabled('fatal')).toBe(false);
  });

  it('rejects an unknown level', () => {
    expect(() => LOGGER_OPTIONS.resolve({ level: 'loud' })).toThrow(/one of fatal, error/);
  });
});
