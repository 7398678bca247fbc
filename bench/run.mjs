#!/usr/bin/env node
// Runs one benchmark from the build: `npm run bench -- <name> [flags]`.
// Each bench prints readable rows and, as its last line, one JSON object.
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const built = path.join(root, 'dist', 'bench');
const [name, ...rest] = process.argv.slice(2);
const available = existsSync(built)
  ? readdirSync(built).filter((f) => f.endsWith('.js') && !f.startsWith('_')).map((f) => f.slice(0, -3)).sort()
  : [];
if (!name || name === '--help' || name === '-h') {
  console.log(`usage: npm run bench -- <name> [flags]\navailable: ${available.join(', ') || '(none built)'}`);
  process.exit(name ? 0 : 2);
}
if (!available.includes(name)) {
  console.error(`symfence bench: unknown bench ${JSON.stringify(name)}; available: ${available.join(', ') || '(none built)'}`);
  process.exit(2);
}
process.argv = [process.argv[0], path.join(built, `${name}.js`), ...rest];
await import(pathToFileURL(path.join(built, `${name}.js`)).href);
