import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { lastJsonLine, runCliProcess } from '../helpers/cli-process.js';
import { findDuplicateKeys } from '../helpers/strict-json.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('log lines of a campaign', () => {
  it('are each one JSON object with every key once at every depth, nested components as dotted paths', async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'symfence-log-lines-'));
    dirs.push(root);
    const logFile = path.join(root, 'demo.log');
    // The demo stops as soon as every maze branch is reached (about a second); trace logs everything.
    const { code, stdout, stderr } = await runCliProcess([
      'demo', '--duration', '20s', '--workers', '2', '--json', '--log-level', 'trace', '--log-file', logFile, '--out-dir', path.join(root, 'out'),
    ]).exit;
    expect(code, stderr).toBe(0);
    expect(lastJsonLine(stdout)['complete']).toBe(true);
    const lines = readFileSync(logFile, 'utf8').split('\n').filter((l) => l !== '');
    // Lines written to stderr (the I/O thread's own logger) obey the same rule.
    const stderrJson = stderr.split('\n').filter((l) => l.startsWith('{'));
    const all = [...lines, ...stderrJson];
    expect(lines.length).toBeGreaterThanOrEqual(3);
    const bad = all.map((line) => ({ line, duplicates: findDuplicateKeys(line) })).filter((r) => r.duplicates.length > 0);
    expect(bad).toEqual([]);
    const components = new Set(all.map((l) => (JSON.parse(l) as { component?: string }).component));
    // The coordinator's logger is a child of the campaign's: its lines name the path.
    expect(components).toContain('campaign');
    expect(components).toContain('campaign.coordinator');
  });
});
