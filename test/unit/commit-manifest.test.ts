// The commit manifest is read strictly: anything but a well-formed manifest of this schema for
// this work fails closed with ERR_COMMIT_MANIFEST (a replaying coordinator never guesses bytes).
import { describe, expect, it } from 'vitest';
import { SOLVER_OPTIONS } from '../../src/solver/solver-options.js';
import {
  buildCommitManifest,
  COMMIT_MANIFEST_SCHEMA,
  MAX_MANIFEST_ITEMS,
  MAX_STAGED_BYTES,
  manifestJson,
  parseCommitManifest,
  parseStagedName,
  stagedRelativePath,
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

