/** `listDir`: the names in `dir`, read after the batch's commit. */
import { checkDir, NO_OPERATIONS, type RequestKind } from './request-kind.js';

export interface ListDirRequest {
  readonly kind: 'listDir';
  readonly dir: string;
}

export const listDir: RequestKind<ListDirRequest, string[]> = {
  kind: 'listDir',
  readOnly: true,
  keys: () => [],
  plan(request, ctx) {
    const dir = checkDir(request.dir);
    return { ...NO_OPERATIONS, read: () => ctx.fsLayer.readdir(dir), finish: (_r, value) => value as string[] };
  },
};
