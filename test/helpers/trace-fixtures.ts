// What the shared-trace tests share: one trace run's telemetry and outcome, and a work source that
// records what the shared traces hand it (docs/campaign.md "Shared traces").
import type { CoordinatorJob, SolverOutcome } from '../../src/coordinator/ports.js';
import { parseTelemetry, type Telemetry } from '../../src/scheduler/telemetry.js';
import { telemetryJson } from '../unit/scheduler-fixtures.js';
import { FakeSource } from './coordinator-fakes.js';

/** A trace run's telemetry: two rows (sites 4 and 7), open branches 3 and 6. */
export const TELEMETRY: Telemetry = parseTelemetry(
  telemetryJson({
    target: 0,
    reached: false,
    status: 'none',
    trace: [[1, 2, 3, 4, 1, 0], [2, 5, 6, 7, 0, 1]],
    open: [3, 6],
    counters: { queries: 0, sat: 0, unsat: 0, unknown: 0, solverTimeUs: 0, generated: 0 },
  }),
);

/** A trace run that finished and left `TELEMETRY`. */
export const TRACED: SolverOutcome = { status: 'ok', elapsedMs: 5, generated: [], telemetry: TELEMETRY };

/** A work source that records what the shared traces hand it. */
export class TraceRecordingSource extends FakeSource {
  readonly adopted: { job: CoordinatorJob; workId: string; telemetry: Telemetry }[] = [];
  readonly deferred: CoordinatorJob[] = [];
  adoptTrace(job: CoordinatorJob, workId: string, telemetry: Telemetry): void {
    this.adopted.push({ job, workId, telemetry });
  }
  deferTrace(job: CoordinatorJob): void {
    this.deferred.push(job);
  }
}
