/**
 * TEST AND DEMO FIXTURE helpers: command templates that run the reference solver (in SymCC mode
 * and in afl-showmap-compatible mode) from the build, for `SolverPool` tasks and triage settings.
 */
import { builtFile } from '../util/paths.js';
import type { CommandTemplate, TriageSettings } from '../solver/solver-types.js';

/** Absolute path of the compiled reference solver script. */
export function referenceSolverScript(): string {
  return builtFile('src/reference/reference-solver.js');
}

/**
 * The reference solver as a SymCC "binary". `maze` is a maze JSON path or `builtin:demo`;
 * `inputMode: 'file'` appends `@@` (the runner then sets SYMCC_INPUT_FILE and substitutes it).
 */
export function referenceSolverCommand(maze: string, inputMode: 'stdin' | 'file' = 'file'): CommandTemplate {
  return { binary: process.execPath, argv: [referenceSolverScript(), maze, ...(inputMode === 'file' ? ['@@'] : [])] };
}

/** Triage settings that run the maze's own coverage map through the afl-showmap code path. */
export function referenceTriage(maze: string, inputMode: 'stdin' | 'file' = 'file', timeoutMs = 5_000): TriageSettings {
  return {
    showmap: { binary: process.execPath, argv: [referenceSolverScript(), 'showmap'] },
    target: { binary: maze, argv: inputMode === 'file' ? ['@@'] : [] },
    inputMode,
    timeoutMs,
  };
}
