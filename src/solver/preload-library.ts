/**
 * The SymCC preload library (`native-bindings/symfence_preload.c`): loaded with LD_PRELOAD into a
 * stock SymCC binary (QSYM backend, libSymRuntime.so dynamically linked), it gives the binary
 * branch ids, `symfence-telemetry/1` telemetry and directed solving. Its environment contract is in
 * docs/solver.md, "Stock SymCC: the preload library". Built during `npm ci` beside the addon; a
 * failed build leaves it missing and this returns null.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from '../util/paths.js';

/** Where `native-bindings/build.mjs` leaves the library. */
export const PRELOAD_LIBRARY_PATH = path.join(PACKAGE_ROOT, 'native-bindings', 'build', 'Release', 'symfence_preload.so');

/** Absolute path of the built preload library, or null when it was not built here. */
export function preloadLibraryPath(): string | null {
  return existsSync(PRELOAD_LIBRARY_PATH) ? PRELOAD_LIBRARY_PATH : null;
}
