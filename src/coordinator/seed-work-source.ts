/**
 * The coordinator's work source: where the next jobs come from —
 *
 * - our own interesting findings, deepest generation first (they sit at the frontier), then
 *   initial seeds, then the best unseen entries of AFL++'s queue (`AflQueueReader`);
 * - targeted jobs admitted by the scheduler (their leases are already held). While fresh inputs
 *   wait, the scheduler gets only `schedulerShare` of the slots (a running credit, so the share
 *   holds even when slots free up one at a time); with nothing fresh it may fill every slot.
 *   (Fresh inputs reach new code fastest; directed replays work the branches they left open.)
 *
 * Sources 2 and 3 are untargeted whole-input runs: no target group, only the exact-work lease.
 * Under the `trace` first-run strategy they solve nothing and only record the input's branches;
 * the scheduler's frontier lane then directs runs at the branches no run has answered.
 * Every input is also handed to the scheduler, which learns branches from the runs' telemetry and
 * proposes targeted jobs later. Our own findings are marked seen in the AFL reader so that AFL's
 * re-import of them (`sync:` entries) is not run again.
 */
import type { AdmittedWork, CoordinatorJob, JobFeedback, SeedInput, TargetScheduler, WorkSource } from './ports.js';
import type { Telemetry } from '../scheduler/telemetry.js';
import type { ClaimAsk } from '../scheduler/admission-ports.js';
import type { AflQueueReader } from '../triage/afl-queue.js';
import { FirstRunBandit, type YieldFigures } from './first-run-bandit.js';

interface SeedWorkSourceOptions {
  readonly afl?: AflQueueReader;
  readonly scheduler?: TargetScheduler;
  readonly initialSeeds?: readonly SeedInput[];
  /** Findings deeper than this are not run again (0 = unlimited). */
  readonly maxDepth?: number;
  /** Owner number for untargeted jobs (they reserve nothing, but the field is required). */
  readonly owner?: number;
  /** Fraction of slots given to scheduler jobs while fresh inputs wait, 0..1. Default 0.25. */
  readonly schedulerShare?: number;
  /** Least time between two scans of AFL's queue directory, ms. Default 500. */
  readonly aflPollMs?: number;
  /**
   * An input's first run: `full` (solve every branch) or `trace` (a trace-only run that teaches
   * the scheduler the input's branches; directed runs then solve the ones nobody answered).
   * `auto`: each input's first run chosen by measured yield (`FirstRunBandit`). Default `full`.
   */
  readonly firstRun?: 'trace' | 'full' | 'auto';
}

/** The most branches a trace run's wanted set holds (the preload library reads at most this many). */
const MAX_WANTED = 256;

/**
 * How long an input whose trace another coordinator is making waits before it is offered again,
 * ms: the first delay, doubled at each refusal up to the last (docs/campaign.md "Shared traces").
 */
export const TRACE_RETRY_FIRST_MS = 1000;
export const TRACE_RETRY_MAX_MS = 30_000;

/**
 * An input's first run: untargeted, solving everything (`full`) or nothing (`trace`). A trace run
 * names no coordinator: its work is the campaign's, one trace per input (docs/campaign.md "Shared traces").
 */
export function untargetedJob(seed: SeedInput, firstRun: 'trace' | 'full' = 'full'): CoordinatorJob {
  return {
    inputPath: seed.path,
    inputSha256: seed.sha256,
    targetBranch: 0n,
    actions: [],
    group: [],
    origin: seed.origin,
    depth: seed.depth,
    ...(firstRun === 'trace' ? { mode: 'trace' as const } : {}),
  };
}

export class SeedWorkSource implements WorkSource {
  readonly #afl: AflQueueReader | undefined;
  readonly #scheduler: TargetScheduler | undefined;
  readonly #maxDepth: number;
  readonly #owner: number;
  readonly #seeds: SeedInput[];
  readonly #feedback: SeedInput[] = [];
  readonly #known = new Set<string>();
  readonly #schedulerShare: number;
  #schedulerCredit = 0;
  readonly #aflPollMs: number;
  readonly #firstRun: 'trace' | 'full' | 'auto';
  readonly #bandit = new FirstRunBandit();
  /**
   * Inputs put off, by digest, and when to offer them again: their trace is being made elsewhere,
   * or their run answered nothing and came back (`giveBack`).
   */
  readonly #deferred = new Map<string, { seed: SeedInput; dueMs: number }>();
  /** The last delay of each input put off so far (cleared once it ran, or its trace was adopted). */
  readonly #delays = new Map<string, number>();
  /** Failed after work was taken (`take`): thrown by the next `take`, so that work is not lost. */
  #failure: { error: unknown } | undefined;
  #lastAflScanMs = Number.NEGATIVE_INFINITY;

  constructor(options: SeedWorkSourceOptions) {
    this.#afl = options.afl;
    this.#scheduler = options.scheduler;
    this.#maxDepth = options.maxDepth ?? 0;
    this.#owner = options.owner ?? 0;
    this.#seeds = [...(options.initialSeeds ?? [])];
    const share = options.schedulerShare ?? 0.25;
    if (!(share >= 0 && share <= 1)) throw new RangeError(`schedulerShare must be in 0..1, got ${share}`);
    this.#schedulerShare = share;
    this.#aflPollMs = options.aflPollMs ?? 500;
    this.#firstRun = options.firstRun ?? 'full';
  }

  /** Inputs waiting to be run untargeted (those put off for a trace made elsewhere included). */
  get backlog(): number {
    return this.#seeds.length + this.#feedback.length + this.#deferred.size;
  }

  /**
   * Up to `limit` jobs. Contract: work taken is never lost to a failure after it was taken (the
   * scheduler's admission, an AFL queue scan): the work taken so far is returned, and the error
   * is thrown by the next call, before it takes anything.
   */
  async take(limit: number, now: number): Promise<readonly AdmittedWork[]> {
    const failure = this.#failure;
    if (failure !== undefined) {
      this.#failure = undefined;
      throw failure.error;
    }
    const out: AdmittedWork[] = [];
    if (limit <= 0) return out;
    try {
      await this.#take(out, limit, now);
    } catch (error) {
      if (out.length === 0) throw error;
      this.#failure = { error };
    }
    return out;
  }

  async #take(out: AdmittedWork[], limit: number, now: number): Promise<void> {
    const fresh = this.#feedback.length + this.#seeds.length;
    if (this.#scheduler && fresh > 0) {
      this.#schedulerCredit += this.#schedulerShare * Math.min(limit, fresh);
      const budget = Math.min(limit, Math.floor(this.#schedulerCredit));
      if (budget > 0) {
        const admitted = (await this.#scheduler.admit(budget, now)).slice(0, budget);
        this.#schedulerCredit -= admitted.length;
        out.push(...admitted);
      }
      // Unused credit does not pile up: an idle scheduler must not later crowd out fresh inputs.
      this.#schedulerCredit = Math.min(this.#schedulerCredit, 1);
    }
    while (out.length < limit && this.#feedback.length > 0) out.push(this.#untargeted(this.#feedback.shift()!, now));
    while (out.length < limit && this.#seeds.length > 0) out.push(this.#untargeted(this.#seeds.shift()!, now));
    for (const [digest, waiting] of this.#deferred) {
      if (out.length >= limit) break;
      if (waiting.dueMs > now) continue;
      // Offered once; a refusal of this claim defers it again with the next delay (#delays).
      this.#deferred.delete(digest);
      out.push(this.#untargeted(waiting.seed, now));
    }
    // A queue scan lists and stats every entry: rate-limited, like AFL++'s own sync.
    if (out.length < limit && this.#afl && now - this.#lastAflScanMs >= this.#aflPollMs) {
      this.#lastAflScanMs = now;
      for (const picked of await this.#afl.next(limit - out.length)) {
        out.push(this.#untargeted({ path: picked.entry.path, sha256: picked.sha256, depth: 0, origin: 'afl' }, now));
      }
    }
    if (out.length < limit && this.#scheduler) out.push(...(await this.#scheduler.admit(limit - out.length, now)).slice(0, limit - out.length));
  }

  #untargeted(seed: SeedInput, now: number): AdmittedWork {
    if (!this.#known.has(seed.sha256)) {
      this.#known.add(seed.sha256);
      this.#scheduler?.addSeed(seed, now);
    }
    // Our own fresh findings reach new code fastest: a prefetched job gives way to one of them.
    const priority = seed.origin === 'feedback' ? { priority: 1 } : {};
    const firstRun = !this.#scheduler ? 'full' : this.#firstRun === 'auto' ? this.#bandit.choose() : this.#firstRun;
    const job = untargetedJob(seed, firstRun);
    const wanted = job.mode === 'trace' ? (this.#scheduler?.wantedFor?.(seed.sha256, MAX_WANTED) ?? []) : [];
    return { job: wanted.length > 0 ? { ...job, wanted } : job, owner: this.#owner, ...priority };
  }

  /**
   * A stored trace of `job`'s input (another coordinator's, or ours from a life whose lane state
   * was not saved after it): the lanes learn it as they learn a run of ours. No run happened now,
   * so the first-run yield is not touched and nothing is published.
   */
  adoptTrace(job: CoordinatorJob, workId: string, telemetry: Telemetry, now: number): void {
    this.#forgetDeferral(job.inputSha256);
    this.#scheduler?.observe({ job, workId, status: 'ok', telemetry, findings: [] }, now);
  }

  /** Do the lanes know `job`'s input's trace? (A scheduler that cannot tell is taken to know it.) */
  knowsTrace(job: CoordinatorJob): boolean {
    return this.#scheduler?.knowsInput?.(job.inputSha256) ?? true;
  }

  /** What a claim of `job`'s group asks about answers: what its lane's admission asked (the input alone without a scheduler). */
  claimAsk(job: CoordinatorJob): ClaimAsk {
    return this.#scheduler?.claimAsk?.(job) ?? { input: job.inputSha256 };
  }

  /** `job`'s input is being traced elsewhere: offered again after a delay that doubles per refusal. */
  deferTrace(job: CoordinatorJob, now: number): void {
    this.#putOff(job, now);
  }

  /**
   * `work` answered nothing and was rolled back (`WorkSource.giveBack`: a dispatch that failed on
   * the lease store, a stop, a lost target group, a set-up failure; docs/campaign.md "Lifecycle of
   * a job"). A scheduler's job goes back to the lane that proposed it; an input's own run (an
   * initial seed, an AFL++ entry, a finding) is offered again after a delay that doubles per
   * give-back, as a deferred trace's.
   */
  giveBack(work: AdmittedWork, now: number): void {
    const origin = work.job.origin;
    if (origin.startsWith('scheduler:')) this.#scheduler?.reopen?.(work.job, now);
    else if (origin === 'seed' || origin === 'afl' || origin === 'feedback') this.#putOff(work.job, now);
    // Anything else (an embedder's `enqueue`) is not this source's to offer again.
  }

  #putOff(job: CoordinatorJob, now: number): void {
    const last = this.#delays.get(job.inputSha256);
    const delayMs = last === undefined ? TRACE_RETRY_FIRST_MS : Math.min(last * 2, TRACE_RETRY_MAX_MS);
    this.#delays.set(job.inputSha256, delayMs);
    const seed = { path: job.inputPath, sha256: job.inputSha256, depth: job.depth, origin: originOf(job.origin) };
    this.#deferred.set(job.inputSha256, { seed, dueMs: now + delayMs });
  }

  #forgetDeferral(digest: string): void {
    this.#deferred.delete(digest);
    this.#delays.delete(digest);
  }

  /** Measured yield of full and directed runs (directed counts trace runs too) and the full share now. */
  yieldFigures(): YieldFigures {
    return this.#bandit.figures();
  }

  observe(feedback: JobFeedback, now: number): void {
    this.#forgetDeferral(feedback.job.inputSha256);
    const depth = feedback.job.depth + 1;
    const directed = feedback.job.mode === 'trace' || feedback.job.group.length > 0;
    // Equal CPU is what the split trades: a run's cost is its machine time, not only the solver's
    // own solving time (a trace run solves nothing, yet holds a slot).
    this.#bandit.observe(directed ? 'directed' : 'full', feedback.newEdges ?? feedback.findings.filter((f) => f.kind === 'queue').length, feedback.runMs ?? feedback.solverMs ?? 0);
    for (const entry of feedback.findings) {
      if (entry.kind !== 'queue') continue;
      this.#afl?.markSeenDigest(entry.sha256);
      if (this.#maxDepth > 0 && depth > this.#maxDepth) continue;
      if (this.#known.has(entry.sha256)) continue;
      this.#feedback.push({ path: entry.path, sha256: entry.sha256, depth, origin: 'feedback' });
    }
    // Deepest first: stable sort keeps publication order within a generation.
    this.#feedback.sort((a, b) => b.depth - a.depth);
    this.#scheduler?.observe(feedback, now);
  }
}

/** A job's origin as a seed's (a recovered job's input came from AFL++'s queue or our own findings). */
function originOf(origin: string): SeedInput['origin'] {
  return origin === 'seed' || origin === 'feedback' ? origin : 'afl';
}
