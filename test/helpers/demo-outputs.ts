/**
 * Output directories of short demo campaigns for the report tests: one coordinator, or two run
 * at the same time into sibling directories of one AFL-style output directory.
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCliProcess } from './cli-process.js';

async function demo(outDir: string): Promise<void> {
  const { code, stderr } = await runCliProcess(['demo', '--duration', '20s', '--workers', '1', '--out-dir', outDir, '--log-level', 'warn']).exit;
  if (code !== 0) throw new Error(`demo into ${outDir} exited ${code}: ${stderr}`);
}

/** A finished demo campaign's out-dir (its own directory: stats.json, plot_data.csv, leases/). */
export async function demoCampaign(prefix: string): Promise<string> {
  const root = mkdtempSync(path.join(tmpdir(), prefix));
  const outDir = path.join(root, 'demo');
  await demo(outDir);
  return outDir;
}

/** An AFL-style output directory holding two demo coordinators that ran side by side (`a`, `b`). */
export async function twoCoordinatorCampaign(prefix: string): Promise<string> {
  const aflOut = mkdtempSync(path.join(tmpdir(), prefix));
  mkdirSync(aflOut, { recursive: true });
  await Promise.all([demo(path.join(aflOut, 'a')), demo(path.join(aflOut, 'b'))]);
  return aflOut;
}
