/**
 * Which mechanism starts solver (and afl-showmap) processes.
 *
 * - `native`: the addon's `spawnGroup` — posix_spawn (glibc: clone with CLONE_VM | CLONE_VFORK,
 *   no page-table copy) and a pidfd + stderr pipe watched on the calling thread's loop.
 * - `child-process`: Node's `child_process.spawn` with `detached: true` — libuv 1.46 forks, which
 *   copies the page tables of the whole Node process and costs the parent about twice the CPU
 *   when other threads are busy (docs/solver.md, *Per-run overhead*).
 *
 * Both give the child the same contract (own session and process group, default signal
 * dispositions, empty mask, stdin from an fd / given bytes / /dev/null, stdout /dev/null, stderr
 * on a pipe, execvp-style program lookup). `auto` picks `native` whenever the addon provides it.
 */
import { NativeUnavailableError } from '../errors.js';
import { loadNative, nativeLoadError } from '../native/bindings.js';

export type SpawnMethod = 'native' | 'child-process';
export type SpawnMethodChoice = SpawnMethod | 'auto';

/** Why native spawning is not available on this thread, or `null` when it is. */
function nativeSpawnUnavailableReason(): string | null {
  const native = loadNative();
  if (native === null) return `native addon not loadable: ${nativeLoadError()?.message ?? 'unknown reason'}`;
  if (typeof native.spawnGroup !== 'function') return native.spawnUnsupported ?? 'the loaded addon has no spawnGroup (rebuild it with `npm run build:native`)';
  return null;
}

export function nativeSpawnAvailable(): boolean {
  return nativeSpawnUnavailableReason() === null;
}

/**
 * `auto` → `native` when available, else `child-process`. `native` when unavailable throws
 * `NativeUnavailableError` (`ERR_NATIVE_UNAVAILABLE`) naming the reason.
 */
export function resolveSpawnMethod(choice: SpawnMethodChoice): SpawnMethod {
  if (choice === 'child-process') return choice;
  const reason = nativeSpawnUnavailableReason();
  if (reason === null) return 'native';
  if (choice === 'auto') return 'child-process';
  throw new NativeUnavailableError(`spawnMethod native needs the addon's posix_spawn support: ${reason}`, { purpose: 'native solver spawning', reason });
}
