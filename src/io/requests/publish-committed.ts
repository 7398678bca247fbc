/**
 * `publishCommitted`: fenced publication of a committed result, in three stages of the I/O batch
 * (docs/leases.md "Publishing a committed result"): the claim (`planClaimPublication`: the record
 * is `committing` with `token`, and, with `minIdleMs`, was not renewed for that long — another
 * coordinator's result, which the claim takes over), the publication of every directory's files
 * (outside every lease batch: no lock, transaction or lock key is held meanwhile), and the finish
 * (`done`, unless the publication was taken over since the claim). A recovering coordinator racing this one
 * publishes either everything or nothing, never twice.
 */
import { InternalError } from '../../errors.js';
import { invalidOption } from '../../config/values.js';
import type { PublicationClaim, ReplayResult } from '../../lease/lease-results.js';
import type { PublicationJob } from '../file-publication.js';
import type { DirectoryFiles } from '../io-requests.js';
import { checkDir, checkFiles, dirKeys, NO_OPERATIONS, type Planned, type RequestKind, unwrap } from './request-kind.js';

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
    const claim = ctx.workStore().planClaimPublication(request.workId, request.token, {
      nowMs: request.nowMs,
      ...(request.minIdleMs !== undefined ? { minIdleMs: request.minIdleMs } : {}),
    });
    const finish = (takenOverMs: number | undefined): Planned<ReplayResult> => ({
      target: [],
      work: [ctx.workStore().planFinishPublication(request.workId, request.token, { nowMs: request.nowMs, ...(takenOverMs !== undefined ? { takenOverMs } : {}) })],
      finish: (r) => unwrap<ReplayResult>(r.work[0]),
    });
    const nothing = jobs.every((j) => j.files.length === 0);
    return {
      target: [],
      work: [claim],
      then: (r) => {
        const claimed = unwrap<PublicationClaim>(r.work[0]);
        if (claimed.state !== 'publish') return undefined;
        if (nothing) return finish(claimed.takenOverMs);
        return {
          ...NO_OPERATIONS,
          publication: jobs,
          // A failed publication fails the request; the record stays committing (replayed later).
          then: (published) => {
            if (published.publication) throw published.publication;
            return finish(claimed.takenOverMs);
          },
          finish: () => {
            throw new InternalError('a publication stage always goes on to its finish');
          },
        };
      },
      finish: (r) => (unwrap<PublicationClaim>(r.work[0]) as Exclude<PublicationClaim, { state: 'publish' }>).state,
    };
  },
};
