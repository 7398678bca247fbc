/**
 * The coordinator's lease ports over the I/O thread (src/io/): every durable lease mutation of
 * the process then goes through that one thread and shares its group commits with the scheduler's
 * claims and the queue publication. This is the production adapter (the `run` and `demo` wiring);
 * `lease-adapters.ts` is the same ports over the tables directly, for embedders without the
 * thread. Both map claims with the same functions (`workClaimOutcome`, and
 * `claimOutcomeOfAnswer` over `groupClaimOutcome`): refusals are values, I/O failures are thrown,
 * with class and code kept across the thread hop.
 *
 * A target claim names the local reservation's owner (`mirrorOwner`), so the I/O thread, which keeps
 * the in-flight mirror coherent with the durable grants, recognises the reservation the scheduler
 * already holds instead of refusing it as a local conflict.
 */
import { claimOutcomeOfAnswer } from '../../io/io-adapters.js';
import type { IoClient } from '../../io/io-thread.js';
import { workClaimOutcome } from '../../lease/claim-outcome.js';
import type { AnswerWriter, GroupAnswers } from '../../lease/table-contract.js';
import type { ClaimAsk } from '../../scheduler/admission-ports.js';
import type { ClaimOutcome, RecoveredWork, TargetLeasePort, WorkClaimAsk, WorkLeasePort } from '../ports.js';

/** Mirror owner for a re-claim whose group has no local reservation (recovered work uses its own). */
const DEFAULT_MIRROR_OWNER = 1;

export class IoWorkLeases implements WorkLeasePort {
  /**
   * `leaseTtlMs`: the work TTL when it differs from the tables' TTL (one I/O thread opens both
   * tables with one set of options; claims and expiry scans of work then pass their own TTL).
   */
  constructor(
    readonly client: IoClient,
    private readonly leaseTtlMs?: number,
  ) {}

  async claim(workId: string, payload: Readonly<Record<string, unknown>>, now: number, options: WorkClaimAsk = {}): Promise<ClaimOutcome> {
    const ask = { ...(this.leaseTtlMs !== undefined ? { leaseTtlMs: this.leaseTtlMs } : {}), ...(options.doneCommit === true ? { doneCommit: true } : {}) };
    return workClaimOutcome(await this.client.claimWork(workId, payload, now, ask));
  }

  async heartbeatMany(fences: ReadonlyMap<string, string>, now: number): Promise<ReadonlySet<string>> {
    return new Set((await this.client.heartbeatWork([...fences.entries()], now)).lost);
  }

  async abandon(workId: string, token: string): Promise<boolean> {
    return (await this.client.abandonWork(workId, token)).ok;
  }

  async beginCommit(workId: string, token: string, now: number, manifest?: Readonly<Record<string, unknown>>): Promise<boolean> {
    return (await this.client.beginCommit(workId, token, now, manifest)).ok;
  }

  complete(workId: string, token: string, now: number): Promise<boolean> {
    return this.client.completeWork(workId, token, now);
  }

  async recoverExpired(limit: number, now: number): Promise<readonly RecoveredWork[]> {
    const options = this.leaseTtlMs !== undefined ? { limit, leaseTtlMs: this.leaseTtlMs } : { limit };
    return (await this.client.recoverExpired('work', now, options)).map((e) => ({ workId: e.id, payload: e.payload }));
  }
}

export class IoTargetLeases implements TargetLeasePort {
  /** `ownerOf(group)`: the in-flight owner reserving the group locally (0 = none). */
  constructor(
    readonly client: IoClient,
    private readonly ownerOf: (group: readonly bigint[]) => number = () => 0,
  ) {}

  async claimGroup(group: readonly bigint[], payload: Readonly<Record<string, unknown>>, now: number, ask?: ClaimAsk): Promise<ClaimOutcome> {
    const owner = this.ownerOf(group);
    return claimOutcomeOfAnswer(await this.client.claimGroup(group, payload, owner > 0 ? owner : DEFAULT_MIRROR_OWNER, now, ask));
  }

  async heartbeatGroup(group: readonly bigint[], token: string, now: number): Promise<boolean> {
    return (await this.client.heartbeatGroup(group, token, now)).ok;
  }

  async releaseGroup(group: readonly bigint[], token: string, now: number, answers?: GroupAnswers): Promise<boolean> {
    return (await this.client.releaseGroup(group, token, now, answers)).ok;
  }

  async recordAnswers(answers: GroupAnswers, writer: AnswerWriter, now: number): Promise<boolean> {
    return (await this.client.recordAnswers(answers, writer, now)).ok;
  }
}
