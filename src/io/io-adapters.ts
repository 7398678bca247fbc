/**
 * Adapters from the I/O client to the ports other components defined, so they can plug into the
 * I/O thread without knowing it:
 *
 * - `IoSharedTargetClaims` implements the scheduler's `SharedTargetClaims`
 *   (src/scheduler/admission-ports.ts): one admission round = one `claimGroups` request = one
 *   group commit.
 * - `IoDurableWriter` is the queue publisher's `DurableWriter` (src/triage/durable-writer.ts), matched
 *   by shape (TypeScript types structurally): AFL queue publication through the I/O thread, so only
 *   that thread mutates the queue directory.
 */
import type { InflightTargetSet } from '../inflight/inflight-target-set.js';
import { groupClaimOutcome, type ClaimOutcome } from '../lease/claim-outcome.js';
import { answerClaimOptions } from '../lease/target-lease-table.js';
import type { ClaimAsk, SharedTargetClaims } from '../scheduler/admission-ports.js';
import type { BatchClaimResult, GroupClaimRequest, GroupFence, PublishedFile } from './io-requests.js';


/** The part of `IoClient` the claims adapter uses (a fake in unit tests). */
export interface TargetClaimsClient {
  claimGroups(groups: readonly GroupClaimRequest[], nowMs: number): Promise<BatchClaimResult[]>;
  releaseGroups(claims: readonly GroupFence[], nowMs: number): Promise<unknown>;
}

interface SharedTargetClaimsOptions {
  /**
   * The process's in-flight set. The scheduler reserves each group locally before the shared
   * claim; the adapter passes that reservation's owner (the owner of the group's first member) as
   * the claim's `mirrorOwner`, so the I/O thread recognises it. Omitted: `defaultMirrorOwner`.
   */
  readonly inflight?: InflightTargetSet | null;
  /** Mirror owner when the group is not reserved locally. Default 1. */
  readonly defaultMirrorOwner?: number;
  /** The payload stored in each member record. Default `{ targets: [decimal…] }`. */
  readonly payloadOf?: (group: readonly bigint[]) => object;
}

export class IoSharedTargetClaims implements SharedTargetClaims {
  readonly #client: TargetClaimsClient;
  readonly #inflight: InflightTargetSet | null;
  readonly #defaultOwner: number;
  readonly #payloadOf: (group: readonly bigint[]) => object;

  constructor(client: TargetClaimsClient, options: SharedTargetClaimsOptions = {}) {
    this.#client = client;
    this.#inflight = options.inflight ?? null;
    this.#defaultOwner = options.defaultMirrorOwner ?? 1;
    this.#payloadOf = options.payloadOf ?? ((group) => ({ targets: group.map((t) => t.toString(10)) }));
  }

  /**
   * Claims every group in one request. Never rejects: an I/O failure of the whole request makes
   * every outcome `error` (nothing is held: failed claims are restored by the lease table).
   * `asks[i].input`, when it is an input's SHA-256 (the campaign's seeds are), is group i's input:
   * the table refuses members answered on it (`answered`); any other seed name claims without it.
   * `asks[i].anyInput`: members answered on any input refuse it too.
   */
  async claimGroups(groups: readonly (readonly bigint[])[], now: number, asks?: readonly (ClaimAsk | undefined)[]): Promise<readonly ClaimOutcome[]> {
    const outcomes: (ClaimOutcome | undefined)[] = groups.map((g) => (g.length === 0 ? { ok: false, reason: 'error', detail: 'empty target group' } : undefined));
    const sent = groups.flatMap((group, index) => (group.length === 0 ? [] : [{ index, group }]));
    if (sent.length === 0) return outcomes as ClaimOutcome[];
    let results: BatchClaimResult[];
    try {
      results = await this.#client.claimGroups(
        sent.map(({ group, index }) => {
          const ask = asks?.[index];
          return {
            targets: group,
            payload: this.#payloadOf(group),
            mirrorOwner: this.#ownerOf(group),
            ...answerClaimOptions(ask),
          };
        }),
        now,
      );
    } catch (error) {
      const detail = `${(error as { code?: string }).code ?? 'ERR'}: ${(error as Error)?.message ?? String(error)}`;
      for (const { index } of sent) outcomes[index] = { ok: false, reason: 'error', detail };
      return outcomes as ClaimOutcome[];
    }
    sent.forEach(({ index }, i) => {
      outcomes[index] = claimOutcomeOfAnswer(results[i]);
    });
    return outcomes as ClaimOutcome[];
  }

  /** Releases in one request; rejects on an I/O failure (the leases then expire after their TTL). */
  async releaseGroups(claims: readonly { targets: readonly bigint[]; token: string }[], now: number): Promise<void> {
    if (claims.length === 0) return;
    await this.#client.releaseGroups(claims, now);
  }

  #ownerOf(group: readonly bigint[]): number {
    const owner = this.#inflight?.ownerOf(group[0]!) ?? 0;
    return owner > 0 ? owner : this.#defaultOwner;
  }
}

/**
 * The I/O thread's answer to one target-group claim as a port outcome, with a `detail` for logs:
 * a local conflict is a `conflict` (someone holds a member), a failed claim an `error`, a missing
 * answer an `error` too. Used by the scheduler's claims here and the coordinator's
 * `IoTargetLeases`, so both read the thread's answers the same way.
 */
export function claimOutcomeOfAnswer(result: BatchClaimResult | undefined): ClaimOutcome {
  if (!result) return { ok: false, reason: 'error', detail: 'no answer for this group' };
  if (result.ok) return groupClaimOutcome(result);
  switch (result.reason) {
    case 'conflict':
      return { ok: false, reason: 'conflict', detail: result.holders.map((h) => `${h.target}@${h.owner}`).join(',') };
    case 'local-conflict':
      return { ok: false, reason: 'conflict', detail: `held locally: ${result.targets.join(',')}` };
    case 'corrupt':
      return { ok: false, reason: 'corrupt', detail: result.corrupt.map((c) => `${c.target}: ${c.detail}`).join('; ') };
    case 'answered':
      return { ok: false, reason: 'answered', answered: result.answered, detail: `answered on this input: ${result.answered.join(',')}` };
    case 'backoff':
      return { ok: false, reason: 'backoff', open: result.open, detail: `left open on this input: ${result.open.map((o) => `${o.target}×${o.attempts}`).join(',')}` };
    case 'failed':
      return { ok: false, reason: 'error', detail: `${result.code}: ${result.message}` };
  }
}

/** The part of `IoClient` the writer uses. */
interface FilePublicationClient {
  ensureDir(dir: string): Promise<void>;
  listDir(dir: string): Promise<string[]>;
  publishFiles(dir: string, files: readonly PublishedFile[]): Promise<void>;
}

/** The campaign's `DurableWriter` port, implemented through the I/O thread. */
export class IoDurableWriter {
  readonly #client: FilePublicationClient;

  constructor(client: FilePublicationClient) {
    this.#client = client;
  }

  ensureDir(dir: string): Promise<void> {
    return this.#client.ensureDir(dir);
  }

  list(dir: string): Promise<string[]> {
    return this.#client.listDir(dir);
  }

  /** Content durable before names; names in array order; all names durable before resolving. */
  publish(dir: string, files: readonly { readonly name: string; readonly bytes: Uint8Array }[]): Promise<void> {
    if (files.length === 0) return Promise.resolve();
    return this.#client.publishFiles(dir, files);
  }
}
