import { describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { childLogger, componentLogger, createLogger, LOGGER_OPTIONS, silentLogger, type Logger } from '../../src/telemetry/logger.js';
import { findDuplicateKeys } from '../helpers/strict-json.js';

/** A pino logger writing into an array of lines. */
function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...String(chunk).split('\n').filter((l) => l !== ''));
      done();
    },
  });
  return { logger: pino({ level: 'info', base: { pid: 7 } }, sink) as Logger, lines };
}

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

  it('nests a component under its parent component as a dotted path, binding the key once', () => {
    const { logger, lines } = capturingLogger();
    const campaign = componentLogger(logger, 'campaign', { coordinator: 'h:1' });
    const job = childLogger(componentLogger(campaign, 'coordinator'), { workId: 'w1', targets: ['3'] });
    job.info('finished');
    expect(lines).toHaveLength(1);
    expect(findDuplicateKeys(lines[0]!)).toEqual([]);
    expect(JSON.parse(lines[0]!)).toMatchObject({ pid: 7, component: 'campaign.coordinator', coordinator: 'h:1', workId: 'w1', targets: ['3'], msg: 'finished' });
  });

  it('gives a re-bound key the child\'s value, once, and leaves the parent logger unchanged', () => {
    const { logger, lines } = capturingLogger();
    const parent = childLogger(logger, { owner: 'a', shard: 1 });
    childLogger(parent, { owner: 'b' }).info('child');
    parent.info('parent');
    expect(lines.map(findDuplicateKeys)).toEqual([[], []]);
    expect(JSON.parse(lines[0]!)).toMatchObject({ owner: 'b', shard: 1 });
    expect(JSON.parse(lines[1]!)).toMatchObject({ owner: 'a', shard: 1 });
  });

  it('is what a plain pino child gets wrong: the same re-binding written with child() repeats the key', () => {
    // Guards the helper's reason to exist (and the detector): if pino ever merged keys itself,
    // this would fail and childLogger could become plain child().
    const { logger, lines } = capturingLogger();
    logger.child({ component: 'campaign' }).child({ component: 'coordinator' }).info('x');
    expect(findDuplicateKeys(lines[0]!)).toEqual([{ at: '$', key: 'component' }]);
  });
  it('is the only way the sources derive loggers: no bare .child() outside the logger module', () => {
    const root = path.resolve(import.meta.dirname, '../..');
    const offenders: string[] = [];
    for (const dir of ['src', 'workers']) {
      for (const entry of readdirSync(path.join(root, dir), { recursive: true, withFileTypes: true })) {
        if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
        const file = path.join(entry.parentPath, entry.name);
        if (path.relative(root, file) === path.join('src', 'telemetry', 'logger.ts')) continue;
        if (/\.child\(/.test(readFileSync(file, 'utf8'))) offenders.push(path.relative(root, file));
      }
    }
    expect(offenders).toEqual([]);
  });
});

describe('duplicate-key detector', () => {
  it('finds repeated keys at any depth and in arrays, and none in clean JSON', () => {
    expect(findDuplicateKeys('{"a":1,"b":{"c":[{"d":1,"d":2}],"c":3},"e":"x"}')).toEqual([
      { at: '$.b.c[0]', key: 'd' },
      { at: '$.b', key: 'c' },
    ]);
    expect(findDuplicateKeys('{"a":"\\u0062","b":[1,2.5e3,true,null,{}],"c":{"a":1}}')).toEqual([]);
    // Escaped spellings of one key are the same key.
    expect(findDuplicateKeys('{"k":1,"\\u006b":2}')).toEqual([{ at: '$', key: 'k' }]);
  });

  it('rejects malformed JSON instead of passing it', () => {
    expect(() => findDuplicateKeys('{"a":1,}')).toThrow(SyntaxError);
    expect(() => findDuplicateKeys('{"a":1} x')).toThrow(SyntaxError);
  });
});
