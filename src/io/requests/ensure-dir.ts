/** `ensureDir`: creates `dir` and any missing parents, each durable in its parent, before the batch's passes. */
import { checkDir, dirKeys, finishPublication, NO_OPERATIONS, type RequestKind } from './request-kind.js';

export interface EnsureDirRequest {
  readonly kind: 'ensureDir';
  readonly dir: string;
}

export const ensureDir: RequestKind<EnsureDirRequest, void> = {
  kind: 'ensureDir',
  readOnly: false,
  keys: (request) => dirKeys(request.dir),
  plan: (request) => ({ ...NO_OPERATIONS, ensureDir: checkDir(request.dir), finish: finishPublication }),
};
