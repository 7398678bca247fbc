import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from './util/paths.js';

/** The version from package.json, read once at load. */
export const PACKAGE_VERSION: string = (
  JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }
).version;
