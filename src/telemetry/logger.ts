/**
 * Logger setup. symfence logs with pino: JSON lines to a file or stderr for machines, pretty lines
 * on a TTY for humans. Embedders pass their own pino logger and symfence only derives children
 * (`{ component }`, `{ workId, targets }`) from it, always through `childLogger`/`componentLogger`.
 *
 * Why not `logger.child()` directly: pino appends a child's bindings to its parent's as JSON text,
 * so a child that binds a key its parent already bound writes that key twice on every line
 * (`"component":"campaign",…,"component":"coordinator"`) — JSON that parsers read differently.
 * `childLogger` keeps each key once (docs/campaign.md "Log lines"): a nested `component`
 * becomes a dotted path (`campaign.coordinator`), any other re-bound key takes the child's value.
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

type LoggerOptions = ResolvedOptions<typeof LOGGER_OPTIONS.specs>;

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

const CHINDINGS = pino.symbols.chindingsSym;

/**
 * A child of `parent` with `bindings`, every key bound once. `component` nests: under a parent
 * bound to `campaign`, `{ component: 'coordinator' }` binds `campaign.coordinator`. Any other key
 * the parent already bound takes the child's value (the inner scope is the more specific one).
 */
export function childLogger(parent: Logger, bindings: Readonly<Record<string, unknown>>): Logger {
  const parentComponent = parent.bindings()['component'];
  const own = { ...bindings };
  if (typeof own['component'] === 'string' && typeof parentComponent === 'string') own['component'] = `${parentComponent}.${own['component']}`;
  const child = parent.child(own);
  // pino keeps the bound fields as one JSON text fragment (`,"k":v,…`, already serialized, so
  // parsing it back is lossless) and the child's is the parent's plus its own: rewrite it with
  // every key once. Once per child logger (per component, per job), never per line.
  const holder = child as unknown as Record<symbol, unknown>;
  const text = holder[CHINDINGS];
  if (typeof text === 'string' && text.length > 1) {
    // JSON.parse keeps the last of repeated keys: the child's, at the parent's position.
    const merged = JSON.parse(`{${text.slice(1)}}`) as Record<string, unknown>;
    holder[CHINDINGS] = `,${JSON.stringify(merged).slice(1, -1)}`;
  }
  return child;
}

/** A child logger for one component (`io`, `scheduler`, `solver`, `coordinator` …); nests as a dotted path. */
export function componentLogger(parent: Logger, component: string, bindings: Readonly<Record<string, unknown>> = {}): Logger {
  return childLogger(parent, { ...bindings, component });
}
