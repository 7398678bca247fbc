/**
 * The file store (`RecordBackend`): one canonical-JSON file per record in a sharded directory,
 * guarded by `flock` on stable lock files (docs/lease-format.md). Batches are `DurabilityBatch`es;
 * scans list the shard directories. It is the store that works across hosts on a shared
 * filesystem whose `flock` excludes across hosts.
 */
import { nodeFsLayer, type FsLayer } from '../../fs/fs-layer.js';
import { DurabilityBatch, type DurabilityContext } from './durability-batch.js';
import { probeFilesystem } from './fs-probe.js';
import { LeaseLayout } from '../table-layout.js';
import type { RecordKind } from '../lease-record.js';
import { scanRecords } from './record-scan.js';
import type { LeaseTableOptions } from '../lease-table-options.js';
import type { LeaseTableDeps } from '../open-backend.js';
import type { RecordBackend, RecordFiles, ScanEntry, StoreBatch } from '../backend-contract.js';
import { createRecordLocker, type RecordLocker } from './record-lock.js';
import { RecordReadCache } from '../record-read-cache.js';
import { checkDirectory, ensureDirectoryDurable } from './record-files.js';
import { ensureTableMeta } from '../table-meta.js';

/** Roots already qualified by this process (the probe costs a child process). */
const probedRoots = new Set<string>();

/** Picks the locker, creates the root durably, qualifies its filesystem and checks its metadata. */
export async function openFileRecordBackend(root: string, options: LeaseTableOptions, deps: LeaseTableDeps, kind: RecordKind): Promise<FileRecordBackend> {
  const fsLayer = deps.fsLayer ?? nodeFsLayer;
  const locker: RecordLocker = createRecordLocker(options.coordination, {
    fsLayer,
    lockAcquireTimeoutMs: options.lockAcquireTimeoutMs,
    lockAgeHintMs: options.lockAgeHintMs,
    monotonicNowMs: deps.monotonicNowMs,
    native: deps.native,
    lockFdCacheSize: options.lockFdCacheSize,
  });
  const layout = new LeaseLayout(root, options.shardCount);
  await ensureDirectoryDurable(fsLayer, layout.root);
  if (options.coordination === 'multi' && options.verifyFilesystem && !probedRoots.has(layout.root)) {
    // Refuses to open (FsProbeError naming the failed step) on a filesystem that cannot keep
    // the lease protocol's promises, e.g. flock that does not exclude another process.
    await (deps.probe ?? ((dir: string) => probeFilesystem(dir, { native: deps.native })))(layout.root);
    if (!deps.probe) probedRoots.add(layout.root);
  }
  await ensureTableMeta(fsLayer, layout, kind, 'files', locker);
  const known = new Set<string>([layout.root]);
  return new FileRecordBackend({
    fsLayer,
    locker,
    layout,
    kind,
    fileBarrier: options.fileBarrier,
    directoryBarrier: options.directoryBarrier,
    readCache: new RecordReadCache(kind),
    async ensureDirectory(dir: string): Promise<void> {
      // A known directory is re-checked (one lstat) on every batch: a shard swapped for a symlink
      // after first use must be refused as a fresh table would refuse it, never written through.
      if (known.has(dir)) return checkDirectory(fsLayer, dir);
      await ensureDirectoryDurable(fsLayer, dir);
      known.add(dir);
    },
  });
}

class FileRecordBackend implements RecordBackend {
  readonly store = 'files';

  constructor(readonly ctx: DurabilityContext) {}

  get kind(): RecordKind {
    return this.ctx.kind;
  }

  get root(): string {
    return this.ctx.layout.root;
  }

  get layout(): LeaseLayout {
    return this.ctx.layout;
  }

  get locker(): RecordLocker {
    return this.ctx.locker;
  }

  get fsLayer(): FsLayer {
    return this.ctx.fsLayer;
  }

  begin(): StoreBatch {
    return new DurabilityBatch(this.ctx);
  }

  get recordFiles(): RecordFiles {
    const { layout, locker } = this.ctx;
    return {
      shardCount: layout.shardCount,
      lockerKind: locker.kind,
      recordPath: (id) => layout.recordPath(id),
      lockPath: (id) => layout.lockPath(id),
      dirOf: (id) => layout.dirOf(id),
    };
  }

  scan(): Promise<ScanEntry[]> {
    return scanRecords(this.ctx.fsLayer, this.ctx.layout, this.ctx.kind);
  }

  close(): Promise<void> {
    return this.ctx.locker.close();
  }
}
