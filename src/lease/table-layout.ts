/**
 * Where a lease table keeps things on disk (docs/lease-format.md):
 *
 *   <root>/lease-table.json                table metadata: schema, kind, shard count
 *   <root>/lease-table.json.lock           lock held while the metadata is created or checked
 *   <root>/<SSS>/<id>.json                 the record (SSS = shard, decimal, ≥ 3 digits)
 *   <root>/<SSS>/<id>.json.lock            its lock file: regular, mode 0600, never deleted
 *   <root>/<SSS>/<id>.json.<tag>.<n>.tmp   short-lived temp file while a record is written
 *                                          (<tag>: the writer, see temp-writer.ts)
 *
 * The shard count is fixed per root and recorded in the metadata file: two coordinators that
 * disagreed on it would look for the same id at different paths and lock different files.
 */
import path from 'node:path';
import { assertRecordId, shardDirName, shardOf } from './identity.js';
import { currentWriterTagText } from './temp-writer.js';

export const META_FILE = 'lease-table.json';
/** Under a lease directory: the named campaigns' namespaces, `campaigns/<name>/` (src/coordinator/lease-root.ts). */
export const CAMPAIGNS_DIR = 'campaigns';

/** The etcd prefix of campaign `campaign` whose lease directory's own tables are under `prefix` (docs/leases.md, "a named campaign"). */
export function campaignPrefix(prefix: string, campaign: string): string {
  return `${prefix.replace(/\/+$/, '')}/${CAMPAIGNS_DIR}/${campaign}`;
}

/** The campaign whose table `root` is (`<lease dir>/campaigns/<name>/<kind>`), or undefined for a lease directory's own tables. */
export function campaignOfTableRoot(root: string): string | undefined {
  const campaignDir = path.dirname(path.resolve(root));
  return path.basename(path.dirname(campaignDir)) === CAMPAIGNS_DIR ? path.basename(campaignDir) : undefined;
}
export const RECORD_SUFFIX = '.json';
export const LOCK_SUFFIX = '.json.lock';
export const TEMP_SUFFIX = '.tmp';

let tempCounter = 0;

export class LeaseLayout {
  readonly root: string;
  readonly shardCount: number;

  constructor(root: string, shardCount: number) {
    this.root = path.resolve(root);
    this.shardCount = shardCount;
  }

  get metaPath(): string {
    return path.join(this.root, META_FILE);
  }

  shardOf(id: string): number {
    return shardOf(id, this.shardCount);
  }

  shardDir(shard: number): string {
    return path.join(this.root, shardDirName(shard));
  }

  dirOf(id: string): string {
    return this.shardDir(this.shardOf(id));
  }

  recordPath(id: string): string {
    assertRecordId(id);
    return path.join(this.dirOf(id), `${id}${RECORD_SUFFIX}`);
  }

  lockPath(id: string): string {
    return `${this.recordPath(id)}.lock`;
  }

  /**
   * A fresh temp name next to the record. Unique within the process (counter) and across
   * processes and hosts (the writer tag); the record's lock is held while it exists, so no other
   * writer uses the id. The tag lets a sweeper remove it if this process dies before the rename
   * (temp-sweep.ts); names written before tags existed (`<id>.json.<pid>.<n>.tmp`) are swept by
   * age only.
   */
  tempPath(id: string): string {
    tempCounter += 1;
    return `${this.recordPath(id)}.${currentWriterTagText()}.${process.hrtime.bigint()}${tempCounter}${TEMP_SUFFIX}`;
  }
}
