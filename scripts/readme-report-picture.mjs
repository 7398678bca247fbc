#!/usr/bin/env node
// Makes the README's picture of a report (docs/images/report.png): runs the demo campaign into a
// temporary directory, writes its report, and screenshots the top of the page (title,
// coordinator table, first charts) in headless Debian chromium through playwright-core (which
// never downloads a browser). Usage, after `npm run build`:
//   node scripts/readme-report-picture.mjs [output.png]      (npm run readme-picture)
// Env: SYMFENCE_CHROMIUM = the chromium binary (default /usr/bin/chromium).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const output = path.resolve(process.argv[2] ?? path.join(root, 'docs', 'images', 'report.png'));
const work = mkdtempSync(path.join(tmpdir(), 'symfence-readme-picture-'));
try {
  const outDir = path.join(work, 'demo');
  const cli = path.join(root, 'dist', 'src', 'cli', 'main.js');
  execFileSync(process.execPath, [cli, 'demo', '--duration', '20s', '--workers', '2', '--out-dir', outDir, '--log-level', 'warn'], { stdio: ['ignore', 'inherit', 'inherit'] });
  const html = execFileSync(process.execPath, [cli, 'report', outDir, '--output-dir', path.join(work, 'report')], { encoding: 'utf8' }).trim();
  const browser = await chromium.launch({
    executablePath: process.env.SYMFENCE_CHROMIUM ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1000, height: 1000 }, deviceScaleFactor: 1 });
    await page.route('**/*', (route) => (route.request().url().startsWith('file:') ? route.continue() : route.abort()));
    await page.goto(pathToFileURL(html).href);
    await page.screenshot({ path: output, clip: { x: 0, y: 0, width: 1000, height: 1000 } });
  } finally {
    await browser.close();
  }
  console.log(`${path.relative(process.cwd(), output)} (${statSync(output).size} bytes)`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
