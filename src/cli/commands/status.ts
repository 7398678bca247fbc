/**
 * `symfence status <out-dir> [--json] [--details] [--watch]`: the stats of a running or finished
 * campaign, or an `afl-whatsup`-style overview of every coordinator under an AFL output directory.
 */
import path from 'node:path';
import type { Command } from 'commander';
import type { CliIo } from '../program.js';
import { optionsFromFlags } from '../../config/schema.js';
import { formatCampaignStatus, readCampaignStatus, type CampaignStatus } from '../../telemetry/campaign-status.js';
import { coordinatorState, formatCampaignOverview } from '../../telemetry/campaign-overview.js';
import { STATS_FILE_NAME } from '../../telemetry/stats-file.js';
import { addSchemaFlags } from '../flags.js';
import { checkWatchable, STATUS_WATCH_OPTIONS, watchStatus } from '../status-watch.js';
import { escapeForTerminal } from '../../util/terminal-text.js';

interface StatusFlags {
  readonly json?: boolean;
  readonly details?: boolean;
  readonly watch?: boolean;
}

/** One coordinator's own directory (detailed block), or a directory holding coordinators (overview). */
function isSingleCampaign(dir: string, statuses: readonly CampaignStatus[]): boolean {
  return statuses.length === 1 && statuses[0]!.path === path.join(dir, STATS_FILE_NAME);
}

function renderStatus(dir: string, statuses: readonly CampaignStatus[], nowMs: number, details: boolean): string {
  if (isSingleCampaign(dir, statuses)) return formatCampaignStatus(statuses[0]!);
  const overview = formatCampaignOverview(dir, statuses, nowMs, escapeForTerminal);
  return details ? [overview, ...statuses.map(formatCampaignStatus)].join('\n\n') : overview;
}

export function register(program: Command, io: CliIo): void {
  const command = program
    .command('status')
    .description('show the stats of a campaign, or an overview of every coordinator in an AFL output directory')
    .argument('<out-dir>', 'a campaign directory (<afl-out>/<name>) or an AFL output directory holding several')
    .option('--json', 'print the stats as JSON: one object for one campaign, an array for several')
    .option('--details', 'for an AFL output directory: each coordinator\'s detailed block after the overview')
    .option('--watch', 'redraw on the terminal every --watch-interval until Ctrl-C or every coordinator has finished');
  addSchemaFlags(command, STATUS_WATCH_OPTIONS);
  command
    .addHelpText(
      'after',
      '\nReads <out-dir>/stats.json (a detailed block), or <out-dir>/*/stats.json (one line per coordinator,\n' +
        'like afl-whatsup, and totals). A coordinator is alive while it rewrites its stats, stale when a\n' +
        'running one has not for three intervals (it probably died), finished after a clean stop.\n' +
        '--watch needs a terminal: on a pipe or file it exits 2 (print once without it).',
    )
    .action(async (outDir: string, flags: StatusFlags & Record<string, unknown>) => {
      if (flags.watch) {
        const watchIo = { stdout: io.stdout, isTty: io.isTty?.() ?? false };
        checkWatchable(watchIo, flags.json === true);
        const options = STATUS_WATCH_OPTIONS.resolve(optionsFromFlags(STATUS_WATCH_OPTIONS, flags));
        // The first read fails the command (no campaign there); later ones are drawn as errors.
        readCampaignStatus(outDir);
        const controller = new AbortController();
        const stop = (): void => controller.abort();
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
        try {
          await watchStatus(
            () => {
              const nowMs = Date.now();
              const statuses = readCampaignStatus(outDir, nowMs);
              return { text: renderStatus(outDir, statuses, nowMs, flags.details === true), final: statuses.every((s) => coordinatorState(s) === 'finished') };
            },
            watchIo,
            options,
            controller.signal,
          );
        } finally {
          process.off('SIGINT', stop);
          process.off('SIGTERM', stop);
        }
        return;
      }
      const nowMs = Date.now();
      const statuses = readCampaignStatus(outDir, nowMs);
      if (flags.json) {
        const rows = statuses.map((s) => ({ path: s.path, liveness: s.liveness, status: coordinatorState(s), ...s.stats }));
        io.stdout(JSON.stringify(rows.length === 1 ? rows[0] : rows) + '\n');
        return;
      }
      io.stdout(renderStatus(outDir, statuses, nowMs, flags.details === true) + '\n');
    });
}
