/**
 * The coordinator's lease ports over the durable lease tables (src/lease/) directly, for embedders
 * that run without the I/O thread (production wiring uses `io-lease-adapters.ts`). The tables answer
 * expected outcomes as values (`ok`/`reason`) and throw on I/O failure; the ports keep that split:
 * a refusal becomes `false` / `{ ok: false }`, an I/O failure propagates for the coordinator
 * to count and log. `nowMs` is the coordinator's clock (wall time: several processes compare it).
 */
import { answerClaimOptions, type FencedTargetLeaseTable } from '../../lease/target-lease-table.js';
import type { FencedWorkLeaseTable } from '../../lease/work-lease-table.js';
import { groupClaimOutcome, workClaimOutcome } from '../../lease/claim-outcome.js';
import type { AnswerWriter, GroupAnswers } from '../../lease/table-contract.js';
import type { ClaimAsk, SharedTargetClaims } from '../../scheduler/admission-ports.js';
import type { ClaimOutcome, RecoveredWork, TargetLeasePort, WorkClaimAsk, WorkLeasePort } from '../ports.js';

export class WorkLeaseAdapter implements WorkLeasePort {
  constructor(
    readonly table: FencedWorkLeaseTable,
    private readonly owner: string,
  ) {}

  async claim(workId: string, payload: Readonly<Record<string, unknown>>, now: number, options: WorkClaimAsk = {}): Promise<ClaimOutcome> {
    return workClaimOutcome(await this.table.claim(workId, payload, { nowMs: now, owner: this.owner, ...(options.doneCommit === true ? { doneCommit: true } : {}) }));
  }

  async heartbeatMany(fences: ReadonlyMap<string, string>, now: number): Promise<ReadonlySet<string>> {
    const result = await this.table.heartbeatMany(fences.entries(), { nowMs: now });
    return new Set(result.lost);
  }

  async abandon(workId: string, token: string): Promise<boolean> {
    return (await this.table.abandon(workId, token)).ok;
  }

  async beginCommit(workId: string, token: string, now: number, manifest?: Readonly<Record<string, unknown>>): Promise<boolean> {
    return (await this.table.beginCommit(workId, token, { nowMs: now, ...(manifest !== undefined ? { commit: manifest } : {}) })).ok;
  }

  async complete(workId: string, token: string, now: number): Promise<boolean> {
    return this.table.complete(workId, token, { nowMs: now });
  }

  async recoverExpired(limit: number, now: number): Promise<readonly RecoveredWork[]> {
    const expired = await this.table.recoverExpired({ nowMs: now, limit });
    return expired.map((e) => ({ workId: e.id, payload: e.payload }));
  }
}

export class TargetLeaseAdapter implements TargetLeasePort, SharedTargetClaims {
  constructor(
    readonly table: FencedTargetLeaseTable,
    private readonly owner: string,
  ) {}

  async claimGroup(group: readonly bigint[], payload: Readonly<Record<string, unknown>>, now: number, ask?: ClaimAsk): Promise<ClaimOutcome> {
    return groupClaimOutcome(await this.table.claimGroup(group, payload, { nowMs: now, owner: this.owner, ...answerClaimOptions(ask) }));
  }

  async heartbeatGroup(group: readonly bigint[], token: string, now: number): Promise<boolean> {
    return (await this.table.heartbeatGroup(group, token, { nowMs: now })).ok;
  }

  async releaseGroup(group: readonly bigint[], token: string, now: number, answers?: GroupAnswers): Promise<boolean> {
    return (await this.table.releaseGroup(group, token, answers !== undefined ? { answers, nowMs: now } : {})).ok;
  }

  async recordAnswers(answers: GroupAnswers, writer: AnswerWriter, now: number): Promise<boolean> {
    return (await this.table.recordAnswers(answers, writer, now)).ok;
  }

  /**
   * The scheduler's batched claim of one admission round. Each group is its own all-or-nothing
   * claim; an I/O failure on one group answers `error` for that group only.
   */
  async claimGroups(groups: readonly (readonly bigint[])[], now: number, asks?: readonly (ClaimAsk | undefined)[]): Promise<readonly ClaimOutcome[]> {
    const outcomes: ClaimOutcome[] = [];
    for (const [i, group] of groups.entries()) {
      try {
        outcomes.push(groupClaimOutcome(await this.table.claimGroup(group, { coordinator: this.owner }, { nowMs: now, owner: this.owner, ...answerClaimOptions(asks?.[i]) })));
      } catch (error) {
        outcomes.push({ ok: false, reason: 'error', detail: error instanceof Error ? error.message : String(error) });
      }
    }
    return outcomes;
  }

  async releaseGroups(claims: readonly { targets: readonly bigint[]; token: string }[]): Promise<void> {
    for (const claim of claims) {
      try {
        await this.table.releaseGroup(claim.targets, claim.token);
      } catch {
        // Left to TTL expiry; the scheduler counts release failures on its side.
      }
    }
  }
}
