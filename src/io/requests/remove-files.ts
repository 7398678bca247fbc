/**
 * `removeFiles`: unlinks names in `dir` after the batch's commit; missing names are fine. No
 * barrier: what is left is garbage either way. Answers how many names were actually removed.
 */
import path from 'node:path';
import { invalidOption } from '../../config/values.js';
import { errnoCode } from '../../fs/fs-layer.js';
import { checkPublishedName } from '../file-publication.js';
import { checkDir, dirKeys, NO_OPERATIONS, type RequestKind } from './request-kind.js';

export interface RemoveFilesRequest {
  readonly kind: 'removeFiles';
  readonly dir: string;
  readonly names: readonly string[];
}

export const removeFiles: RequestKind<RemoveFilesRequest, number> = {
  kind: 'removeFiles',
  readOnly: false,
  keys: (request) => dirKeys(request.dir),
  plan(request, ctx) {
    const dir = checkDir(request.dir);
    if (!Array.isArray(request.names)) throw invalidOption('names', 'an array of file names', request.names);
    const names = request.names.map((n) => checkPublishedName(n));
    return {
      ...NO_OPERATIONS,
      read: async () => {
        const results = await Promise.allSettled(names.map((n) => ctx.fsLayer.unlink(path.join(dir, n))));
        const failed = results.find((r) => r.status === 'rejected' && errnoCode(r.reason) !== 'ENOENT') as PromiseRejectedResult | undefined;
        if (failed) throw failed.reason;
        return results.filter((r) => r.status === 'fulfilled').length;
      },
      finish: (_r, value) => value as number,
    };
  },
};
