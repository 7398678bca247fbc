/**
 * `stageFiles`: content-addressed durable staging. Creates `dir` durably, then publishes the
 * files, keeping names that already exist (an earlier attempt wrote the same bytes); the
 * directory barrier runs even then, since that attempt may have died before its own.
 */
import type { PublishedFile } from '../io-requests.js';
import { checkDir, checkFiles, dirKeys, finishPublication, NO_OPERATIONS, type RequestKind } from './request-kind.js';

export interface StageFilesRequest {
  readonly kind: 'stageFiles';
  readonly dir: string;
  readonly files: readonly PublishedFile[];
}

export const stageFiles: RequestKind<StageFilesRequest, void> = {
  kind: 'stageFiles',
  readOnly: false,
  keys: (request) => dirKeys(request.dir),
  plan(request) {
    const dir = checkDir(request.dir);
    checkFiles(request.files);
    return { ...NO_OPERATIONS, ensureDir: dir, publication: { dir, files: request.files, existing: 'keep' }, finish: finishPublication };
  },
};
