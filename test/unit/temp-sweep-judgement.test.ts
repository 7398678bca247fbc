import { describe, expect, it } from 'vitest';
import { isLeaseTempName, isStagedTempName, judgeTemp, resolveStaleTempAgeMs } from '../../src/lease/temp-sweep.js';
import { currentWriterTag, formatWriterTag, parseWriterTag, processStartTicks, systemProcessProbe, type ProcessProbe, type WriterTag } from '../../src/lease/temp-writer.js';

const SELF: WriterTag = { host: '0123456789ab', pid: 4242, startTicks: 900 };
const NOW = 10_000_000;
const AGE = 3_600_000;

/** pid 4242 alive since tick 900, pid 5000 alive since tick 77, everything else dead. */
const probe: ProcessProbe = {
  isAlive: (pid) => pid === 4242 || pid === 5000,
  startTicksOf: (pid) => (pid === 4242 ? 900 : pid === 5000 ? 77 : undefined),
};
const judge = (tag: WriterTag | null, ageMs: number) =>
  judgeTemp(tag ? `x.json.${formatWriterTag(tag)}.17.tmp` : 'x.json.4242.17.tmp', NOW - ageMs, { nowMs: NOW, staleTempAgeMs: AGE, self: SELF, probe });

describe('leftover temp judgement', () => {
  it('keeps a live writer\'s temp of this host however old it is', () => {
    expect(judge(SELF, 0)).toBe('live-writer');
    expect(judge(SELF, 100 * AGE)).toBe('live-writer');
    expect(judge({ ...SELF, pid: 5000, startTicks: 0 }, 100 * AGE)).toBe('live-writer'); // start unknown: kept
  });

  it('sweeps at once the temp of a dead process of this host, and of a pid now held by another process', () => {
    expect(judge({ ...SELF, pid: 31337 }, 0)).toBe('dead-writer');
    expect(judge({ ...SELF, pid: 5000, startTicks: 78 }, 0)).toBe('reused-pid');
  });

  it('sweeps another host\'s temp, and an untagged one, only once older than the bound', () => {
    const foreign = { ...SELF, host: 'fedcba987654', pid: 31337 };
    expect(judge(foreign, AGE - 1)).toBe('foreign-recent');
    expect(judge(foreign, AGE)).toBe('foreign-old');
    expect(judge(null, AGE - 1)).toBe('untagged-recent');
    expect(judge(null, AGE)).toBe('untagged-old');
  });

  it('reads writer tags back from the names the writers produce, and none from legacy names', () => {
    expect(parseWriterTag(`.symfence-io-${formatWriterTag(SELF)}-3.tmp`)).toEqual(SELF);
    expect(parseWriterTag(`${'a'.repeat(64)}.json.${formatWriterTag(SELF)}.123456.tmp`)).toEqual(SELF);
    expect(parseWriterTag(`${'a'.repeat(64)}.json.4242.1234561.tmp`)).toBeNull();
    expect(parseWriterTag('.symfence-io-4242-deadbeef-3.tmp')).toBeNull();
  });

  it('picks temps by name: lease temps in shards, staging temps in staged/, never records or locks', () => {
    expect(isLeaseTempName(`${'a'.repeat(64)}.json.${formatWriterTag(SELF)}.1.tmp`)).toBe(true);
    expect(isLeaseTempName(`${'a'.repeat(64)}.json`)).toBe(false);
    expect(isLeaseTempName(`${'a'.repeat(64)}.json.lock`)).toBe(false);
    expect(isStagedTempName('.symfence-io-4242-deadbeef-3.tmp')).toBe(true);
    expect(isStagedTempName(`${'a'.repeat(64)}.${'b'.repeat(64)}`)).toBe(false);
  });

  it('describes this process truthfully: its own pid is alive with its own start time', () => {
    const self = currentWriterTag();
    expect(self.pid).toBe(process.pid);
    expect(self.host).toMatch(/^[0-9a-f]{12}$/);
    expect(systemProcessProbe.isAlive(process.pid)).toBe(true);
    if (process.platform === 'linux') {
      expect(self.startTicks).toBeGreaterThan(0);
      expect(processStartTicks(process.pid)).toBe(self.startTicks);
    }
  });

  it('takes the age bound from the flag, else SYMFENCE_STALE_TEMP_AGE, else 1 h, refusing less than a minute by name', () => {
    expect(resolveStaleTempAgeMs(undefined, {})).toBe(3_600_000);
    expect(resolveStaleTempAgeMs(undefined, { SYMFENCE_STALE_TEMP_AGE: '10m' })).toBe(600_000);
    expect(resolveStaleTempAgeMs('2h', { SYMFENCE_STALE_TEMP_AGE: '10m' })).toBe(7_200_000);
    expect(() => resolveStaleTempAgeMs(undefined, { SYMFENCE_STALE_TEMP_AGE: '5s' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION', message: expect.stringContaining('SYMFENCE_STALE_TEMP_AGE') }));
    expect(() => resolveStaleTempAgeMs('soon', {})).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION', message: expect.stringContaining('--stale-temp-age') }));
  });
});
