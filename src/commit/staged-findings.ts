/**
 * Staged findings: the durable copies of a result's findings that make a commit replayable
 * (docs/lease-format.md "Staged findings"). They live in `<lease-root>/staged/`, one file per
 * distinct content of a work item, named `<workId>.<sha256>` — content-addressed within the work,
 * so two jobs (or coordinators) never share, and so never delete, each other's copies.
 *
 * Lifecycle: `stage` (before beginCommit: temp, file barrier, rename, directory barrier — through
 * the I/O thread) → the manifest names them → after the record is `done`, `discard` unlinks them;
 * a crash before that leaves files of a `done` record, which `sweep` removes later. A crash in the
 * middle of staging leaves a hidden temp (`.symfence-io-<writer tag>-<n>.tmp`), which `sweepTemps`
 * removes once its writer is provably gone (src/lease/temp-sweep.ts). Reading (`load`) verifies
 * size and SHA-256 and fails closed with `ERR_STAGED_FINDING`.
 *
 * A trace run's trace is staged the same way beside them, in `<lease-root>/traces/` (same naming),
 * and named by the manifest's `trace`. It is never discarded or swept with the findings: the done
 * record keeps pointing at it for every coordinator that meets the same trace work later
 * (`loadTrace`, docs/campaign.md "Shared traces").
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { StagedFindingError, StagedFindingTooLargeError } from '../errors.js';
import { readBoundedFile } from '../fs/bounded-read.js';
import { errnoCode, nodeFsLayer, type FsLayer } from '../fs/fs-layer.js';
import { isStagedTempName, sweepTempsIn, type TempSweepOptions, type TempSweepReport } from '../lease/temp-sweep.js';
import type { PublishedFile } from '../io/io-requests.js';
import type { CommitFinding, FindingItem } from '../core/findings.js';
import {
  buildCommitManifest,
  MAX_STAGED_BYTES,
  MAX_TRACE_BYTES,
  parseCommitManifest,
  parseStagedName,
  stagedName,
  STAGED_DIR,
  TRACES_DIR,
  type CommitAnswers,
  type CommitManifest,
  type CommitStatus,
} from './commit-manifest.js';

/** A staged result: the manifest naming the staged copies, and the findings with their bytes. */
export interface StagedResult {
  readonly manifest: CommitManifest;
  readonly findings: readonly CommitFinding[];
}

/** What a result is staged with: its status, its parent's AFL source id, and a trace run's trace. */
export interface StageInfo {
  readonly status: CommitStatus;
  readonly source: string;
  /** A trace run's trace (canonical telemetry JSON) to share with the campaign; at most `MAX_TRACE_BYTES`. */
  readonly trace?: Uint8Array;
  /** What the run answered, kept in the manifest (commit-manifest.ts `CommitAnswers`). */
  readonly answers?: CommitAnswers;
}

/** The I/O-thread requests staging uses (an `IoClient` has them). */
export interface StagingClient {
  ensureDir(dir: string): Promise<void>;
  listDir(dir: string): Promise<string[]>;
  stageFiles(dir: string, files: readonly PublishedFile[]): Promise<void>;
  removeFiles(dir: string, names: readonly string[]): Promise<number>;
}

const sha256Hex = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/**
 * Reads a finding (a solver output, a parent input, or a staged copy) through `readBoundedFile`:
 * a regular file of at most `MAX_STAGED_BYTES`. Symlinks are followed — a parent input may be one,
 * and a staged copy's bytes are checked against its manifest's SHA-256 anyway. Rejects with an
 * errno-carrying error: `ENOENT` when absent, `EFBIG` when too large, `EINVAL` for a FIFO, device,
 * directory or socket (never read, never waited on).
 */
export async function readFindingFile(file: string): Promise<Uint8Array> {
  const read = await readBoundedFile(nodeFsLayer, file, { maxBytes: MAX_STAGED_BYTES, followSymlinks: true });
  if (read.state === 'read') return read.bytes;
  const code = read.state === 'absent' ? 'ENOENT' : read.kind === 'oversized' ? 'EFBIG' : 'EINVAL';
  const why = read.state === 'absent' ? 'no such file' : read.reason;
  throw Object.assign(new Error(`${code}: cannot read finding ${file}: ${why}`), { code, path: file });
}

export class StagedFindings {
  readonly leaseRoot: string;
  readonly dir: string;
  /** `<leaseRoot>/traces`. */
  readonly tracesDir: string;
  readonly #client: StagingClient;
  readonly #readFile: (file: string) => Promise<Uint8Array>;

  private constructor(leaseRoot: string, client: StagingClient, readFile: (file: string) => Promise<Uint8Array>) {
    this.leaseRoot = path.resolve(leaseRoot);
    this.dir = path.join(this.leaseRoot, STAGED_DIR);
    this.tracesDir = path.join(this.leaseRoot, TRACES_DIR);
    this.#client = client;
    this.#readFile = readFile;
  }

  /** Makes `<leaseRoot>/staged/` and `<leaseRoot>/traces/` exist durably. `readFile` is injectable for tests. */
  static async open(leaseRoot: string, client: StagingClient, readFile: (file: string) => Promise<Uint8Array> = readFindingFile): Promise<StagedFindings> {
    const staged = new StagedFindings(leaseRoot, client, readFile);
    await client.ensureDir(staged.dir);
    await client.ensureDir(staged.tracesDir);
    return staged;
  }

  /**
   * Stages the findings of work `workId` (file items are read first) and returns the manifest
   * naming them, with their bytes. Contract: when this
   * resolves, every named file is complete and durable under its final name (and its directory
   * entry is durable); when it rejects, no manifest exists, so nothing can point at missing bytes.
   * Repeated (kind, content) pairs are named once. `info.trace` is staged into `traces/` under the
   * same contract, before the findings.
   */
  async stage(workId: string, items: readonly FindingItem[], info: StageInfo): Promise<StagedResult> {
    const manifestItems: { kind: CommitFinding['kind']; sha256: string; size: number }[] = [];
    const findings: CommitFinding[] = [];
    const files = new Map<string, PublishedFile>();
    const seen = new Set<string>();
    for (const item of items) {
      const bytes = item.content instanceof Uint8Array ? item.content : await this.#readFile(item.content.path);
      const digest = sha256Hex(bytes);
      const key = `${item.kind}:${digest}`;
      if (seen.has(key)) continue;
      seen.add(key);
      manifestItems.push({ kind: item.kind, sha256: digest, size: bytes.length });
      findings.push({ kind: item.kind, bytes, sha256: digest });
      if (!files.has(digest)) files.set(digest, { name: stagedName(workId, digest), bytes });
    }
    const trace = info.trace;
    if (trace !== undefined && trace.length > MAX_TRACE_BYTES) {
      throw new StagedFindingTooLargeError(`the trace of work ${workId} has ${trace.length} bytes; at most ${MAX_TRACE_BYTES} are shared`, { name: 'trace', bytes: trace.length, limit: MAX_TRACE_BYTES });
    }
    const traceDigest = trace !== undefined ? sha256Hex(trace) : undefined;
    const manifest = buildCommitManifest(workId, info.status, info.source, manifestItems, trace !== undefined ? { sha256: traceDigest!, size: trace.length } : undefined, info.answers);
    if (trace !== undefined) await this.#client.stageFiles(this.tracesDir, [{ name: stagedName(workId, traceDigest!), bytes: trace }]);
    if (files.size > 0) await this.#client.stageFiles(this.dir, [...files.values()]);
    return { manifest, findings };
  }

  /**
   * Validates a stored manifest for `workId` and reads every staged finding it names, checking size
   * and SHA-256. Throws `ERR_COMMIT_MANIFEST` (bad manifest) or `ERR_STAGED_FINDING` (details
   * `{ workId, sha256, reason: 'missing' | 'unreadable' | 'mismatch' }`).
   */
  async load(workId: string, commit: unknown): Promise<StagedResult> {
    const manifest = parseCommitManifest(commit, workId);
    const cache = new Map<string, Uint8Array>();
    const findings: CommitFinding[] = [];
    for (const item of manifest.items) {
      let bytes = cache.get(item.sha256);
      if (bytes === undefined) {
        bytes = await this.#readVerified(workId, item, 'staged finding');
        cache.set(item.sha256, bytes);
      }
      findings.push({ kind: item.kind, bytes, sha256: item.sha256 });
    }
    return { manifest, findings };
  }

  /**
   * The trace a stored manifest of `workId` names, its size and SHA-256 checked; `undefined` when
   * the manifest names none. Throws `ERR_COMMIT_MANIFEST` (bad manifest) or `ERR_STAGED_FINDING`
   * (details `{ workId, sha256, reason: 'missing' | 'unreadable' | 'mismatch' }`).
   */
  async loadTrace(workId: string, commit: unknown): Promise<Uint8Array | undefined> {
    const { trace } = parseCommitManifest(commit, workId);
    if (trace === undefined) return undefined;
    return this.#readVerified(workId, trace, 'trace');
  }

  async #readVerified(workId: string, item: { readonly path: string; readonly sha256: string; readonly size: number }, what: string): Promise<Uint8Array> {
    const file = path.join(this.leaseRoot, item.path);
    let bytes: Uint8Array;
    try {
      bytes = await this.#readFile(file);
    } catch (error) {
      const reason = errnoCode(error) === 'ENOENT' ? 'missing' : 'unreadable';
      throw new StagedFindingError(`${what} ${item.path} of work ${workId} is ${reason}`, { workId, sha256: item.sha256, reason });
    }
    if (bytes.length !== item.size || sha256Hex(bytes) !== item.sha256) {
      throw new StagedFindingError(`${what} ${item.path} of work ${workId} does not hold the bytes its manifest names`, { workId, sha256: item.sha256, reason: 'mismatch' });
    }
    return bytes;
  }

  /** Unlinks the staged files of a finished result; resolves with how many were removed. */
  async discard(manifest: CommitManifest): Promise<number> {
    const names = [...new Set(manifest.items.map((i) => stagedName(manifest.workId, i.sha256)))];
    return names.length === 0 ? 0 : this.#client.removeFiles(this.dir, names);
  }

  /**
   * Removes staged files whose work is `done` (left by a crash between completion and discard),
   * and trace files of `done` work that its record does not keep (`keptTraces`: work id → the kept
   * file's name, or null for none; a work id absent there keeps all): a trace staged by a run
   * whose `beginCommit` was refused, or one another coordinator's trace of the same work replaced.
   * Files of leased or committing work are kept: a live owner may be staging or committing them.
   */
  async sweep(done: ReadonlySet<string>, keptTraces: ReadonlyMap<string, string | null> = new Map()): Promise<number> {
    const names = await this.#client.listDir(this.dir);
    const garbage = names.filter((name) => {
      const parsed = parseStagedName(name);
      return parsed !== null && done.has(parsed.workId);
    });
    let removed = garbage.length === 0 ? 0 : await this.#client.removeFiles(this.dir, garbage);
    if (keptTraces.size === 0) return removed;
    const traces = await this.#client.listDir(this.tracesDir);
    const orphans = traces.filter((name) => {
      const parsed = parseStagedName(name);
      if (parsed === null || !done.has(parsed.workId) || !keptTraces.has(parsed.workId)) return false;
      return keptTraces.get(parsed.workId) !== name;
    });
    if (orphans.length > 0) removed += await this.#client.removeFiles(this.tracesDir, orphans);
    return removed;
  }

  /**
   * Removes staging temps of writers that are provably gone: this host's dead (or pid-reused)
   * processes at once, another host's or untagged ones after `staleTempAgeMs`. A live stager's
   * temp is never touched. Direct filesystem calls (`fsLayer`), not I/O-thread requests: the temps
   * belong to no batch, and removing garbage needs no barrier.
   */
  async sweepTemps(options: Omit<TempSweepOptions, 'fsLayer'> & { readonly fsLayer?: FsLayer }): Promise<TempSweepReport> {
    const resolved = { ...options, fsLayer: options.fsLayer ?? nodeFsLayer };
    const staged = await sweepTempsIn(this.dir, isStagedTempName, resolved);
    const traces = await sweepTempsIn(this.tracesDir, isStagedTempName, resolved);
    return { swept: staged.swept + traces.swept, kept: staged.kept + traces.kept };
  }
}
