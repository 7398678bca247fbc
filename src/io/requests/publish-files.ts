/**
 * `publishFiles`: publishes AFL-visible files into `dir` in the batch's publication pass
 * (file-publication.ts): content durable before each name, every name durable before the answer,
 * an existing final name refused before anything is written.
 */
import { invalidOption } from '../../config/values.js';
import type { PublishedFile } from '../io-requests.js';
import { checkDir, dirKeys, finishPublication, NO_OPERATIONS, type RequestKind } from './request-kind.js';

export interface PublishFilesRequest {
  readonly kind: 'publishFiles';
  readonly dir: string;
  readonly files: readonly PublishedFile[];
}

export const publishFiles: RequestKind<PublishFilesRequest, void> = {
  kind: 'publishFiles',
  readOnly: false,
  keys: (request) => dirKeys(request.dir),
  plan(request) {
    const dir = checkDir(request.dir);
    if (!Array.isArray(request.files)) throw invalidOption('files', 'an array of { name, bytes }', request.files);
    for (const file of request.files) {
      if (!(file?.bytes instanceof Uint8Array)) throw invalidOption('files[].bytes', 'a Uint8Array', file?.bytes);
    }
    return { ...NO_OPERATIONS, publication: { dir, files: request.files }, finish: finishPublication };
  },
};
