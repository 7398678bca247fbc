/**
 * The `symfence` command tree. Each subcommand lives in `commands/` and registers itself here;
 * `runCli` turns every failure into one line on stderr and a stable exit code:
 * 0 success, 1 runtime failure, 2 usage, invalid option or any refusal while a campaign starts.
 */
import { Command, CommanderError } from 'commander';
import { SymfenceError } from '../errors.js';
import { COMMANDS } from './commands/index.js';
import { PACKAGE_VERSION } from '../version.js';
import { escapeForTerminal } from '../util/terminal-text.js';
import { isStartupRefusal } from './startup-refusal.js';

export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  /** Whether stdout is a terminal (`status --watch` redraws only there); absent = not a TTY. */
  readonly isTty?: () => boolean;
}

const processIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  isTty: () => process.stdout.isTTY === true,
};

export function buildProgram(io: CliIo = processIo): Command {
  const program = new Command('symfence')
    .description('Parallel hybrid fuzzing: SymCC jobs on every core, fenced branch-target leases, findings fed to AFL++.')
    .version(PACKAGE_VERSION, '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help')
    .showSuggestionAfterError(true)
    .configureOutput({
      writeOut: io.stdout,
      writeErr: io.stderr,
      // Commander prints "error: …" itself; keep it to one line.
      outputError: (text, write) => write(text.split('\n')[0] + '\n'),
    });
  for (const register of COMMANDS) register(program, io);
  program.exitOverride();
  for (const sub of program.commands) sub.exitOverride().configureOutput(program.configureOutput());
  return program;
}

/** Refusals of a command line that cannot work as given: exit code 2, nothing was started. */
const CONFIGURATION_ERROR_CODES: ReadonlySet<string> = new Set(['ERR_USAGE', 'ERR_INVALID_OPTION', 'ERR_SOLVER_NOT_FOUND', 'ERR_SHOWMAP_SETUP', 'ERR_PRELOAD_UNSUPPORTED', 'ERR_SOLVER_NOT_SYMCC']);

/** Exit code for a thrown value. */
function exitCodeFor(error: unknown): number {
  if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2;
  if (error instanceof SymfenceError) return CONFIGURATION_ERROR_CODES.has(error.code) || isStartupRefusal(error) ? 2 : 1;
  return 1;
}

export async function runCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const program = buildProgram(io);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version exit through here with code 0; commander already printed the message.
      return exitCodeFor(error);
    }
    const message = error instanceof Error ? error.message : String(error);
    // Every error line carries a code: ours, or ERR_INTERNAL for anything that escaped the mapping
    // (Node's own message keeps its errno name).
    const code = ` [${error instanceof SymfenceError ? error.code : 'ERR_INTERNAL'}]`;
    // One line, whole: a newline or control sequence in a path the message quotes is escaped
    // (src/util/terminal-text.ts), never cut there and never passed to the terminal.
    io.stderr(`symfence: ${escapeForTerminal(message)}${code}\n`);
    return exitCodeFor(error);
  }
}
