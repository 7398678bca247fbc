/**
 * Lane state on disk: one JSON document, written atomically and durably (hidden temp file, fsync,
 * rename, directory fsync) so a crash leaves either the old or the new state, and a state the
 * caller was told is saved survives power loss. Leases are never part of it: after a restart every
 * target is free again and the lease tables are the only truth about what is in flight.
 */
import { mkdir, open, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { LaneStateError } from '../errors.js';
import { readBoundedFile } from '../fs/bounded-read.js';
import { nodeFsLayer } from '../fs/fs-layer.js';

export const SCHEDULER_STATE_SCHEMA = 'symfence-scheduler-state/1';

export async function writeStateFile(file: string, document: unknown, maxBytes: number): Promise<void> {
  const text = JSON.stringify(document);
  const bytes = Buffer.byteLength(text);
  if (bytes > maxBytes) {
    throw new LaneStateError(`scheduler state is ${bytes} bytes, over the ${maxBytes}-byte budget; old state kept`, { file, bytes, maxBytes });
  }
  const dir = path.dirname(file);
  await mkdir(dir, { recursive: true });
  const temp = path.join(dir, `.${path.basename(file)}.${process.pid}.${process.hrtime.bigint()}.tmp`);
  try {
    const handle = await open(temp, 'wx');
    try {
      await handle.writeFile(text);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
  // The rename is durable only once the directory entry is: without this a crash could bring
  // back the old state (or none) after the save was reported done.
  const dirHandle = await open(dir, 'r');
  try {
    await dirHandle.sync();
  } finally {
    await dirHandle.close();
  }
}

/**
 * The stored document, or `undefined` when there is no state file yet. Read through
 * `readBoundedFile` (a user-chosen path: a symlink to a regular file is followed); anything but a
 * regular file within the byte budget is `ERR_LANE_STATE`, never read.
 */
export async function readStateFile(file: string, maxBytes: number): Promise<unknown> {
  const read = await readBoundedFile(nodeFsLayer, file, { maxBytes, followSymlinks: true });
  if (read.state === 'absent') return undefined;
  if (read.state === 'refused') throw new LaneStateError(`scheduler state file ${file} is not usable: ${read.reason}`, { file, reason: read.reason, maxBytes });
  const text = read.bytes.toString('utf8');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new LaneStateError(`scheduler state file ${file} is not valid JSON: ${(error as Error).message}`, { file });
  }
}
