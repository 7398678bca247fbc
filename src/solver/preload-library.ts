/**
 * Where the SymCC preload library (native-bindings/symfence_preload.c) is built.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from '../util/paths.js';

/** Absolute path of the built preload library, or null when the build is missing. */
export function preloadLibraryPath(): string | null {
  const file = path.join(PACKAGE_ROOT, 'native-bindings', 'build', 'Release', 'symfence_preload.so');
  return existsSync(file) ? file : null;
}
