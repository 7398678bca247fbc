/**
 * The coordinator's solver port over `SolverPool`: one `CoordinatorJob` becomes one pool task
 * (input file, the SymCC command, directed fields, coverage triage), and the pool's result becomes
 * a `SolverOutcome`. A generated input is interesting when triage claimed new bits in the shared
 * coverage bitmap; showmap's crash/hang verdicts make it a terminal crash/hang.
 */
import { codeOf, SolverSilentError } from '../../errors.js';
import { isSilentRun } from '../../solver/symcc-evidence.js';
import type { Telemetry } from '../../scheduler/telemetry.js';
import type { SolverPool } from '../../solver/solver-pool.js';
import type { CommandTemplate, InputMode, SolverResult, TriageSettings } from '../../solver/solver-types.js';
import type { TriagedInput, SolverOutcome, SolverPort, SolverPortTask, SolverRunOptions } from '../ports.js';

export interface SolverAdapterSettings {
  /** The SymCC binary (or the reference solver) and its argv, `@@` for file input. */
  readonly command: CommandTemplate;
  readonly inputMode?: InputMode;
  readonly timeoutMs: number;
  /** Coverage triage in the solver threads (afl-showmap against the pool's shared bitmap). */
  readonly triage?: TriageSettings;
  /**
   * In-process triage instead (the demo's built-in maze coverage: no process per input). Used
   * only when `triage` is absent; without either, nothing is interesting.
   */
  readonly classify?: (bytes: Uint8Array) => { readonly interesting: boolean; readonly terminal?: 'crash' | 'timeout' };
  /** The preload library for a stock SymCC binary (`--solver-telemetry preload`). */
  readonly preload?: string;
  /**
   * Runs must show SymCC (telemetry, output or the runtime banner; src/solver/symcc-evidence.ts):
   * a run that exits 0 showing nothing becomes an `ERR_SOLVER_SILENT` set-up failure — its work is
   * abandoned, not done. Off with `--solver-telemetry off`, where no telemetry is expected.
   */
  readonly requireSymccEvidence?: boolean;
}

export class SolverPoolAdapter implements SolverPort {
  /** `SolverPool` runs a run in the slot it is given, staged behind the slot's running one. */
  readonly stagesRuns = true;

  constructor(
    readonly pool: SolverPool<Telemetry>,
    private readonly settings: SolverAdapterSettings,
  ) {}

  async run(task: SolverPortTask, options: SolverRunOptions): Promise<SolverOutcome> {
    const { job } = task;
    let result: SolverResult<Telemetry>;
    try {
      result = await this.pool.run(
        {
          input: { path: job.inputPath },
          command: this.settings.command,
          ...(this.settings.inputMode ? { inputMode: this.settings.inputMode } : {}),
          timeoutMs: this.settings.timeoutMs,
          job:
            job.mode === 'trace'
              ? { targetBranch: 0n, actions: [], traceOnly: true, ...(job.wanted !== undefined && job.wanted.length > 0 ? { wanted: job.wanted } : {}) }
              : { targetBranch: job.targetBranch, actions: job.actions },
          ...(this.settings.preload ? { preload: this.settings.preload } : {}),
          ...(this.settings.triage ? { triage: this.settings.triage } : {}),
        },
        { signal: options.signal, ...(options.onSolverExit ? { onSolverExit: options.onSolverExit } : {}), ...(options.slot !== undefined ? { slot: options.slot } : {}) },
      );
    } catch (error) {
      if (codeOf(error) === 'ERR_ABORTED' || options.signal.aborted) return { status: 'aborted', generated: [], elapsedMs: 0 };
      const code = codeOf(error);
      return { status: 'error', generated: [], elapsedMs: 0, error: error instanceof Error ? error.message : String(error), ...(code !== undefined ? { errorCode: code } : {}) };
    }
    if (this.settings.requireSymccEvidence === true && isSilentRun(result)) {
      const error = new SolverSilentError(
        `solver ${this.settings.command.binary} exited 0 with no telemetry, no output and no SymCC runtime banner: it does not behave like SymCC; the work was abandoned, not done`,
        { binary: this.settings.command.binary },
      );
      return { status: 'error', generated: [], elapsedMs: result.elapsedMs, error: error.message, errorCode: error.code };
    }
    const generated: TriagedInput[] = [];
    for (const g of result.generated) {
      if (g.bytes === undefined) continue;
      if (!this.settings.triage && this.settings.classify) {
        const verdict = this.settings.classify(g.bytes);
        generated.push({ bytes: g.bytes, sha256: g.sha256, interesting: verdict.interesting, ...(verdict.terminal ? { terminal: verdict.terminal } : {}) });
        continue;
      }
      const terminal = g.showmap === 'crash' ? 'crash' : g.showmap === 'hang' ? 'timeout' : undefined;
      generated.push({ bytes: g.bytes, sha256: g.sha256, interesting: (g.novelty?.newBits ?? 0) > 0, newEdges: g.novelty?.newBytes ?? 0, ...(terminal ? { terminal } : {}) });
    }
    return {
      status: result.status,
      generated,
      ...(result.telemetry !== undefined ? { telemetry: result.telemetry } : {}),
      ...(result.telemetryError !== undefined ? { telemetryError: result.telemetryError } : {}),
      ...(result.solverTimeUs !== null ? { solverTimeUs: result.solverTimeUs } : {}),
      elapsedMs: result.elapsedMs,
      ...(result.timing !== undefined ? { timing: result.timing } : {}),
      ...(result.error ? { error: result.error.message, errorCode: result.error.code } : {}),
    };
  }
}
