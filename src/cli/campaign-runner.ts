/**
 * What `symfence run` and `symfence demo` share: logger from the `--log-*` flags, the live progress
 * line on a TTY (stderr), SIGINT/SIGTERM handling (first: clean stop, second: exit now), and the
 * closing summary — human lines, or with `--json` one JSON object as the last stdout line.
 */
import { LOGGER_OPTIONS, createLogger, type Logger } from '../telemetry/logger.js';
import { resolveLayered } from '../config/schema.js';
import { prepareUserFileDirectory, userPathError } from '../config/user-paths.js';
import type { CliIo } from './program.js';
import { installShutdownSignals } from './shutdown-signals.js';
import { testHooksFromEnv } from './test-hooks.js';
import { asStartupStep } from './startup-refusal.js';
import type { CoordinatorHooks } from '../coordinator/coordinator.js';

interface StartedCampaign<S> {
  stop(): Promise<unknown>;
  readonly done: Promise<S>;
}

interface CampaignCliSettings<S> {
  readonly json: boolean;
  readonly flags: Readonly<Record<string, unknown>>;
  readonly start: (runtime: { logger: Logger; progressStream: NodeJS.WriteStream; hooks?: CoordinatorHooks }) => Promise<StartedCampaign<S>>;
  readonly formatSummary: (summary: S) => string;
  /** The campaign's output directory when known: the only place `--log-file` may create directories. */
  readonly outDir?: string;
}

export async function runCampaignCli<S>(io: CliIo, settings: CampaignCliSettings<S>): Promise<S> {
  const loggerOptions = resolveLayered(LOGGER_OPTIONS, { env: process.env, flags: settings.flags });
  let logger: Logger;
  if (loggerOptions.file === undefined) logger = await createLogger(loggerOptions);
  else {
    prepareUserFileDirectory(loggerOptions.file, '--log-file', 'the log file', settings.outDir);
    try {
      logger = await createLogger(loggerOptions);
    } catch (error) {
      throw userPathError('--log-file', loggerOptions.file, 'the log file', error);
    }
  }
  const hooks = testHooksFromEnv(process.env);
  const started = await asStartupStep(() => settings.start({ logger, progressStream: process.stderr, ...(hooks ? { hooks } : {}) }));
  const uninstall = installShutdownSignals(() => started.stop(), (line) => io.stderr(`${line}\n`));
  try {
    const summary = await started.done;
    io.stdout(settings.json ? `${JSON.stringify(summary)}\n` : `${settings.formatSummary(summary)}\n`);
    return summary;
  } finally {
    uninstall();
  }
}
