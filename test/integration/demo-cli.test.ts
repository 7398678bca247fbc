import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { detectFilesystemKind } from '../../src/lease/filesystem-kind.js';
import { loadSqlite } from '../../src/lease/sqlite/sqlite-database.js';
import { readStatsFile } from '../../src/telemetry/stats-file.js';
import { lastJsonLine, runCliProcess } from '../helpers/cli-process.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('symfence demo', () => {
  it('reaches every branch of the bundled maze within 20 s, says so, and exits 0', async () => {
    const { code, stdout, stderr } = await runCliProcess(['demo', '--duration', '20s', '--json', '--log-level', 'warn']).exit;
    expect(code, stderr).toBe(0);
    const summary = lastJsonLine(stdout) as { branchesReached: number; branchesTotal: number; complete: boolean; outDir: string; jobsCompleted: number; conflicts: number };
    dirs.push(summary.outDir);
    expect(summary.branchesTotal).toBe(16);
    expect(summary.branchesReached).toBe(summary.branchesTotal);
    expect(summary.complete).toBe(true);
    expect(summary.jobsCompleted).toBeGreaterThan(0);
    expect(readStatsFile(path.join(summary.outDir, 'stats.json')).state).toBe('stopped');
    expect(existsSync(path.join(summary.outDir, 'crashes'))).toBe(true);
    // The default lease store (auto): SQLite for a lease directory on a local disk.
    const meta = JSON.parse(readFileSync(path.join(summary.outDir, 'leases', 'work', 'lease-table.json'), 'utf8')) as { store?: string };
    const local = !(await detectFilesystemKind(summary.outDir)).network;
    expect(meta.store ?? 'files').toBe(local && loadSqlite() ? 'sqlite' : 'files');
  });

  it('prints a human summary naming the branches reached', async () => {
    const { code, stdout } = await runCliProcess(['demo', '--duration', '20s', '--workers', '1', '--log-level', 'warn']).exit;
    expect(code).toBe(0);
    expect(stdout).toMatch(/16 of 16 branches reached \(every branch\)/);
    const outDir = /output: (.*)/.exec(stdout)![1]!.trim();
    dirs.push(outDir);
    // It ends by saying how to make its report, and the average solver utilisation.
    expect(stdout.trim().split('\n').at(-1)).toContain(`make its report: symfence report ${outDir}`);
    expect(stdout).toMatch(/solver utilisation \d+% on average/);
  });

  it('takes the solver options of run, and names a bad one with exit 2', async () => {
    const ok = await runCliProcess(['demo', '--duration', '20s', '--json', '--log-level', 'warn', '--solver-spawn-thread', 'main', '--solver-max-outputs', '64']).exit;
    expect(ok.code).toBe(0);
    const summary = JSON.parse(ok.stdout.trim().split('\n').at(-1)!) as { complete: boolean; outDir: string };
    expect(summary.complete).toBe(true);
    dirs.push(summary.outDir);
    const bad = await runCliProcess(['demo', '--solver-max-outputs', 'lots']).exit;
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('ERR_INVALID_OPTION');
    expect(bad.stderr).toContain('lots');
  });

  it('rejects a bad duration with one line and exit 2', async () => {
    const { code, stderr } = await runCliProcess(['demo', '--duration', 'soon']).exit;
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toContain('ERR_INVALID_OPTION');
  });
});
