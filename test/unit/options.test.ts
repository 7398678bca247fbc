import { describe, expect, it } from 'vitest';
import { Command } from 'commander';
import { defineOptionSchema, omitOptions, optionsFromEnv, optionsFromFlags, resolveLayered, formatDuration, formatSize } from '../../src/config/schema.js';
import { parseBoolean, parseDurationMs, parseFiniteNumber, parseInteger, parseNonEmptyString, parseSizeBytes } from '../../src/config/values.js';
import { addSchemaFlags } from '../../src/cli/flags.js';
import { InvalidOptionError, SymfenceError } from '../../src/errors.js';

function rejection(fn: () => unknown): SymfenceError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidOptionError);
    return error as SymfenceError;
  }
  throw new Error('expected InvalidOptionError');
}

describe('value parsers', () => {
  it.each([
    [0, 0],
    [1500, 1500],
    ['1500', 1500],
    ['250ms', 250],
    ['30s', 30_000],
    ['5m', 300_000],
    ['1.5h', 5_400_000],
    [' 2s ', 2000],
  ])('parses duration %j as %d ms', (input, ms) => {
    expect(parseDurationMs('timeout', input)).toBe(ms);
  });

  it.each([NaN, -1, Infinity, -Infinity, '', 'abc', '-5s', '5 parsecs', '1e3', null, undefined, true, {}, []])(
    'rejects duration %j naming the option and the value',
    (input) => {
      const error = rejection(() => parseDurationMs('solverTimeoutMs', input));
      expect(error.code).toBe('ERR_INVALID_OPTION');
      expect(error.message).toContain('solverTimeoutMs');
      expect(error.message).toContain('duration');
      expect(error.details.option).toBe('solverTimeoutMs');
    },
  );

  it.each([
    [65536, 65536],
    ['65536', 65536],
    ['64k', 65536],
    ['64KiB', 65536],
    ['1M', 1 << 20],
    ['2g', 2 * 1024 ** 3],
    ['10b', 10],
  ])('parses size %j as %d bytes', (input, bytes) => {
    expect(parseSizeBytes('mapSize', input)).toBe(bytes);
  });

  it.each([-1, 1.5, NaN, Infinity, '1.5k', '12 parsecs', 'k', '', '99999999999999999999', false])('rejects size %j', (input) => {
    expect(rejection(() => parseSizeBytes('mapSize', input)).details.option).toBe('mapSize');
  });

  it.each([
    [3, 3],
    ['42', 42],
    [' -7 ', -7],
    ['+8', 8],
  ])('parses integer %j', (input, n) => expect(parseInteger('workers', input)).toBe(n));

  it.each([1.5, NaN, Infinity, '1.5', '0x10', '', 'two', 2 ** 60, null, []])('rejects integer %j', (input) => {
    expect(rejection(() => parseInteger('workers', input)).details.option).toBe('workers');
  });

  it.each([
    [0.5, 0.5],
    ['0.25', 0.25],
    ['-3', -3],
  ])('parses number %j', (input, n) => expect(parseFiniteNumber('ratio', input)).toBe(n));

  it.each([NaN, Infinity, '', 'x', null])('rejects number %j', (input) => {
    rejection(() => parseFiniteNumber('ratio', input));
  });

  it.each([
    [true, true],
    [false, false],
    ['1', true],
    ['YES', true],
    ['on', true],
    ['0', false],
    ['no', false],
    ['off', false],
  ])('parses boolean %j', (input, b) => expect(parseBoolean('json', input)).toBe(b));

  it.each(['maybe', '', 2, null])('rejects boolean %j', (input) => {
    rejection(() => parseBoolean('json', input));
  });

  it('rejects empty strings and NUL bytes', () => {
    expect(parseNonEmptyString('name', 'a')).toBe('a');
    rejection(() => parseNonEmptyString('name', ''));
    rejection(() => parseNonEmptyString('name', 'a\0b'));
    rejection(() => parseNonEmptyString('name', 5));
  });
});

const schema = defineOptionSchema('example', {
  workers: { kind: 'integer', default: 2, min: 1, max: 64, flag: 'workers', env: 'SYMFENCE_WORKERS', description: 'solver threads' },
  ratio: { kind: 'number', default: 0.5, min: 0, max: 1, description: 'a fraction' },
  timeoutMs: { kind: 'duration', default: 30_000, min: 1, flag: 'timeout', env: 'SYMFENCE_TIMEOUT', description: 'per-run timeout' },
  mapBytes: { kind: 'size', default: 65536, min: 256, description: 'bitmap size' },
  json: { kind: 'boolean', default: false, flag: 'json', env: 'SYMFENCE_JSON', description: 'machine output' },
  name: { kind: 'string', default: undefined, flag: 'name', description: 'instance name' },
  mode: { kind: 'enum', values: ['fsync', 'syncfs'] as const, default: 'fsync', flag: 'mode', env: 'SYMFENCE_MODE', description: 'barrier' },
});

describe('option schemas', () => {
  it('exposes frozen defaults', () => {
    expect(schema.defaults).toEqual({ workers: 2, ratio: 0.5, timeoutMs: 30_000, mapBytes: 65536, json: false, name: undefined, mode: 'fsync' });
    expect(Object.isFrozen(schema.defaults)).toBe(true);
    expect(() => {
      (schema.defaults as { workers: number }).workers = 3;
    }).toThrow();
  });

  it('resolves every kind from its accepted forms', () => {
    const resolved = schema.resolve({ workers: '8', ratio: '0.75', timeoutMs: '5m', mapBytes: '1M', json: 'yes', name: 'sf1', mode: 'syncfs' });
    expect(resolved).toEqual({ workers: 8, ratio: 0.75, timeoutMs: 300_000, mapBytes: 1 << 20, json: true, name: 'sf1', mode: 'syncfs' });
    expect(Object.isFrozen(resolved)).toBe(true);
  });

  it('keeps defaults for undefined values', () => {
    expect(schema.resolve({ workers: undefined }).workers).toBe(2);
  });

  it.each([
    [{ workers: 0 }, 'workers', 'between 1 and 64'],
    [{ workers: 65 }, 'workers', 'between 1 and 64'],
    [{ workers: 1.5 }, 'workers', 'integer'],
    [{ ratio: 2 }, 'ratio', 'between 0 and 1'],
    [{ ratio: NaN }, 'ratio', 'finite'],
    [{ timeoutMs: 0 }, 'timeoutMs', 'at least 1'],
    [{ timeoutMs: -5 }, 'timeoutMs', 'duration'],
    [{ mapBytes: 100 }, 'mapBytes', 'at least 256'],
    [{ json: 'maybe' }, 'json', 'boolean'],
    [{ name: '' }, 'name', 'non-empty'],
    [{ mode: 'fdatasync' }, 'mode', 'one of fsync, syncfs'],
    [{ wokers: 3 }, 'wokers', 'known options'],
  ])('rejects %j naming %s', (input, option, expected) => {
    const error = rejection(() => schema.resolve(input));
    expect(error.details.option).toBe(option);
    expect(error.message).toContain(expected);
  });

  it('rejects a non-object input', () => {
    expect(rejection(() => schema.resolve([] as never)).details.option).toBe('options');
    expect(rejection(() => schema.resolve(null as never)).details.option).toBe('options');
  });

  it('reads declared SYMFENCE_* variables and names the variable on a bad value', () => {
    expect(optionsFromEnv(schema, { SYMFENCE_WORKERS: '4', SYMFENCE_TIMEOUT: '10s', SYMFENCE_JSON: '1', OTHER: 'x', SYMFENCE_MODE: '' })).toEqual({
      workers: 4,
      timeoutMs: 10_000,
      json: true,
    });
    const error = rejection(() => optionsFromEnv(schema, { SYMFENCE_TIMEOUT: 'soon' }));
    expect(error.details.option).toBe('SYMFENCE_TIMEOUT');
  });

  it('maps commander flags onto the schema and names the flag on a bad value', () => {
    const command = addSchemaFlags(new Command('x').exitOverride(), schema);
    command.parse(['--workers', '3', '--timeout', '2s', '--json', '--mode', 'syncfs'], { from: 'user' });
    expect(optionsFromFlags(schema, command.opts())).toEqual({ workers: 3, timeoutMs: 2000, json: true, mode: 'syncfs' });
    const bad = addSchemaFlags(new Command('y').exitOverride(), schema);
    bad.parse(['--workers', 'many'], { from: 'user' });
    expect(rejection(() => optionsFromFlags(schema, bad.opts())).details.option).toBe('--workers');
  });

  it('layers defaults < env < flags < explicit', () => {
    const resolved = resolveLayered(schema, {
      env: { SYMFENCE_WORKERS: '4', SYMFENCE_TIMEOUT: '10s', SYMFENCE_MODE: 'syncfs' },
      flags: { workers: '6', timeout: '20s' },
      explicit: { workers: 8 },
    });
    expect(resolved.workers).toBe(8);
    expect(resolved.timeoutMs).toBe(20_000);
    expect(resolved.mode).toBe('syncfs');
    expect(resolved.ratio).toBe(0.5);
  });

  it('documents defaults and env in the help text', () => {
    const command = addSchemaFlags(new Command('x'), schema);
    const help = command.helpInformation();
    expect(help).toContain('--timeout <duration>');
    expect(help).toContain('default: 30s');
    expect(help).toContain('env: SYMFENCE_TIMEOUT');
    expect(help).toContain('--mode <fsync|syncfs>');
  });

  it.each([
    [30_000, '30s'],
    [300_000, '5m'],
    [7_200_000, '2h'],
    [250, '250ms'],
    [1500, '1500ms'],
  ])('formats duration %d as %s', (ms, text) => expect(formatDuration(ms)).toBe(text));

  it.each([
    [65536, '64k'],
    [1 << 20, '1M'],
    [100, '100'],
  ])('formats size %d as %s', (bytes, text) => expect(formatSize(bytes)).toBe(text));

  it('omits options owned elsewhere: their keys become unknown, the rest resolves as before', () => {
    const narrowed = omitOptions(schema, ['workers', 'timeoutMs']);
    expect(Object.keys(narrowed.defaults)).not.toContain('workers');
    expect(narrowed.resolve({ mode: 'syncfs' }).mode).toBe('syncfs');
    expect(rejection(() => narrowed.resolve({ workers: 2 })).details.option).toBe('workers');
    expect(optionsFromEnv(narrowed, { SYMFENCE_WORKERS: '4', SYMFENCE_MODE: 'syncfs' })).toEqual({ mode: 'syncfs' });
  });
});
