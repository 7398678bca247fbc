#!/usr/bin/env node
// Builds the N-API addon and the SymCC preload library (symfence_preload.so, a plain shared
// library, docs/solver.md "Stock SymCC: the preload library") with node-gyp during `npm ci` /
// `npm install` (package.json `install`).
//
// Never downloads anything: node-gyp is pointed at the headers of the Node that runs this script
// (`<prefix>/include/node`, or an explicit `npm_config_nodedir`). If the headers, node-gyp or a
// compiler are missing, or the build fails, this prints ONE warning and exits 0: symfence still
// works in single-coordinator mode without the addon (solvers then start through child_process),
// and `loadNative()` returns null. A failed preload build is one more warning, never a failed
// install: `preloadLibraryPath()` then returns null. make runs with -k so either target builds
// even when the other does not compile.
//
// SYMFENCE_SKIP_NATIVE=1 skips the build (to exercise the no-addon path).
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const buildDir = path.join(here, 'build');
const logFile = path.join(buildDir, 'build.log');
const addon = path.join(buildDir, 'Release', 'symfence_native.node');
/** The stable path `preloadLibraryPath()` (src/solver/preload-library.ts) looks at. */
const preload = path.join(buildDir, 'Release', 'symfence_preload.so');
/** Where node-gyp's generators may leave a shared_library target, newest layouts first. */
const preloadCandidates = [preload, path.join(buildDir, 'Release', 'lib.target', 'symfence_preload.so'), path.join(buildDir, 'Release', 'obj.target', 'symfence_preload.so')];

function warnPreload(reason) {
  console.warn(`symfence: SymCC preload library not built (${reason}); stock SymCC binaries run without branch telemetry or directed solving.`);
}

function warn(reason) {
  if (!preloadSettled) warnPreload(reason);
  console.warn(
    `symfence: native addon not built (${reason}); single-coordinator mode works, ` +
      'solvers are started with child_process (slower), and ' +
      'multi-coordinator mode (flock across processes) will refuse to start.',
  );
  process.exit(0);
}

/** Built, or its one warning printed. */
let preloadSettled = false;

if (process.env.SYMFENCE_SKIP_NATIVE === '1') warn('SYMFENCE_SKIP_NATIVE=1');
if (process.platform !== 'linux') warn(`platform ${process.platform} is not supported, only linux`);

/** A directory holding `include/node/node_api.h`, so node-gyp uses it instead of downloading. */
function localNodeDir() {
  const candidates = [process.env.npm_config_nodedir, path.resolve(path.dirname(process.execPath), '..')];
  return candidates.find((dir) => dir && existsSync(path.join(dir, 'include', 'node', 'node_api.h')));
}

/** node-gyp's JS entry: the one npm hands lifecycle scripts, else npm's bundled copy, else a local install. */
function nodeGypScript() {
  const candidates = [
    process.env.npm_config_node_gyp,
    path.resolve(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ];
  try {
    candidates.push(createRequire(import.meta.url).resolve('node-gyp/bin/node-gyp.js'));
  } catch {
    // not installed locally; the other candidates may still exist
  }
  return candidates.find((file) => file && existsSync(file));
}

const nodedir = localNodeDir();
if (!nodedir) warn(`no local Node headers (include/node/node_api.h) next to ${process.execPath}; set npm_config_nodedir`);
const gyp = nodeGypScript();
if (!gyp) warn('node-gyp not found (npm normally provides it)');

const result = spawnSync(process.execPath, [gyp, 'rebuild', `--nodedir=${nodedir}`, '--loglevel=warn'], {
  cwd: here,
  encoding: 'utf8',
  // Belt and braces: even a misconfigured node-gyp must not fetch headers from the network.
  // MAKEFLAGS=k: the addon and the preload library are independent; one failing must not stop the other.
  env: { ...process.env, MAKEFLAGS: `k ${process.env.MAKEFLAGS ?? ''}`.trim(), npm_config_nodedir: nodedir, npm_config_tarball: '', npm_config_dist_url: 'http://127.0.0.1:9/' },
});
const builtPreload = preloadCandidates.find((file) => existsSync(file));
if (builtPreload && builtPreload !== preload) {
  // Copy then rename, so the stable path never holds half a library.
  copyFileSync(builtPreload, `${preload}.tmp`);
  renameSync(`${preload}.tmp`, preload);
}
preloadSettled = builtPreload !== undefined;
if (!preloadSettled) {
  mkdirSync(buildDir, { recursive: true });
  writeFileSync(logFile, `${result.error ?? ''}\n${result.stdout ?? ''}\n${result.stderr ?? ''}`);
  warnPreload(`node-gyp failed with ${result.error ? result.error.message : `exit ${result.status}`}; log in ${logFile}`);
  preloadSettled = true; // warned once: the addon's warning below must not repeat it
}
// A failed preload compile alone also makes node-gyp exit non-zero; the addon built fine then.
if (!existsSync(addon) || (result.status !== 0 && builtPreload !== undefined)) {
  mkdirSync(buildDir, { recursive: true });
  writeFileSync(logFile, `${result.error ?? ''}\n${result.stdout ?? ''}\n${result.stderr ?? ''}`);
  warn(`node-gyp failed with ${result.error ? result.error.message : `exit ${result.status}`}; log in ${logFile}`);
}
