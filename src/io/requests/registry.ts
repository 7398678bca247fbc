/**
 * Every I/O request kind, in one list. The wire types `IoRequest` (a discriminated union on
 * `kind`) and `IoAnswers` are derived from it, so a new kind is one file next to this one plus
 * its line here (docs/io-thread.md "Adding a request kind").
 */
import { abandon } from './abandon.js';
import { beginCommit } from './begin-commit.js';
import { claim } from './claim.js';
import { claimGroup } from './claim-group.js';
import { claimGroups } from './claim-groups.js';
import { completeOnce } from './complete-once.js';
import { ensureDir } from './ensure-dir.js';
import { heartbeatGroup } from './heartbeat-group.js';
import { heartbeatMany } from './heartbeat-many.js';
import { listDir } from './list-dir.js';
import { publishCommitted } from './publish-committed.js';
import { publishFiles } from './publish-files.js';
import { recordAnswers } from './record-answers.js';
import { recoverExpired } from './recover-expired.js';
import { releaseGroup } from './release-group.js';
import { releaseGroups } from './release-groups.js';
import { removeFiles } from './remove-files.js';
import type { RequestKind } from './request-kind.js';
import { snapshotCounts } from './snapshot-counts.js';
import { snapshotRecords } from './snapshot-records.js';
import { stageFiles } from './stage-files.js';
import { sweepExpired } from './sweep-expired.js';

const REQUEST_KINDS = [
  claimGroup,
  claimGroups,
  heartbeatGroup,
  releaseGroup,
  releaseGroups,
  recordAnswers,
  claim,
  heartbeatMany,
  abandon,
  beginCommit,
  completeOnce,
  recoverExpired,
  snapshotCounts,
  snapshotRecords,
  sweepExpired,
  ensureDir,
  listDir,
  publishFiles,
  stageFiles,
  publishCommitted,
  removeFiles,
] as const;

type Definition = (typeof REQUEST_KINDS)[number];
type RequestOfDefinition<D> = D extends RequestKind<infer R, infer _A> ? R : never;
type AnswerOfDefinition<D> = D extends RequestKind<infer _R, infer A> ? A : never;

export type IoRequest = RequestOfDefinition<Definition>;
export type IoRequestKind = IoRequest['kind'];
/** What each request kind resolves to. */
export type IoAnswers = { [D in Definition as D['kind']]: AnswerOfDefinition<D> };

type AnyRequestKind = RequestKind<any, unknown>;

const BY_KIND: ReadonlyMap<string, AnyRequestKind> = new Map(REQUEST_KINDS.map((d) => [d.kind, d as AnyRequestKind]));

/** The definition of `kind`, or undefined for an unknown one (never an inherited property). */
export function requestKindOf(kind: unknown): AnyRequestKind | undefined {
  return typeof kind === 'string' ? BY_KIND.get(kind) : undefined;
}

/** The records (or directories) a request touches, for batch admission. */
export function keysOf(request: IoRequest): string[] {
  return requestKindOf((request as { kind?: unknown } | null)?.kind)?.keys(request) ?? [];
}
