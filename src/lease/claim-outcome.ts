/**
 * The one shape of a claim's outcome, from the lease tables up to the coordinator: granted with a
 * fencing token, or refused with a reason. Every layer's claim answer is this union or a
 * refinement of it that adds detail (the table's holder or corrupt member, the I/O thread's local
 * conflict or failure), so code that only needs "held or not, and why" reads `ok`, `token` and
 * `reason` the same way everywhere.
 *
 * Refusals are values: a refused claim has mutated nothing. A failure whose outcome is unknown
 * (I/O error, lock timeout) is thrown by the tables; ports that must answer per claim report it
 * as the reason `error` (`failed` in the I/O thread's batch answer, with the error's code).
 */
import type { ClaimResult, GroupClaimResult } from './lease-results.js';
import type { JsonObject } from './lease-record.js';

/** A claim that holds: `token` fences every later mutation of what was claimed. */
export interface ClaimGranted {
  readonly ok: true;
  readonly token: string;
}

/**
 * Why a port-level claim was refused: `conflict` — another holder's live lease, or a `committing`
 * record; `done` — the work was completed already (work claims only); `answered` — the question
 * was answered on this input already, anywhere in the campaign (target claims that name their
 * input; `answered` lists the members); `backoff` — runs left a member's question open on this
 * input and the claimer's back-off policy says wait, or give up (`open` lists them); `corrupt` —
 * a corrupt record was met and left untouched; `error` — I/O failure, outcome unknown but nothing
 * is held.
 */
export type ClaimRefusalReason = 'conflict' | 'corrupt' | 'done' | 'answered' | 'backoff' | 'error';

/** A member whose question runs left open on the claim's input: how often, and when last (table clock, ms). */
export interface OpenMember {
  readonly target: bigint;
  readonly attempts: number;
  readonly lastOpenMs: number;
}

/** A refused claim. `R` narrows the reasons a layer can answer; `detail` is for logs. */
export interface ClaimRefused<R extends string = ClaimRefusalReason> {
  readonly ok: false;
  readonly reason: R;
  readonly detail?: string;
  /** `answered` refusals: the members answered on the claim's input. */
  readonly answered?: readonly bigint[];
  /** `backoff` refusals: the members backing off on the claim's input. */
  readonly open?: readonly OpenMember[];
  /** `done` refusals: who finished the work, and its commit manifest when the claim asked for it (`doneCommit`). */
  readonly finished?: FinishedWork;
}

/** The finished work a `done` refusal names. */
export interface FinishedWork {
  readonly owner: string;
  readonly commit?: JsonObject;
}

/** The outcome of one claim as the scheduler's and the coordinator's ports see it. */
export type ClaimOutcome = ClaimGranted | ClaimRefused;

/**
 * A work table's claim as a port outcome: a `done` holder refuses with `done` (the work needs no
 * run) and names who finished it (with its manifest, when the claim asked), any other holder with
 * `conflict`. The rest of the table's detail is dropped.
 */
export function workClaimOutcome(result: ClaimResult): ClaimOutcome {
  if (result.ok) return { ok: true, token: result.token };
  if (result.reason === 'corrupt') return { ok: false, reason: 'corrupt' };
  const { holder } = result;
  if (holder.status !== 'done') return { ok: false, reason: 'conflict' };
  return { ok: false, reason: 'done', finished: { owner: holder.owner, ...(holder.commit !== undefined ? { commit: holder.commit } : {}) } };
}

/** A target table's group claim as a port outcome; the table's detail is dropped. */
export function groupClaimOutcome(result: GroupClaimResult): ClaimOutcome {
  if (result.ok) return { ok: true, token: result.token };
  if (result.reason === 'answered') return { ok: false, reason: 'answered', answered: result.answered };
  if (result.reason === 'backoff') return { ok: false, reason: 'backoff', open: result.open };
  return { ok: false, reason: result.reason };
}
