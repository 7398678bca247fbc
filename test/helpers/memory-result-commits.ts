/**
 * An in-memory `ResultCommits` with the behaviour of the production one
 * (`src/coordinator/adapters/io-result-commits.ts` over `src/commit/`), so lifecycle tests run the
 * path production takes (docs/campaign.md "Commit recovery"):
 *
 * - `stage` reads file items, names each distinct (kind, content) once, keeps the copies under
 *   `<workId>.<sha256>` and builds the manifest `beginCommit` stores;
 * - `publish` runs under the work record's "lock" (`CommitRecordTable.publishUnderLock`): only a
 *   committing record with the caller's token (and, for a replay, idle for `minIdleMs`) publishes
 *   its findings into this coordinator's queue — de-duplicated by content per directory, as the
 *   queue publisher does — and becomes `done` in the same step; `already` / `stale` / `live` else;
 * - `load` validates the stored manifest and verifies every staged copy (`ERR_COMMIT_MANIFEST`,
 *   `ERR_STAGED_FINDING` with reason `missing` / `mismatch`), `discard` and `sweep` remove copies;
 * - a trace run's trace is kept apart (`traces`), never discarded or swept, and `loadTrace`
 *   verifies it like a staged copy.
 *
 * Several instances may share one table and one staging store (`peer()`): each is one
 * coordinator with its own queue, as coordinators sharing a lease directory are.
 */
import { createHash } from 'node:crypto';
import { buildCommitManifest, parseCommitManifest, parseStagedName, stagedName, type CommitManifest } from '../../src/commit/commit-manifest.js';
import type { StageInfo } from '../../src/commit/staged-findings.js';
import type { CommitFinding, CommitOutcome, CommitPublication, CommitScan, CommittingWork, FindingItem, PublishedEntry, ResultCommits, StagedResult } from '../../src/coordinator/ports.js';
import { StagedFindingError } from '../../src/errors.js';
import type { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';

/** A work record as the commit path reads it. */
export interface CommitRecordView {
  readonly workId: string;
  readonly status: 'leased' | 'committing' | 'done';
  readonly token: string;
  readonly owner: string;
  readonly updatedMs: number;
  readonly completedMs?: number;
  readonly payload: Readonly<Record<string, unknown>>;
  readonly commit?: unknown;
}

/** The work table as `ResultCommits` needs it: one fenced step, and a lock-free read. */
export interface CommitRecordTable {
  /**
   * Under the record's lock: a committing record with `token` and a manifest, idle for at least
   * `minIdleMs`, runs `publish` and becomes done → `completed`; done with `token` → `already`;
   * renewed too recently → `live` (nothing runs); else `stale`. A throwing `publish` leaves the
   * record committing and propagates.
   */
  publishUnderLock(workId: string, token: string, nowMs: number, minIdleMs: number, publish: () => Promise<void>): Promise<Exclude<CommitOutcome, 'corrupt'>>;
  readRecords(): Promise<readonly CommitRecordView[]>;
}

/** `CommitRecordTable` over a real `FencedWorkLeaseTable` (its `replayCommitOnce` is the lock). */
export function leaseTableRecords(table: FencedWorkLeaseTable): CommitRecordTable {
  return {
    async publishUnderLock(workId, token, nowMs, minIdleMs, publish) {
      const result = await table.replayCommitOnce(workId, token, publish, { nowMs, minIdleMs });
      if (result === 'corrupt') throw new Error(`work record ${workId} is corrupt`);
      return result;
    },
    async readRecords() {
      return (await table.snapshotRecords()).map(({ id, record }) => ({
        workId: id,
        status: record.status as CommitRecordView['status'],
        token: record.token,
        owner: record.owner,
        updatedMs: record.updatedMs,
        ...(record.completedMs !== undefined ? { completedMs: record.completedMs } : {}),
        payload: record.payload,
        commit: record.commit,
      }));
    },
  };
}

const sha256Hex = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

export interface MemoryResultCommitsOptions {
  /** Reads a file item (a crashing or timed-out parent input). Default: the path's own text. */
  readonly readFile?: (path: string) => Uint8Array;
  /** Where the calls `stage n`, `publish n` (findings) and `discard` are logged. Default: `calls`. */
  readonly log?: string[];
}

export class MemoryResultCommits implements ResultCommits {
  /** Entries published into this coordinator's queue, in order. */
  readonly entries: PublishedEntry[] = [];
  readonly calls: string[];
  /** Staged copies by `<workId>.<sha256>`, shared with every `peer()`. */
  readonly staged: Map<string, Uint8Array>;
  /** Shared traces by `<workId>.<sha256>`, shared with every `peer()`. */
  readonly traces: Map<string, Uint8Array>;
  /** Make the next `stage` calls throw (no manifest, nothing staged). */
  stageError = false;
  /** Make the next `publish` calls throw inside the lock (the record stays committing). */
  publishError = false;
  /** Make the next `scan` calls throw, as an unreadable table does. */
  scanError = false;
  /** Awaited inside the lock, just before the findings are published (to observe or hold it). */
  beforePublish: (findings: readonly CommitFinding[]) => Promise<void> | void = () => {};

  readonly #table: CommitRecordTable;
  readonly #readFile: (path: string) => Uint8Array;
  readonly #ids = { queue: 0, crashes: 0, hangs: 0 };
  /** Content already in each directory (the queue publisher de-duplicates by digest). */
  readonly #present = { queue: new Set<string>(), crashes: new Set<string>(), hangs: new Set<string>() };

  constructor(table: CommitRecordTable, options: MemoryResultCommitsOptions = {}, staged = new Map<string, Uint8Array>(), traces = new Map<string, Uint8Array>()) {
    this.#table = table;
    this.#readFile = options.readFile ?? ((path) => new TextEncoder().encode(path));
    this.calls = options.log ?? [];
    this.staged = staged;
    this.traces = traces;
  }

  /** Another coordinator over the same table and staging store, with its own queue. */
  peer(options: MemoryResultCommitsOptions = {}): MemoryResultCommits {
    return new MemoryResultCommits(this.#table, { readFile: this.#readFile, ...options }, this.staged, this.traces);
  }

  async stage(workId: string, items: readonly FindingItem[], info: StageInfo): Promise<StagedResult> {
    this.calls.push(`stage ${items.length}`);
    if (this.stageError) throw Object.assign(new Error('injected staging failure'), { code: 'ERR_PUBLISH' });
    const findings: CommitFinding[] = [];
    const seen = new Set<string>();
    for (const item of items) {
      const bytes = item.content instanceof Uint8Array ? item.content : this.#readFile(item.content.path);
      const digest = sha256Hex(bytes);
      if (seen.has(`${item.kind}:${digest}`)) continue;
      seen.add(`${item.kind}:${digest}`);
      findings.push({ kind: item.kind, bytes, sha256: digest });
    }
    for (const f of findings) this.staged.set(stagedName(workId, f.sha256), f.bytes);
    const trace = info.trace !== undefined ? { sha256: sha256Hex(info.trace), size: info.trace.length } : undefined;
    if (trace !== undefined) this.traces.set(stagedName(workId, trace.sha256), info.trace!);
    const manifest = buildCommitManifest(workId, info.status, info.source, findings.map((f) => ({ kind: f.kind, sha256: f.sha256, size: f.bytes.length })), trace, info.answers);
    return { manifest, findings };
  }

  async publish(workId: string, token: string, manifest: CommitManifest, findings: readonly CommitFinding[], now: number, minIdleMs = 0): Promise<CommitPublication> {
    this.calls.push(`publish ${findings.length}`);
    let entries: PublishedEntry[] = [];
    const outcome = await this.#table.publishUnderLock(workId, token, now, minIdleMs, async () => {
      await this.beforePublish(findings);
      if (this.publishError) throw Object.assign(new Error('injected publication failure'), { code: 'ERR_PUBLISH' });
      entries = this.#publishNew(findings, manifest.source);
    });
    return { outcome, entries: outcome === 'completed' ? entries : [] };
  }

  #publishNew(findings: readonly CommitFinding[], source: string): PublishedEntry[] {
    const published: PublishedEntry[] = [];
    for (const { kind, sha256 } of findings) {
      if (this.#present[kind].has(sha256)) continue;
      this.#present[kind].add(sha256);
      const id = this.#ids[kind]++;
      published.push({ kind, id, path: `${kind}/id:${String(id).padStart(6, '0')},src:${source}`, sha256 });
    }
    this.entries.push(...published);
    return published;
  }

  async scan(): Promise<CommitScan> {
    if (this.scanError) throw Object.assign(new Error('injected unreadable table'), { code: 'ERR_LEASE_CORRUPT' });
    const committing: CommittingWork[] = [];
    const done = new Map<string, number>();
    for (const r of await this.#table.readRecords()) {
      if (r.status === 'done') done.set(r.workId, r.completedMs ?? r.updatedMs);
      else if (r.status === 'committing') committing.push({ workId: r.workId, token: r.token, owner: r.owner, updatedMs: r.updatedMs, payload: r.payload, commit: r.commit });
    }
    return { committing, done };
  }

  async load(workId: string, commit: unknown): Promise<StagedResult> {
    const manifest = parseCommitManifest(commit, workId);
    const findings: CommitFinding[] = [];
    for (const item of manifest.items) {
      const bytes = this.staged.get(stagedName(workId, item.sha256));
      if (bytes === undefined) throw new StagedFindingError(`staged finding ${item.path} is missing`, { workId, sha256: item.sha256, reason: 'missing' });
      if (bytes.length !== item.size || sha256Hex(bytes) !== item.sha256) {
        throw new StagedFindingError(`staged finding ${item.path} does not hold its bytes`, { workId, sha256: item.sha256, reason: 'mismatch' });
      }
      findings.push({ kind: item.kind, bytes, sha256: item.sha256 });
    }
    return { manifest, findings };
  }

  async loadTrace(workId: string, commit: unknown): Promise<Uint8Array | undefined> {
    const { trace } = parseCommitManifest(commit, workId);
    if (trace === undefined) return undefined;
    const bytes = this.traces.get(stagedName(workId, trace.sha256));
    if (bytes === undefined) throw new StagedFindingError(`trace ${trace.path} is missing`, { workId, sha256: trace.sha256, reason: 'missing' });
    if (bytes.length !== trace.size || sha256Hex(bytes) !== trace.sha256) throw new StagedFindingError(`trace ${trace.path} does not hold its bytes`, { workId, sha256: trace.sha256, reason: 'mismatch' });
    return bytes;
  }

  async discard(manifest: CommitManifest): Promise<void> {
    this.calls.push('discard');
    for (const item of manifest.items) this.staged.delete(stagedName(manifest.workId, item.sha256));
  }

  async sweep(done: ReadonlySet<string>): Promise<number> {
    let swept = 0;
    for (const name of [...this.staged.keys()]) {
      const parsed = parseStagedName(name);
      if (parsed !== null && done.has(parsed.workId)) {
        this.staged.delete(name);
        swept++;
      }
    }
    return swept;
  }
}
