/**
 * Failures that are the set-up's fault, not the input's: the solver cannot be started (missing or
 * non-executable binary), afl-showmap cannot be started or cannot run the AFL target at all.
 * Marking such a job `done` would burn its input for good — a rerun with the set-up fixed would
 * skip it — so the coordinator abandons its work lease instead (the work stays claimable), counts
 * it (`jobsAbandoned`), and stops the campaign once `maxSetupFailures` of them come in a row
 * (`ERR_SETUP_FAILURES`, docs/campaign.md).
 */

/** `SolverOutcome.errorCode` values that say "the set-up is broken", never "this input failed". */
export const SETUP_FAILURE_CODES: ReadonlySet<string> = new Set(['ERR_SOLVER_SPAWN', 'ERR_SOLVER_NOT_FOUND', 'ERR_SHOWMAP_SETUP']);

export function isSetupFailure(status: string, errorCode: string | undefined): boolean {
  return status === 'error' && errorCode !== undefined && SETUP_FAILURE_CODES.has(errorCode);
}

/** Default of the campaign's `maxSetupFailures`: set-up failures in a row before the campaign stops. */
export const DEFAULT_MAX_SETUP_FAILURES = 8;
