/**
 * Lock-free scans of a lease root: every shard directory, every `*.json` name in it. A scan is a
 * snapshot, not a transaction — records may change while it runs; a record that disappears between
 * listing and reading is skipped. Lock files and temp files are ignored.
 *
 * Corrupt entries are reported, never repaired: an unparseable or invalid record, anything but a
 * regular file of record size at a record path (record-files.ts), a `.json` name that is not a
 * record id, a record sitting in a shard that is not its own, or a record whose read failed
 * (EIO, EACCES …). A scan never stops at one bad entry: one damaged record must not hide the
 * state of every other one from commit recovery or `symfence leases check`.
 */
import { errnoCode, type FsLayer } from '../../fs/fs-layer.js';
import { isRecordId } from '../identity.js';
import { RECORD_SUFFIX, type LeaseLayout } from '../table-layout.js';
import type { RecordKind } from '../lease-record.js';
import type { ScanEntry } from '../backend-contract.js';
import { readRecord } from './record-files.js';
import path from 'node:path';


/**
 * The names in shard directory `dir`: none when it does not exist (shards are created lazily);
 * any other failure rejects with the fs layer's error.
 */
export async function shardNames(fsLayer: FsLayer, dir: string): Promise<string[]> {
  try {
    return await fsLayer.readdir(dir);
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return [];
    throw error;
  }
}

/** Scans shards `0..shardCount-1` of `layout`. */
export async function scanRecords(fsLayer: FsLayer, layout: LeaseLayout, kind: RecordKind): Promise<ScanEntry[]> {
  const entries: ScanEntry[] = [];
  for (let shard = 0; shard < layout.shardCount; shard += 1) {
    const dir = layout.shardDir(shard);
    let names: string[];
    try {
      names = await shardNames(fsLayer, dir);
    } catch (error) {
      // A shard that cannot be listed (a file or dangling link in its place, EIO) is reported
      // like a bad record; the other shards are still scanned.
      entries.push({ state: 'corrupt', id: undefined, path: dir, reason: `shard directory cannot be listed (${errnoCode(error) ?? (error as Error).message})` });
      continue;
    }
    for (const name of names.sort()) {
      if (!name.endsWith(RECORD_SUFFIX)) continue;
      const filePath = path.join(dir, name);
      const id = name.slice(0, -RECORD_SUFFIX.length);
      if (!isRecordId(id)) {
        entries.push({ state: 'corrupt', id: undefined, path: filePath, reason: 'file name is not a record id' });
        continue;
      }
      if (layout.shardOf(id) !== shard) {
        entries.push({ state: 'corrupt', id, path: filePath, reason: `record belongs in shard ${layout.shardOf(id)}, found in ${shard}` });
        continue;
      }
      let read;
      try {
        read = await readRecord(fsLayer, filePath, id, kind);
      } catch (error) {
        entries.push({ state: 'corrupt', id, path: filePath, reason: `unreadable (${errnoCode(error) ?? (error as Error).message})` });
        continue;
      }
      if (read.state === 'absent') continue;
      if (read.state === 'corrupt') entries.push({ state: 'corrupt', id, path: filePath, reason: read.reason });
      else entries.push({ state: 'valid', id, path: filePath, record: read.record });
    }
  }
  return entries;
}
