/**
 * `symfence report <out-dir>… [--output-dir DIR] [--json]`: one self-contained HTML report plus
 * the same charts as standalone SVG files, from one or more coordinators' output directories or
 * AFL output directories holding them (docs/report.md).
 */
import type { Command } from 'commander';
import type { CliIo } from '../program.js';
import { DEFAULT_REPORT_DIR_NAME, REPORT_HTML_NAME, writeReport } from '../../report/write-report.js';

interface ReportFlags {
  readonly outputDir?: string;
  readonly json?: boolean;
}

export function register(program: Command, io: CliIo): void {
  program
    .command('report')
    .description('write an HTML report with charts (and each chart as SVG) of one or more campaigns')
    .argument('<out-dir...>', 'campaign directories (<afl-out>/<name>) or AFL output directories holding several')
    .option('--output-dir <dir>', `where to write ${REPORT_HTML_NAME} and the SVG files (default: <first out-dir>/${DEFAULT_REPORT_DIR_NAME})`)
    .option('--json', 'print the written paths as one JSON object instead of the HTML path')
    .addHelpText(
      'after',
      '\nReads each coordinator\'s stats.json and plot_data.csv, AFL++\'s plot_data and fuzzer_stats of the\n' +
        'instances in an AFL output directory, and the lease tables (lock-free, as `symfence leases`).\n' +
        'The HTML needs no network: styles and charts are inline. Prints the HTML path.\n' +
        'Exit codes: 0 written; 1 no campaign there, or a stats or plot file that cannot be parsed\n' +
        '(ERR_CAMPAIGN_STATE, ERR_PLOT_DATA_INVALID, naming the file); 2 bad usage.',
    )
    .action(async (dirs: string[], flags: ReportFlags) => {
      const written = await writeReport(dirs, flags.outputDir !== undefined ? { outputDir: flags.outputDir } : {});
      io.stdout(flags.json ? `${JSON.stringify(written)}\n` : `${written.htmlPath}\n`);
    });
}
