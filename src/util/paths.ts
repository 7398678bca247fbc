/**
 * Locations inside the installed package. Sources run from `src/` under vitest and from
 * `dist/src/` once built; worker threads and native addons are always loaded from the build.
 */
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const builtRoot = here.split(path.sep).includes('dist');

/** The package root (the directory holding package.json). */
export const PACKAGE_ROOT = builtRoot ? path.resolve(here, '..', '..', '..') : path.resolve(here, '..', '..');

/** Absolute path of a compiled thread entry point in `dist/workers/`. */
export function workerEntry(name: string): string {
  return path.join(PACKAGE_ROOT, 'dist', 'workers', `${name}.js`);
}

/** Absolute path of a compiled file under `dist/` (e.g. `test/fixtures/reference-solver.js`). */
export function builtFile(relative: string): string {
  return path.join(PACKAGE_ROOT, 'dist', relative);
}
