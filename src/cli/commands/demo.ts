/**
 * `symfence demo [--duration 60s] [--workers N] [--json] [solver, scheduler, --io-* options]`: the
 * embedded default campaign — the reference solver over the bundled maze, built-in coverage, no
 * AFL++ or SymCC. The solver, scheduler and I/O options are those of `symfence run` (caps, lanes,
 * hints, lane-state interval, batch sizes …), so the demo can try them out.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { optionsFromEnv, optionsFromFlags } from '../../config/schema.js';
import { CAMPAIGN_OPTIONS, MAX_CAMPAIGN_WORKERS } from '../../coordinator/campaign-options.js';
import { startDemo, type DemoSummary } from '../../coordinator/adapters/demo-campaign.js';
import { addSchemaFlags } from '../flags.js';
import { formatUtilisation } from '../../telemetry/counters.js';
import { checkScratchDir, SOLVER_CAMPAIGN_OPTIONS } from '../../solver/solver-options.js';
import { LOGGER_OPTIONS } from '../../telemetry/logger.js';
import { SCHEDULER_OPTIONS } from '../../scheduler/scheduler-options.js';
import { IO_OPTIONS } from '../../io/io-options.js';
import { CAMPAIGN_LEASE_OPTIONS } from '../../lease/lease-table-options.js';
import type { CliIo } from '../program.js';
import { runCampaignCli } from '../campaign-runner.js';

const DEMO_DEFAULT_DURATION = '60s';
/** The demo's stats and plot_data.csv interval (a `run` campaign's default is 5 s). */
const DEMO_STATS_INTERVAL_MS = 200;

function formatDemoSummary(s: DemoSummary): string {
  const c = s.counters;
  return [
    `symfence demo: maze "${s.maze}": ${s.branchesReached} of ${s.branchesTotal} branches reached${s.complete ? ' (every branch)' : ''}`,
    `  jobs ${s.jobsCompleted} in ${(s.elapsedMs / 1000).toFixed(1)} s, findings ${s.findings} (queue ${c.interesting}, crashes ${c.crashes}, hangs ${c.hangs}), conflicts ${s.conflicts}`,
    `  jobs by kind: trace ${c.jobsTrace}, targeted ${c.jobsTargeted}, full ${c.jobsFull}; queries solved ${c.queriesSolved}; targets reached ${c.targetsReached}`,
    `  ${formatUtilisation(s.solverUtilisation, c.solverProcessMs, s.workers)}`,
    `  output: ${s.outDir}`,
    `  make its report: symfence report ${s.outDir}  (in a checkout: node dist/src/cli/main.js report ${s.outDir})`,
  ].join('\n');
}

export function register(program: Command, io: CliIo): void {
  const command = program
    .command('demo')
    .description('run a short campaign on the bundled maze with the reference solver (no AFL++ or SymCC needed)')
    .addOption(new Option('--duration <duration>', `stop after this long, or as soon as every maze branch is reached (default: ${DEMO_DEFAULT_DURATION})`))
    .addOption(new Option('--workers <n>', `concurrent solver jobs, 0-${MAX_CAMPAIGN_WORKERS} (default: 0 = one per available core)`))
    .addOption(new Option('--out-dir <dir>', 'output directory (default: a new temporary directory)'))
    .addOption(
      // The reference solver's cost per run is its process start-up, not solving: asking fewer
      // questions in more runs (trace) makes the demo slower, so it solves in full by default.
      new Option('--first-run <strategy>', 'first run of each input: full (solve every branch) or trace (learn its branches, then solve the unanswered ones directed)')
        .choices(['trace', 'full'])
        .default('full'),
    )
    .option('--json', 'print the summary as one JSON object (the last line of stdout)')
    .addHelpText(
      'after',
      '\nThe reference solver behaves like a SymCC binary over a small declarative maze; it exists to\nexercise and demonstrate the runtime. The summary says how many maze branches were reached.',
    );
  addSchemaFlags(command, SOLVER_CAMPAIGN_OPTIONS);
  addSchemaFlags(command, SCHEDULER_OPTIONS);
  addSchemaFlags(command, IO_OPTIONS);
  addSchemaFlags(command, CAMPAIGN_LEASE_OPTIONS);
  addSchemaFlags(command, LOGGER_OPTIONS);
  command.action(async (flags: Record<string, unknown>) => {
    // Resolved first so a bad solver flag is reported before anything starts (as in `run`).
    const solver = SOLVER_CAMPAIGN_OPTIONS.resolve({ ...optionsFromEnv(SOLVER_CAMPAIGN_OPTIONS), ...optionsFromFlags(SOLVER_CAMPAIGN_OPTIONS, flags) });
    checkScratchDir(solver.scratchDir);
    const scheduler = SCHEDULER_OPTIONS.resolve({ ...optionsFromEnv(SCHEDULER_OPTIONS), ...optionsFromFlags(SCHEDULER_OPTIONS, flags) });
    const ioOptions = IO_OPTIONS.resolve({ ...optionsFromEnv(IO_OPTIONS), ...optionsFromFlags(IO_OPTIONS, flags) });
    const lease = CAMPAIGN_LEASE_OPTIONS.resolve({ ...optionsFromEnv(CAMPAIGN_LEASE_OPTIONS), ...optionsFromFlags(CAMPAIGN_LEASE_OPTIONS, flags) });
    const options = {
      ...optionsFromFlags(CAMPAIGN_OPTIONS, flags),
      durationMs: (flags['duration'] as string | undefined) ?? DEMO_DEFAULT_DURATION,
      outDir: (flags['outDir'] as string | undefined) ?? mkdtempSync(path.join(os.tmpdir(), 'symfence-demo-')),
      name: 'demo',
      // The demo lasts seconds: sample stats often enough that its report draws a curve.
      statsIntervalMs: DEMO_STATS_INTERVAL_MS,
      scheduler,
      io: ioOptions,
      lease,
    };
    await runCampaignCli<DemoSummary>(io, {
      json: flags['json'] === true,
      flags,
      outDir: options.outDir,
      start: async (runtime) => startDemo(options, runtime, { solver }).then((demo) => ({ stop: () => demo.campaign.stop(), done: demo.done })),
      formatSummary: formatDemoSummary,
    });
  });
}
