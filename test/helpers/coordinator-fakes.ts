/**
 * In-memory fakes of the coordinator's ports with the lease semantics of docs/leases.md (token
 * fencing by equality, TTL expiry on an injected clock, committing records never stolen, the
 * manifest stored with beginCommit), so lifecycle tests can assert on what is held after each
 * transition. `FakeWorkLeases` is also the record table of `MemoryResultCommits`
 * (memory-result-commits.ts), the production commit path in memory.
 */
import { createHash } from 'node:crypto';
import type {
  AdmittedWork,
  ClaimOutcome,
  Clock,
  CoordinatorJob,
  CommitOutcome,
  JobAction,
  JobFeedback,
  LocalReservations,
  RecoveredWork,
  SolverOutcome,
  SolverPort,
  SolverPortTask,
  TargetLeasePort,
  WorkClaimAsk,
  WorkLeasePort,
  WorkSource,
} from '../../src/coordinator/ports.js';
import type { JsonObject } from '../../src/lease/lease-record.js';
import type { AnswerWriter, GroupAnswers } from '../../src/lease/table-contract.js';
import type { ClaimAsk } from '../../src/scheduler/admission-ports.js';
import { TELEMETRY_SCHEMA, type Telemetry } from '../../src/scheduler/telemetry.js';
import type { CommitRecordTable, CommitRecordView } from './memory-result-commits.js';

/** An I/O failure as the lease tables throw it (`ERR_LEASE_IO`, outcome unknown). */
export const ioError = (message: string): Error => Object.assign(new Error(message), { code: 'ERR_LEASE_IO' });

export class ManualClock implements Clock {
  constructor(public ms = 1_000_000) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

let tokenSeq = 0;
const newToken = (owner: string): string => `${owner}:${++tokenSeq}`;

interface WorkRecord {
  status: 'leased' | 'committing' | 'done';
  token: string;
  updatedMs: number;
  payload: Readonly<Record<string, unknown>>;
  /** Coordinator id of the holder (the claim payload's `coordinator`, else the table's owner). */
  owner?: string;
  /** The result manifest stored with beginCommit. */
  commit?: unknown;
  completedMs?: number;
}

export class FakeWorkLeases implements WorkLeasePort, CommitRecordTable {
  readonly records = new Map<string, WorkRecord>();
  /** Make the next claims fail: 'error' throws, a reason refuses. */
  claimFailure: 'error' | 'conflict' | undefined;
  heartbeatError = false;
  readonly calls: string[] = [];

  constructor(
    private readonly ttlMs: number,
    private readonly owner = 'me',
  ) {}

  async claim(workId: string, payload: Readonly<Record<string, unknown>>, now: number, options: WorkClaimAsk = {}): Promise<ClaimOutcome> {
    this.calls.push(`claim ${workId.slice(0, 8)}`);
    if (this.claimFailure === 'error') throw ioError('injected claim I/O error');
    if (this.claimFailure) return { ok: false, reason: this.claimFailure };
    const rec = this.records.get(workId);
    if (rec && rec.status === 'done') {
      const commit = options.doneCommit === true && rec.commit !== undefined ? { commit: rec.commit as JsonObject } : {};
      return { ok: false, reason: 'done', finished: { owner: rec.owner ?? this.owner, ...commit } };
    }
    if (rec && (rec.status === 'committing' || now - rec.updatedMs < this.ttlMs)) return { ok: false, reason: 'conflict' };
    const token = newToken(this.owner);
    const owner = typeof payload['coordinator'] === 'string' ? payload['coordinator'] : this.owner;
    this.records.set(workId, { status: 'leased', token, updatedMs: now, payload, owner });
    return { ok: true, token };
  }

  async heartbeatMany(fences: ReadonlyMap<string, string>, now: number): Promise<ReadonlySet<string>> {
    this.calls.push(`heartbeatMany ${fences.size}`);
    if (this.heartbeatError) throw ioError('injected heartbeat I/O error');
    const lost = new Set<string>();
    for (const [id, token] of fences) {
      const rec = this.records.get(id);
      // As the real table: committing records are renewed too (their owner is alive).
      if (rec && rec.token === token && rec.status !== 'done') rec.updatedMs = now;
      else lost.add(id);
    }
    return lost;
  }

  async abandon(workId: string, token: string): Promise<boolean> {
    this.calls.push(`abandon ${workId.slice(0, 8)}`);
    const rec = this.records.get(workId);
    if (!rec || rec.token !== token || rec.status !== 'leased') return false;
    this.records.delete(workId);
    return true;
  }

  async beginCommit(workId: string, token: string, now: number, manifest?: Readonly<Record<string, unknown>>): Promise<boolean> {
    this.calls.push(`beginCommit ${workId.slice(0, 8)}`);
    const rec = this.records.get(workId);
    // As the real table's beginCommit: leased, or committing with the same manifest (idempotent), with this token.
    if (!rec || rec.token !== token || rec.status === 'done') return false;
    if (rec.status === 'committing' && JSON.stringify(rec.commit) !== JSON.stringify(manifest)) return false;
    rec.status = 'committing';
    rec.updatedMs = now;
    if (manifest !== undefined) rec.commit = structuredClone(manifest);
    return true;
  }

  async complete(workId: string, token: string, now: number): Promise<boolean> {
    this.calls.push(`complete ${workId.slice(0, 8)}`);
    const rec = this.records.get(workId);
    // As the real table's completeOnce: leased or committing with this token → done; done → already.
    if (!rec || rec.token !== token) return false;
    if (rec.status === 'done') return true;
    rec.status = 'done';
    rec.completedMs = now;
    return true;
  }

  /** The fenced publication step (as the table's replayCommitOnce): see `CommitRecordTable`. */
  async publishUnderLock(workId: string, token: string, now: number, minIdleMs: number, publish: () => Promise<void>): Promise<Exclude<CommitOutcome, 'corrupt'>> {
    this.calls.push(`publishCommitted ${workId.slice(0, 8)}`);
    const rec = this.records.get(workId);
    if (!rec || rec.token !== token) return 'stale';
    if (rec.status === 'done') return 'already';
    if (rec.status !== 'committing' || rec.commit === undefined) return 'stale';
    if (now - rec.updatedMs < minIdleMs) return 'live';
    await publish();
    rec.status = 'done';
    rec.completedMs = now;
    return 'completed';
  }

  async readRecords(): Promise<readonly CommitRecordView[]> {
    return [...this.records].map(([workId, r]) => ({ workId, ...r, owner: r.owner ?? this.owner }));
  }

  async recoverExpired(limit: number, now: number): Promise<readonly RecoveredWork[]> {
    const out: RecoveredWork[] = [];
    for (const [workId, rec] of this.records) {
      if (out.length >= limit) break;
      if (rec.status === 'leased' && now - rec.updatedMs >= this.ttlMs) out.push({ workId, payload: rec.payload });
    }
    return out;
  }

  /** Another coordinator takes the record over (as after an expiry). */
  steal(workId: string, now: number): void {
    const rec = this.records.get(workId);
    if (!rec) throw new Error(`no record ${workId}`);
    rec.token = newToken('thief');
    rec.updatedMs = now;
  }

  /** Records still held (leased or committing). */
  held(): string[] {
    return [...this.records].filter(([, r]) => r.status !== 'done').map(([id]) => id);
  }
}

export class FakeTargetLeases implements TargetLeasePort {
  readonly records = new Map<bigint, { token: string; updatedMs: number }>();
  claimError = false;
  /** Per call, in order: 'error' throws, 'lost' answers false, undefined behaves normally. */
  heartbeatScript: Array<'error' | 'lost' | undefined> = [];
  releaseError = false;
  readonly calls: string[] = [];
  /** The input each claim named (undefined: none), in call order. */
  readonly claimInputs: (string | undefined)[] = [];
  /** What each claim asked about answers (undefined: nothing), in call order. */
  readonly claimAsks: (ClaimAsk | undefined)[] = [];

  constructor(
    private readonly ttlMs: number,
    private readonly owner = 'me',
  ) {}

  async claimGroup(group: readonly bigint[], _payload: Readonly<Record<string, unknown>>, now: number, ask?: ClaimAsk): Promise<ClaimOutcome> {
    this.calls.push(`claim ${group.join(',')}`);
    this.claimInputs.push(ask?.input);
    this.claimAsks.push(ask);
    if (this.claimError) throw ioError('injected target claim I/O error');
    for (const t of group) {
      const rec = this.records.get(t);
      if (rec && now - rec.updatedMs < this.ttlMs) return { ok: false, reason: 'conflict' };
    }
    const token = newToken(this.owner);
    for (const t of group) this.records.set(t, { token, updatedMs: now });
    return { ok: true, token };
  }

  async heartbeatGroup(group: readonly bigint[], token: string, now: number): Promise<boolean> {
    this.calls.push(`heartbeat ${group.join(',')}`);
    const scripted = this.heartbeatScript.shift();
    if (scripted === 'error') throw ioError('injected target heartbeat I/O error');
    if (scripted === 'lost') return false;
    if (!group.every((t) => this.records.get(t)?.token === token)) return false;
    for (const t of group) this.records.get(t)!.updatedMs = now;
    return true;
  }

  async releaseGroup(group: readonly bigint[], token: string): Promise<boolean> {
    this.calls.push(`release ${group.join(',')}`);
    if (this.releaseError) throw ioError('injected release I/O error');
    if (!group.every((t) => this.records.get(t)?.token === token)) return false;
    for (const t of group) this.records.delete(t);
    return true;
  }

  /** Answers written without a lease (`recordAnswers`), in call order. */
  readonly recorded: { answers: GroupAnswers; writer: AnswerWriter; now: number }[] = [];
  /** `recordAnswers` throws an I/O error, or is refused (a corrupt answer record). */
  recordError = false;
  recordRefused = false;

  async recordAnswers(answers: GroupAnswers, writer: AnswerWriter, now: number): Promise<boolean> {
    this.calls.push(`record ${[...answers.settled, ...(answers.open ?? [])].join(',')}`);
    if (this.recordError) throw ioError('injected recordAnswers I/O error');
    if (this.recordRefused) return false;
    this.recorded.push({ answers, writer, now });
    return true;
  }

  /** Another coordinator holds the targets now. */
  takeOver(group: readonly bigint[], now: number): string {
    const token = newToken('other');
    for (const t of group) this.records.set(t, { token, updatedMs: now });
    return token;
  }
}

export class FakeReservations implements LocalReservations {
  readonly held = new Map<bigint, number>();
  tryReserveGroup(targets: readonly bigint[], owner: number): boolean {
    if (targets.some((t) => this.held.has(t))) return false;
    for (const t of targets) this.held.set(t, owner);
    return true;
  }
  releaseGroup(targets: readonly bigint[], owner: number): number {
    let n = 0;
    for (const t of targets) {
      if (this.held.get(t) === owner) {
        this.held.delete(t);
        n++;
      }
    }
    return n;
  }
}

interface Deferred {
  readonly task: SolverPortTask;
  readonly signal: AbortSignal;
  resolve(outcome: SolverOutcome): void;
}

/** A solver whose runs finish when the test says so; an abort finishes a run as `aborted`. */
export class FakeSolver implements SolverPort {
  readonly runs: Deferred[] = [];
  #waiters: Array<() => void> = [];

  run(task: SolverPortTask, options: { signal: AbortSignal }): Promise<SolverOutcome> {
    return new Promise((resolve) => {
      const entry: Deferred = { task, signal: options.signal, resolve };
      options.signal.addEventListener('abort', () => resolve({ status: 'aborted', generated: [], elapsedMs: 0 }), { once: true });
      this.runs.push(entry);
      for (const w of this.#waiters.splice(0)) w();
    });
  }

  /** Resolves once at least `n` runs have started. */
  async started(n: number): Promise<void> {
    while (this.runs.length < n) await new Promise<void>((r) => this.#waiters.push(r));
  }
}

export class FakeSource implements WorkSource {
  readonly observed: JobFeedback[] = [];
  /** Deliver everything queued regardless of `limit` (to exercise the safety valve). */
  overdeliver = false;
  /** What a re-claim of a job's group asks (`WorkSource.claimAsk`); unset: the job's input alone. */
  ask: ((job: CoordinatorJob) => ClaimAsk) | undefined;
  constructor(public queue: AdmittedWork[] = []) {}
  claimAsk(job: CoordinatorJob): ClaimAsk {
    return this.ask?.(job) ?? { input: job.inputSha256 };
  }
  async take(limit: number): Promise<readonly AdmittedWork[]> {
    return this.queue.splice(0, this.overdeliver ? this.queue.length : limit);
  }
  observe(feedback: JobFeedback): void {
    this.observed.push(feedback);
  }
}

export const sha = (bytes: Uint8Array | string): string => createHash('sha256').update(bytes).digest('hex');

/** A job on input `name` with primary `target` and extra solve actions. */
/** Runtime telemetry of a directed run whose target `branch` was reached and proved unsat, with `generated` inputs written. */
export function unsatTelemetry(branch: bigint, generated = 0): Telemetry {
  return {
    schema: TELEMETRY_SCHEMA,
    targetBranch: branch,
    targetReached: true,
    targetStatus: 'unsat',
    branchTrace: [],
    openBranches: [],
    counters: { queries: 1, sat: 0, unsat: 1, unknown: 0, solverTimeUs: 10, generated },
  };
}

export function makeJob(name: string, target = 0n, extra: readonly bigint[] = []): CoordinatorJob {
  const actions: JobAction[] = [
    ...(target > 0n ? [{ branch: target, kind: 'solve' as const }] : []),
    ...extra.map((branch) => ({ branch, kind: 'sample' as const })),
  ];
  const group = [...new Set([...(target > 0n ? [target] : []), ...extra])];
  return { inputPath: `/afl/queue/${name}`, inputSha256: sha(name), targetBranch: target, actions, group, origin: 'scheduler', depth: 0 };
}
