/**
 * Sweeping leftover temp files: the `*.tmp` names a lease batch or a staging writes before its
 * rename, left behind when the writer crashed between creating and renaming them
 * (docs/leases.md "Leftover temp files").
 *
 * A temp is removed only when its writer is provably gone:
 *
 *   tag names this host   the pid is dead (`kill(pid, 0)` → ESRCH), or alive with another start
 *                         time (the pid was reused). Alive with the same (or an unknown) start
 *                         time: kept, however old — a live writer's temp is never touched.
 *   tag names another host  older than `staleTempAgeMs` (by its mtime): we cannot ask that
 *                         host's kernel, and no write holds a temp for anything near that long.
 *   no tag (legacy name)  older than `staleTempAgeMs`, like another host's.
 *
 * Removing a temp needs no lock: only its writer ever renames it, and that writer is gone. The one
 * judgement that can be wrong is the age bound on a live writer of another host stalled for longer
 * than the bound; its rename then fails with ENOENT and its batch reports an I/O error without
 * having changed any record.
 */
import path from 'node:path';
import { errnoCode, type FsLayer } from '../fs/fs-layer.js';
import { LOCK_SUFFIX, META_FILE, RECORD_SUFFIX, TEMP_SUFFIX, LeaseLayout } from './table-layout.js';
import { parseOptionValue } from '../config/schema.js';
import { LEASE_TABLE_OPTIONS } from './lease-table-options.js';
import { readTableMeta } from './table-meta.js';
import { currentWriterTag, parseWriterTag, systemProcessProbe, type ProcessProbe, type WriterTag } from './temp-writer.js';

/**
 * `staleTempAgeMs` from a flag value (named `--stale-temp-age` in errors), else from
 * `SYMFENCE_STALE_TEMP_AGE`, else the default. Range-checked like the schema.
 */
export function resolveStaleTempAgeMs(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): number {
  const spec = LEASE_TABLE_OPTIONS.specs.staleTempAgeMs;
  if (flag !== undefined) return parseOptionValue(`--${spec.flag}`, spec, flag) as number;
  const raw = env[spec.env];
  if (raw !== undefined && raw !== '') return parseOptionValue(spec.env, spec, raw) as number;
  return LEASE_TABLE_OPTIONS.defaults.staleTempAgeMs;
}

export interface TempSweepOptions {
  /** Current time, ms since the epoch (compared with temp mtimes). */
  readonly nowMs: number;
  /** Age after which an untagged or other host's temp counts as abandoned, ms. */
  readonly staleTempAgeMs: number;
  readonly fsLayer: FsLayer;
  /** This process's tag (tests); default `currentWriterTag()`. */
  readonly self?: WriterTag;
  /** Default: `kill(pid, 0)` and `/proc/<pid>/stat`. */
  readonly probe?: ProcessProbe;
}

export interface TempSweepReport {
  /** Temps removed. */
  readonly swept: number;
  /** Temps left in place (a live or possibly live writer). */
  readonly kept: number;
}

type TempVerdict = 'live-writer' | 'dead-writer' | 'reused-pid' | 'foreign-recent' | 'foreign-old' | 'untagged-recent' | 'untagged-old';

const SWEPT: ReadonlySet<TempVerdict> = new Set<TempVerdict>(['dead-writer', 'reused-pid', 'foreign-old', 'untagged-old']);

/** Whether `verdict` lets a sweeper remove the temp. */
const isSweepable = (verdict: TempVerdict): boolean => SWEPT.has(verdict);

/** The judgement above for one temp name and its mtime. Pure apart from the probe. */
export function judgeTemp(name: string, mtimeMs: number, options: Omit<TempSweepOptions, 'fsLayer'>): TempVerdict {
  const tag = parseWriterTag(name);
  const old = options.nowMs - mtimeMs >= options.staleTempAgeMs;
  if (tag === null) return old ? 'untagged-old' : 'untagged-recent';
  const self = options.self ?? currentWriterTag();
  if (tag.host !== self.host) return old ? 'foreign-old' : 'foreign-recent';
  const probe = options.probe ?? systemProcessProbe;
  if (!probe.isAlive(tag.pid)) return 'dead-writer';
  if (tag.startTicks === 0) return 'live-writer';
  const start = probe.startTicksOf(tag.pid);
  // Unknown now (no /proc, or it exited a moment ago): keep; the next sweep sees it dead.
  if (start === undefined || start === tag.startTicks) return 'live-writer';
  return 'reused-pid';
}

/** A lease table's temp: `<id>.json.<…>.tmp` in a shard directory. */
export function isLeaseTempName(name: string): boolean {
  return name.endsWith(TEMP_SUFFIX) && name.includes(`${RECORD_SUFFIX}.`) && !name.endsWith(LOCK_SUFFIX);
}

/** A staging temp in `staged/`: `.symfence-io-<…>.tmp` (the I/O thread's publication temps). */
export function isStagedTempName(name: string): boolean {
  return name.startsWith('.symfence-io-') && name.endsWith(TEMP_SUFFIX);
}

/** Sweeps the temps of one directory (`isTemp` picks them). A missing directory holds none. */
export async function sweepTempsIn(dir: string, isTemp: (name: string) => boolean, options: TempSweepOptions): Promise<TempSweepReport> {
  let names: string[];
  try {
    names = await options.fsLayer.readdir(dir);
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return { swept: 0, kept: 0 };
    throw error;
  }
  let swept = 0;
  let kept = 0;
  for (const name of names) {
    if (!isTemp(name)) continue;
    const file = path.join(dir, name);
    let mtimeMs: number;
    try {
      const stat = await options.fsLayer.lstat(file);
      if (!stat.isFile) continue;
      mtimeMs = stat.mtimeMs;
    } catch (error) {
      if (errnoCode(error) === 'ENOENT') continue; // renamed by its live writer meanwhile
      throw error;
    }
    if (!isSweepable(judgeTemp(name, mtimeMs, options))) {
      kept++;
      continue;
    }
    try {
      await options.fsLayer.unlink(file);
      swept++;
    } catch (error) {
      if (errnoCode(error) !== 'ENOENT') throw error;
    }
  }
  return { swept, kept };
}

/** Sweeps every shard directory of the file table at `root` (nothing when it is not one). */
export async function sweepLeaseTableTemps(root: string, options: TempSweepOptions): Promise<TempSweepReport> {
  const meta = await readTableMeta(options.fsLayer, path.join(root, META_FILE));
  // Only the file store keeps record temps in shard directories.
  if (!meta || meta.store !== 'files') return { swept: 0, kept: 0 };
  const layout = new LeaseLayout(root, meta.shardCount);
  let swept = 0;
  let kept = 0;
  for (let shard = 0; shard < layout.shardCount; shard++) {
    const r = await sweepTempsIn(layout.shardDir(shard), isLeaseTempName, options);
    swept += r.swept;
    kept += r.kept;
  }
  return { swept, kept };
}
