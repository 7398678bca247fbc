import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const REPO = path.resolve(import.meta.dirname, '../..');
const CHECK = path.join(REPO, '.ci/check-install-scripts.mjs');
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A copy of the project's install policy files, to break one at a time. */
function projectCopy(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-install-policy-'));
  dirs.push(dir);
  for (const f of ['package.json', 'package-lock.json', '.npmrc']) cpSync(path.join(REPO, f), path.join(dir, f));
  return dir;
}

const check = (dir: string) => spawnSync(process.execPath, [CHECK, dir], { encoding: 'utf8' });

describe('the fresh-clone install-scripts check (.ci/run)', () => {
  it('passes on the project: every locked dependency install script is approved or denied, strict mode on', () => {
    expect(execFileSync(process.execPath, [CHECK, REPO], { encoding: 'utf8' })).toContain('every dependency install script is reviewed');
    const pkg = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean>; scripts: Record<string, string> };
    // better-sqlite3 (the SQLite lease store) is approved (its version is pinned exactly in dependencies): it builds
    // from source with node-gyp when no prebuilt binary can be downloaded. protobufjs (etcd3's gRPC
    // stack) is denied: its postinstall only prints a warning.
    expect(pkg.allowScripts).toEqual({ 'es5-ext': false, 'better-sqlite3': true, protobufjs: false });
    // The addon build is the package's own install script, which the policy does not govern.
    expect(pkg.scripts['install']).toBe('node native-bindings/build.mjs');
  });

  it('fails naming a locked dependency whose install script the policy does not cover', () => {
    const dir = projectCopy();
    const lockFile = path.join(dir, 'package-lock.json');
    const lock = JSON.parse(readFileSync(lockFile, 'utf8')) as { packages: Record<string, Record<string, unknown>> };
    lock.packages['node_modules/esbuild-like'] = { version: '1.2.3', hasInstallScript: true, dev: true };
    writeFileSync(lockFile, JSON.stringify(lock));
    const result = check(dir);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('esbuild-like@1.2.3');
    expect(result.stderr).not.toContain('es5-ext');
  });

  it('fails when .npmrc no longer makes an unreviewed install script an error', () => {
    const dir = projectCopy();
    writeFileSync(path.join(dir, '.npmrc'), '# nothing\n');
    const result = check(dir);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('strict-allow-scripts');
  });

  it('accepts pinned entries only for the locked version', () => {
    const dir = projectCopy();
    const pkgFile = path.join(dir, 'package.json');
    const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as { allowScripts: Record<string, boolean> };
    // Only es5-ext's entry varies; the project's other approvals stay as they are.
    const others = Object.fromEntries(Object.entries(pkg.allowScripts).filter(([key]) => !key.startsWith('es5-ext')));
    pkg.allowScripts = { ...others, 'es5-ext@0.10.63 || 0.10.64': false };
    writeFileSync(pkgFile, JSON.stringify(pkg));
    expect(check(dir).status).toBe(0);
    pkg.allowScripts = { ...others, 'es5-ext@0.10.63': false };
    writeFileSync(pkgFile, JSON.stringify(pkg));
    expect(check(dir).status).toBe(1);
  });
});
