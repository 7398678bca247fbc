// Hints at dispatch through the scheduler adapter: the target contract as the coordinator sees it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SchedulerAdapter } from '../../src/coordinator/adapters/scheduler-adapter.js';
import { HintLinesFile } from '../../src/scheduler/hint-lines-file.js';
import { parseHint, type HintSource } from '../../src/scheduler/hints.js';
import { MapLocalReservations } from '../../src/scheduler/map-local-reservations.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { DEFAULT_LANES } from '../../src/scheduler/scheduler-options.js';
import { parseGuidance } from '../../src/scheduler/guidance-map.js';
import { ScriptedSharedClaims, sha, tel } from './scheduler-fixtures.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function seedFile(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-hints-'));
  dirs.push(dir);
  const file = path.join(dir, 'seed');
  writeFileSync(file, 'AAAA');
  return file;
}

const SEED = sha(1);
const NOW = 1_000_000;

function hintFor(sha256: string, fields: Record<string, unknown>): HintSource {
  const hint = parseHint(fields);
  return { hintFor: (seed) => (seed.sha256 === sha256 ? hint : undefined) };
}

function setUp(hints: readonly HintSource[], shared?: ScriptedSharedClaims, lanes = 'fallback') {
  const local = new MapLocalReservations();
  const scheduler = new Scheduler({ local, options: { lanes, cooldownMs: 0 }, hints, ...(shared ? { shared } : {}) });
  const adapter = new SchedulerAdapter(scheduler, local, undefined, shared ? { shared } : {});
  adapter.addSeed({ path: seedFile(), sha256: SEED, depth: 0, origin: 'afl' }, 0);
  return { local, scheduler, adapter };
}

describe('hints at dispatch', () => {
  it('gives an untargeted job the hint target, claimed under the job owner before it is handed out', async () => {
    const { local, scheduler, adapter } = setUp([hintFor(SEED, { targetBranch: '500' })]);
    scheduler.observe({ seed: SEED, telemetry: null, reward: 0.5 }, 0);
    const [work] = await adapter.admit(1, NOW);
    expect(work!.job).toMatchObject({ targetBranch: 500n, group: [500n], origin: 'scheduler:fallback+hint' });
    expect(local.reserved().get(500n)).toBe(work!.owner);
    expect(adapter.hintStats()).toEqual({ claims: 1, refused: 0 });
    adapter.releaseGroup(work!.job.group, work!.owner);
    expect(local.reserved().size).toBe(0);
  });

  it('claims the hint group in the shared table too and hands its token to the coordinator', async () => {
    const shared = new ScriptedSharedClaims();
    const { adapter, scheduler } = setUp([hintFor(SEED, { targetBranch: '500' })], shared);
    scheduler.observe({ seed: SEED, telemetry: null, reward: 0.5 }, 0);
    const [work] = await adapter.admit(1, NOW);
    expect(shared.calls.at(-1)).toEqual([[500n]]);
    expect(work!.targetToken).toEqual(expect.any(String));
    expect(work!.job.group).toEqual([500n]);
  });

  it('runs the job untargeted and holds nothing when the hint target is held by another job', async () => {
    const { local, scheduler, adapter } = setUp([hintFor(SEED, { targetBranch: '500' })]);
    expect(local.tryReserveGroup([500n], 9999)).toBe(true);
    scheduler.observe({ seed: SEED, telemetry: null, reward: 0.5 }, 0);
    const [work] = await adapter.admit(1, NOW);
    expect(work!.job).toMatchObject({ targetBranch: 0n, group: [], origin: 'scheduler:fallback' });
    expect([...local.reserved()]).toEqual([[500n, 9999]]);
    expect(adapter.hintStats()).toEqual({ claims: 0, refused: 1 });
  });

  it('never changes the targets of a job admitted with a leased group', async () => {
    const { scheduler, adapter } = setUp([hintFor(SEED, { targetBranch: '500', strategy: 3 })]);
    scheduler.observe({ seed: SEED, telemetry: tel({ open: [77] }), reward: 0.5 }, 0);
    const [work] = await adapter.admit(1, NOW);
    expect(work!.job).toMatchObject({ targetBranch: 77n, group: [77n], origin: 'scheduler:fallback' });
    expect(adapter.hintStats()).toEqual({ claims: 0, refused: 0 });
  });
});

describe('hints file (JSON lines)', () => {
  it('reads one hint per line keyed by sha256, skipping blank and # lines, the last line winning', () => {
    const file = new HintLinesFile(
      ['# planner output', `{"sha256":"${SEED}","targetBranch":"12"}`, '', `{"sha256":"${SEED}","targetBranch":"13","strategy":2}`].join('\n'),
      'hints.jsonl',
    );
    expect(file.size).toBe(1);
    expect(file.hintFor({ seed: SEED, sha256: SEED, path: '/x' })).toMatchObject({ targetBranch: 13n, strategy: 2 });
    expect(file.hintFor({ seed: 'other', sha256: sha(2), path: '/x' })).toBeUndefined();
  });

  it.each([
    ['a line that is not JSON', '{nope'],
    ['a line without sha256', '{"targetBranch":"1"}'],
    ['an unknown field', `{"sha256":"${SEED}","target_branch":"1"}`],
    ['a path key (the format is keyed by sha256 only)', `{"sha256":"${SEED}","path":"/q/a"}`],
  ])('refuses %s with ERR_HINT_INVALID naming --hints, the file and the line', (_what, line) => {
    let error: { code?: string; message?: string } | undefined;
    try {
      new HintLinesFile(`\n${line}\n`, 'h.jsonl');
    } catch (e) {
      error = e as never;
    }
    expect(error?.code).toBe('ERR_HINT_INVALID');
    expect(error?.message).toContain('--hints h.jsonl');
    expect(error?.message).toContain('line 2');
  });

  it('refuses a missing file with ERR_HINT_INVALID naming --hints', async () => {
    await expect(HintLinesFile.load('/nonexistent/hints.jsonl')).rejects.toMatchObject({ code: 'ERR_HINT_INVALID', message: expect.stringContaining('--hints') });
  });
});

describe('concurrency lane default', () => {
  it('is off by default and joins the default lanes when guidance is given', () => {
    const local = new MapLocalReservations();
    expect(new Scheduler({ local }).lanes().map((l) => l.name)).toEqual(DEFAULT_LANES.split(','));
    const guided = new Scheduler({ local, guidance: parseGuidance('11 0') });
    expect(guided.lanes().map((l) => l.name)).toEqual(['frontier', 'prefix', 'cstg', 'concurrency', 'edge', 'fallback']);
    expect(new Scheduler({ local, guidance: parseGuidance('11 0'), options: { lanes: 'fallback' } }).lanes().map((l) => l.name)).toEqual(['fallback']);
  });
});
