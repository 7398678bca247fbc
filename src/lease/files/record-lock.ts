/**
 * Per-record update locks: they protect one read → validate → write critical section, nothing more.
 * Ownership over time is the lease record's job (TTL + token); a lock is never taken over because
 * it is old, and its file is never deleted.
 *
 * Why never delete: if a releaser unlinked the lock file, a newcomer could create and lock a fresh
 * inode while a slow holder still held the old, unlinked one — two holders. A stable regular file
 * per record, opened `O_NOFOLLOW` (a symlink planted at the path cannot redirect the lock) and
 * locked with `flock(LOCK_EX|LOCK_NB)`, gives one holder per inode; the kernel frees it when the
 * holder closes the fd or dies, SIGKILL included.
 *
 * Two lockers share the same path checks and retry loop:
 * - `flock` (native addon): excludes other processes and other open file descriptions in this
 *   process (two table instances in one process exclude each other, as two coordinators would).
 * - `in-process`: a per-process set of held paths. Correct only while this process is the single
 *   writer of the lease directory (single-coordinator mode without the addon).
 */
import fs from 'node:fs';
import { leaseIoError } from '../lease-io-error.js';
import { performance } from 'node:perf_hooks';
import { LockPathError, LockTimeoutError, NativeUnavailableError } from '../../errors.js';
import { errnoCode, type FsLayer } from '../../fs/fs-layer.js';
import { loadNative, nativeLoadError, type NativeBindings } from '../../native/bindings.js';
import { LockFdCache, type LockFileIdentity } from './lock-fd-cache.js';

import type { LockerKind } from '../backend-contract.js';

/** How records are locked: across processes (`flock`) or only within this process. */
export type { LockerKind };

/** `multi`: several coordinators share the directory (needs flock). `single`: this process only. */
export type CoordinationMode = 'single' | 'multi';

export interface LockHandle {
  readonly path: string;
  /** Releases the lock and closes its fd. Never throws; idempotent. */
  release(): Promise<void>;
}

export interface RecordLocker {
  readonly kind: LockerKind;
  /**
   * Takes the exclusive lock on `lockPath` (created if missing, never deleted), retrying until the
   * monotonic deadline. Rejects with `LockTimeoutError` on contention past the deadline,
   * `LockPathError` when the path is a directory, symlink or other non-regular file, `LeaseIoError`
   * for any other failure (including flock itself failing: there is no lock-less fallback).
   */
  acquire(lockPath: string, description: string): Promise<LockHandle>;
  /**
   * Same as calling `acquire` for each path in turn, in the given order (callers pass ascending
   * record order), except that the lock files are opened in parallel first: opening a lock file
   * takes no lock, so the global lock order — and with it deadlock freedom — is unchanged, while
   * a batch of N records waits for one round of opens instead of N. On any failure every lock
   * taken is released, every opened fd closed, and the error of the first failing path rejects.
   */
  acquireAll(lockPaths: readonly string[], descriptionOf: (lockPath: string) => string): Promise<LockHandle[]>;
  /**
   * Closes the lock fds kept open between batches (see `lockFdCacheSize`) and stops keeping them;
   * locks still held stay valid and their fds are closed on release. Idempotent.
   */
  close(): Promise<void>;
}

interface RecordLockerOptions {
  readonly fsLayer: FsLayer;
  /** Give up after this long under contention. */
  readonly lockAcquireTimeoutMs: number;
  /** Shown in the timeout message only: a lock is never stolen by age. */
  readonly lockAgeHintMs: number;
  /** Monotonic clock in ms (default `performance.now`). */
  readonly monotonicNowMs?: () => number;
  /** Injected addon (tests); default `loadNative()`. */
  readonly native?: NativeBindings | null;
  /**
   * Lock-file fds kept open (unlocked) after release for reuse, least recently used closed first
   * (lock-fd-cache.ts). Default 0: every release closes its fd.
   */
  readonly lockFdCacheSize?: number;
}

/** A lock file opened (or taken from the cache) for this acquisition. */
interface OpenedLock {
  readonly fd: number;
  readonly identity: LockFileIdentity;
}

/** Longest sleep between two attempts under contention. */
const RETRY_DELAY_MS = 2;

// O_NONBLOCK: whatever sits at the path, open(2) returns at once; fstat then refuses non-files.
const LOCK_FLAGS = fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;
const LOCK_FILE_MODE = 0o600;

/** Paths held through the in-process locker, shared by every table in this process. */
const inProcessHeld = new Set<string>();

interface LockPrimitive {
  readonly kind: LockerKind;
  tryLock(fd: number, path: string): boolean;
  unlock(fd: number, path: string): void;
}

function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

class BoundedRecordLocker implements RecordLocker {
  readonly kind: LockerKind;
  private readonly monotonicNowMs: () => number;
  private readonly fdCache: LockFdCache;

  constructor(
    private readonly options: RecordLockerOptions,
    private readonly primitive: LockPrimitive,
  ) {
    this.kind = primitive.kind;
    this.monotonicNowMs = options.monotonicNowMs ?? (() => performance.now());
    this.fdCache = new LockFdCache(options.fsLayer, options.lockFdCacheSize ?? 0);
  }

  close(): Promise<void> {
    return this.fdCache.close();
  }

  async acquire(lockPath: string, description: string): Promise<LockHandle> {
    const opened = await this.openLockFile(lockPath);
    return this.lockOpened(opened, lockPath, description);
  }

  async acquireAll(lockPaths: readonly string[], descriptionOf: (lockPath: string) => string): Promise<LockHandle[]> {
    const opened = await Promise.allSettled(lockPaths.map((lockPath) => this.openLockFile(lockPath)));
    const failed = opened.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined;
    if (failed) {
      await Promise.all(opened.map((r, i) => (r.status === 'fulfilled' ? this.fdCache.checkin(lockPaths[i]!, r.value.fd, r.value.identity) : undefined)));
      throw failed.reason;
    }
    const fds = opened.map((r) => (r as PromiseFulfilledResult<OpenedLock>).value);
    const handles: LockHandle[] = [];
    let next = 0;
    try {
      for (; next < fds.length; next += 1) handles.push(await this.lockOpened(fds[next]!, lockPaths[next]!, descriptionOf(lockPaths[next]!)));
      return handles;
    } catch (error) {
      // lockOpened closed its own fd; close the ones not tried yet, release the ones held.
      await Promise.all(fds.slice(next + 1).map((o, i) => this.fdCache.checkin(lockPaths[next + 1 + i]!, o.fd, o.identity)));
      await Promise.all(handles.map((h) => h.release()));
      throw error;
    }
  }

  /**
   * A cached fd still naming `lockPath`'s inode, or the lock file opened (created if missing) and
   * checked to be a regular file.
   */
  private async openLockFile(lockPath: string): Promise<OpenedLock> {
    const cached = await this.fdCache.checkout(lockPath);
    if (cached) return cached;
    const { fsLayer } = this.options;
    let fd: number;
    try {
      fd = await fsLayer.open(lockPath, LOCK_FLAGS, LOCK_FILE_MODE);
    } catch (error) {
      const code = errnoCode(error);
      // ENXIO: a unix socket at the path (open(2) of a socket fails so).
      if (code === 'ELOOP' || code === 'EISDIR' || code === 'ENOTDIR' || code === 'ENXIO') {
        throw new LockPathError(`lock path ${lockPath} is not a regular file (${code}); refusing to lock through it`, { path: lockPath, errno: code });
      }
      throw leaseIoError(`cannot open lock file ${lockPath}: ${(error as Error).message}`, { path: lockPath, errno: code, step: 'lock-open' }, error);
    }
    try {
      const stat = await fsLayer.fstat(fd);
      if (!stat.isFile) {
        throw new LockPathError(`lock path ${lockPath} is not a regular file; refusing to lock through it`, { path: lockPath });
      }
      return { fd, identity: { dev: stat.dev, ino: stat.ino } };
    } catch (error) {
      await fsLayer.close(fd).catch(() => undefined); // the fd never held the lock; the open's error is rethrown
      throw error;
    }
  }

  /** Locks an opened lock file, retrying until the deadline; gives the fd back on failure. */
  private async lockOpened(opened: OpenedLock, lockPath: string, description: string): Promise<LockHandle> {
    const { fd } = opened;
    const deadlineMs = this.monotonicNowMs() + this.options.lockAcquireTimeoutMs;
    try {
      for (;;) {
        let acquired: boolean;
        try {
          acquired = this.primitive.tryLock(fd, lockPath);
        } catch (error) {
          throw leaseIoError(`locking ${lockPath} failed: ${(error as Error).message}`, { path: lockPath, errno: errnoCode(error), step: 'lock' }, error);
        }
        if (acquired) return this.handle(opened, lockPath);
        const remainingMs = deadlineMs - this.monotonicNowMs();
        if (remainingMs <= 0) {
          throw new LockTimeoutError(
            `timed out after ${this.options.lockAcquireTimeoutMs}ms acquiring ${description}; configured age hint=${this.options.lockAgeHintMs}ms; kernel advisory locks are never time-stolen`,
            { path: lockPath, lockAcquireTimeoutMs: this.options.lockAcquireTimeoutMs, lockAgeHintMs: this.options.lockAgeHintMs },
          );
        }
        await sleepMs(Math.min(RETRY_DELAY_MS, remainingMs));
      }
    } catch (error) {
      // Not locked by us (or the flock call itself failed): do not reuse a suspect fd.
      await this.fdCache.discard(lockPath, fd);
      throw error;
    }
  }

  private handle(opened: OpenedLock, path: string): LockHandle {
    let released = false;
    return {
      path,
      release: async () => {
        if (released) return;
        released = true;
        try {
          this.primitive.unlock(opened.fd, path);
        } catch {
          // Closing the fd releases the flock anyway; never keep an fd whose unlock failed.
          await this.fdCache.discard(path, opened.fd);
          return;
        }
        await this.fdCache.checkin(path, opened.fd, opened.identity);
      },
    };
  }
}

function flockPrimitive(native: NativeBindings): LockPrimitive {
  return {
    kind: 'flock',
    tryLock: (fd) => native.tryLockExclusive(fd),
    unlock: (fd) => native.unlock(fd),
  };
}

const inProcessPrimitive: LockPrimitive = {
  kind: 'in-process',
  tryLock: (_fd, path) => {
    if (inProcessHeld.has(path)) return false;
    inProcessHeld.add(path);
    return true;
  },
  unlock: (_fd, path) => {
    inProcessHeld.delete(path);
  },
};

/** A flock-based locker; throws `NativeUnavailableError` when the addon is not built. */
export function createFlockLocker(options: RecordLockerOptions): RecordLocker {
  const native = options.native === undefined ? loadNative() : options.native;
  if (!native) {
    const why = nativeLoadError()?.message ?? 'not built';
    throw new NativeUnavailableError(
      `multi-coordinator lease tables need the native flock addon (native-bindings/), which is unavailable: ${why}. Rebuild with \`npm ci\`, or use coordination 'single' when this process is the only writer.`,
      { reason: why },
    );
  }
  return new BoundedRecordLocker(options, flockPrimitive(native));
}

/** A locker valid only while this process is the single writer of the lease directory. */
export function createInProcessLocker(options: RecordLockerOptions): RecordLocker {
  return new BoundedRecordLocker(options, inProcessPrimitive);
}

/**
 * The locker for a coordination mode: `multi` requires flock (else `NativeUnavailableError`);
 * `single` uses flock when the addon is present (cheap, and still safe if a second process shows
 * up by mistake) and the in-process locker otherwise.
 */
export function createRecordLocker(mode: CoordinationMode, options: RecordLockerOptions): RecordLocker {
  if (mode === 'multi') return createFlockLocker(options);
  const native = options.native === undefined ? loadNative() : options.native;
  return native ? new BoundedRecordLocker(options, flockPrimitive(native)) : createInProcessLocker(options);
}
