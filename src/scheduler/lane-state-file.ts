/**
 * Lane state on disk: one JSON document, written atomically and durably (hidden temp file, fsync,
 * rename, directory fsync) so a crash leaves either the old or the new state, and a state the
 * caller was told is saved survives power loss. Leases are never part of it: after a restart every
 * target is free again and the lease tables are the only truth about what is in flight.
 */
import path from 'node:path';
import { LaneStateError } from '../errors.js';
import { readBoundedFile } from '../fs/bounded-read.js';
import { writeFileDurably } from '../fs/durable-files.js';
import { errnoCode, nodeFsLayer, type FsLayer } from '../fs/fs-layer.js';
import { systemProcessProbe, type ProcessProbe } from '../lease/temp-writer.js';

export const SCHEDULER_STATE_SCHEMA = 'symfence-scheduler-state/1';

export async function writeStateFile(file: string, document: unknown, maxBytes: number, fsLayer: FsLayer = nodeFsLayer): Promise<void> {
  const text = JSON.stringify(document);
  const bytes = Buffer.byteLength(text);
  if (bytes > maxBytes) {
    throw new LaneStateError(`scheduler state is ${bytes} bytes, over the ${maxBytes}-byte budget; old state kept`, { file, bytes, maxBytes });
  }
  const dir = path.dirname(file);
  try {
    await fsLayer.mkdir(dir);
    await fsLayer.syncDirectory(path.dirname(dir));
  } catch (error) {
    if (errnoCode(error) !== 'EEXIST') throw error;
  }
  await writeFileDurably(fsLayer, file, text);
}

/**
 * Removes the hidden temps a save killed before its rename left beside `file`
 * (`.<name>.<pid>.<n>.tmp`, fs/durable-files.ts) whose writer is provably gone (`kill(pid, 0)` →
 * ESRCH). A live writer's temp is kept: only the coordinator holding the out-dir lock saves this
 * file, and it calls this before its first save. Returns the names removed; a temp that cannot be
 * removed is left for the next start.
 */
export async function sweepStateTemps(file: string, fsLayer: FsLayer = nodeFsLayer, probe: Pick<ProcessProbe, 'isAlive'> = systemProcessProbe): Promise<string[]> {
  const prefix = `.${path.basename(file)}.`;
  let names: string[];
  try {
    names = await fsLayer.readdir(path.dirname(file));
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return [];
    throw error;
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith(prefix) || !name.endsWith('.tmp')) continue;
    const pid = Number(name.slice(prefix.length).split('.')[0]);
    if (!Number.isSafeInteger(pid) || pid < 1 || probe.isAlive(pid)) continue;
    try {
      await fsLayer.unlink(path.join(path.dirname(file), name));
      removed.push(name);
    } catch (error) {
      if (errnoCode(error) !== 'ENOENT') continue;
    }
  }
  return removed;
}

/**
 * The stored document, or `undefined` when there is no state file yet. Read through
 * `readBoundedFile` (a user-chosen path: a symlink to a regular file is followed); anything but a
 * regular file within the byte budget is `ERR_LANE_STATE`, never read.
 */
export async function readStateFile(file: string, maxBytes: number, fsLayer: FsLayer = nodeFsLayer): Promise<unknown> {
  const read = await readBoundedFile(fsLayer, file, { maxBytes, followSymlinks: true });
  if (read.state === 'absent') return undefined;
  if (read.state === 'refused') throw new LaneStateError(`scheduler state file ${file} is not usable: ${read.reason}`, { file, reason: read.reason, maxBytes });
  const text = read.bytes.toString('utf8');
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new LaneStateError(`scheduler state file ${file} is not valid JSON: ${(error as Error).message}`, { file });
  }
}
