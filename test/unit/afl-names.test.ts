import { describe, expect, it } from 'vitest';
import { formatAflId, nextAflId, parseAflEntryName, sourceIdOf } from '../../src/triage/afl-names.js';

describe('AFL entry names', () => {
  it('parses ids beyond six digits and keeps the source id digits as written', () => {
    expect(parseAflEntryName('id:999999,src:000123,op:havoc,rep:2')).toMatchObject({ id: 999_999, src: '000123', orig: false, cov: false });
    expect(parseAflEntryName('id:1000000,src:0000042,+cov')).toMatchObject({ id: 1_000_000, idDigits: '1000000', src: '0000042', cov: true });
    expect(parseAflEntryName('id:000000,orig:seed.bin')).toMatchObject({ id: 0, orig: true });
  });

  it('rejects ids past 2^32 - 1 and names that are not id entries', () => {
    expect(parseAflEntryName('id:4294967296')).toBeNull();
    expect(parseAflEntryName('id:4294967295')).toMatchObject({ id: 4_294_967_295 });
    expect(parseAflEntryName('.symfence-publish-1-1.tmp')).toBeNull();
    expect(parseAflEntryName('README')).toBeNull();
    expect(parseAflEntryName('id:12x')).toBeNull();
  });

  it('gives the next id after the highest id entry, ignoring other files', () => {
    expect(nextAflId(['id:999999,src:000001', 'id:1000000,src:000002', 'notes.txt', '.state'])).toBe(1_000_001);
    expect(nextAflId([])).toBe(0);
  });

  it('formats ids with at least six digits and names a parent without id as source 000000', () => {
    expect(formatAflId(7)).toBe('000007');
    expect(formatAflId(1_234_567)).toBe('1234567');
    expect(sourceIdOf('id:000123,orig:seed')).toBe('000123');
    expect(sourceIdOf('seed.bin')).toBe('000000');
  });
});
