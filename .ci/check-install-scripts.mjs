#!/usr/bin/env node
// Checks, without installing anything, that `npm ci` on a fresh clone will be quiet about install
// scripts: every locked dependency that has one is approved or denied in package.json
// "allowScripts", and .npmrc keeps strict-allow-scripts on (so a new, unreviewed one fails the
// install instead of warning). Usage: node .ci/check-install-scripts.mjs [project-dir]
import { readFileSync } from 'node:fs';
import path from 'node:path';

const dir = path.resolve(process.argv[2] ?? '.');
const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
const lock = JSON.parse(readFileSync(path.join(dir, 'package-lock.json'), 'utf8'));
const policy = pkg.allowScripts ?? {};
const problems = [];

/** Does an allowScripts key (`name`, `name@1.2.3`, `name@1.2.3 || 1.2.4`) cover name@version? */
function covers(key, name, version) {
  if (key === name || key === `${name}@*`) return true;
  if (!key.startsWith(`${name}@`)) return false;
  return key.slice(name.length + 1).split('||').map((v) => v.trim()).includes(version);
}

for (const [where, entry] of Object.entries(lock.packages ?? {})) {
  if (where === '' || !entry.hasInstallScript) continue; // '' is this package: its own scripts run
  const name = entry.name ?? where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length);
  if (!Object.keys(policy).some((key) => covers(key, name, entry.version))) {
    problems.push(`${name}@${entry.version} (${where}) has an install script not covered by package.json "allowScripts"`);
  }
}

let npmrc = '';
try {
  npmrc = readFileSync(path.join(dir, '.npmrc'), 'utf8');
} catch {
  // reported below
}
if (!/^\s*strict-allow-scripts\s*=\s*true\s*$/m.test(npmrc)) problems.push('.npmrc does not set strict-allow-scripts=true');

if (problems.length > 0) {
  for (const p of problems) console.error(`install-scripts check: ${p}`);
  console.error('Review each with `npm install-scripts ls`, then `npm install-scripts approve <pkg>` or `deny <pkg>`.');
  process.exit(1);
}
console.log('install-scripts check: every dependency install script is reviewed');
