/**
 * What a finished solver run shows of SymCC (docs/solver.md "Is it SymCC?"). symfence never
 * trusts a command line to be SymCC: `/bin/true`, afl-showmap or a stray script exit 0 on every
 * input, and each such run would otherwise mark its input done. A SymCC run shows its runtime in
 * at least one of these ways:
 *
 * - the preload library's report counts branch-hook calls (`preload.events > 0`);
 * - the runtime wrote `symfence-telemetry/1` itself (the directed extension, the reference solver);
 * - SymCC's runtime banner on stderr: every backend prints "This is SymCC running with the …
 *   backend" when it starts.
 */
import type { SolverResult } from './solver-types.js';

/** Printed by SymCC's runtime at start, on stderr, whatever the backend (QSYM, simple). */
const SYMCC_RUNTIME_BANNER = /This is SymCC running with the [\w-]+ backend/;

/** How a run showed SymCC's runtime, strongest first; `none` when it did not. */
export type SymccEvidence = 'preload-events' | 'own-telemetry' | 'runtime-banner' | 'none';

export function symccEvidenceOf(result: Pick<SolverResult<{ readonly preload?: { readonly events: number } }>, 'telemetry' | 'stderrTail'>): SymccEvidence {
  const telemetry = result.telemetry;
  if (telemetry !== undefined) {
    if (telemetry.preload === undefined) return 'own-telemetry';
    if (telemetry.preload.events > 0) return 'preload-events';
  }
  return SYMCC_RUNTIME_BANNER.test(result.stderrTail) ? 'runtime-banner' : 'none';
}

/**
 * A run that ended `ok` with exit 0 and showed nothing at all: no telemetry (valid or not), no
 * output, no SymCC banner. A truncated stderr may have lost the banner, so it does not count as silent.
 */
export function isSilentRun(result: Pick<SolverResult<{ readonly preload?: { readonly events: number } }>, 'status' | 'exitCode' | 'aborted' | 'telemetry' | 'telemetryError' | 'totalGenerated' | 'stderrTail' | 'stderrTruncated'>): boolean {
  if (result.status !== 'ok' || result.exitCode !== 0 || result.aborted) return false;
  if (result.telemetryError !== undefined || result.totalGenerated > 0 || result.stderrTruncated) return false;
  return symccEvidenceOf(result) === 'none' && result.telemetry === undefined;
}
