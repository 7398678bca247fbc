// The commit manifest is read strictly: anything but a well-formed manifest of this schema for
// this work fails closed with ERR_COMMIT_MANIFEST (a replaying coordinator never guesses bytes).
import { describe, expect, it } from 'vitest';
import { SOLVER_OPTIONS } from '../../src/solver/solver-options.js';
import {
  buildCommitManifest,
  COMMIT_MANIFEST_SCHEMA,
  MAX_MANIFEST_ITEMS,
  MAX_STAGED_BYTES,
  MAX_TRACE_BYTES,
  manifestJson,
  parseCommitManifest,
  parseStagedName,
  stagedRelativePath,
  traceRelativePath,
} from '../../src/commit/commit-manifest.js';
import { codeOf } from '../helpers/error-code.js';

const WORK = 'a'.repeat(64);
const SHA1 = '1'.repeat(64);
const SHA2 = '2'.repeat(64);

function valid(): Record<string, unknown> {
  return manifestJson(
    buildCommitManifest(WORK, 'crash', '000012', [
      { kind: 'queue', sha256: SHA1, size: 3 },
      { kind: 'crashes', sha256: SHA2, size: 0 },
    ]),
  ) as Record<string, unknown>;
}

describe('commit manifest', () => {
  it('round-trips through its stored JSON form, naming staged paths relative to the lease root', () => {
    const json = JSON.parse(JSON.stringify(valid())) as unknown;
    const manifest = parseCommitManifest(json, WORK);
    expect(manifest).toEqual({
      schema: COMMIT_MANIFEST_SCHEMA,
      workId: WORK,
      status: 'crash',
      source: '000012',
      items: [
        { kind: 'queue', sha256: SHA1, size: 3, path: `staged/${WORK}.${SHA1}` },
        { kind: 'crashes', sha256: SHA2, size: 0, path: `staged/${WORK}.${SHA2}` },
      ],
    });
  });

  it('accepts the same content under two kinds (one staged file) and an empty item list', () => {
    expect(buildCommitManifest(WORK, 'ok', '000000', [
      { kind: 'queue', sha256: SHA1, size: 3 },
      { kind: 'crashes', sha256: SHA1, size: 3 },
    ]).items).toHaveLength(2);
    expect(buildCommitManifest(WORK, 'ok', '000000', []).items).toEqual([]);
  });

  const corruptions: Array<[string, (m: Record<string, any>) => unknown]> = [
    ['not an object', () => 'manifest'],
    ['an array', () => []],
    ['another schema version', (m) => ({ ...m, schema: 'symfence-commit/2' })],
    ['an unknown key', (m) => ({ ...m, extra: 1 })],
    ['a missing key', (m) => { const { source: _s, ...rest } = m; return rest; }],
    ['another work id', (m) => ({ ...m, workId: 'b'.repeat(64) })],
    ['an unknown status', (m) => ({ ...m, status: 'aborted' })],
    ['a non-numeric source', (m) => ({ ...m, source: '../x' })],
    ['items not an array', (m) => ({ ...m, items: {} })],
    ['an item with an unknown kind', (m) => ({ ...m, items: [{ ...m.items[0], kind: 'seeds' }] })],
    ['an item with an uppercase digest', (m) => ({ ...m, items: [{ ...m.items[0], sha256: 'A'.repeat(64), path: `staged/${WORK}.${'A'.repeat(64)}` }] })],
    ['an item with a negative size', (m) => ({ ...m, items: [{ ...m.items[0], size: -1 }] })],
    ['an item with a fractional size', (m) => ({ ...m, items: [{ ...m.items[0], size: 1.5 }] })],
    ['an item with an absolute path', (m) => ({ ...m, items: [{ ...m.items[0], path: `/tmp/staged/${WORK}.${SHA1}` }] })],
    ['an item escaping the lease root', (m) => ({ ...m, items: [{ ...m.items[0], path: '../../etc/passwd' }] })],
    ['an item naming another work\'s staged file', (m) => ({ ...m, items: [{ ...m.items[0], path: stagedRelativePath('c'.repeat(64), SHA1) }] })],
    ['an item with an extra key', (m) => ({ ...m, items: [{ ...m.items[0], mode: 0o777 }] })],
    ['a repeated item', (m) => ({ ...m, items: [m.items[0], m.items[0]] })],
  ];
  for (const [what, corrupt] of corruptions) {
    it(`fails closed with ERR_COMMIT_MANIFEST on ${what}`, () => {
      expect(codeOf(() => parseCommitManifest(corrupt(valid()), WORK))).toBe('ERR_COMMIT_MANIFEST');
    });
  }

  function traced(): Record<string, any> {
    return manifestJson(buildCommitManifest(WORK, 'ok', '000003', [], { sha256: SHA2, size: 40 })) as Record<string, any>;
  }

  it('names a trace run\'s shared trace under traces/, relative to the lease root, and round-trips it', () => {
    const json = JSON.parse(JSON.stringify(traced())) as unknown;
    expect(parseCommitManifest(json, WORK).trace).toEqual({ sha256: SHA2, size: 40, path: `traces/${WORK}.${SHA2}` });
    expect(traceRelativePath(WORK, SHA2)).toBe(`traces/${WORK}.${SHA2}`);
    expect('trace' in parseCommitManifest(valid(), WORK)).toBe(false);
  });

  const traceCorruptions: Array<[string, (t: Record<string, any>) => unknown]> = [
    ['not an object', () => 'trace'],
    ['null', () => null],
    ['a missing size', (t) => ({ sha256: t.sha256, path: t.path })],
    ['an extra key', (t) => ({ ...t, kind: 'queue' })],
    ['a size over the trace cap', (t) => ({ ...t, size: MAX_TRACE_BYTES + 1 })],
    ['a negative size', (t) => ({ ...t, size: -1 })],
    ['a digest that is not 64 hex', (t) => ({ ...t, sha256: 'z'.repeat(64), path: `traces/${WORK}.${'z'.repeat(64)}` })],
    ['a path under staged/', (t) => ({ ...t, path: stagedRelativePath(WORK, SHA2) })],
    ['a path escaping the lease root', (t) => ({ ...t, path: `../traces/${WORK}.${SHA2}` })],
    ['another work\'s trace', (t) => ({ ...t, path: traceRelativePath('c'.repeat(64), SHA2) })],
  ];
  for (const [what, corrupt] of traceCorruptions) {
    it(`fails closed with ERR_COMMIT_MANIFEST on a trace that is ${what}`, () => {
      const m = traced();
      expect(codeOf(() => parseCommitManifest({ ...m, trace: corrupt(m.trace) }, WORK))).toBe('ERR_COMMIT_MANIFEST');
    });
  }

  const ANSWERS = { input: SHA1, token: 'c1:token', worker: 2, settled: [5n, 18446744073709551615n] };
  function answered(): Record<string, any> {
    return manifestJson(buildCommitManifest(WORK, 'ok', '000003', [], undefined, ANSWERS)) as Record<string, any>;
  }

  it('keeps what the run settled, targets as decimal strings, and round-trips it', () => {
    const json = JSON.parse(JSON.stringify(answered())) as Record<string, any>;
    expect(json.answers).toEqual({ input: SHA1, token: 'c1:token', worker: 2, settled: ['5', '18446744073709551615'] });
    expect(parseCommitManifest(json, WORK).answers).toEqual(ANSWERS);
    expect('answers' in parseCommitManifest(valid(), WORK)).toBe(false);
    // A long coordinator id makes a long token: kept as a lease record keeps it.
    const long = { ...ANSWERS, token: `${'c'.repeat(4096)}:1:2:3:0123456789abcdef` };
    expect(parseCommitManifest(manifestJson(buildCommitManifest(WORK, 'ok', '000003', [], undefined, long)), WORK).answers?.token).toBe(long.token);
  });

  const answersCorruptions: Array<[string, (a: Record<string, any>) => unknown]> = [
    ['not an object', () => ['5']],
    ['missing its token', (a) => ({ input: a.input, worker: a.worker, settled: a.settled })],
    ['carrying open questions', (a) => ({ ...a, open: ['6'] })],
    ['an input that is no SHA-256', (a) => ({ ...a, input: 'x'.repeat(64) })],
    ['an empty token', (a) => ({ ...a, token: '' })],
    ['a token that is no string', (a) => ({ ...a, token: 7 })],
    ['a negative worker', (a) => ({ ...a, worker: -1 })],
    ['nothing settled', (a) => ({ ...a, settled: [] })],
    ['a target settled twice', (a) => ({ ...a, settled: ['5', '5'] })],
    ['a target that is no u64', (a) => ({ ...a, settled: ['18446744073709551616'] })],
    ['target 0', (a) => ({ ...a, settled: ['0'] })],
    ['a target as a number', (a) => ({ ...a, settled: [5] })],
    ['more than a group of targets', (a) => ({ ...a, settled: Array.from({ length: 65 }, (_, i) => String(i + 1)) })],
  ];
  for (const [what, corrupt] of answersCorruptions) {
    it(`fails closed with ERR_COMMIT_MANIFEST on answers ${what}`, () => {
      const m = answered();
      expect(codeOf(() => parseCommitManifest({ ...m, answers: corrupt(m.answers) }, WORK))).toBe('ERR_COMMIT_MANIFEST');
    });
  }

  it('refuses to build a manifest for an id that is not a work id', () => {
    expect(codeOf(() => buildCommitManifest('../x', 'ok', '000000', []))).toBe('ERR_COMMIT_MANIFEST');
  });

  it('parses staged file names and ignores temps and foreign files', () => {
    expect(parseStagedName(`${WORK}.${SHA1}`)).toEqual({ workId: WORK, sha256: SHA1 });
    expect(parseStagedName('.symfence-io-1-2.tmp')).toBeNull();
    expect(parseStagedName(`${WORK}.${SHA1}.tmp`)).toBeNull();
    expect(parseStagedName('README')).toBeNull();
  });
});

describe('solver caps against manifest limits', () => {
  it('keeps every result the solver may return nameable by one manifest (outputs plus the parent)', () => {
    expect(SOLVER_OPTIONS.specs.maxOutputFiles.max! + 1).toBeLessThanOrEqual(MAX_MANIFEST_ITEMS);
    expect(SOLVER_OPTIONS.specs.maxOutputFileBytes.max!).toBeLessThanOrEqual(MAX_STAGED_BYTES);
    expect(() => SOLVER_OPTIONS.resolve({ maxOutputFiles: 100_001 })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION', details: expect.objectContaining({ option: 'maxOutputFiles' }) }));
    expect(() => SOLVER_OPTIONS.resolve({ maxOutputFileBytes: '65M' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
  });
});

