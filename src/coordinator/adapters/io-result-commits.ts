/**
 * `ResultCommits` over the I/O thread: staged findings under the lease root (`StagedFindings`),
 * fenced publication into this coordinator's AFL directories (`QueuePublisher.publishGuarded` +
 * the I/O thread's `publishCommitted`, which publishes and marks the record done under the
 * record's lock), and recovery scans of the work table.
 */
import { TRACES_DIR, parseStagedName, type CommitManifest } from '../../commit/commit-manifest.js';
import { StagedFindings, type StageInfo, type StagingClient } from '../../commit/staged-findings.js';
import type { DirectoryFiles } from '../../io/io-requests.js';
import type { ReplayResult, SnapshotEntry } from '../../lease/lease-results.js';
import { nodeFsLayer, type FsLayer } from '../../fs/fs-layer.js';
import { findLeaseTables } from '../../lease/lease-inspect.js';
import { LEASE_TABLE_OPTIONS } from '../../lease/lease-table-options.js';
import { resolveStaleTempAgeMs, sweepLeaseTableTemps } from '../../lease/temp-sweep.js';
import type { QueuePublisher } from '../../triage/queue-publisher.js';
import type { CommitFinding, CommitPublication, CommitScan, CommittingWork, FindingItem, PublishedEntry, ResultCommits, StagedResult } from '../ports.js';

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

export class IoResultCommits implements ResultCommits {
  readonly staged: StagedFindings;
  readonly #client: ResultCommitsClient;
  readonly #publisher: QueuePublisher;
  readonly #leaseRoot: string;
  readonly #staleTempAgeMs: number;
  readonly #fsLayer: FsLayer;
  #tablesSwept = false;

  private constructor(staged: StagedFindings, client: ResultCommitsClient, publisher: QueuePublisher, leaseRoot: string, temps: TempSweepSettings) {
    this.staged = staged;
    this.#client = client;
    this.#publisher = publisher;
    this.#leaseRoot = leaseRoot;
    this.#staleTempAgeMs =
      temps.staleTempAgeMs === undefined ? resolveStaleTempAgeMs(undefined) : LEASE_TABLE_OPTIONS.resolve({ staleTempAgeMs: temps.staleTempAgeMs }).staleTempAgeMs;
    this.#fsLayer = temps.fsLayer ?? nodeFsLayer;
  }

  /**
   * `leaseRoot`: the directory holding `work/` (shared `--lease-dir`, or `<outDir>/leases`).
   * `readFile`: how finding files are read (default from disk; the etcd store reads staged ones
   * from the cluster, commit/etcd-staged-findings.ts).
   */
  static async open(leaseRoot: string, client: ResultCommitsClient, publisher: QueuePublisher, temps: TempSweepSettings = {}, readFile?: (file: string) => Promise<Uint8Array>): Promise<IoResultCommits> {
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
    for (const { id, record } of records) {
      if (record.status === 'done') {
        done.set(id, record.completedMs ?? record.updatedMs);
        const kept = tracedName(record.commit);
        if (kept !== undefined) traces.set(id, kept);
      } else if (record.status === 'committing') {
        committing.push({ workId: id, token: record.token, owner: record.owner, updatedMs: record.updatedMs, payload: record.payload, commit: record.commit });
      }
    }
    return { committing, done, traces };
  }

  load(workId: string, commit: unknown): Promise<StagedResult> {
    return this.staged.load(workId, commit);
  }

  loadTrace(workId: string, commit: unknown): Promise<Uint8Array | undefined> {
    return this.staged.loadTrace(workId, commit);
  }

  async discard(manifest: CommitManifest): Promise<void> {
    await this.staged.discard(manifest);
  }

  sweep(done: ReadonlySet<string>, keptTraces?: ReadonlyMap<string, string | null>): Promise<number> {
    return this.staged.sweep(done, keptTraces);
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
