/**
 * What the campaign already knows about each (input, target) pair, so that no deterministic
 * query is posed twice:
 *
 * - **settled** — the run answered it (`sat`: an input was written; `unsat`: refuted). The same
 *   input asks the same query again, so the pair is never proposed again;
 * - **retry** — the run left it open (`unknown`, a solver timeout or kill, or it did not reach
 *   the branch). It may be proposed again after a back-off (`retryBaseMs · 2^(attempts−1)`),
 *   at most `maxAttempts` times in all; then it is settled as given up.
 *
 * Besides the per-input pairs, the ledger keeps the set of branch ids answered on *any* input:
 * with a bounded-context branch id (docs/solver.md, "Branch ids") a branch answered on one input
 * poses the same query on another input that shares its recent path, so the frontier lane does not
 * ask it again. Both are bounded (oldest forgotten first). Time is the caller's monotonic clock.
 *
 * The admission filter (`filter`) is what makes the guarantee hold whichever lane proposes: a
 * proposal whose primary target is settled or backing off is dropped, settled actions are removed
 * from the rest.
 *
 * The ledger is saved with the lanes (`toJSON` / `restore`, docs/scheduler.md "Lane state file"),
 * so a campaign restarted on its out-dir keeps what it knew at its last save. A pair given up is
 * saved as settled, like an answered one.
 */
import type { Telemetry } from './telemetry.js';
import type { OpenMember } from '../lease/claim-outcome.js';
import type { OpenBackoff } from '../lease/table-contract.js';
import { backoffEndMs } from '../lease/target-lease-table.js';
import { fitToGroup, type ReplayJob } from './replay-job.js';
import { arr, bad, id, ids, int, num, obj, strings } from './lanes/state-codec.js';

/** Version of the ledger's part of the saved lane state (`toJSON`). */
const LEDGER_SCHEMA = 1;

interface TargetLedgerOptions {
  /** Attempts (runs that left a pair open) before it is given up. Default 3. */
  readonly maxAttempts?: number;
  /** First back-off after an open outcome, ms. Default 30 000. */
  readonly retryBaseMs?: number;
  /** Pairs remembered (settled + retrying). Default 1 048 576. */
  readonly maxPairs?: number;
  /** Branches remembered as answered on some input. Default 1 048 576. */
  readonly maxAnswered?: number;
}

interface RetryState {
  attempts: number;
  notBeforeMs: number;
}

export interface LedgerStats {
  readonly settledPairs: number;
  readonly retryingPairs: number;
  readonly answeredBranches: number;
  /** Proposals dropped because their primary target was settled or backing off. */
  readonly droppedProposals: number;
  /** Actions removed from proposals because their pair was settled. */
  readonly strippedActions: number;
  readonly givenUp: number;
}

/**
 * Per-branch outcome of one run, derived from its telemetry (`outcomesOf`). `untried`: the run
 * ended (early exit) before its path reached the branch — no attempt is charged.
 */
type PairOutcome = 'answered' | 'open' | 'untried';

const SETTLED = 0 as const;

export class TargetLedger {
  readonly #maxAttempts: number;
  readonly #retryBaseMs: number;
  readonly #maxPairs: number;
  readonly #maxAnswered: number;
  /** `key(seed, branch)` → SETTLED or the retry state. Insertion order is age (oldest first). */
  readonly #pairs = new Map<string, typeof SETTLED | RetryState>();
  readonly #answered = new Set<bigint>();
  #settledCount = 0;
  #droppedProposals = 0;
  #strippedActions = 0;
  #givenUp = 0;

  constructor(options: TargetLedgerOptions = {}) {
    this.#maxAttempts = Math.max(1, Math.floor(options.maxAttempts ?? 3));
    this.#retryBaseMs = Math.max(0, options.retryBaseMs ?? 30_000);
    this.#maxPairs = Math.max(1024, Math.floor(options.maxPairs ?? 1 << 20));
    this.#maxAnswered = Math.max(1024, Math.floor(options.maxAnswered ?? 1 << 20));
  }

  /** Was `branch` answered on any input? */
  answered(branch: bigint): boolean {
    return this.#answered.has(branch);
  }

  /** May `(seed, branch)` be proposed at `now`? False when settled or still backing off. */
  allowed(seed: string, branch: bigint, now: number): boolean {
    const state = this.#pairs.get(key(seed, branch));
    if (state === undefined) return true;
    if (state === SETTLED) return false;
    return now >= state.notBeforeMs;
  }

  isSettled(seed: string, branch: bigint): boolean {
    return this.#pairs.get(key(seed, branch)) === SETTLED;
  }

  /**
   * The admission filter: the job as it may run now, or undefined when it must not be proposed.
   * Untargeted jobs pass unchanged. Pure with respect to lane state (only counters move).
   */
  filter(job: ReplayJob, now: number): ReplayJob | undefined {
    const primaryAllowed = job.targetBranch === 0n || this.allowed(job.seed, job.targetBranch, now);
    if (primaryAllowed && job.actions.length === 0) return job;
    const kept = job.actions.filter((a) => a.kind === 'skip' || this.allowed(job.seed, a.branch, now));
    if (primaryAllowed && kept.length === job.actions.length) return job;
    this.#strippedActions += job.actions.length - kept.length;
    let targetBranch = job.targetBranch;
    let actions = kept;
    if (!primaryAllowed) {
      // The primary is settled or backing off: the first still-open action takes its place (the
      // group only shrinks), so one settled branch does not hold the rest of the job back.
      const next = kept.find((a) => a.kind !== 'skip');
      if (next === undefined) {
        this.#droppedProposals += 1;
        return undefined;
      }
      targetBranch = next.branch;
      actions = kept.filter((a) => a !== next);
    } else if (targetBranch === 0n && kept.every((a) => a.kind === 'skip')) {
      this.#droppedProposals += 1;
      return undefined;
    }
    return fitToGroup(Object.freeze({ ...job, targetBranch, actions: Object.freeze(actions) }));
  }

  /**
   * Records a finished run of `job` on its seed: every branch of the job's group gets the outcome
   * its telemetry shows (`outcomesOf`); without telemetry, or when the run was killed, every
   * branch of the group counts as open.
   */
  record(job: ReplayJob, group: readonly bigint[], telemetry: Telemetry | null, killed: boolean, now: number): void {
    const { settled, open } = memberOutcomes(group, telemetry, killed);
    for (const branch of settled) this.#settle(job.seed, branch, true);
    for (const branch of open) this.#retry(job.seed, branch, now);
  }

  /** This ledger's back-off policy, as the shared target table applies it to a claim (docs/leases.md "Shared answers"). */
  get backoff(): OpenBackoff {
    return { baseMs: this.#retryBaseMs, maxAttempts: this.#maxAttempts };
  }

  /**
   * Learns questions left open elsewhere in the campaign (a claim refused `backoff`): each pair
   * takes the larger attempt count and the later end of its back-off, counted from when the last
   * run left it open (`lastOpenMs` on the same clock as `now`); at `maxAttempts` it is given up.
   */
  noteOpen(seed: string, open: readonly OpenMember[], now: number): void {
    for (const o of open) {
      const k = key(seed, o.target);
      const before = this.#pairs.get(k);
      if (before === SETTLED) continue;
      const attempts = Math.max(before?.attempts ?? 0, o.attempts);
      if (attempts >= this.#maxAttempts) {
        this.#givenUp += 1;
        this.#settle(seed, o.target, false);
        continue;
      }
      const notBeforeMs = Math.max(before?.notBeforeMs ?? 0, backoffEndMs(this.#retryBaseMs, o.attempts, Math.min(o.lastOpenMs, now)));
      this.#pairs.delete(k);
      this.#pairs.set(k, { attempts, notBeforeMs });
      this.#evict();
    }
  }

  /** Marks branches answered by a run that was not directed at them (e.g. an untargeted run). */
  noteAnswered(seed: string, branches: Iterable<bigint>): void {
    for (const b of branches) this.#settle(seed, b, true);
  }

  /**
   * Pairs (oldest first, as the eviction order) and answered branches as one JSON-safe document.
   * A back-off is kept as the time left after `now`, so a restart with a new monotonic clock keeps it.
   */
  toJSON(now: number): unknown {
    const seeds: string[] = [];
    const seedIndex = new Map<string, number>();
    const pairs: [number, string, number, number][] = [];
    for (const [k, state] of this.#pairs) {
      const [seed, branch] = unkey(k);
      let index = seedIndex.get(seed);
      if (index === undefined) {
        index = seeds.length;
        seeds.push(seed);
        seedIndex.set(seed, index);
      }
      // [seed, branch, attempts (0 = settled), ms until it may be asked again]
      pairs.push(state === SETTLED ? [index, branch, 0, 0] : [index, branch, state.attempts, Math.max(0, Math.ceil(state.notBeforeMs - now))]);
    }
    return { schema: LEDGER_SCHEMA, seeds, pairs, answered: [...this.#answered].map(String) };
  }

  /**
   * Replaces what the ledger knows with a `toJSON` document. All or nothing: a malformed document
   * throws `ERR_LANE_STATE` naming the field and changes nothing. Pairs and branches beyond this
   * ledger's bounds keep the newest.
   */
  restore(document: unknown, now: number): void {
    const parsed = TargetLedger.#parse(document, now);
    this.#pairs.clear();
    this.#answered.clear();
    for (const [k, state] of parsed.pairs) {
      // A later row for the same pair wins, at the later position; a pair saved with more attempts
      // than this ledger allows (a lower --target-attempts now) is given up.
      this.#pairs.delete(k);
      this.#pairs.set(k, state !== SETTLED && state.attempts >= this.#maxAttempts ? SETTLED : state);
    }
    while (this.#pairs.size > this.#maxPairs) this.#pairs.delete(this.#pairs.keys().next().value as string);
    this.#settledCount = 0;
    for (const state of this.#pairs.values()) if (state === SETTLED) this.#settledCount += 1;
    for (const branch of parsed.answered) {
      this.#answered.delete(branch);
      this.#answered.add(branch);
    }
    while (this.#answered.size > this.#maxAnswered) this.#answered.delete(this.#answered.values().next().value as bigint);
  }

  /** Validates a `toJSON` document without touching any ledger (the dry run of a restore). */
  static check(document: unknown, now: number): void {
    TargetLedger.#parse(document, now);
  }

  static #parse(document: unknown, now: number): { pairs: [string, typeof SETTLED | RetryState][]; answered: bigint[] } {
    const o = obj(document, 'ledger');
    if (o.schema !== LEDGER_SCHEMA) bad('ledger.schema', String(LEDGER_SCHEMA));
    const seeds = strings(o.seeds, 'ledger.seeds');
    const pairs = arr(o.pairs, 'ledger.pairs').map((raw, i): [string, typeof SETTLED | RetryState] => {
      const p = `ledger.pairs[${i}]`;
      const row = arr(raw, p);
      if (row.length !== 4) bad(p, '[seed, branch, attempts, retryInMs]');
      const seed = seeds[int(row[0], `${p}[0]`)];
      if (seed === undefined) bad(`${p}[0]`, 'an index into ledger.seeds');
      const branch = id(row[1], `${p}[1]`);
      const attempts = int(row[2], `${p}[2]`);
      const retryInMs = num(row[3], `${p}[3]`);
      if (retryInMs < 0) bad(`${p}[3]`, 'a time left of at least 0 ms');
      return [key(seed, branch), attempts === 0 ? SETTLED : { attempts, notBeforeMs: now + retryInMs }];
    });
    return { pairs, answered: ids(o.answered, 'ledger.answered') };
  }

  stats(): LedgerStats {
    return {
      settledPairs: this.#settledCount,
      retryingPairs: this.#pairs.size - this.#settledCount,
      answeredBranches: this.#answered.size,
      droppedProposals: this.#droppedProposals,
      strippedActions: this.#strippedActions,
      givenUp: this.#givenUp,
    };
  }

  #settle(seed: string, branch: bigint, answered: boolean): void {
    const k = key(seed, branch);
    const before = this.#pairs.get(k);
    if (before !== SETTLED) {
      this.#pairs.delete(k);
      this.#pairs.set(k, SETTLED);
      this.#settledCount += 1;
    }
    // A pair given up first and answered later (an untargeted run, an adopted trace) still makes
    // the branch answered on some input.
    if (answered) {
      this.#answered.delete(branch);
      this.#answered.add(branch);
      while (this.#answered.size > this.#maxAnswered) this.#answered.delete(this.#answered.values().next().value as bigint);
    }
    this.#evict();
  }

  #retry(seed: string, branch: bigint, now: number): void {
    const k = key(seed, branch);
    const before = this.#pairs.get(k);
    if (before === SETTLED) return;
    const attempts = (before?.attempts ?? 0) + 1;
    if (attempts >= this.#maxAttempts) {
      this.#givenUp += 1;
      this.#settle(seed, branch, false);
      return;
    }
    this.#pairs.delete(k);
    this.#pairs.set(k, { attempts, notBeforeMs: backoffEndMs(this.#retryBaseMs, attempts, now) });
    this.#evict();
  }

  #evict(): void {
    while (this.#pairs.size > this.#maxPairs) {
      const [oldest, state] = this.#pairs.entries().next().value as [string, typeof SETTLED | RetryState];
      this.#pairs.delete(oldest);
      if (state === SETTLED) this.#settledCount -= 1;
    }
  }
}

/**
 * The map key of a pair. A campaign's seeds are SHA-256 digests in lowercase hex and its branch ids
 * 64-bit: such a pair is packed into one flat 40-character string of byte-valued characters (the
 * digest's 32 bytes, then the id's 8, little-endian), about 92 bytes a pair with its map entry
 * against 141 for the text `seed NUL decimal` (and twice as fast to build and look up: measured
 * with 200,000 pairs on Node 20). The ledger holds up to `maxPairs` of them. Any other seed or id
 * (a library caller's own names) keeps the text form behind a U+FFFF mark, a character no packed
 * key holds, so the two forms never meet.
 */
function key(seed: string, branch: bigint): string {
  if (seed.length === 64 && branch >= 0n && branch <= MAX_U64 && SEED_HEX.test(seed)) {
    PACKED.write(seed, 0, 32, 'hex');
    PACKED.writeBigUInt64LE(branch, 32);
    return PACKED.toString('latin1', 0, PACKED_LENGTH);
  }
  return `\uffff${seed}\u0000${branch.toString(10)}`;
}

/** The seed and the decimal branch id of a `key`. */
function unkey(k: string): [seed: string, branch: string] {
  if (k.charCodeAt(0) === 0xffff) {
    // The branch is decimal digits: the last NUL ends the seed, whatever the seed holds.
    const cut = k.lastIndexOf('\u0000');
    return [k.slice(1, cut), k.slice(cut + 1)];
  }
  const bytes = Buffer.from(k, 'latin1');
  return [bytes.toString('hex', 0, 32), bytes.readBigUInt64LE(32).toString(10)];
}

const SEED_HEX = /^[0-9a-f]{64}$/;
const MAX_U64 = (1n << 64n) - 1n;
const PACKED_LENGTH = 40;
/** Scratch of `key` (single-threaded: each call copies its string out before returning). */
const PACKED = Buffer.alloc(PACKED_LENGTH);

/**
 * The members of `group` a finished run answered (sat or unsat) and left open, as `record` counts
 * them: without telemetry, or when the run was killed, none answered and all open; a member the
 * run's path never reached before an early exit is neither.
 */
export function memberOutcomes(group: readonly bigint[], telemetry: Telemetry | null | undefined, killed: boolean): { settled: bigint[]; open: bigint[] } {
  if (group.length === 0) return { settled: [], open: [] };
  if (telemetry == null || killed) return { settled: [], open: [...group] };
  const outcomes = outcomesOf(telemetry, group);
  return { settled: group.filter((b) => outcomes.get(b) === 'answered'), open: group.filter((b) => (outcomes.get(b) ?? 'open') === 'open') };
}

/**
 * Which of `group` a run answered, from its telemetry.
 *
 * Preload telemetry (stock SymCC): a branch is answered when a generated input was attributed to
 * it (`generatedFor`: sat), when a forked child answered it `sat` or `unsat` (`answers`: the
 * child's one solving call is the first real one its QSYM sees, so it is always solved;
 * docs/solver.md "Fork at the target"), or when it is the primary target of a directed run and
 * its status is `unsat` (one solving call on a fresh map, likewise). A call that wrote nothing for
 * any other reason (QSYM's own pruning, a timeout, a crashed child: `unknown`) proves nothing.
 * When the run ended early, a branch its trace never reached is `untried`.
 *
 * Runtime telemetry (a runtime that reports outcomes itself): a branch is answered when the run
 * solved it (a trace row whose opposite it is, marked interesting) and did not leave it open, or
 * when it is the primary target with status `sat`/`unsat`.
 *
 * Everything else — `unknown`, not reached, or not visible in a truncated trace — is open.
 */
export function outcomesOf(telemetry: Telemetry, group: readonly bigint[]): Map<bigint, PairOutcome> {
  const wanted = new Set(group);
  const outcomes = new Map<bigint, PairOutcome>();
  if (telemetry.preload !== undefined) {
    for (const b of telemetry.generatedFor ?? []) if (wanted.has(b)) outcomes.set(b, 'answered');
    for (const a of telemetry.answers ?? []) if (wanted.has(a.branch) && a.status !== 'unknown') outcomes.set(a.branch, 'answered');
    if (telemetry.preload.mode === 'directed' && telemetry.targetBranch > 0n && wanted.has(telemetry.targetBranch) && telemetry.targetStatus === 'unsat') {
      outcomes.set(telemetry.targetBranch, 'answered');
    }
    if (telemetry.preload.earlyExit) {
      const reached = new Set(telemetry.branchTrace.map((r) => r.opposite));
      for (const b of group) if (!outcomes.has(b) && !reached.has(b)) outcomes.set(b, 'untried');
    }
    return outcomes;
  }
  const open = new Set(telemetry.openBranches);
  for (const row of telemetry.branchTrace) {
    if (row.interesting === 1 && wanted.has(row.opposite) && !open.has(row.opposite)) outcomes.set(row.opposite, 'answered');
  }
  if (telemetry.targetBranch > 0n && wanted.has(telemetry.targetBranch)) {
    if (telemetry.targetStatus === 'sat' || telemetry.targetStatus === 'unsat') outcomes.set(telemetry.targetBranch, 'answered');
    else if (telemetry.targetStatus === 'unknown') outcomes.set(telemetry.targetBranch, 'open');
  }
  return outcomes;
}

/**
 * Branches an untargeted run answered on its input, by the same evidence as `outcomesOf`: with
 * preload telemetry only those it generated an input for (QSYM's pruning map may have declined
 * the others unasked), otherwise every solved row it did not leave open.
 */
export function answeredBy(telemetry: Telemetry): bigint[] {
  if (telemetry.preload !== undefined) {
    const answered = new Set(telemetry.generatedFor ?? []);
    // A trace run with a wanted set answers the wanted branches it forked at (sat or unsat).
    for (const a of telemetry.answers ?? []) if (a.status !== 'unknown') answered.add(a.branch);
    return [...answered];
  }
  const open = new Set(telemetry.openBranches);
  const out: bigint[] = [];
  for (const row of telemetry.branchTrace) if (row.interesting === 1 && !open.has(row.opposite)) out.push(row.opposite);
  return out;
}
