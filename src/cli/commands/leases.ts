/**
 * `symfence leases <dir>` — counts of a lease directory by status and by owner;
 * `symfence leases check <dir>` — lists every corrupt record and exits 1 if there is one, and
 * removes leftover temp files whose writer is provably gone (docs/leases.md "Leftover temp files").
 * Safe to run next to live coordinators: the counts are a lock-free snapshot, and no live writer's
 * temp is ever removed.
 */
import path from 'node:path';
import { Command, Option } from 'commander';
import { STAGED_DIR, TRACES_DIR, parseStagedName } from '../../commit/commit-manifest.js';
import { errnoCode, nodeFsLayer, type FsLayer } from '../../fs/fs-layer.js';
import { isStagedTempName, resolveStaleTempAgeMs, sweepLeaseTableTemps, sweepTempsIn, type TempSweepReport } from '../../lease/temp-sweep.js';
import { LeaseCorruptError, UsageError } from '../../errors.js';
import { LEASE_STORE_OPTIONS, LEASE_TABLE_OPTIONS } from '../../lease/lease-table-options.js';
import { removeSupersededAnswers } from '../../lease/etcd/etcd-backend.js';
import { etcdTableOptions, inspectLeaseDirectory, type TableInspection } from '../../lease/lease-inspect.js';
import { parseDurationMs } from '../../config/values.js';
import { formatDuration, formatSize, optionsFromEnv, parseOptionValue } from '../../config/schema.js';
import { CAMPAIGN_OPTIONS } from '../../coordinator/campaign-options.js';
import { escapeForTerminal } from '../../util/terminal-text.js';
import type { CliIo } from '../program.js';

interface LeasesFlags {
  readonly json?: boolean;
  readonly leaseTtl?: string;
  readonly staleTempAge?: string;
  readonly traceStoreMax?: string;
}

function definedOnly(flags: LeasesFlags): LeasesFlags {
  return Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined)) as LeasesFlags;
}

function ttlOf(flags: LeasesFlags): number {
  return flags.leaseTtl === undefined ? LEASE_TABLE_OPTIONS.defaults.leaseTtlMs : parseDurationMs('--lease-ttl', flags.leaseTtl);
}

const TRACE_STORE_MAX = CAMPAIGN_OPTIONS.specs.traceStoreMaxBytes;

/** The traces' cap the coordinators run with: `--trace-store-max`, else its variable, else the default. */
function traceCapOf(flags: LeasesFlags, env: NodeJS.ProcessEnv = process.env): number {
  if (flags.traceStoreMax !== undefined) return parseOptionValue(`--${TRACE_STORE_MAX.flag}`, TRACE_STORE_MAX, flags.traceStoreMax) as number;
  const fromEnv = env[TRACE_STORE_MAX.env];
  if (fromEnv !== undefined && fromEnv !== '') return parseOptionValue(TRACE_STORE_MAX.env, TRACE_STORE_MAX, fromEnv) as number;
  return TRACE_STORE_MAX.default;
}

/** The shared terminal escaping (src/util/terminal-text.ts), under the name this module exported first. */
const escapeControl = escapeForTerminal;

function renderTable(t: TableInspection): string {
  const c = t.counts;
  const lines = [
    `${escapeControl(t.root)} (${t.kind} table, ${t.store === 'files' ? `${t.shardCount} shards` : `${t.store} store`})`,
    `  leased ${c.leased} (expired ${c.expired})  committing ${c.committing}  done ${c.done}  corrupt ${c.corrupt}`,
  ];
  // The campaign's shared answers (docs/leases.md "Shared answers").
  if (t.answers !== undefined) {
    const superseded = t.answers.superseded > 0 ? `; ${t.answers.superseded} superseded answer versions (${t.answers.supersededBytes} bytes) to remove` : '';
    lines.push(`  answers: ${t.answers.branches} branches answered, ${t.answers.pairs} (input, branch) pairs, ${t.answers.open} open questions, ${t.answers.bytes} bytes, generation ${t.answers.generation}${superseded}`);
  }
  const owners = Object.entries(t.owners).sort(([a], [b]) => a.localeCompare(b));
  for (const [owner, o] of owners) lines.push(`  owner ${escapeControl(owner)}: leased ${o.leased} (expired ${o.expired})  committing ${o.committing}  done ${o.done}`);
  for (const bad of t.corrupt) lines.push(`  corrupt ${escapeControl(bad.path)}: ${escapeControl(bad.reason)}`);
  return `${lines.join('\n')}\n`;
}

/** The shared traces stored under a lease root (docs/campaign.md "Shared traces"). */
export interface TracesInspection {
  readonly dir: string;
  readonly count: number;
  readonly bytes: number;
  /** The cap the coordinators evict down from (`--trace-store-max`), bytes. */
  readonly capBytes: number;
}

/**
 * Counts the shared traces of the lease root `leaseRoot` (`<leaseRoot>/traces/`, trace files only:
 * temps and other names are not counted); none when the directory does not exist.
 */
export async function inspectTraces(leaseRoot: string, fsLayer: FsLayer = nodeFsLayer, capBytes: number = TRACE_STORE_MAX.default): Promise<TracesInspection> {
  const dir = path.join(path.resolve(leaseRoot), TRACES_DIR);
  let names: string[];
  try {
    names = await fsLayer.readdir(dir);
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return { dir, count: 0, bytes: 0, capBytes };
    throw new UsageError(`cannot read trace directory ${dir}: ${errnoCode(error) ?? (error as Error).message}`, { path: dir });
  }
  let count = 0;
  let bytes = 0;
  for (const name of names) {
    if (parseStagedName(name) === null) continue;
    try {
      const stat = await fsLayer.lstat(path.join(dir, name));
      if (!stat.isFile) continue;
      count += 1;
      bytes += stat.size;
    } catch (error) {
      if (errnoCode(error) !== 'ENOENT') throw error;
    }
  }
  return { dir, count, bytes, capBytes };
}

function renderTraces(t: TracesInspection): string {
  return `${escapeControl(t.dir)}\n  traces: ${t.count} stored (${t.bytes} bytes, cap ${t.capBytes} bytes)\n`;
}

function toJson(tables: readonly TableInspection[], nowMs: number, leaseTtlMs: number, traces: readonly TracesInspection[], temps?: TempsReport, supersededRemoved?: number): string {
  return `${JSON.stringify({ nowMs, leaseTtlMs, tables, traces, ...(temps ? { temps } : {}), ...(supersededRemoved !== undefined ? { supersededRemoved } : {}) }, null, 2)}\n`;
}

/**
 * Removes the replaced answer versions releases left behind in etcd target tables
 * (docs/lease-format.md "Answer versions"), from the cluster the environment names; how many.
 */
async function removeSuperseded(tables: readonly TableInspection[]): Promise<number> {
  let removed = 0;
  for (const t of tables) {
    if (t.store !== 'etcd' || t.kind !== 'target' || (t.answers?.superseded ?? 0) === 0) continue;
    removed += await removeSupersededAnswers(t.root, etcdTableOptions(t.root));
  }
  return removed;
}

/**
 * The shared traces of every lease root holding a directory-store table (an etcd campaign keeps
 * its traces in etcd): the lease root is the parent of a campaign's tables.
 */
async function tracesOf(tables: readonly TableInspection[], capBytes: number): Promise<TracesInspection[]> {
  const roots = new Set(tables.filter((t) => t.store !== 'etcd').map((t) => path.dirname(t.root)));
  return Promise.all([...roots].map((root) => inspectTraces(root, nodeFsLayer, capBytes)));
}

interface TempsReport extends TempSweepReport {
  readonly staleTempAgeMs: number;
}

const STALE_TEMP_AGE_ENV = LEASE_TABLE_OPTIONS.specs.staleTempAgeMs.env;

/** Every table's shard temps, and the staging and trace temps of each lease root holding a table. */
async function sweepTemps(tables: readonly TableInspection[], nowMs: number, staleTempAgeMs: number): Promise<TempsReport> {
  const options = { nowMs, staleTempAgeMs, fsLayer: nodeFsLayer };
  let swept = 0;
  let kept = 0;
  const add = (r: TempSweepReport): void => {
    swept += r.swept;
    kept += r.kept;
  };
  for (const t of tables) add(await sweepLeaseTableTemps(t.root, options));
  for (const leaseRoot of new Set(tables.map((t) => path.dirname(t.root)))) {
    for (const dir of [STAGED_DIR, TRACES_DIR]) add(await sweepTempsIn(path.join(leaseRoot, dir), isStagedTempName, options));
  }
  return { swept, kept, staleTempAgeMs };
}

const ttlOption = (): Option =>
  new Option('--lease-ttl <duration>', `TTL after which a leased record without its own stored TTL counts as expired (default: ${formatDuration(LEASE_TABLE_OPTIONS.defaults.leaseTtlMs)})`);

const traceCapOption = (): Option =>
  new Option(
    `--${TRACE_STORE_MAX.flag} <size>`,
    `the shared traces' size cap the coordinators run with, shown beside the traces (default: ${formatSize(TRACE_STORE_MAX.default)}; env: ${TRACE_STORE_MAX.env})`,
  );

export function register(program: Command, io: CliIo): void {
  const leases = program
    .command('leases')
    .description('inspect a lease directory: counts by status (leased, expired, committing, done, corrupt) and by owner, a target table\'s shared answers and open questions, and the shared traces')
    .argument('<dir>', 'a lease table root, or a directory holding table roots')
    .option('--json', 'print JSON instead of text')
    .addOption(ttlOption())
    .addOption(traceCapOption())
    .addHelpText(
      'after',
      '\nRead-only and lock-free: safe next to running coordinators. A leased record counts as expired\n' +
        "once its holder's stored TTL has passed (--lease-ttl for records without one). Corrupt records are counted here and listed by `leases check`.\n" +
        'Exit codes: 0 printed, 1 a shard or record could not be read, 2 not a lease directory or bad flag.',
    )
    .action(async (dir: string, flags: LeasesFlags) => {
      const nowMs = Date.now();
      const leaseTtlMs = ttlOf(flags);
      const capBytes = traceCapOf(flags);
      const tables = await inspectLeaseDirectory(dir, { nowMs, leaseTtlMs });
      const traces = await tracesOf(tables, capBytes);
      io.stdout(flags.json ? toJson(tables, nowMs, leaseTtlMs, traces) : [...tables.map(renderTable), ...traces.filter((t) => t.count > 0).map(renderTraces)].join(''));
    });
  leases
    .command('check')
    .description('list every corrupt lease record; exit 1 if there is any')
    .argument('<dir>', 'a lease table root, or a directory holding table roots')
    .option('--json', 'print JSON instead of text')
    .addOption(ttlOption())
    .addOption(traceCapOption())
    .addOption(
      new Option(
        '--stale-temp-age <duration>',
        `remove another host's (or an untagged) leftover temp file once it is this old (default: ${formatDuration(LEASE_TABLE_OPTIONS.defaults.staleTempAgeMs)}; env: ${STALE_TEMP_AGE_ENV})`,
      ),
    )
    .addHelpText(
      'after',
      '\nA corrupt record (unparseable, wrong schema or kind, bad field, id not matching its path, not a\n' +
        'regular file) blocks its id: coordinators refuse to claim or overwrite it. Inspect and remove it\n' +
        'by hand. Exit codes: 0 no corrupt record, 1 at least one (each listed as `corrupt <path>: <why>`),\n' +
        '2 not a lease directory or bad flag.\n\n' +
        'check also removes leftover temp files (`*.tmp` of a lease write or a staging that crashed)\n' +
        'whose writer is provably gone: a dead process of this host, or another host\'s or an untagged\n' +
        'temp older than --stale-temp-age. A live writer\'s temp is never removed. The last line says\n' +
        'how many were removed and kept (`temps` in --json). On an etcd target table it also removes the\n' +
        'replaced answer versions a release left behind (`supersededRemoved` in --json).',
    )
    .action(async (dir: string, localFlags: LeasesFlags) => {
      // `leases` declares the same flags and commander gives them to it even when they follow
      // `check <dir>` (`leases check d --json` set leases' --json, not check's): merge both.
      const flags = { ...definedOnly(leases.opts<LeasesFlags>()), ...definedOnly(localFlags) };
      const nowMs = Date.now();
      const leaseTtlMs = ttlOf(flags);
      const staleTempAgeMs = resolveStaleTempAgeMs(flags.staleTempAge);
      const capBytes = traceCapOf(flags);
      const tables = await inspectLeaseDirectory(dir, { nowMs, leaseTtlMs });
      // The traces directory is read (and refused with ERR_USAGE naming it when it cannot be)
      // before its temps are swept, in text mode too.
      const traces = await tracesOf(tables, capBytes);
      const temps = await sweepTemps(tables, nowMs, staleTempAgeMs);
      const superseded = await removeSuperseded(tables);
      const corrupt = tables.flatMap((t) => t.corrupt);
      if (flags.json) io.stdout(toJson(tables, nowMs, leaseTtlMs, traces, temps, superseded));
      else {
        for (const bad of corrupt) io.stdout(`corrupt ${escapeControl(bad.path)}: ${escapeControl(bad.reason)}\n`);
        if (corrupt.length === 0) {
          const records = tables.reduce((n, t) => n + t.counts.leased + t.counts.committing + t.counts.done, 0);
          io.stdout(`ok: ${tables.length} table(s), ${records} record(s), no corrupt record\n`);
        }
        for (const t of traces) io.stdout(`traces: ${t.count} stored in ${escapeControl(t.dir)} (${t.bytes} bytes, cap ${t.capBytes} bytes)\n`);
        io.stdout(`temps: swept ${temps.swept} leftover temp file(s) of writers that are gone, kept ${temps.kept} of live or possibly live writers\n`);
        if (superseded > 0) io.stdout(`answers: removed ${superseded} replaced answer version(s) left behind\n`);
      }
      if (corrupt.length > 0) {
        throw new LeaseCorruptError(`${corrupt.length} corrupt lease record(s) in ${dir}`, { count: corrupt.length });
      }
    })
    // Nested commands do not get the program's exit override (set after registration).
    .exitOverride();
}
