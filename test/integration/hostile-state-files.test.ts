/**
 * `status`, `report` and `leases` over state files someone else wrote: every number is checked
 * (finite, in range, non-negative) with `ERR_CAMPAIGN_STATE` naming the file and the field, and
 * every string that reaches the terminal is escaped the same way in every command.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCliCaptured } from '../helpers/cli-in-process.js';
import { openWork } from '../helpers/lease-fixtures.js';
import { createCounters } from '../../src/telemetry/counters.js';
import { makeSnapshot, parseStatsFile } from '../../src/telemetry/stats-file.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tmp(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-hostile-'));
  dirs.push(dir);
  return dir;
}

function snapshot(fields: { coordinator?: string; name?: string } = {}): Record<string, unknown> {
  const now = Date.now();
  return {
    ...makeSnapshot({
      coordinator: fields.coordinator ?? 'host:1',
      name: fields.name ?? 'symfence',
      state: 'stopped',
      startedMs: now - 10_000,
      updatedMs: now,
      statsIntervalMs: 2_000,
      workers: 2,
      counters: { ...createCounters(), jobsStarted: 4, jobsOk: 3 },
    }),
  };
}

/** A campaign directory whose stats.json is `text` verbatim. */
function campaignWith(text: string): string {
  const dir = tmp();
  writeFileSync(path.join(dir, 'stats.json'), text);
  return dir;
}

const withField = (edit: (s: Record<string, unknown>) => void): string => {
  const s = snapshot();
  edit(s);
  return JSON.stringify(s);
};

describe('numbers in stats.json', () => {
  const cases: readonly (readonly [string, string, string])[] = [
    ['updatedMs 1e300 (no date)', withField((s) => (s['updatedMs'] = 1e300)), 'updatedMs'],
    ['a negative counter', withField((s) => ((s['counters'] as Record<string, number>)['jobsOk'] = -3)), 'counters.jobsOk'],
    // JSON.parse reads 1e999 as Infinity.
    ['an infinite counter', withField((s) => ((s['counters'] as Record<string, number>)['interesting'] = 7)).replace('"interesting":7', '"interesting":1e999'), 'counters.interesting'],
    ['a fill ratio above 1', withField((s) => ((s['counters'] as Record<string, number>)['fillRatio'] = 4)), 'counters.fillRatio'],
    ['a fractional worker count', withField((s) => (s['workers'] = 1.5)), 'workers'],
    ['a negative jobsPerSec', withField((s) => (s['jobsPerSec'] = -1)), 'jobsPerSec'],
    ['a state that is neither running nor stopped', withField((s) => (s['state'] = 'dancing')), 'state'],
  ];

  for (const [what, text, field] of cases) {
    it(`refuses ${what} with ERR_CAMPAIGN_STATE naming the file and ${field}, in status and report alike`, async () => {
      const dir = campaignWith(text);
      const file = path.join(dir, 'stats.json');
      let thrown: unknown;
      try {
        parseStatsFile(file, text);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toMatchObject({ code: 'ERR_CAMPAIGN_STATE', details: { file, field } });
      for (const argv of [['status', dir], ['report', dir, '--output-dir', path.join(dir, 'r')]]) {
        const { code, err } = await runCliCaptured(...argv);
        expect(err).not.toContain('ERR_INTERNAL');
        expect(err).toContain('[ERR_CAMPAIGN_STATE]');
        expect(err).toContain(file);
        expect(err).toContain(field);
        expect(code).toBe(1);
      }
    });
  }

  it('still reads a valid file written by the campaign', async () => {
    const dir = campaignWith(JSON.stringify(snapshot()));
    const { code, out } = await runCliCaptured('status', dir);
    expect(code).toBe(0);
    expect(out).toContain('campaign symfence (coordinator host:1');
  });
});

describe('strings printed to a terminal', () => {
  const hostile = 'evil\ncampaign forged: running, 0s\u001b[31m\u202eTXT';

  it('status of one campaign escapes a coordinator id holding a newline, ANSI codes and U+202E', async () => {
    const dir = campaignWith(JSON.stringify(snapshot({ coordinator: hostile, name: `n\u001b]0;title\u0007` })));
    const { code, out } = await runCliCaptured('status', dir);
    expect(code).toBe(0);
    expect(out.split('\n')[0]).toContain('coordinator evil\\ncampaign forged: running, 0s\\x1b[31m\\u202eTXT');
    expect(out).toContain('campaign n\\x1b]0;title\\x07 ');
    expect(out).not.toMatch(/[\u001b\u0007\u202e]/);
    expect(out.split('\n').filter((l) => l.startsWith('campaign '))).toHaveLength(1);
  });

  it('the overview of several coordinators escapes them the same way', async () => {
    const root = tmp();
    for (const name of ['a', 'b']) {
      mkdirSync(path.join(root, name));
      writeFileSync(path.join(root, name, 'stats.json'), JSON.stringify(snapshot({ coordinator: hostile, name })));
    }
    const { code, out } = await runCliCaptured('status', root);
    expect(code).toBe(0);
    expect(out).toContain('evil\\ncampaign forged: running, 0s\\x1b[31m\\u202eTXT');
    expect(out).not.toMatch(/[\u001b\u202e]/);
  });

  it('leases escapes an owner holding U+202E and other reordering characters', async () => {
    const root = tmp();
    const work = await openWork(path.join(root, 'work'), { coordination: 'single' });
    const claimed = await work.claim('a'.repeat(64), { p: 1 }, { owner: 'host\u202e1:cba\u2066x', nowMs: Date.now() });
    expect(claimed.ok).toBe(true);
    await work.close();
    const { code, out } = await runCliCaptured('leases', root);
    expect(code).toBe(0);
    expect(out).toContain('owner host\\u202e1:cba\\u2066x: leased 1');
    expect(out).not.toMatch(/[\u202e\u2066]/);
  });

  it('an error naming a path with a newline prints the whole path, escaped, on one line', async () => {
    const root = tmp();
    const dir = path.join(root, 'no\nsymfence: forged line [ERR_NONE]');
    const { code, err } = await runCliCaptured('status', dir);
    expect(code).toBe(1);
    expect(err.trimEnd().split('\n')).toHaveLength(1);
    expect(err).toContain('no\\nsymfence: forged line [ERR_NONE]');
    expect(err).toContain('[ERR_CAMPAIGN_STATE]');
  });
});
