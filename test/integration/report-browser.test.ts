/**
 * The report as a user sees it: rendered by headless Chromium from disk with every network request
 * refused, it logs no console error, every chart has drawn data marks, and the report of a
 * two-coordinator campaign shows both coordinators. A screenshot is kept in the test's temp dir.
 */
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeReport } from '../../src/report/write-report.js';
import { demoCampaign, twoCoordinatorCampaign } from '../helpers/demo-outputs.js';
import { launchChromium, skipBrowserTests } from '../helpers/headless-chromium.js';

const dirs: string[] = [];
let browser: Browser;

afterAll(async () => {
  await browser?.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

interface Opened {
  readonly page: Page;
  readonly consoleErrors: string[];
  readonly requests: string[];
}

/** Opens a file in a fresh page that refuses (and records) every request other than the file itself. */
async function open(file: string): Promise<Opened> {
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  const consoleErrors: string[] = [];
  const requests: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(e.message));
  const own = pathToFileURL(file).href;
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url === own) return route.continue();
    requests.push(url);
    return route.abort();
  });
  await page.goto(own, { waitUntil: 'load' });
  return { page, consoleErrors, requests };
}

/** Per chart: how many data marks (line paths, point symbols) its SVG holds. */
function marksPerChart(page: Page): Promise<Array<[string, number]>> {
  return page.$$eval('figure.chart', (figures) => figures.map((f) => [(f as HTMLElement).dataset['chart'] ?? '', f.querySelectorAll('svg g.role-mark > path').length] as [string, number]));
}

describe.skipIf(skipBrowserTests)('the report in headless Chromium', () => {
  beforeAll(async () => {
    browser = await launchChromium();
  });

  it('renders a demo campaign with no console error, no request, data marks in every chart, and a screenshot', async () => {
    const outDir = await demoCampaign('symfence-browser-demo-');
    dirs.push(path.dirname(outDir));
    const written = await writeReport([outDir]);
    const { page, consoleErrors, requests } = await open(written.htmlPath);
    const marks = await marksPerChart(page);
    expect(marks.map(([id]) => id)).toEqual(['coverage', 'jobs', 'findings', 'utilisation', 'admission', 'job-kinds', 'coordinators', 'slot-time']);
    for (const [id, n] of marks) expect(n, `data marks of ${id}`).toBeGreaterThan(0);
    // Each chart is laid out with a real size, not collapsed.
    const sizes = await page.$$eval('figure.chart svg', (svgs) => svgs.map((s) => s.getBoundingClientRect().width * s.getBoundingClientRect().height));
    for (const area of sizes) expect(area).toBeGreaterThan(10_000);
    expect(await page.locator('table.leases tbody tr').count()).toBeGreaterThan(0);
    const screenshot = path.join(path.dirname(outDir), 'report.png');
    await page.screenshot({ path: screenshot, fullPage: true });
    expect(existsSync(screenshot) && statSync(screenshot).size).toBeGreaterThan(10_000);
    expect(consoleErrors).toEqual([]);
    expect(requests).toEqual([]);
    await page.close();
  });

  it('shows both coordinators of a two-coordinator campaign in the table and in the per-coordinator chart', async () => {
    const aflOut = await twoCoordinatorCampaign('symfence-browser-two-');
    dirs.push(aflOut);
    const written = await writeReport([aflOut]);
    expect(written.coordinators).toHaveLength(2);
    const { page, consoleErrors } = await open(written.htmlPath);
    const rows = await page.$$eval('table.coordinators tbody tr', (trs) => trs.map((tr) => tr.querySelector('td')?.textContent ?? ''));
    expect(rows.sort()).toEqual([...written.coordinators].sort());
    const legend = await page.$$eval('figure[data-chart="coordinators"] svg g.role-legend-label text', (texts) => texts.map((t) => t.textContent ?? ''));
    for (const label of written.coordinators) expect(legend).toContain(label);
    // Two coordinators, one completed-jobs line each.
    expect(await page.locator('figure[data-chart="coordinators"] svg g.mark-line.role-mark > path').count()).toBe(2);
    await page.screenshot({ path: path.join(aflOut, 'report.png'), fullPage: true });
    expect(consoleErrors).toEqual([]);
    await page.close();
  });
});
