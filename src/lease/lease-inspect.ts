/**
 * Read-only inspection of lease directories, for `symfence leases` and embedding tools: counts by
 * status and by owner, and every corrupt record. Takes no locks and changes no record (a SQLite
 * table gets the `-wal`/`-shm` files any reader of it creates).
 *
 * `dir` is a table root (it holds `lease-table.json`) or a directory whose immediate
 * subdirectories are table roots (a campaign's lease directory with a work and a target table).
 */
import path from 'node:path';
import { optionsFromEnv } from '../config/schema.js';
import { checkOptionsObject, invalidOption } from '../config/values.js';
import { UsageError } from '../errors.js';
import { checkTtlMs } from './lease-table-base.js';
import { checkNowMs } from './lease-operation.js';
import { errnoCode, nodeFsLayer, type FsLayer } from '../fs/fs-layer.js';
import { CAMPAIGNS_DIR, META_FILE, campaignOfTableRoot, campaignPrefix } from './table-layout.js';
import type { LeaseTableOptions } from './lease-table-options.js';
import { isExpiredLease, type LeaseRecord, type LeaseStatus, type RecordKind } from './lease-record.js';
import type { LeaseCounts } from './lease-results.js';
import { LEASE_STORE_OPTIONS, LEASE_TABLE_OPTIONS } from './lease-table-options.js';
import { scanTableRoot } from './open-backend.js';
import type { LeaseStoreKind } from './backend-contract.js';
import { readTableMeta } from './table-meta.js';

export interface OwnerCounts {
  readonly leased: number;
  readonly expired: number;
  readonly committing: number;
  readonly done: number;
}

export interface CorruptRecordReport {
  readonly id: string | null;
  readonly path: string;
  readonly reason: string;
}

export interface TableInspection {
  readonly root: string;
  readonly kind: RecordKind;
  readonly store: LeaseStoreKind;
  readonly shardCount: number;
  readonly counts: LeaseCounts;
  readonly owners: Readonly<Record<string, OwnerCounts>>;
  readonly corrupt: readonly CorruptRecordReport[];
  /**
   * Target tables: the campaign's shared answers (docs/leases.md "Shared answers") — branches
   * answered on some input, (input, branch) pairs remembered as answered, and (input, branch)
   * questions runs left open (attempts and back-off kept); `bytes`: what those fields take in the
   * records that carry them (their JSON, as a release that records an answer for the branch
   * writes it again): answer records, and lease records of tables written before them.
   * `superseded` (etcd): older answer versions a newer one replaced that are still stored (a
   * release that died between its commit and the removal of the version it replaced leaves one),
   * with `supersededBytes` the size of their values (docs/lease-format.md "Answer versions");
   * `symfence leases check` removes them.
   */
  readonly answers?: {
    readonly branches: number;
    readonly pairs: number;
    readonly open: number;
    readonly bytes: number;
    readonly generation: number;
    readonly superseded: number;
    readonly supersededBytes: number;
  };
}

export interface InspectOptions {
  /** Current time, ms since the epoch. */
  readonly nowMs: number;
  /** TTL used to call a leased record expired when the record carries none of its own. */
  readonly leaseTtlMs: number;
  /** Largest accepted lead of a record's time over `nowMs` (see `expiryOf`). Default 5 min. */
  readonly maxClockSkewMs?: number;
  readonly fsLayer?: FsLayer;
  /**
   * Table options that reach a store outside the directory (the etcd store's endpoints, prefix,
   * TLS and auth). Default: from the environment (`SYMFENCE_ETCD_ENDPOINTS`, …).
   */
  readonly storeOptions?: Readonly<Record<string, unknown>>;
}

function checkInspectOptions(options: InspectOptions): void {
  checkOptionsObject(options, 'options');
  checkNowMs(options.nowMs);
  checkTtlMs(options.leaseTtlMs);
  if (options.maxClockSkewMs !== undefined) checkTtlMs(options.maxClockSkewMs, 'maxClockSkewMs');
}

async function hasMeta(fsLayer: FsLayer, dir: string): Promise<boolean> {
  try {
    await fsLayer.lstat(path.join(dir, META_FILE));
    return true;
  } catch {
    return false;
  }
}

/** Subdirectories of `dir` (sorted), none when it cannot be read. */
async function subdirectories(fsLayer: FsLayer, dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await fsLayer.readdir(dir);
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const name of names.sort()) {
    try {
      if ((await fsLayer.lstat(path.join(dir, name))).isDirectory) out.push(path.join(dir, name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/**
 * The table roots at or directly under `dir`, and those of every named campaign's namespace
 * under it (`campaigns/<name>/`, src/coordinator/lease-root.ts); throws `UsageError` when there
 * are none.
 */
export async function findLeaseTables(dir: string, fsLayer: FsLayer = nodeFsLayer): Promise<string[]> {
  if (typeof dir !== 'string' || dir === '') throw invalidOption('dir', 'a lease directory path', dir);
  const root = path.resolve(dir);
  if (await hasMeta(fsLayer, root)) return [root];
  try {
    await fsLayer.readdir(root);
  } catch (error) {
    throw new UsageError(`cannot read lease directory ${root}: ${errnoCode(error) ?? (error as Error).message}`, { path: root });
  }
  const tables: string[] = [];
  const collect = async (parent: string): Promise<void> => {
    for (const child of await subdirectories(fsLayer, parent)) if (await hasMeta(fsLayer, child)) tables.push(child);
  };
  await collect(root);
  for (const campaign of await subdirectories(fsLayer, path.join(root, CAMPAIGNS_DIR))) await collect(campaign);
  if (tables.length === 0) throw new UsageError(`${root} is not a lease table directory (no ${META_FILE} in it or its subdirectories)`, { path: root });
  return tables;
}

/**
 * The options an etcd table at `root` is read with: the cluster the environment (or
 * `storeOptions`) names, under the prefix of the table's campaign (`<prefix>/campaigns/NAME` for a
 * table under `<lease dir>/campaigns/NAME/`, as `--campaign` runs write it).
 */
export function etcdTableOptions(root: string, storeOptions?: Readonly<Record<string, unknown>>): LeaseTableOptions {
  const resolved = LEASE_TABLE_OPTIONS.resolve({ ...(storeOptions ?? optionsFromEnv(LEASE_STORE_OPTIONS)) });
  const campaign = campaignOfTableRoot(root);
  return campaign === undefined ? resolved : { ...resolved, etcdPrefix: campaignPrefix(resolved.etcdPrefix, campaign) };
}

/** Inspects one table root. */
export async function inspectLeaseTable(root: string, options: InspectOptions): Promise<TableInspection> {
  checkInspectOptions(options);
  if (typeof root !== 'string' || root === '') throw invalidOption('root', 'a lease table directory path', root);
  const fsLayer = options.fsLayer ?? nodeFsLayer;
  const meta = await readTableMeta(fsLayer, path.join(root, META_FILE));
  if (!meta) throw new UsageError(`${root} is not a lease table directory (no ${META_FILE})`, { path: root });
  // An etcd table is read from the cluster the environment names (SYMFENCE_ETCD_ENDPOINTS, …).
  const entries = await scanTableRoot(root, meta, fsLayer, meta.store === 'etcd' ? etcdTableOptions(root, options.storeOptions) : undefined);
  const counts = { leased: 0, expired: 0, committing: 0, done: 0, corrupt: 0 };
  const owners: Record<string, { leased: number; expired: number; committing: number; done: number }> = {};
  const corrupt: CorruptRecordReport[] = [];
  const answers = { branches: 0, pairs: 0, open: 0, bytes: 0, generation: 0, superseded: 0, supersededBytes: 0 };
  for (const entry of entries) {
    if (entry.state === 'corrupt') {
      counts.corrupt += 1;
      corrupt.push({ id: entry.id ?? null, path: entry.path, reason: entry.reason });
      continue;
    }
    // An answer version a newer one replaced (etcd): no lease, no answer; counted apart.
    if (entry.state === 'superseded') {
      answers.superseded += 1;
      answers.supersededBytes += entry.bytes;
      continue;
    }
    // The answer generation record counts writes of answer records; it is no lease and no answer.
    if (entry.record.role === 'answers-generation') {
      answers.generation = entry.record.generation as number;
      continue;
    }
    if (entry.record.answered === true) answers.branches += 1;
    answers.pairs += entry.record.settled?.length ?? 0;
    answers.open += entry.record.open?.length ?? 0;
    answers.bytes += answerBytes(entry.record);
    const status: LeaseStatus = entry.record.status;
    const owner = (owners[entry.record.owner] ??= { leased: 0, expired: 0, committing: 0, done: 0 });
    counts[status] += 1;
    owner[status] += 1;
    if (isExpiredLease(entry.record, options.nowMs, options.leaseTtlMs, options.maxClockSkewMs)) {
      counts.expired += 1;
      owner.expired += 1;
    }
  }
  return { root: path.resolve(root), kind: meta.kind, store: meta.store, shardCount: meta.shardCount, counts, owners, corrupt, ...(meta.kind === 'target' ? { answers } : {}) };
}

/** Inspects every table at or under `dir`. */
export async function inspectLeaseDirectory(dir: string, options: InspectOptions): Promise<TableInspection[]> {
  checkInspectOptions(options);
  const tables = await findLeaseTables(dir, options.fsLayer);
  const out: TableInspection[] = [];
  for (const table of tables) out.push(await inspectLeaseTable(table, options));
  return out;
}

/** Bytes of a record's answer fields as JSON (`"answered":true`, `"settled":[…]`, `"open":[…]`), 0 for none. */
function answerBytes(record: LeaseRecord): number {
  const { answered, settled, open } = record;
  if (answered === undefined && settled === undefined && open === undefined) return 0;
  return Buffer.byteLength(JSON.stringify({ answered, settled, open }), 'utf8');
}
