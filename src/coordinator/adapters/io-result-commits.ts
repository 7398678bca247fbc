/**
 * `ResultCommits` over the I/O thread: staged findings under the lease root (`StagedFindings`),
 * fenced publication into this coordinator's AFL directories (`QueuePublisher.publishGuarded` +
 * the I/O thread's `publishCommitted`, which publishes and marks the record done under the
 * record's lock), recovery scans of the work table, and the shared traces' size cap
 * (src/commit/trace-store-cap.ts).
 */
import { TRACES_DIR, parseStagedName, type CommitManifest } from '../../commit/commit-manifest.js';
import { StagedFindings, type StageInfo, type StagingClient } from '../../commit/staged-findings.js';
import { DEFAULT_TRACE_STORE_MAX_BYTES, evictLeastRecentlyUsedTraces, fileTraceUse, type KeptTrace, type TraceUse } from '../../commit/trace-store-cap.js';
import { systemClock } from '../../core/clock.js';
import type { DirectoryFiles } from '../../io/io-requests.js';
import type { ReplayResult, SnapshotEntry } from '../../lease/lease-results.js';
import { nodeFsLayer, type FsLayer } from '../../fs/fs-layer.js';
import { findLeaseTables } from '../../lease/lease-inspect.js';
import { LEASE_TABLE_OPTIONS } from '../../lease/lease-table-options.js';
import { resolveStaleTempAgeMs, sweepLeaseTableTemps } from '../../lease/temp-sweep.js';
import type { QueuePublisher } from '../../triage/queue-publisher.js';
import type { Clock, CommitFinding, CommitPublication, CommitScan, CommittingWork, FindingItem, PublishedEntry, ResultCommits, StagedResult } from '../ports.js';

/** The I/O-thread requests this adapter uses (an `IoClient` has them). */
interface ResultCommitsClient extends StagingClient {
  publishCommitted(workId: string, token: string, publications: readonly DirectoryFiles[], nowMs: number, minIdleMs?: number): Promise<ReplayResult>;
  snapshotRecords(table: 'work', options?: { readonly corrupt?: 'reject' | 'skip' }): Promise<SnapshotEntry[]>;
}

/** How leftover temps are swept (`sweepTemps`). */
interface TempSweepSettings {
  /** See `LEASE_TABLE_OPTIONS.staleTempAgeMs`. Default: `SYMFENCE_STALE_TEMP_AGE`, else 1 h. */
  readonly staleTempAgeMs?: number;
  /** Default: the real filesystem. */
  readonly fsLayer?: FsLayer;
}

/** The shared traces' size cap (docs/campaign.md "Shared traces"). */
interface TraceStoreSettings {
  /** See `CAMPAIGN_OPTIONS.traceStoreMaxBytes`. Default 512 MiB. */
  readonly traceStoreMaxBytes?: number;
  /** Where last uses live: default the files' mtimes through `fsLayer`; the etcd store's use keys. */
  readonly traceUse?: TraceUse;
  /** The time an adoption marks a trace used. Default: the system clock. */
  readonly clock?: Clock;
}

export class IoResultCommits implements ResultCommits {
  readonly staged: StagedFindings;
  readonly #client: ResultCommitsClient;
  readonly #publisher: QueuePublisher;
  readonly #leaseRoot: string;
  readonly #staleTempAgeMs: number;
  readonly #fsLayer: FsLayer;
  readonly #traceStoreMaxBytes: number;
  readonly #traceUse: TraceUse;
  readonly #clock: Clock;
  #tablesSwept = false;

  private constructor(staged: StagedFindings, client: ResultCommitsClient, publisher: QueuePublisher, leaseRoot: string, temps: TempSweepSettings & TraceStoreSettings) {
    this.staged = staged;
    this.#client = client;
    this.#publisher = publisher;
    this.#leaseRoot = leaseRoot;
    this.#staleTempAgeMs =
      temps.staleTempAgeMs === undefined ? resolveStaleTempAgeMs(undefined) : LEASE_TABLE_OPTIONS.resolve({ staleTempAgeMs: temps.staleTempAgeMs }).staleTempAgeMs;
    this.#fsLayer = temps.fsLayer ?? nodeFsLayer;
    this.#traceStoreMaxBytes = temps.traceStoreMaxBytes ?? DEFAULT_TRACE_STORE_MAX_BYTES;
    this.#traceUse = temps.traceUse ?? fileTraceUse(this.#fsLayer);
    this.#clock = temps.clock ?? systemClock;
  }

  /**
   * `leaseRoot`: the directory holding `work/` (shared `--lease-dir`, or `<outDir>/leases`).
   * `readFile`: how finding files are read (default from disk; the etcd store reads staged ones
   * from the cluster, commit/etcd-staged-findings.ts).
   */
  static async open(
    leaseRoot: string,
    client: ResultCommitsClient,
    publisher: QueuePublisher,
    temps: TempSweepSettings & TraceStoreSettings = {},
    readFile?: (file: string) => Promise<Uint8Array>,
  ): Promise<IoResultCommits> {
    return new IoResultCommits(await StagedFindings.open(leaseRoot, client, ...(readFile ? [readFile] : [])), client, publisher, leaseRoot, temps);
  }

  stage(workId: string, items: readonly FindingItem[], info: StageInfo): Promise<StagedResult> {
    return this.staged.stage(workId, items, info);
  }

  async publish(workId: string, token: string, manifest: CommitManifest, findings: readonly CommitFinding[], now: number, minIdleMs = 0): Promise<CommitPublication> {
    let outcome: ReplayResult = 'stale';
    const result = await this.#publisher.publishGuarded(findings, manifest.source, async (jobs) => {
      outcome = await this.#client.publishCommitted(workId, token, jobs, now, minIdleMs);
      return outcome === 'completed';
    });
    return { outcome, entries: result.entries.filter((e): e is PublishedEntry => e !== null) };
  }

  async scan(): Promise<CommitScan> {
    // One damaged record must not stop recovery of all the others (`symfence leases check` lists it).
    const records = await this.#client.snapshotRecords('work', { corrupt: 'skip' });
    const committing: CommittingWork[] = [];
    const done = new Map<string, number>();
    const traces = new Map<string, string | null>();
    const traceBytes = new Map<string, number>();
    for (const { id, record } of records) {
      if (record.status === 'done') {
        done.set(id, record.completedMs ?? record.updatedMs);
        const kept = tracedName(record.commit);
        if (kept !== undefined) traces.set(id, kept);
        const size = (record.commit as { trace?: { size?: unknown } } | undefined)?.trace?.size;
        if (kept && Number.isSafeInteger(size) && (size as number) >= 0) traceBytes.set(id, size as number);
      } else if (record.status === 'committing') {
        committing.push({ workId: id, token: record.token, owner: record.owner, updatedMs: record.updatedMs, payload: record.payload, commit: record.commit });
      }
    }
    return { committing, done, traces, traceBytes };
  }

  load(workId: string, commit: unknown): Promise<StagedResult> {
    return this.staged.load(workId, commit);
  }

  /** Also marks the trace used (the trace store's cap evicts the least recently used). */
  async loadTrace(workId: string, commit: unknown): Promise<Uint8Array | undefined> {
    const bytes = await this.staged.loadTrace(workId, commit);
    const name = bytes === undefined ? undefined : tracedName(commit);
    if (name) {
      try {
        await this.#traceUse.touch(this.staged.tracesDir, name, this.#clock.now());
      } catch {
        // A use not recorded only makes the trace look older to the cap; the adoption stands.
      }
    }
    return bytes;
  }

  async discard(manifest: CommitManifest): Promise<void> {
    await this.staged.discard(manifest);
  }

  sweep(done: ReadonlySet<string>, keptTraces?: ReadonlyMap<string, string | null>): Promise<number> {
    return this.staged.sweep(done, keptTraces);
  }

  evictTraces(scan: CommitScan, settled: ReadonlySet<string>): Promise<number> {
    const kept: KeptTrace[] = [];
    for (const [workId, name] of scan.traces ?? []) {
      const bytes = scan.traceBytes?.get(workId);
      if (name !== null && bytes !== undefined) kept.push({ workId, name, bytes });
    }
    const ctx = { client: this.#client, use: this.#traceUse, dir: this.staged.tracesDir, capBytes: this.#traceStoreMaxBytes };
    return evictLeastRecentlyUsedTraces(ctx, kept, settled);
  }

  /**
   * Staging temps at every call (one listing of `staged/`); the lease tables' temps (a listing of
   * every shard) once, at the first call after start — a table's temps are left only by a writer
   * that died mid-batch, and a restart is when a dead writer's leftovers are looked for.
   */
  async sweepTemps(nowMs: number): Promise<number> {
    const options = { nowMs, staleTempAgeMs: this.#staleTempAgeMs, fsLayer: this.#fsLayer };
    let swept = (await this.staged.sweepTemps(options)).swept;
    if (!this.#tablesSwept) {
      this.#tablesSwept = true;
      for (const root of await findLeaseTables(this.#leaseRoot, this.#fsLayer)) swept += (await sweepLeaseTableTemps(root, options)).swept;
    }
    return swept;
  }
}

/**
 * The trace file a done record's stored manifest keeps: its name (`trace.path` = `traces/<name>`),
 * null when the manifest names no trace, undefined when it cannot tell (no manifest object, or a
 * `trace` that is not a trace path): the sweep then leaves every trace of that work alone.
 */
function tracedName(commit: unknown): string | null | undefined {
  if (typeof commit !== 'object' || commit === null || Array.isArray(commit)) return undefined;
  const trace = (commit as { trace?: unknown }).trace;
  if (trace === undefined) return null;
  const tracePath = (trace as { path?: unknown } | null)?.path;
  if (typeof tracePath !== 'string' || !tracePath.startsWith(`${TRACES_DIR}/`)) return undefined;
  const name = tracePath.slice(TRACES_DIR.length + 1);
  return parseStagedName(name) !== null ? name : undefined;
}
