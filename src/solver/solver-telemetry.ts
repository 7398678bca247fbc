/**
 * Where a campaign's branch telemetry comes from (`--solver-telemetry`), decided once, before any
 * seed is spent:
 *
 * - `preload`: symfence's preload library interposes the SymCC runtime's branch hook of a
 *   dynamically linked stock SymCC binary (docs/solver.md, "Stock SymCC: the preload library");
 * - `runtime`: the solver writes `symfence-telemetry/1` itself (the reference solver, or a SymCC
 *   runtime with the directed extension);
 * - `off`: no telemetry; every job is an untargeted whole-input run.
 *
 * `auto` picks `preload` when the binary imports `_sym_push_path_constraint` through the dynamic
 * loader and its SymCC runtime does not already write telemetry, `runtime` otherwise. A SymCC
 * binary that cannot be interposed (statically linked) falls back to `runtime` with one warning:
 * its runs stay untargeted unless its runtime writes telemetry.
 */
import { closeSync, existsSync, fstatSync, openSync, readSync, constants as fsConstants } from 'node:fs';
import { resolveProgramPath } from './program-lookup.js';
import path from 'node:path';
import { PreloadUnsupportedError } from '../errors.js';
import { invalidOption } from '../config/values.js';
import { readElfInfo, type ElfInfo } from './elf-dynamic.js';

export const SOLVER_TELEMETRY_MODES = ['auto', 'preload', 'runtime', 'off'] as const;
export type SolverTelemetryMode = (typeof SOLVER_TELEMETRY_MODES)[number];

export interface SolverTelemetryDecision {
  readonly mode: 'preload' | 'runtime' | 'off';
  /** The library to preload (mode `preload`). */
  readonly preload?: string;
  /** Why this mode, in one sentence (logged at start). */
  readonly reason: string;
  /** Set when `auto` had to fall back on a SymCC binary: print it once. */
  readonly warning?: string;
}

/** The runtime's branch hook: a binary that imports it can be interposed by a preload library. */
export const SYMCC_BRANCH_HOOK = '_sym_push_path_constraint';
/** A runtime library that contains this string writes telemetry itself. */
const OWN_TELEMETRY_MARK = 'symfence-telemetry/1';
/** Runtime libraries larger than this are not scanned for the mark (treated as stock). */
const MAX_RUNTIME_SCAN_BYTES = 512 * 1024 * 1024;
const DEFAULT_LIBRARY_DIRS = ['/lib', '/usr/lib', '/lib64', '/usr/lib64', '/usr/local/lib', '/lib/x86_64-linux-gnu', '/usr/lib/x86_64-linux-gnu', '/lib/aarch64-linux-gnu', '/usr/lib/aarch64-linux-gnu'];

export interface DecideTelemetryInput {
  readonly requested: SolverTelemetryMode;
  /** The solver binary as it will be spawned (absolute, or resolved through PATH by the caller). */
  readonly binary: string;
  /** The built preload library, or null when the build is missing. */
  readonly preloadLibrary: string | null;
  /** The environment the solver inherits (`LD_LIBRARY_PATH` is part of the loader's search). */
  readonly env: NodeJS.ProcessEnv;
}

export function checkSolverTelemetryMode(value: unknown, option = 'solverTelemetry'): SolverTelemetryMode {
  if (typeof value === 'string' && (SOLVER_TELEMETRY_MODES as readonly string[]).includes(value)) return value as SolverTelemetryMode;
  throw invalidOption(option, `one of ${SOLVER_TELEMETRY_MODES.join('|')}`, value);
}

/**
 * Decides the telemetry source. Throws `ERR_PRELOAD_UNSUPPORTED` when `preload` was asked for
 * explicitly and cannot work (not a dynamically linked SymCC binary, or the library is missing).
 */
export function decideSolverTelemetry(input: DecideTelemetryInput): SolverTelemetryDecision {
  const requested = checkSolverTelemetryMode(input.requested);
  if (requested === 'off') return { mode: 'off', reason: 'solver telemetry is off (--solver-telemetry off): every job is an untargeted run' };
  if (requested === 'runtime') return { mode: 'runtime', reason: 'the solver writes its own telemetry (--solver-telemetry runtime)' };

  let elf: ElfInfo;
  try {
    elf = readElfInfo(input.binary);
  } catch (error) {
    if (requested === 'preload') throw new PreloadUnsupportedError(`--solver-telemetry preload: cannot read ${input.binary}: ${(error as Error).message}`, { binary: input.binary });
    return { mode: 'runtime', reason: `${input.binary} could not be inspected (${(error as NodeJS.ErrnoException).code ?? 'error'}); using the solver's own telemetry, if any` };
  }
  const symcc = elf.kind === 'elf' && elf.hasSymbolName(SYMCC_BRANCH_HOOK);
  // Interposable: the hook is resolved by the dynamic loader from a SymCC runtime the binary
  // needs. A runtime linked into the executable binds its calls at link time, past any preload.
  const runtimeNeeded = elf.kind === 'elf' && elf.needed.some(isSymccRuntimeName);
  const interposable = elf.kind === 'elf' && elf.dynamic && runtimeNeeded && elf.hasDynamicSymbolName(SYMCC_BRANCH_HOOK);

  if (!interposable) {
    const why =
      elf.kind !== 'elf'
        ? `${input.binary} is not an ELF executable`
        : !symcc
          ? `${input.binary} does not call SymCC's ${SYMCC_BRANCH_HOOK}`
          : `${input.binary} has its SymCC runtime linked in statically (no SymCC runtime in DT_NEEDED), so it cannot be interposed`;
    if (requested === 'preload') throw new PreloadUnsupportedError(`--solver-telemetry preload: ${why}`, { binary: input.binary });
    if (symcc) {
      return {
        mode: 'runtime',
        reason: why,
        warning: `${why}: solver runs stay untargeted (no branch telemetry) unless its runtime writes symfence-telemetry/1; link SymCC's runtime dynamically (the default build) for directed runs`,
      };
    }
    return { mode: 'runtime', reason: `${why}; using the solver's own telemetry, if any` };
  }

  const runtime = elf.kind === 'elf' ? findSymccRuntime(elf, input.binary, input.env) : undefined;
  if (requested === 'auto' && runtime !== undefined && writesOwnTelemetry(runtime)) {
    return { mode: 'runtime', reason: `the SymCC runtime ${runtime} writes its own telemetry` };
  }
  if (input.preloadLibrary === null || !existsSync(input.preloadLibrary)) {
    const why = 'the preload library was not built (npm ci builds it with the native addon; see native-bindings/build/build.log)';
    if (requested === 'preload') throw new PreloadUnsupportedError(`--solver-telemetry preload: ${why}`, { binary: input.binary });
    return { mode: 'runtime', reason: why, warning: `${why}: solver runs of ${input.binary} stay untargeted` };
  }
  return {
    mode: 'preload',
    preload: input.preloadLibrary,
    reason: `${input.binary} links the SymCC runtime dynamically${runtime ? ` (${runtime})` : ''}: branch telemetry and directed runs through the preload library`,
  };
}

/** `libSymRuntime.so` (SymCC's name for every backend), or a renamed build of it. */
export function isSymccRuntimeName(needed: string): boolean {
  return /sym.*runtime|symcc/i.test(path.basename(needed));
}

/**
 * The SymCC runtime library the binary will load: the `DT_NEEDED` entry naming a SymCC runtime,
 * looked up as the loader would (RUNPATH with `$ORIGIN`, `LD_LIBRARY_PATH`, default directories).
 * The ld.so cache is not read; a runtime found only through it is treated as stock.
 */
export function findSymccRuntime(elf: Extract<ElfInfo, { kind: 'elf' }>, binary: string, env: NodeJS.ProcessEnv): string | undefined {
  const name = elf.needed.find(isSymccRuntimeName);
  if (name === undefined) return undefined;
  if (name.includes('/')) return existsSync(name) ? name : undefined;
  const origin = path.dirname(path.resolve(binary));
  const dirs = [
    ...elf.runpath.map((d) => d.replace(/\$(ORIGIN|\{ORIGIN\})/g, origin)),
    ...(env.LD_LIBRARY_PATH ?? '').split(':').filter((d) => d !== ''),
    ...DEFAULT_LIBRARY_DIRS,
  ];
  for (const dir of dirs) {
    const candidate = path.join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

/**
 * The file `execvp` would run for `binary` (`resolveProgramPath`); unchanged when nothing
 * matches — the start-up check reports that as `ERR_SOLVER_NOT_FOUND`.
 */
export function resolveOnPath(binary: string, env: NodeJS.ProcessEnv): string {
  try {
    return resolveProgramPath(binary, env.PATH);
  } catch {
    return binary;
  }
}

/** Does the library's file contain the telemetry schema name (it writes telemetry itself)? */
function writesOwnTelemetry(library: string): boolean {
  let fd: number;
  try {
    fd = openSync(library, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  } catch {
    return false;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile() || stat.size > MAX_RUNTIME_SCAN_BYTES) return false;
    const mark = Buffer.from(OWN_TELEMETRY_MARK);
    const chunk = Buffer.alloc(1 << 20);
    let carry = Buffer.alloc(0);
    for (let offset = 0; offset < stat.size; ) {
      const n = readSync(fd, chunk, 0, chunk.length, offset);
      if (n <= 0) break;
      const window = Buffer.concat([carry, chunk.subarray(0, n)]);
      if (window.indexOf(mark) >= 0) return true;
      carry = window.subarray(Math.max(0, window.length - mark.length + 1));
      offset += n;
    }
    return false;
  } finally {
    closeSync(fd);
  }
}
