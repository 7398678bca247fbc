/**
 * A solver command that is not SymCC is refused before a seed is spent: the start-up probe must
 * see SymCC's runtime (preload events, the runtime's own telemetry or its banner), a file that is
 * neither ELF nor a `#!` script is refused outright, and a solver that goes silent during the run
 * (exit 0, no telemetry, no output) is a set-up failure whose work stays claimable. In every case
 * a rerun with the right solver runs every seed.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Campaign } from '../../src/coordinator/campaign.js';
import { findLeaseTables } from '../../src/lease/lease-inspect.js';
import { META_FILE } from '../../src/lease/table-layout.js';
import { scanTableRoot } from '../../src/lease/open-backend.js';
import { readTableMeta } from '../../src/lease/table-meta.js';
import { nodeFsLayer } from '../../src/fs/fs-layer.js';
import type { JobLogEntry } from '../../src/telemetry/job-log.js';
import { runCliCaptured } from '../helpers/cli-in-process.js';
import { cleanedAfterEach, fakeAflOut, REFERENCE_SOLVER } from '../helpers/cli-process.js';

const { dirs } = cleanedAfterEach();

function tempRoot(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-not-symcc-'));
  dirs.push(dir);
  return dir;
}

function executable(file: string, content: string | Buffer): string {
  writeFileSync(file, content);
  chmodSync(file, 0o755);
  return file;
}

const SEEDS = ['s0', 's1', 's2'];
const referenceShowmap = `${process.execPath} ${REFERENCE_SOLVER} showmap`;
const onPath = (tool: string): string | undefined => {
  try {
    return execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
};
const aflShowmap = onPath('afl-showmap');

/** Every work record's status under the campaign's private lease directory. */
async function recordStatuses(out: string): Promise<string[]> {
  const leaseDir = path.join(out, 'symfence', 'leases');
  if (!existsSync(leaseDir)) return [];
  const statuses: string[] = [];
  for (const root of await findLeaseTables(leaseDir)) {
    const meta = (await readTableMeta(nodeFsLayer, path.join(root, META_FILE)))!;
    for (const entry of await scanTableRoot(root, meta)) statuses.push(entry.state === 'valid' ? entry.record.status : 'corrupt');
  }
  return statuses;
}

function run(out: string, solver: readonly string[], ...flags: string[]) {
  return runCliCaptured('run', '--afl-out', out, '--afl-instance', 'main', '--workers', '1', '--showmap', referenceShowmap, '--log-level', 'silent', ...flags, '--', ...solver);
}

/** The rerun with the right solver: every seed runs (none was marked done by the wrong one). */
async function rerunRunsEverySeed(out: string): Promise<void> {
  const campaign = await Campaign.start({ aflOut: out, aflInstance: 'main', workers: 1, solverCommand: [process.execPath, REFERENCE_SOLVER, 'builtin:demo', '@@'], showmap: referenceShowmap });
  const seeds = new Set(SEEDS.map((s) => createHash('sha256').update(s).digest('hex')));
  const ran = new Set<string>();
  campaign.on('jobFinished', (entry) => {
    if (entry.status === 'ok' && entry.input !== undefined && seeds.has(entry.input)) ran.add(entry.input);
    if (ran.size === seeds.size) void campaign.stop();
  });
  const summary = await campaign.done;
  expect(summary.counters.jobsAbandoned).toBe(0);
  expect(ran.size).toBe(seeds.size);
}

describe('the start-up probe refuses a solver that is not SymCC, exit 2, before any seed is spent', () => {
  const cases: readonly (readonly [string, (root: string) => readonly string[]])[] = [
    ['/bin/true', () => ['/bin/true', '@@']],
    ['a #! script that exits 0', (root) => [executable(path.join(root, 'solver.sh'), '#!/bin/sh\nexit 0\n'), '@@']],
    ...(aflShowmap !== undefined ? ([['the AFL++ afl-showmap binary', () => [aflShowmap, '@@']]] as const) : []),
  ];
  for (const [what, solver] of cases) {
    it(`refuses ${what} with ERR_SOLVER_NOT_SYMCC, claiming no work; the right solver then runs every seed`, async () => {
      const root = tempRoot();
      const out = fakeAflOut(root, SEEDS, 'builtin:demo @@');
      const { code, err } = await run(out, solver(root));
      expect(err).toContain('[ERR_SOLVER_NOT_SYMCC]');
      expect(err).toContain('--solver-telemetry off');
      expect(code).toBe(2);
      expect(await recordStatuses(out)).toEqual([]);
      expect(existsSync(path.join(out, 'symfence', 'jobs.jsonl'))).toBe(false);
      await rerunRunsEverySeed(out);
    });
  }

  it('refuses a crafted file that is neither ELF nor a #! script, even with --solver-telemetry off', async () => {
    const root = tempRoot();
    const out = fakeAflOut(root, SEEDS, 'builtin:demo @@');
    // execve answers ENOEXEC; execvp would hand it to sh, which runs `true` and exits 0.
    const crafted = executable(path.join(root, 'crafted'), Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c]), Buffer.from('\ntrue\n')]));
    for (const flags of [[], ['--solver-telemetry', 'off']]) {
      const { code, err } = await run(out, [crafted, '@@'], ...flags);
      expect(err).toContain('[ERR_SOLVER_NOT_SYMCC]');
      expect(err).toContain('neither an ELF executable nor a #! script');
      expect(code).toBe(2);
    }
    expect(await recordStatuses(out)).toEqual([]);
  });

  it('--solver-telemetry off skips the probe: a script solver runs', async () => {
    const root = tempRoot();
    const out = fakeAflOut(root, SEEDS, 'builtin:demo @@');
    const script = executable(path.join(root, 'solver.sh'), '#!/bin/sh\nexit 0\n');
    const { code, err } = await run(out, [script, '@@'], '--solver-telemetry', 'off', '--duration', '2s', '--json');
    expect(err).not.toContain('ERR_SOLVER_NOT_SYMCC');
    expect(code).toBe(0);
    expect((await recordStatuses(out)).filter((s) => s === 'done').length).toBeGreaterThan(0);
  });

});

describe('a solver that goes silent during the run', () => {
  it('abandons the silent runs (not done) with ERR_SOLVER_SILENT, stops after the streak, and a rerun runs every seed', async () => {
    const root = tempRoot();
    const out = fakeAflOut(root, SEEDS, 'builtin:demo @@');
    const marker = path.join(root, 'probed');
    // SymCC for its first run (the probe), then a program that exits 0 and writes nothing.
    const solver = executable(
      path.join(root, 'solver.sh'),
      `#!/bin/sh\nif [ ! -e ${JSON.stringify(marker)} ]; then : > ${JSON.stringify(marker)}; exec ${JSON.stringify(process.execPath)} ${JSON.stringify(REFERENCE_SOLVER)} builtin:demo "$@"; fi\nexit 0\n`,
    );
    const { code, err } = await run(out, [solver, '@@'], '--max-setup-failures', '2', '--json');
    expect(existsSync(marker)).toBe(true);
    expect(err).toContain('[ERR_SETUP_FAILURES]');
    expect(err).toContain('ERR_SOLVER_SILENT');
    expect(code).toBe(1);
    const jobs = readFileSync(path.join(out, 'symfence', 'jobs.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as JobLogEntry);
    // The streak of two stops the campaign. Prefetched runs that started in the slots the failures
    // freed are aborted by that stop or go silent themselves (abandoned): never done.
    const statuses = jobs.map((j) => j.status);
    expect(statuses.filter((s) => s === 'abandoned').length).toBeGreaterThanOrEqual(2);
    expect(statuses.every((s) => s === 'abandoned' || s === 'aborted')).toBe(true);
    expect((await recordStatuses(out)).filter((s) => s === 'done')).toEqual([]);
    await rerunRunsEverySeed(out);
  });
});
