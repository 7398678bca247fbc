/**
 * The start-up probe of a campaign's solver command (docs/solver.md "Is it SymCC?"): one
 * trace-only run on a seed, with telemetry on, through the same solver pool code a campaign's
 * runs take. It must show SymCC's runtime (`symccEvidenceOf`): the preload library's event
 * counters, the runtime's own telemetry, or SymCC's runtime banner. Otherwise the start is refused
 * with `ERR_SOLVER_NOT_SYMCC` — before any work is claimed, so a mistaken command (`/bin/true`,
 * afl-showmap, a script) spends no seed. `--solver-telemetry off` skips the probe.
 */
import { SolverNotSymccError } from '../../errors.js';
import type { OptionsInput } from '../../config/schema.js';
import { parseTelemetry, type Telemetry } from '../../scheduler/telemetry.js';
import type { SOLVER_CAMPAIGN_OPTIONS } from '../../solver/solver-options.js';
import { SolverPool } from '../../solver/solver-pool.js';
import type { SolverTelemetryDecision } from '../../solver/solver-telemetry.js';
import type { CommandTemplate, InputMode } from '../../solver/solver-types.js';
import { symccEvidenceOf, type SymccEvidence } from '../../solver/symcc-evidence.js';

export interface SolverProbeSpec {
  readonly command: CommandTemplate;
  readonly telemetry: SolverTelemetryDecision;
  readonly inputMode?: InputMode;
  /** The seed to run: a queue entry's path, or bytes (an empty input when the queue has none). */
  readonly seed: { readonly path: string } | { readonly bytes: Uint8Array };
  /** The campaign's solver timeout, ms. */
  readonly timeoutMs: number;
  readonly solver?: OptionsInput<typeof SOLVER_CAMPAIGN_OPTIONS.specs>;
  /** Where the probe's scratch directory goes (default as the pool's). */
  readonly scratchParent?: string;
}

/** Runs the probe; resolves with how the run showed SymCC, or throws `ERR_SOLVER_NOT_SYMCC`. */
export async function probeSolverCommand(spec: SolverProbeSpec): Promise<Exclude<SymccEvidence, 'none'>> {
  const pool = new SolverPool<Telemetry>({
    // One run on the calling thread: no worker threads to start for it.
    solver: { ...spec.solver, workers: 1, spawnThread: 'main', timeoutMs: spec.timeoutMs },
    parseTelemetry,
    ...(spec.scratchParent !== undefined ? { scratchParent: spec.scratchParent } : {}),
  });
  try {
    const result = await pool.run({
      input: spec.seed,
      command: spec.command,
      ...(spec.inputMode ? { inputMode: spec.inputMode } : {}),
      // Trace-only: the preload library solves nothing, so the probe costs one plain execution.
      job: { targetBranch: 0n, actions: [], traceOnly: true },
      telemetry: true,
      includeBytes: false,
      ...(spec.telemetry.preload !== undefined ? { preload: spec.telemetry.preload } : {}),
    });
    const evidence = symccEvidenceOf(result);
    if (evidence !== 'none') return evidence;
    const seed = 'path' in spec.seed ? spec.seed.path : `an input of ${spec.seed.bytes.length} bytes`;
    const ended = result.signal !== null ? `was killed by ${result.signal}` : `exited ${result.exitCode ?? 'without a code'}`;
    const telemetry = result.telemetryError !== undefined ? `invalid telemetry (${result.telemetryError.message})` : 'no symfence telemetry';
    throw new SolverNotSymccError(
      `solver ${JSON.stringify(spec.command.binary)} does not look like a SymCC binary: its probe run on ${JSON.stringify(seed)} ${ended} with ${telemetry}, ` +
        `no preload event and no SymCC runtime banner on stderr (telemetry ${spec.telemetry.mode}); nothing was started and no work was claimed. ` +
        'Give the SymCC-instrumented build of the target, or --solver-telemetry off to skip this check',
      {
        binary: spec.command.binary,
        seed,
        exitCode: result.exitCode,
        signal: result.signal,
        status: result.status,
        telemetryMode: spec.telemetry.mode,
        stderrTail: result.stderrTail.slice(-512),
      },
    );
  } finally {
    await pool.close();
  }
}
