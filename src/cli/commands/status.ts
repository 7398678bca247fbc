/**
 * `symfence status <out-dir> [--json]`: the stats of a running or finished campaign.
 */
import type { Command } from 'commander';
import type { CliIo } from '../program.js';
import { formatCampaignStatus, readCampaignStatus } from '../../telemetry/campaign-status.js';

export function register(program: Command, io: CliIo): void {
  program
    .command('status')
    .description('show the stats of a running or finished campaign')
    .argument('<out-dir>', 'a campaign directory (<afl-out>/<name>) or an AFL output directory holding several')
    .option('--json', 'print the stats as JSON: one object for one campaign, an array for several')
    .addHelpText(
      'after',
      '\nReads <out-dir>/stats.json, or <out-dir>/*/stats.json. A running campaign whose stats were not\nrewritten for three intervals is shown as "stale" (its coordinator probably died).',
    )
    .action((outDir: string, flags: { json?: boolean }) => {
      const statuses = readCampaignStatus(outDir);
      if (flags.json) {
        const rows = statuses.map((s) => ({ path: s.path, liveness: s.liveness, ...s.stats }));
        io.stdout(JSON.stringify(rows.length === 1 ? rows[0] : rows) + '\n');
        return;
      }
      io.stdout(statuses.map(formatCampaignStatus).join('\n\n') + '\n');
    });
}
