/**
 * A bounded LRU of open lock-file descriptors, one per lock path, kept open between batches so a
 * warm record costs one `lstat` instead of `open` + `fstat` + `close` per lock.
 *
 * Why this keeps the lock protocol intact:
 * - flock belongs to the open file description. A cached fd is handed to at most one holder at a
 *   time (`checkout` marks it busy); a second holder in this process opens its own fd, as before,
 *   so two batches of one table still exclude each other.
 * - A cached fd is idle only after `LOCK_UN`: keeping it open holds no lock. If this process dies,
 *   the kernel closes every fd, cached or not.
 * - Lock files are never deleted by the protocol, but an operator (or a bug elsewhere) may replace
 *   one, or put a directory or symlink at its path. Locking the old inode would then exclude nobody.
 *   So before reuse the path is `lstat`ed: it must still be a regular file with the device and
 *   inode the fd was opened on; anything else closes the cached fd and the caller opens the path
 *   afresh (which refuses a directory or symlink). The window between that check and the flock is
 *   the same one the uncached path has between its open and its flock.
 */
import type { FsLayer, FsStat } from '../../fs/fs-layer.js';

/** Identity of the inode a lock fd was opened on. */
export interface LockFileIdentity {
  readonly dev: number;
  readonly ino: number;
}

interface Entry {
  readonly fd: number;
  readonly identity: LockFileIdentity;
  busy: boolean;
}

function sameInode(stat: FsStat, identity: LockFileIdentity): boolean {
  return stat.isFile && stat.dev === identity.dev && stat.ino === identity.ino;
}

export class LockFdCache {
  /** Map iteration order is insertion order: the first entry is the least recently used. */
  private readonly entries = new Map<string, Entry>();
  private closed = false;

  /** @param capacity most fds kept open (idle or busy); 0 disables caching. */
  constructor(
    private readonly fsLayer: FsLayer,
    readonly capacity: number,
  ) {}

  /** Open fds held by the cache (idle and busy). */
  get size(): number {
    return this.entries.size;
  }

  /**
   * A validated idle fd for `lockPath`, now busy, or undefined (no entry, entry busy, or the path no
   * longer names the cached inode — that entry is then closed and dropped). Never throws.
   */
  async checkout(lockPath: string): Promise<{ readonly fd: number; readonly identity: LockFileIdentity } | undefined> {
    const entry = this.entries.get(lockPath);
    if (!entry || entry.busy) return undefined;
    entry.busy = true;
    let valid = false;
    try {
      valid = sameInode(await this.fsLayer.lstat(lockPath), entry.identity);
    } catch {
      // ENOENT (removed) or anything else: the fresh open reports the real problem.
    }
    if (!valid) {
      this.entries.delete(lockPath);
      await this.fsLayer.close(entry.fd).catch(() => undefined); // an idle lock fd holds no lock: a failed close loses nothing
      return undefined;
    }
    // Most recently used goes last.
    this.entries.delete(lockPath);
    this.entries.set(lockPath, entry);
    return { fd: entry.fd, identity: entry.identity };
  }

  /**
   * Hands back an fd whose lock was released (`LOCK_UN` done, or never taken). The checked-out
   * entry becomes idle; a freshly opened fd is adopted if the path has no entry and the cache is
   * open, and closed otherwise. Idle entries beyond capacity are closed, oldest first.
   */
  async checkin(lockPath: string, fd: number, identity: LockFileIdentity): Promise<void> {
    const entry = this.entries.get(lockPath);
    if (entry && entry.fd === fd) {
      entry.busy = false;
      if (this.closed) {
        this.entries.delete(lockPath);
        await this.fsLayer.close(fd).catch(() => undefined); // an idle lock fd holds no lock: a failed close loses nothing
        return;
      }
    } else if (!entry && !this.closed && this.capacity > 0) {
      this.entries.set(lockPath, { fd, identity, busy: false });
    } else {
      await this.fsLayer.close(fd).catch(() => undefined); // an idle lock fd holds no lock: a failed close loses nothing
      return;
    }
    await this.evictOverCapacity();
  }

  /** Drops and closes an fd that must not be reused (its unlock failed, or it is suspect). */
  async discard(lockPath: string, fd: number): Promise<void> {
    const entry = this.entries.get(lockPath);
    if (entry && entry.fd === fd) this.entries.delete(lockPath);
    await this.fsLayer.close(fd).catch(() => undefined); // an idle lock fd holds no lock: a failed close loses nothing
  }

  /** Closes every idle fd and stops caching; busy fds are closed when checked in. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    const idle = [...this.entries].filter(([, e]) => !e.busy);
    for (const [lockPath] of idle) this.entries.delete(lockPath);
    await Promise.all(idle.map(([, e]) => this.fsLayer.close(e.fd).catch(() => undefined))); // an idle lock fd holds no lock: a failed close loses nothing
  }

  private async evictOverCapacity(): Promise<void> {
    if (this.entries.size <= this.capacity) return;
    const victims: number[] = [];
    for (const [lockPath, entry] of this.entries) {
      if (this.entries.size <= this.capacity) break;
      if (entry.busy) continue;
      this.entries.delete(lockPath);
      victims.push(entry.fd);
    }
    await Promise.all(victims.map((fd) => this.fsLayer.close(fd).catch(() => undefined))); // an idle lock fd holds no lock: a failed close loses nothing
  }
}
