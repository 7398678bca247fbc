/**
 * `publishCommitted`: fenced publication of a committed result. Under the work record's lock,
 * only while it is `committing` with `token` (and, with `minIdleMs`, only when it was not renewed
 * for that long — another coordinator's result), publishes every directory's files, then marks the
 * record `done`. A recovering coordinator racing this one publishes either everything or nothing,
 * never twice.
 */
import { invalidOption } from '../../config/values.js';
import type { ReplayResult } from '../../lease/lease-results.js';
import { publishFiles, type PublicationJob } from '../file-publication.js';
import type { DirectoryFiles } from '../io-requests.js';
import { checkDir, checkFiles, dirKeys, type RequestKind, unwrap } from './request-kind.js';

export interface PublishCommittedRequest {
  readonly kind: 'publishCommitted';
  readonly workId: string;
  readonly token: string;
  readonly publications: readonly DirectoryFiles[];
  readonly nowMs: number;
  /** Only when the record was not renewed for this long (another coordinator's result). */
  readonly minIdleMs?: number;
}

export const publishCommitted: RequestKind<PublishCommittedRequest, ReplayResult> = {
  kind: 'publishCommitted',
  readOnly: false,
  keys: (request) => [`w:${request.workId}`, ...(Array.isArray(request.publications) ? request.publications.flatMap((p) => dirKeys(p?.dir)) : [])],
  plan(request, ctx) {
    if (!Array.isArray(request.publications)) throw invalidOption('publications', 'an array of { dir, files }', request.publications);
    const jobs: PublicationJob[] = request.publications.map((p) => {
      checkFiles(p?.files);
      return { dir: checkDir(p.dir), files: p.files };
    });
    // The publication runs inside the record's lock (replayCommitOnce), not in the batch's pass.
    const publish = async (): Promise<void> => {
      if (jobs.every((j) => j.files.length === 0)) return;
      const report = await publishFiles(ctx.fsLayer, ctx.fileBarrier, jobs);
      ctx.countBarriers(report);
      const failed = report.errors.find((e) => e !== null);
      if (failed) throw failed;
    };
    const op = ctx.workStore().planReplayCommitOnce(request.workId, request.token, publish, {
      nowMs: request.nowMs,
      ...(request.minIdleMs !== undefined ? { minIdleMs: request.minIdleMs } : {}),
    });
    return { target: [], work: [op], finish: (r) => unwrap<ReplayResult>(r.work[0]) };
  },
};
