/**
 * `symfence run --afl-out DIR --afl-instance NAME --name NAME [...] -- <symcc-binary> [args, @@]`
 */
import path from 'node:path';
import { Option, type Command } from 'commander';
import { formatDuration, optionsFromEnv, optionsFromFlags } from '../../config/schema.js';
import { CAMPAIGN_OPTIONS } from '../../coordinator/campaign-options.js';
import type { CampaignSummary } from '../../coordinator/campaign.js';
import { startAflCampaign } from '../../coordinator/adapters/afl-campaign.js';
import { LOGGER_OPTIONS } from '../../telemetry/logger.js';
import { SCHEDULER_OPTIONS } from '../../scheduler/scheduler-options.js';
import { IO_OPTIONS } from '../../io/io-options.js';
import { CAMPAIGN_LEASE_OPTIONS } from '../../lease/lease-table-options.js';
import { formatSlotTime, formatUtilisation, generatedPerQuery } from '../../telemetry/counters.js';
import { checkScratchDir, SOLVER_CAMPAIGN_OPTIONS } from '../../solver/solver-options.js';
import { addSchemaFlags } from '../flags.js';
import type { CliIo } from '../program.js';
import { runCampaignCli } from '../campaign-runner.js';

function formatRunSummary(s: CampaignSummary): string {
  const c = s.counters;
  return [
    `symfence run: ${s.jobsCompleted} jobs in ${formatDuration(Math.round(s.elapsedMs / 1000) * 1000)} (ok ${c.jobsOk}, timeout ${c.jobsTimeout}, crash ${c.jobsCrash}, error ${c.jobsError}, aborted ${c.jobsAborted}, abandoned ${c.jobsAbandoned})`,
    `  jobs by kind: trace ${c.jobsTrace}, targeted ${c.jobsTargeted}, full ${c.jobsFull}; queries solved ${c.queriesSolved}, skipped ${c.queriesSkipped}; generated per query ${generatedPerQuery(c).toFixed(2)}; targets reached ${c.targetsReached} (sat ${c.targetsSat}, unsat ${c.targetsUnsat})`,
    `  findings: queue ${c.interesting}, crashes ${c.crashes}, hangs ${c.hangs}; edges ${c.edgesCovered}`,
    `  leases: conflicts ${c.conflicts}, stale results ${c.staleResults}, steals ${c.leaseSteals}, release failures ${c.releaseFailures}`,
    `  ${formatUtilisation(s.solverUtilisation, c.solverProcessMs, s.workers)}, slot occupancy ${(s.slotOccupancy * 100).toFixed(0)}%`,
    `  ${formatSlotTime(c, s.workers, s.elapsedMs)}`,
    `  output: ${s.outDir}`,
    `  report: symfence report ${s.outDir}`,
  ].join('\n');
}

/** The output directory the options name, when they name one (the campaign checks them fully). */
function outDirOf(options: Readonly<Record<string, unknown>>): { outDir?: string } {
  if (typeof options['outDir'] === 'string') return { outDir: options['outDir'] };
  const name = typeof options['name'] === 'string' ? options['name'] : CAMPAIGN_OPTIONS.defaults.name;
  return typeof options['aflOut'] === 'string' && typeof name === 'string' ? { outDir: path.join(options['aflOut'], name) } : {};
}

export function register(program: Command, io: CliIo): void {
  const command = program
    .command('run')
    .description('run SymCC jobs beside AFL++: read an AFL++ queue, publish findings for AFL++ to import')
    .argument('<symcc-command...>', 'the SymCC-instrumented binary and its arguments, after "--" (@@ = input file)')
    .option('--json', 'print the final summary as one JSON object (the last line of stdout)')
    .addOption(new Option('--showmap <command>', 'afl-showmap command used for coverage triage (default: afl-showmap from PATH)'))
    .addOption(new Option('--afl-target <command>', "the target as AFL++ runs it (default: read from <afl-out>/<afl-instance>/fuzzer_stats command_line)"))
    .addHelpText(
      'after',
      [
        '',
        'Example:',
        '  afl-fuzz -i in -o out -M main -- ./target_afl @@ &',
        '  symfence run --afl-out out --afl-instance main --name symfence -- ./target_symcc @@',
        '',
        'Several coordinators (processes or hosts) share work with --lease-dir <dir> and distinct',
        '--name/--coordinator-id; on many hosts, with --lease-store etcd --etcd-endpoints host:port,….',
        'Outputs: <afl-out>/<name>/{queue,crashes,hangs,stats.json,plot_data.csv,jobs.jsonl}.',
      ].join('\n'),
    );
  addSchemaFlags(command, CAMPAIGN_OPTIONS);
  addSchemaFlags(command, SOLVER_CAMPAIGN_OPTIONS);
  addSchemaFlags(command, SCHEDULER_OPTIONS);
  addSchemaFlags(command, IO_OPTIONS);
  addSchemaFlags(command, CAMPAIGN_LEASE_OPTIONS);
  addSchemaFlags(command, LOGGER_OPTIONS);
  command.action(async (symcc: string[], flags: Record<string, unknown>) => {
    const options = { ...optionsFromEnv(CAMPAIGN_OPTIONS), ...optionsFromFlags(CAMPAIGN_OPTIONS, flags) };
    // Resolved here so a bad solver flag is reported before anything starts.
    const solver = SOLVER_CAMPAIGN_OPTIONS.resolve({ ...optionsFromEnv(SOLVER_CAMPAIGN_OPTIONS), ...optionsFromFlags(SOLVER_CAMPAIGN_OPTIONS, flags) });
    checkScratchDir(solver.scratchDir);
    const scheduler = SCHEDULER_OPTIONS.resolve({ ...optionsFromEnv(SCHEDULER_OPTIONS), ...optionsFromFlags(SCHEDULER_OPTIONS, flags) });
    const ioOptions = IO_OPTIONS.resolve({ ...optionsFromEnv(IO_OPTIONS), ...optionsFromFlags(IO_OPTIONS, flags) });
    const lease = CAMPAIGN_LEASE_OPTIONS.resolve({ ...optionsFromEnv(CAMPAIGN_LEASE_OPTIONS), ...optionsFromFlags(CAMPAIGN_LEASE_OPTIONS, flags) });
    await runCampaignCli<CampaignSummary>(io, {
      json: flags['json'] === true,
      flags,
      ...outDirOf(options),
      start: async (runtime) =>
        startAflCampaign(
          { ...options, scheduler, io: ioOptions, lease },
          {
            symcc,
            solver,
            ...(typeof flags['showmap'] === 'string' ? { showmap: flags['showmap'] } : {}),
            ...(typeof flags['aflTarget'] === 'string' ? { aflTarget: flags['aflTarget'] } : {}),
          },
          runtime,
        ),
      formatSummary: formatRunSummary,
    });
  });
}
