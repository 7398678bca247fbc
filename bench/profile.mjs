#!/usr/bin/env node
// Profiles one benchmark under clinic: `npm run profile -- <bench> [--tool doctor|flame|bubbleprof|heapprofiler] [bench flags]`,
// or a campaign of the CLI itself: `npm run profile -- cli [--tool …] run --afl-out … -- ./target_sym @@`
// (give it `--duration`: the report is written when the process exits).
// The report lands in bench/results/clinic/ and its path is printed at the end.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const built = path.join(root, 'dist', 'bench');
const tools = ['doctor', 'flame', 'bubbleprof', 'heapprofiler'];

const args = process.argv.slice(2);
let tool = 'flame';
const toolIndex = args.indexOf('--tool');
if (toolIndex !== -1) {
  tool = args[toolIndex + 1] ?? '';
  args.splice(toolIndex, 2);
}
const [name, ...rest] = args;
const available = existsSync(built)
  ? readdirSync(built).filter((f) => f.endsWith('.js') && !f.startsWith('_')).map((f) => f.slice(0, -3)).sort()
  : [];
const cli = path.join(root, 'dist', 'src', 'cli', 'main.js');
if (!name || !(available.includes(name) || name === 'cli') || !tools.includes(tool)) {
  console.error(`usage: npm run profile -- <bench|cli> [--tool ${tools.join('|')}] [bench flags | symfence arguments]`);
  console.error(`benches: ${available.join(', ') || '(none built: run npm run build)'}`);
  process.exit(2);
}

const dest = path.join(root, 'bench', 'results', 'clinic');
mkdirSync(dest, { recursive: true });
const before = new Set(readdirSync(dest));
const clinic = path.join(root, 'node_modules', '.bin', 'clinic');
// NO_INSIGHT: clinic otherwise asks for analytics consent on first use and exits silently without a TTY.
const result = spawnSync(clinic, [tool, '--open=false', '--dest', dest, '--', process.execPath, name === 'cli' ? cli : path.join(built, `${name}.js`), ...rest], {
  stdio: 'inherit',
  env: { ...process.env, NO_INSIGHT: '1' },
});
const reports = readdirSync(dest)
  .filter((f) => !before.has(f) && f.endsWith('.html'))
  .map((f) => path.join(dest, f))
  .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
if (reports[0]) console.log(`clinic ${tool} report: ${reports[0]}`);
else console.error(`clinic ${tool} wrote no report (exit ${result.status ?? result.signal})`);
process.exit(result.status ?? 1);
