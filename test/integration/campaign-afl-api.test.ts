import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Campaign, type CampaignFinding } from '../../src/coordinator/campaign.js';
import { fakeAflOut, REFERENCE_SOLVER } from '../helpers/cli-process.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('Campaign.start without components (AFL++ mode over the real parts)', () => {
  it('runs the solver command on the AFL queue and publishes findings for AFL++', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'symfence-aflapi-'));
    dirs.push(root);
    const out = fakeAflOut(root, ['AAAAAAAAAAAAAAAA'], 'builtin:demo @@');
    const findings: CampaignFinding[] = [];
    const campaign = await Campaign.start({
      aflOut: out,
      aflInstance: 'main',
      name: 'embedded',
      workers: 1,
      solverCommand: [process.execPath, REFERENCE_SOLVER, 'builtin:demo', '@@'],
      showmap: `${process.execPath} ${REFERENCE_SOLVER} showmap`,
    });
    campaign.on('finding', (f) => {
      findings.push(f);
      if (findings.length >= 2) void campaign.stop();
    });
    const summary = await campaign.done;
    expect(summary.counters.interesting).toBeGreaterThanOrEqual(2);
    expect(findings[0]!.inputPath).toContain(path.join(out, 'main', 'queue'));
    expect(readdirSync(path.join(out, 'embedded', 'queue')).filter((n) => n.startsWith('id:')).length).toBe(summary.counters.interesting);
  });

  it('needs a solver command when no components are given', async () => {
    await expect(Campaign.start({ outDir: '/tmp/unused' })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION', details: { option: 'solverCommand' } });
    await expect(Campaign.start({ outDir: '/tmp/unused', solverCommand: [] as string[], aflOut: '/nonexistent', aflInstance: 'main' })).rejects.toMatchObject({ code: 'ERR_USAGE' });
  });
});
