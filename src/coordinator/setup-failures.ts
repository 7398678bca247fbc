/**
 * Failures that are the set-up's fault, not the input's: the solver cannot be started (missing or
 * non-executable binary), it runs but shows no sign of SymCC (`ERR_SOLVER_SILENT`), afl-showmap
 * cannot be started or cannot run the AFL target at all.
 * Marking such a job `done` would burn its input for good — a rerun with the set-up fixed would
 * skip it — so the coordinator abandons its work lease instead (the work stays claimable), counts
 * it (`jobsAbandoned`), and stops the campaign once `maxSetupFailures` of them come in a row
 * (`ERR_SETUP_FAILURES`, docs/campaign.md).
 */
import type { Logger } from 'pino';
import { SetupFailuresError } from '../errors.js';
import type { SolverOutcome } from './ports.js';

/** `SolverOutcome.errorCode` values that say "the set-up is broken", never "this input failed". */
const SETUP_FAILURE_CODES: ReadonlySet<string> = new Set([
  'ERR_SOLVER_SPAWN',
  'ERR_SOLVER_NOT_FOUND',
  'ERR_SHOWMAP_SETUP',
  // Exit 0, no telemetry, no output, no SymCC runtime seen: the solver is not (or no longer) SymCC.
  'ERR_SOLVER_SILENT',
]);

export function isSetupFailure(status: string, errorCode: string | undefined): boolean {
  return status === 'error' && errorCode !== undefined && SETUP_FAILURE_CODES.has(errorCode);
}

/** Default of the campaign's `maxSetupFailures`: set-up failures in a row before the campaign stops. */
const DEFAULT_MAX_SETUP_FAILURES = 8;

/**
 * Set-up failures in a row. Contract: `fail` counts one and logs it at error; it returns the
 * `ERR_SETUP_FAILURES` error exactly once, at the failure that reaches `limit` (the caller then
 * stops), and undefined otherwise. `reset` — a result that was the input's own — starts over.
 */
export class SetupFailureStreak {
  readonly limit: number;
  #streak = 0;
  #fatalError: InstanceType<typeof SetupFailuresError> | undefined;

  constructor(limit: number = DEFAULT_MAX_SETUP_FAILURES) {
    this.limit = limit;
  }

  get fatalError(): InstanceType<typeof SetupFailuresError> | undefined {
    return this.#fatalError;
  }

  fail(outcome: SolverOutcome, logger: Logger): InstanceType<typeof SetupFailuresError> | undefined {
    this.#streak++;
    logger.error({ code: outcome.errorCode, streak: this.#streak, limit: this.limit }, `job abandoned: ${outcome.error ?? outcome.errorCode}`);
    if (this.#streak < this.limit || this.#fatalError !== undefined) return undefined;
    this.#fatalError = new SetupFailuresError(
      `stopping: ${this.#streak} jobs in a row failed because of the set-up, not their input (last: ${outcome.errorCode}: ${outcome.error ?? 'no message'}); their work was abandoned, not done`,
      { failures: this.#streak, lastCode: outcome.errorCode ?? null, lastError: outcome.error ?? null },
    );
    return this.#fatalError;
  }

  reset(): void {
    this.#streak = 0;
  }
}
