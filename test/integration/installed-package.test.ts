/**
 * The package as a user installs it: `npm pack` of this checkout, installed into an empty project,
 * then every `exports` entry imported, `npx symfence --help` and `run --help`, and a short `demo`
 * run from the installed copy (not from the checkout).
 *
 * What the install needs and how the test gets it without a network:
 * - symfence's dependencies: `npm install --prefer-offline` takes them from the npm cache (warm
 *   after `npm ci`); npm goes to the registry only for what the cache lacks. When neither has
 *   them the test fails naming npm's error, it does not skip.
 * - install scripts: they are skipped at install (`--ignore-scripts`) and the two that matter are
 *   run as an install would: symfence's own (`native-bindings/build.mjs`, which compiles the addon
 *   from the shipped sources and never downloads), and better-sqlite3's binary, which its own
 *   script downloads or compiles against downloaded headers — the test copies the one `npm ci`
 *   built for this Node instead (the dependency is pinned, so it is the same version).
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { NATIVE_ADDON_PATH } from '../../src/native/bindings.js';
import { PACKAGE_ROOT } from '../../src/util/paths.js';
import { cleanedAfterEach } from '../helpers/cli-process.js';

const { dirs } = cleanedAfterEach();

const manifest = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { name: string; version: string; exports: Record<string, unknown> };

/**
 * The environment of a user's shell: without the npm settings that `npm test` / `npx` in this
 * checkout export from its .npmrc (allow-scripts of the checkout) and package.json.
 */
const userEnv = Object.fromEntries(
  Object.entries(process.env).filter(([key]) => !/^npm_(config_(allow_scripts|strict_allow_scripts)$|package_|lifecycle_)/i.test(key)),
);

function run(command: string, args: readonly string[], cwd: string, timeoutMs = 300_000): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(command, args, { cwd, encoding: 'utf8', timeout: timeoutMs, env: { ...userEnv, npm_config_yes: 'true', npm_config_update_notifier: 'false' } });
  // A hang guard, not a speed check: say which command ran out of time.
  const timedOut = r.error !== undefined ? `\n${command} ${args.join(' ')}: ${r.error.message}` : '';
  return { status: r.status, stdout: r.stdout, stderr: `${r.stderr}${timedOut}` };
}

it('npm pack, installed in an empty project: every entry imports, the CLI answers --help and runs a demo', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'symfence-installed-'));
  dirs.push(root);

  // The tarball of this checkout (dist/ is built by the test run's pretest; `prepare` would rebuild it).
  const pack = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', root], PACKAGE_ROOT);
  expect(pack.status, pack.stderr).toBe(0);
  const [packed] = JSON.parse(pack.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  const files = packed!.files.map((f) => f.path);
  // What the install and the runtime need: compiled code, thread entry points, the addon's sources.
  for (const needed of ['package.json', 'dist/src/index.js', 'dist/src/cli/main.js', 'dist/workers/io-worker.js', 'dist/workers/solver-worker.js', 'dist/src/reference/reference-solver.js', 'native-bindings/build.mjs', 'native-bindings/binding.gyp', 'native-bindings/symfence_native.c']) {
    expect(files, needed).toContain(needed);
  }
  // Not shipped: this machine's build products and the test suite.
  expect(files.filter((f) => f.startsWith('native-bindings/build/') || f.startsWith('dist/test/') || f.startsWith('dist/bench/'))).toEqual([]);

  const project = path.join(root, 'consumer');
  mkdirSync(project);
  writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }));
  const install = run('npm', ['install', '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel', 'error', path.join(root, packed!.filename)], project);
  if (install.status !== 0) {
    // ENOTCACHED / ENOTFOUND / EAI_AGAIN: a dependency is neither in the npm cache nor reachable in the registry.
    throw new Error(`npm install --prefer-offline of the packed tarball failed (status ${install.status}):\n${install.stderr.trim().split('\n').slice(-8).join('\n')}`);
  }
  const installed = path.join(project, 'node_modules', manifest.name);
  expect(JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8'))).toMatchObject({ version: manifest.version });

  // symfence's own install script, in the installed copy.
  const native = run(process.execPath, [path.join(installed, 'native-bindings', 'build.mjs')], installed);
  expect(native.status, native.stderr).toBe(0);
  // Built from the shipped sources whenever this machine builds the checkout's addon.
  if (existsSync(NATIVE_ADDON_PATH)) expect(existsSync(path.join(installed, 'native-bindings', 'build', 'Release', 'symfence_native.node')), native.stderr).toBe(true);
  // better-sqlite3's binary: the one npm ci built (see the header).
  const sqliteHere = path.dirname(createRequire(path.join(PACKAGE_ROOT, 'package.json')).resolve('better-sqlite3/package.json'));
  const sqliteThere = path.join(project, 'node_modules', 'better-sqlite3');
  const binary = path.join('build', 'Release', 'better_sqlite3.node');
  mkdirSync(path.join(sqliteThere, 'build', 'Release'), { recursive: true });
  copyFileSync(path.join(sqliteHere, binary), path.join(sqliteThere, binary));

  // Every exports entry, imported by its public name from the consumer project.
  const entries = Object.keys(manifest.exports).map((key) => (key === '.' ? manifest.name : `${manifest.name}/${key.slice(2)}`));
  expect(entries.length).toBeGreaterThan(1);
  const script = `const out = {}; for (const name of ${JSON.stringify(entries)}) out[name] = Object.keys(await import(name)).length; console.log(JSON.stringify(out));`;
  const imported = run(process.execPath, ['--input-type=module', '-e', script], project);
  expect(imported.status, imported.stderr).toBe(0);
  const counts = JSON.parse(imported.stdout.trim().split('\n').pop()!) as Record<string, number>;
  for (const name of entries) expect(counts[name], name).toBeGreaterThan(0);
  // The installed copy, not the checkout, is what resolved.
  const resolved = run(process.execPath, ['--input-type=module', '-e', `console.log(import.meta.resolve(${JSON.stringify(manifest.name)}))`], project);
  expect(resolved.stdout.trim()).toContain(path.join(project, 'node_modules', manifest.name));

  // The CLI through the bin link npm made, as the README runs it.
  const help = run('npx', ['--offline', 'symfence', '--help'], project);
  expect(help.status, help.stderr).toBe(0);
  expect(help.stdout).toMatch(/\brun\b/);
  expect(help.stdout).toMatch(/\bdemo\b/);
  const runHelp = run('npx', ['--offline', 'symfence', 'run', '--help'], project);
  expect(runHelp.status, runHelp.stderr).toBe(0);
  expect(runHelp.stdout).toContain('--afl-out');
  const out = path.join(project, 'demo-out');
  // The demo stops as soon as every maze branch is reached; the duration only caps a slow machine.
  const demo = run('npx', ['--offline', 'symfence', 'demo', '--duration', '120s', '--workers', '1', '--out-dir', out, '--json'], project);
  expect(demo.status, demo.stderr).toBe(0);
  const summary = JSON.parse(demo.stdout.trim().split('\n').pop()!) as { jobsCompleted: number };
  expect(summary.jobsCompleted).toBeGreaterThan(0);
  expect(readdirSync(out)).toContain('stats.json');
}, 600_000);
