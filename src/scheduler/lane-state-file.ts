/**
 * Lane state on disk: one JSON document, written atomically (hidden temp file, fsync, rename) so a
 * crash leaves either the old or the new state. Leases are never part of it: after a restart every
 * target is free again and the lease tables are the only truth about what is in flight.
 */
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { LaneStateError } from '../errors.js';

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
}

/** The stored document, or `undefined` when there is no state file yet. */
export async function readStateFile(file: string, maxBytes: number): Promise<unknown> {
  let size: number;
  try {
    size = (await stat(file)).size;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  if (size > maxBytes) throw new LaneStateError(`scheduler state file ${file} is ${size} bytes, over the ${maxBytes}-byte budget`, { file, size, maxBytes });
  const text = await readFile(file, 'utf8');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new LaneStateError(`scheduler state file ${file} is not valid JSON: ${(error as Error).message}`, { file });
  }
}
