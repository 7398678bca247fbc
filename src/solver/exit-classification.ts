/**
 * Classifying how a solver process ended, from Node's `(code, signal)` pair.
 *
 * A crash is one of the fatal signals, received directly (`signal = 'SIGSEGV'`) or reported as
 * `128 + n` by a wrapper such as a shell or `timeout(1)` re-raising it as an exit code. A timeout
 * is decided only by our own timer, never guessed from SIGTERM/SIGKILL (a solver killed by someone
 * else is not "our" timeout and not a crash either). Exit 255 is what a QSYM-instrumented binary
 * returns before `main` when `SYMCC_OUTPUT_DIR` does not exist: the runtime refused to run.
 */
import { constants } from 'node:os';

const FATAL_SIGNALS: readonly NodeJS.Signals[] = ['SIGSEGV', 'SIGABRT', 'SIGBUS', 'SIGFPE', 'SIGILL', 'SIGTRAP'];

const FATAL_SIGNAL_NUMBERS = new Map<number, NodeJS.Signals>(
  FATAL_SIGNALS.map((name) => [constants.signals[name as keyof typeof constants.signals], name]),
);

/** Exit code of a SymCC runtime that refused to start (e.g. missing `SYMCC_OUTPUT_DIR`). */
const RUNTIME_REFUSED_EXIT_CODE = 255;

export type ExitClass =
  | { readonly kind: 'timeout' }
  | { readonly kind: 'crash'; readonly fatalSignal: NodeJS.Signals }
  | { readonly kind: 'runtime-refused' }
  | { readonly kind: 'normal' };

export function classifyExit(code: number | null, signal: NodeJS.Signals | string | null, timedOut: boolean): ExitClass {
  if (timedOut) return { kind: 'timeout' };
  if (signal !== null && (FATAL_SIGNALS as readonly string[]).includes(signal)) {
    return { kind: 'crash', fatalSignal: signal as NodeJS.Signals };
  }
  if (code !== null && code > 128) {
    const viaShell = FATAL_SIGNAL_NUMBERS.get(code - 128);
    if (viaShell !== undefined && code !== RUNTIME_REFUSED_EXIT_CODE) return { kind: 'crash', fatalSignal: viaShell };
  }
  if (code === RUNTIME_REFUSED_EXIT_CODE) return { kind: 'runtime-refused' };
  return { kind: 'normal' };
}
