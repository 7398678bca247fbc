import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { nodeFsLayer } from '../../src/fs/fs-layer.js';
import { findLeaseTables } from '../../src/lease/lease-inspect.js';
import { META_FILE } from '../../src/lease/table-layout.js';
import { scanTableRoot } from '../../src/lease/open-backend.js';
import { readTableMeta } from '../../src/lease/table-meta.js';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { runCliCaptured } from '../helpers/cli-in-process.js';
import { Campaign } from '../../src/coordinator/campaign.js';
import type { JobLogEntry } from '../../src/telemetry/job-log.js';
import { SolverPool } from '../../src/solver/solver-pool.js';
import { runShowmap } from '../../src/solver/showmap.js';
import { fakeAflOut, REFERENCE_SOLVER } from '../helpers/cli-process.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempRoot(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-setup-'));
  dirs.push(dir);
  return dir;
}

const cli = runCliCaptured;

/** Status of every work/target record under a lease directory, whatever its store (absent directory: none). */
async function recordStatuses(leaseDir: string): Promise<string[]> {
  if (!existsSync(leaseDir)) return [];
  const statuses: string[] = [];
  for (const root of await findLeaseTables(leaseDir)) {
    const meta = (await readTableMeta(nodeFsLayer, path.join(root, META_FILE)))!;
    for (const entry of await scanTableRoot(root, meta)) statuses.push(entry.state === 'valid' ? entry.record.status : 'corrupt');
  }
  return statuses;
}

function script(file: string, body: string): string {
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
  return file;
}

const referenceShowmap = `${process.execPath} ${REFERENCE_SOLVER} showmap`;
const hasAflShowmap = (() => {
  try {
    execFileSync('sh', ['-c', 'command -v afl-showmap'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
})();

describe('symfence run refuses a set-up that cannot work, before claiming any work', () => {
  it('exits 2 with ERR_SOLVER_NOT_FOUND for a solver binary that does not exist, leaving no work record', async () => {
    const root = tempRoot();
    const out = fakeAflOut(root, ['AAAA', 'BBBB'], 'builtin:demo @@');
    const { code, err } = await cli('run', '--afl-out', out, '--afl-instance', 'main', '--showmap', referenceShowmap, '--', path.join(root, 'no-such-solver'), '@@');
    expect(code).toBe(2);
    expect(err).toContain('[ERR_SOLVER_NOT_FOUND]');
    expect(await recordStatuses(path.join(out, 'symfence', 'leases'))).toEqual([]);
  });

  it('exits 2 with ERR_SOLVER_NOT_FOUND for a bare solver name that is not on PATH', async () => {
    const root = tempRoot();
    const out = fakeAflOut(root, ['AAAA'], 'builtin:demo @@');
    const { code, err } = await cli('run', '--afl-out', out, '--afl-instance', 'main', '--showmap', referenceShowmap, '--', 'symfence-no-such-solver-on-path', '@@');
    expect(code).toBe(2);
    expect(err).toContain('[ERR_SOLVER_NOT_FOUND]');
  });

  it('exits 2 with ERR_SHOWMAP_SETUP for a --showmap that does not exist, leaving no work record', async () => {
    const root = tempRoot();
    const out = fakeAflOut(root, ['AAAA'], 'builtin:demo @@');
    const solver = script(path.join(root, 'solver.sh'), 'exit 0');
    const { code, err } = await cli('run', '--afl-out', out, '--afl-instance', 'main', '--showmap', path.join(root, 'no-such-showmap'), '--', solver, '@@');
    expect(code).toBe(2);
    expect(err).toContain('[ERR_SHOWMAP_SETUP]');
    expect(await recordStatuses(path.join(out, 'symfence', 'leases'))).toEqual([]);
  });

  it.skipIf(!hasAflShowmap)('exits 2 with ERR_SHOWMAP_SETUP when real afl-showmap cannot find the --afl-target (a set-up failure, not a hang)', async () => {
    const root = tempRoot();
    const out = fakeAflOut(root, ['AAAA'], 'builtin:demo @@');
    const solver = script(path.join(root, 'solver.sh'), 'exit 0');
    const { code, err } = await cli('run', '--afl-out', out, '--afl-instance', 'main', '--afl-target', `${path.join(root, 'no-such-target')} @@`, '--', solver, '@@');
    expect(code).toBe(2);
    expect(err).toContain('[ERR_SHOWMAP_SETUP]');
    expect(await recordStatuses(path.join(out, 'symfence', 'leases'))).toEqual([]);
    expect(existsSync(path.join(out, 'symfence', 'hangs'))).toBe(false);
  });
});

describe('a solver that becomes unavailable mid-run', () => {
  it('abandons its jobs instead of marking them done, stops after --max-setup-failures with ERR_SETUP_FAILURES, and a rerun runs those seeds', async () => {
    const root = tempRoot();
    const seeds = ['s0', 's1', 's2', 's3', 's4'];
    const out = fakeAflOut(root, seeds, 'builtin:demo @@');
    // The first run deletes the solver binary: every later spawn fails with ENOENT. The script is
    // no SymCC, so the start-up probe is skipped (--solver-telemetry off): only the spawn fails.
    const solverPath = script(path.join(root, 'solver.sh'), 'rm -f "$0"\nexit 0');
    const leaseDir = path.join(out, 'symfence', 'leases');

    const halted = await cli(
      'run', '--afl-out', out, '--afl-instance', 'main', '--workers', '1', '--max-setup-failures', '2',
      '--showmap', referenceShowmap, '--solver-telemetry', 'off', '--log-level', 'silent', '--json', '--', solverPath, '@@',
    );
    expect(halted.code).toBe(1);
    expect(halted.err).toContain('[ERR_SETUP_FAILURES]');
    expect(existsSync(solverPath)).toBe(false);
    const jobs = readFileSync(path.join(out, 'symfence', 'jobs.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as JobLogEntry);
    // Lines are written as jobs finish: a run started in the slot the previous one freed may finish
    // first, so compare in start order. The prefetched job that started in the slot the second
    // failure freed either is aborted by the stop or fails its own spawn first (abandoned): either
    // way it is rolled back, never done. A spawn that fails at once frees the slot again, so up to
    // the prefetch depth (4 per slot, one worker) of prefetched jobs may start before the stop.
    const started = [...jobs].sort((a, b) => a.startMs - b.startMs);
    expect(started.slice(0, 3).map((j) => j.status)).toEqual(['ok', 'abandoned', 'abandoned']);
    expect(started.length).toBeLessThanOrEqual(3 + 4);
    for (const extra of started.slice(3)) expect(['aborted', 'abandoned']).toContain(extra.status);
    // Only the job that really ran is done; the abandoned ones left no record behind.
    expect((await recordStatuses(leaseDir)).filter((s) => s === 'done')).toHaveLength(1);

    // Fixed: the solver is back. The rerun runs every seed that is not done — the abandoned ones too.
    script(solverPath, 'exit 0');
    const campaign = await Campaign.start({
      aflOut: out,
      aflInstance: 'main',
      workers: 1,
      solverCommand: [solverPath, '@@'],
      showmap: referenceShowmap,
      solverTelemetry: 'off',
    });
    const finished: JobLogEntry[] = [];
    campaign.on('jobFinished', (entry) => {
      finished.push(entry);
      if (finished.length === seeds.length - 1) void campaign.stop();
    });
    const summary = await campaign.done;
    expect(finished.map((j) => j.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
    expect(summary.counters.jobsAbandoned).toBe(0);
    expect((await recordStatuses(leaseDir)).filter((s) => s === 'done')).toHaveLength(seeds.length);
  });
});

describe('afl-showmap set-up failures are told apart from hangs', () => {
  const request = (root: string, showmap: string) => ({
    showmap: { binary: showmap, argv: [] },
    target: { binary: '/bin/true', argv: [] },
    inputMode: 'stdin' as const,
    timeoutMs: 1_000,
    workDir: root,
    candidate: new Uint8Array([1]),
  });

  it('reads exit 1 with a map as a hang, exit 1 without a map and a showmap that cannot start as set-up failures', async () => {
    const root = tempRoot();
    // Fake showmaps: argv is `-t ms -m none -b -q -o <map> -- target`, so the map path is $8.
    const hanging = script(path.join(root, 'hanging-showmap'), 'printf x > "$8"\nexit 1');
    const aborting = script(path.join(root, 'aborting-showmap'), 'echo "[-] PROGRAM ABORT : target not found"\nexit 1');
    expect(await runShowmap(request(root, hanging))).toMatchObject({ outcome: 'hang', exitCode: 1 });
    expect((await runShowmap(request(root, hanging))).setupFailure).toBeUndefined();
    expect(await runShowmap(request(root, aborting))).toMatchObject({ outcome: 'error', exitCode: 1, setupFailure: true });
    expect(await runShowmap(request(root, path.join(root, 'missing-showmap')))).toMatchObject({ outcome: 'error', setupFailure: true });
  });

  it('ends a solver run whose triage cannot run with ERR_SHOWMAP_SETUP and no generated inputs', async () => {
    const root = tempRoot();
    const solver = script(path.join(root, 'solver.sh'), 'echo one > "$SYMCC_OUTPUT_DIR/000000"; echo two > "$SYMCC_OUTPUT_DIR/000001"');
    const pool = new SolverPool({ scratchParent: root, solver: { workers: 1 } });
    try {
      const result = await pool.run({
        input: { bytes: new Uint8Array([1]) },
        command: { binary: solver, argv: [] },
        triage: { showmap: { binary: path.join(root, 'missing-showmap'), argv: [] }, target: { binary: '/bin/true', argv: [] } },
      });
      expect(result).toMatchObject({ status: 'error', generated: [], totalGenerated: 2 });
      expect(result.error?.code).toBe('ERR_SHOWMAP_SETUP');
    } finally {
      await pool.close();
    }
  });
});
