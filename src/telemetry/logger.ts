/**
 * Logger setup. symfence logs with pino: JSON lines to a file or stderr for machines, pretty lines
 * on a TTY for humans. Embedders pass their own pino logger and symfence only derives children
 * (`{ component }`, `{ workId, targets }`) from it.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';
import { defineOptionSchema, type ResolvedOptions } from '../config/schema.js';

export type { Logger } from 'pino';

export const LOGGER_OPTIONS = defineOptionSchema('logger', {
  level: {
    kind: 'enum',
    values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const,
    default: 'info',
    flag: 'log-level',
    env: 'SYMFENCE_LOG_LEVEL',
    description: 'log level',
  },
  file: {
    kind: 'string',
    default: undefined,
    flag: 'log-file',
    env: 'SYMFENCE_LOG_FILE',
    description: 'write JSON log lines to this file instead of stderr',
  },
  pretty: {
    kind: 'enum',
    values: ['auto', 'always', 'never'] as const,
    default: 'auto',
    flag: 'log-pretty',
    env: 'SYMFENCE_LOG_PRETTY',
    description: 'human-readable log lines on stderr (auto = when stderr is a TTY)',
  },
});

export type LoggerOptions = ResolvedOptions<typeof LOGGER_OPTIONS.specs>;

/**
 * Creates the process logger. File and stderr destinations are synchronous pino destinations
 * (`sync: true`), so nothing is lost when the process exits from a signal handler; the pretty
 * printer runs in-process for the same reason (no transport thread to drain).
 */
export async function createLogger(options: LoggerOptions, isTty: boolean = process.stderr.isTTY === true): Promise<Logger> {
  const level: LevelWithSilent = options.level;
  if (options.file !== undefined) {
    return pino({ level, base: { pid: process.pid } }, pino.destination({ dest: options.file, sync: true, mkdir: true }));
  }
  const pretty = options.pretty === 'always' || (options.pretty === 'auto' && isTty);
  if (pretty) {
    const { default: pinoPretty } = await import('pino-pretty');
    return pino({ level }, pinoPretty({ destination: 2, sync: true, colorize: isTty, ignore: 'pid,hostname', translateTime: 'SYS:HH:MM:ss.l' }));
  }
  return pino({ level, base: { pid: process.pid } }, pino.destination({ dest: 2, sync: true }));
}

/** A logger that drops everything: the default for library embedders who pass none. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** A child logger for one component (`io`, `scheduler`, `solver`, `coordinator` …). */
export function componentLogger(parent: Logger, component: string): Logger {
  return parent.child({ component });
}
