/**
 * The README's `npx symfence …` commands work as written in a fresh clone: a copy of the tracked
 * files (what `git clone` gives) with the dependencies installed, `.npmrc` and its
 * `strict-allow-scripts` included. npx installs the checkout into its own cache, running the
 * project's `install` and `prepare` scripts: slow (a tsc build), so one test runs every command.
 * Offline: dependencies come from the npm cache the install filled.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/util/paths.js';

const tracked = ((): string[] | undefined => {
  try {
    return execFileSync('git', ['ls-files', '-z'], { cwd: PACKAGE_ROOT, encoding: 'utf8' }).split('\0').filter((f) => f !== '');
  } catch {
    return undefined;
  }
})();

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe.skipIf(tracked === undefined)('README commands in a fresh clone', () => {
  it('npx symfence --help, run --help and demo work, with strict-allow-scripts on', () => {
    const clone = mkdtempSync(path.join(tmpdir(), 'symfence-clone-'));
    dirs.push(clone);
    for (const file of tracked!) {
      mkdirSync(path.dirname(path.join(clone, file)), { recursive: true });
      cpSync(path.join(PACKAGE_ROOT, file), path.join(clone, file));
    }
    // `npm ci` done: the dependencies this checkout already installed.
    symlinkSync(path.join(PACKAGE_ROOT, 'node_modules'), path.join(clone, 'node_modules'));
    const npx = (...args: string[]) =>
      spawnSync('npx', ['--offline', 'symfence', ...args], { cwd: clone, encoding: 'utf8', timeout: 480_000, env: { ...process.env, npm_config_yes: 'true' } });
    const help = npx('--help');
    expect(help.stderr).not.toContain('ESTRICTALLOWSCRIPTS');
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toContain('Usage: symfence');
    const run = npx('run', '--help');
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toContain('--afl-out');
    const out = path.join(clone, 'demo-out');
    const demo = npx('demo', '--duration', '3s', '--workers', '1', '--out-dir', out, '--json');
    expect(demo.status, demo.stderr).toBe(0);
    const summary = JSON.parse(demo.stdout.trim().split('\n').pop()!) as { jobsCompleted: number };
    expect(summary.jobsCompleted).toBeGreaterThan(0);
  }, 900_000);
});
