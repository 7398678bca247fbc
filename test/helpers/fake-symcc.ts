/**
 * Builds the fake SymCC fixture (test/fixtures/fake-symcc/) with `cc`: the QSYM-like
 * `libSymRuntime.so`, `branchy` linked against it, `branchy-static` with the runtime linked in
 * (no libSymRuntime in DT_NEEDED) and a tiny marker LD_PRELOAD library. The build is cached in
 * os.tmpdir() under a hash of the sources and flags; it is built in a private temp directory and
 * renamed into place, so two test files building at once both end up with a complete copy.
 *
 * Also the reference implementation of the preload library's branch ids (docs/solver.md,
 * "Stock SymCC: the preload library"), used by the tests to check the C code bit for bit and by
 * the branch-identity bench to compare context lengths.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { aflToolEnv } from '../../src/solver/solver-env.js';
import { PACKAGE_ROOT } from '../../src/util/paths.js';
import { preloadLibraryPath } from '../../src/solver/preload-library.js';

export const FAKE_SYMCC_SOURCE_DIR = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'fake-symcc');
const SOURCES = ['fake_runtime.c', 'fake_symcc.h', 'branchy.c', 'marker_preload.c', 'afl_stub_runtime.c'];
const CFLAGS = ['-std=gnu11', '-O2', '-Wall'];

export interface FakeSymcc {
  /** Directory holding libSymRuntime.so (the fake QSYM runtime). */
  readonly runtimeDir: string;
  /** branchy, dynamically linked against runtimeDir/libSymRuntime.so (rpath set). */
  readonly program: string;
  /** branchy with the fake runtime linked in statically. */
  readonly staticProgram: string;
  /** branchy against the QSYM-like build of the fake runtime (qsym/libSymRuntime.so). */
  readonly qsymProgram: string;
  /** A preload library whose constructor writes "loaded" to $MARKER_OUT. */
  readonly markerLibrary: string;
}

/** Why the fixture cannot be built here (no `cc`), or null when it can. */
export function fakeSymccUnavailable(): string | null {
  const probe = spawnSync('cc', ['--version'], { stdio: 'ignore' });
  return probe.status === 0 ? null : 'no C compiler `cc` on PATH';
}

/**
 * Why a campaign on the fixture through the preload library beside AFL++'s tools cannot run here
 * (no `cc`, the preload library not built, `afl-cc` or `afl-showmap` missing), or null when it can.
 * CI has all of them.
 */
export function fakeSymccCampaignUnavailable(): string | null {
  const which = (name: string): boolean => spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
  return fakeSymccUnavailable() ?? (preloadLibraryPath() === null ? 'preload library not built' : !which('afl-cc') || !which('afl-showmap') ? 'afl-cc/afl-showmap missing' : null);
}

let cached: FakeSymcc | undefined;

export function buildFakeSymcc(): FakeSymcc {
  if (cached) return cached;
  const hash = createHash('sha256');
  for (const name of SOURCES) hash.update(name).update(readFileSync(path.join(FAKE_SYMCC_SOURCE_DIR, name)));
  hash.update(CFLAGS.join(' ')).update(process.arch);
  const dir = path.join(os.tmpdir(), `symfence-fake-symcc-${hash.digest('hex').slice(0, 16)}`);
  const result: FakeSymcc = {
    runtimeDir: dir,
    program: path.join(dir, 'branchy'),
    staticProgram: path.join(dir, 'branchy-static'),
    qsymProgram: path.join(dir, 'branchy-qsym'),
    markerLibrary: path.join(dir, 'marker_preload.so'),
  };
  if (!existsSync(result.markerLibrary)) buildInto(dir);
  cached = result;
  return result;
}

function buildInto(dir: string): void {
  const temp = mkdtempSync(`${dir}.tmp-`);
  const src = (name: string) => path.join(FAKE_SYMCC_SOURCE_DIR, name);
  const cc = (args: string[]) => execFileSync('cc', [...CFLAGS, ...args], { stdio: 'pipe' });
  try {
    cc(['-fPIC', '-shared', '-Wl,-soname,libSymRuntime.so', '-o', path.join(temp, 'libSymRuntime.so'), src('fake_runtime.c')]);
    // The rpath names the final directory: the program is only run after the rename.
    cc(['-o', path.join(temp, 'branchy'), src('branchy.c'), `-L${temp}`, '-lSymRuntime', `-Wl,-rpath,${dir}`]);
    cc(['-c', '-o', path.join(temp, 'fake_runtime.o'), src('fake_runtime.c')]);
    execFileSync('ar', ['rcs', path.join(temp, 'libfakesymcc.a'), path.join(temp, 'fake_runtime.o')], { stdio: 'pipe' });
    cc(['-o', path.join(temp, 'branchy-static'), src('branchy.c'), path.join(temp, 'libfakesymcc.a')]);
    // The QSYM-like build (the backend's solving rules and its solver symbol), with its own program.
    mkdirSync(path.join(temp, 'qsym'));
    cc(['-DFAKE_SYMCC_QSYM', '-fPIC', '-shared', '-Wl,-soname,libSymRuntime.so', '-o', path.join(temp, 'qsym', 'libSymRuntime.so'), src('fake_runtime.c')]);
    cc(['-o', path.join(temp, 'branchy-qsym'), src('branchy.c'), `-L${path.join(temp, 'qsym')}`, '-lSymRuntime', `-Wl,-rpath,${path.join(dir, 'qsym')}`]);
    // Last: its presence marks a complete build (see buildFakeSymcc).
    cc(['-fPIC', '-shared', '-o', path.join(temp, 'marker_preload.so'), src('marker_preload.c')]);
    try {
      renameSync(temp, dir);
    } catch (error) {
      // Another test file won the race with an identical build.
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
      rmSync(temp, { recursive: true, force: true });
    }
  } catch (error) {
    rmSync(temp, { recursive: true, force: true });
    throw error;
  }
}

/** One symbolic call as the fake runtime logged it (FAKE_SYMCC_EVENT_LOG). */
export interface LoggedEvent {
  /** The site id the runtime received: 0 when the caller asked for no solving. */
  readonly site: bigint;
  readonly taken: 0 | 1;
  readonly offset: number;
}

export function parseEventLog(text: string): LoggedEvent[] {
  return text
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => {
      const [site, taken, offset] = line.split(' ');
      return { site: BigInt(site!), taken: taken === '1' ? 1 : 0, offset: Number(offset) };
    });
}

// ---- Reference branch ids (docs/solver.md, "Stock SymCC: the preload library") ----

const MASK = (1n << 64n) - 1n;
const GOLDEN = 0x9e3779b97f4a7c15n;
const CONTEXT_SEED = 0x243f6a8885a308d3n;

export function mix64(value: bigint): bigint {
  let x = value & MASK;
  x ^= x >> 30n;
  x = (x * 0xbf58476d1ce4e5b9n) & MASK;
  x ^= x >> 27n;
  x = (x * 0x94d049bb133111ebn) & MASK;
  x ^= x >> 31n;
  return x;
}

export function branchToken(site: bigint, taken: 0 | 1): bigint {
  return mix64(site + GOLDEN * BigInt(1 + taken));
}

export function hitBucket(hits: number): number {
  if (hits <= 3) return hits;
  if (hits <= 7) return 4;
  if (hits <= 15) return 5;
  if (hits <= 31) return 6;
  if (hits <= 127) return 7;
  return 8;
}

export interface ReferenceId {
  readonly parent: bigint;
  readonly actual: bigint;
  readonly opposite: bigint;
}

/**
 * Ids of a sequence of symbolic events. `context`: K (what the library computes, K in 0..16);
 * `'full'` (a chain hash of every previous event, no hit bucket) and `'site-dir'` (the token
 * alone) are the two extremes the branch-identity bench compares with.
 */
export function referenceBranchIds(events: readonly { site: bigint; taken: 0 | 1 }[], context: number | 'full' | 'site-dir'): ReferenceId[] {
  const tokens = events.map((e) => branchToken(e.site, e.taken));
  const hits = new Map<bigint, number>();
  const out: ReferenceId[] = [];
  let chain = CONTEXT_SEED;
  let parent = 0n;
  events.forEach((event, n) => {
    let c: bigint;
    if (context === 'site-dir') c = CONTEXT_SEED;
    else if (context === 'full') c = chain;
    else {
      c = CONTEXT_SEED;
      for (let i = Math.max(0, n - context); i < n; i++) c = mix64(c ^ tokens[i]!);
      const seen = (hits.get(event.site) ?? 0) + 1;
      hits.set(event.site, seen);
      c = mix64(c ^ BigInt(hitBucket(seen)));
    }
    const nz = (id: bigint) => (id === 0n ? 1n : id);
    const actual = nz(mix64(c ^ tokens[n]!));
    const opposite = nz(mix64(c ^ branchToken(event.site, event.taken === 1 ? 0 : 1)));
    out.push({ parent, actual, opposite });
    parent = actual;
    chain = mix64(chain ^ tokens[n]!);
  });
  return out;
}

/**
 * The position-independent site id the preload library gives an address inside a loaded shared
 * object (docs/solver.md, "Site ids"): mix(fnv1a64(basename)) + offset from the load base.
 */
export function stableSite(objectBasename: string, offset: bigint): bigint {
  let h = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(objectBasename, 'utf8')) h = ((h ^ BigInt(byte)) * 0x100000001b3n) & MASK;
  const site = (mix64(h) + offset) & MASK;
  return site === 0n ? 1n : site;
}

/** The AFL++ side of a fake campaign: branchy built with `afl-cc` against no-op runtime stubs. */
export function buildFakeSymccAflTarget(dir: string): string {
  const out = path.join(dir, 'branchy.afl');
  const src = (name: string) => path.join(FAKE_SYMCC_SOURCE_DIR, name);
  execFileSync('afl-cc', ['-O0', '-o', out, src('branchy.c'), src('afl_stub_runtime.c')], {
    env: aflToolEnv(process.env, { AFL_QUIET: '1' }),
    stdio: 'pipe',
  });
  return out;
}
