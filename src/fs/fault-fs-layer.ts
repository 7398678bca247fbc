/**
 * A test `FsLayer`: wraps a real layer, counts every operation and every durability barrier
 * exactly, and fails or pauses any step on demand.
 *
 * Rules match on the operation name and the path (fd-based operations such as `write` and `fsync`
 * are matched on the path the fd was opened with), and fire on the nth matching call. A failing
 * rule rejects with an errno-carrying error *instead of* running the operation (`when: 'before'`,
 * the default) or *after* running it (`when: 'after'`: the effect happened, the caller sees an
 * error — the ambiguous case real storage produces). A hook runs an async callback before the
 * operation, which lets a test hold a process at an exact point of the protocol (handshake).
 */
import { nodeFsLayer, type FsLayer, type FsOperation, type FsStat } from './fs-layer.js';

export type PathMatcher = string | RegExp | ((path: string) => boolean);

export interface FaultRule {
  readonly op: FsOperation | readonly FsOperation[];
  /** Matches the path (or the fd's path); omitted = any path. Strings match as substrings. */
  readonly path?: PathMatcher;
  /** Fire on the nth matching call (1-based); default 1. */
  readonly nth?: number;
  /** How many consecutive matching calls fail from the nth on; default 1, `Infinity` = all. */
  readonly times?: number;
  /** errno name of the injected error; default `EIO`. */
  readonly code?: string;
  /** Fail before running the operation (default) or after running it. */
  readonly when?: 'before' | 'after';
}

export interface HookRule {
  readonly op: FsOperation | readonly FsOperation[];
  readonly path?: PathMatcher;
  readonly nth?: number;
  /** Awaited before the operation runs. */
  readonly run: (call: FsCall) => Promise<void> | void;
}

export interface FsCall {
  readonly op: FsOperation;
  readonly path: string;
}

/** Barrier counts since construction or the last `resetCounts()`. */
export interface BarrierCounts {
  /** `fsync` on a file descriptor (file content barrier). */
  readonly file: number;
  /** `syncfs` calls (one barrier for every file of a filesystem). */
  readonly filesystem: number;
  /** Directory barriers (`syncDirectory`). */
  readonly directory: number;
}

interface ActiveRule {
  readonly rule: FaultRule;
  seen: number;
  fired: number;
}

interface ActiveHook {
  readonly rule: HookRule;
  seen: number;
}

function matches(matcher: PathMatcher | undefined, path: string): boolean {
  if (matcher === undefined) return true;
  if (typeof matcher === 'string') return path.includes(matcher);
  if (matcher instanceof RegExp) return matcher.test(path);
  return matcher(path);
}

function opMatches(op: FsOperation | readonly FsOperation[], actual: FsOperation): boolean {
  return typeof op === 'string' ? op === actual : op.includes(actual);
}

export class FaultInjectingFsLayer implements FsLayer {
  private readonly inner: FsLayer;
  private readonly fdPaths = new Map<number, string>();
  private readonly rules: ActiveRule[] = [];
  private readonly hooks: ActiveHook[] = [];
  private readonly opCounts = new Map<FsOperation, number>();
  /** Directories synced, in completion order (successful barriers only). */
  readonly directoryBarrierPaths: string[] = [];
  /** Every call in order, successful or not (for debugging failing tests). */
  readonly calls: FsCall[] = [];
  private fileBarriers = 0;
  private filesystemBarriers = 0;
  private directoryBarriers = 0;

  constructor(inner: FsLayer = nodeFsLayer) {
    this.inner = inner;
  }

  /** Adds a failure rule; returns a function that removes it. */
  fail(rule: FaultRule): () => void {
    const active: ActiveRule = { rule, seen: 0, fired: 0 };
    this.rules.push(active);
    return () => {
      const index = this.rules.indexOf(active);
      if (index >= 0) this.rules.splice(index, 1);
    };
  }

  /** Adds a hook; returns a function that removes it. */
  hook(rule: HookRule): () => void {
    const active: ActiveHook = { rule, seen: 0 };
    this.hooks.push(active);
    return () => {
      const index = this.hooks.indexOf(active);
      if (index >= 0) this.hooks.splice(index, 1);
    };
  }

  clearRules(): void {
    this.rules.length = 0;
    this.hooks.length = 0;
  }

  barriers(): BarrierCounts {
    return { file: this.fileBarriers, filesystem: this.filesystemBarriers, directory: this.directoryBarriers };
  }

  count(op: FsOperation): number {
    return this.opCounts.get(op) ?? 0;
  }

  resetCounts(): void {
    this.fileBarriers = 0;
    this.filesystemBarriers = 0;
    this.directoryBarriers = 0;
    this.opCounts.clear();
    this.directoryBarrierPaths.length = 0;
    this.calls.length = 0;
  }

  private async run<T>(op: FsOperation, path: string, action: () => Promise<T>): Promise<T> {
    const call: FsCall = { op, path };
    this.calls.push(call);
    this.opCounts.set(op, (this.opCounts.get(op) ?? 0) + 1);
    for (const hook of [...this.hooks]) {
      if (!opMatches(hook.rule.op, op) || !matches(hook.rule.path, path)) continue;
      hook.seen += 1;
      if (hook.seen === (hook.rule.nth ?? 1)) await hook.rule.run(call);
    }
    let failure: ActiveRule | undefined;
    for (const active of this.rules) {
      if (!opMatches(active.rule.op, op) || !matches(active.rule.path, path)) continue;
      active.seen += 1;
      const first = active.rule.nth ?? 1;
      const times = active.rule.times ?? 1;
      if (failure === undefined && active.seen >= first && active.fired < times) {
        active.fired += 1;
        failure = active;
      }
    }
    const injected = (): Error => {
      const code = failure?.rule.code ?? 'EIO';
      return Object.assign(new Error(`${code}: injected ${op} failure at ${path}`), { code, path, injected: true });
    };
    if (failure && (failure.rule.when ?? 'before') === 'before') throw injected();
    const result = await action();
    if (failure) throw injected();
    return result;
  }

  private pathOf(fd: number): string {
    return this.fdPaths.get(fd) ?? `<fd ${fd}>`;
  }

  async open(path: string, flags: number, mode?: number): Promise<number> {
    const fd = await this.run('open', path, () => this.inner.open(path, flags, mode));
    this.fdPaths.set(fd, path);
    return fd;
  }

  async close(fd: number): Promise<void> {
    const path = this.pathOf(fd);
    try {
      await this.run('close', path, () => this.inner.close(fd));
    } finally {
      this.fdPaths.delete(fd);
    }
  }

  readAll(fd: number, maxBytes?: number): Promise<Buffer> {
    return this.run('read', this.pathOf(fd), () => this.inner.readAll(fd, maxBytes));
  }

  readAt(fd: number, buffer: Buffer, position: number): Promise<number> {
    return this.run('read', this.pathOf(fd), () => this.inner.readAt(fd, buffer, position));
  }

  writeAll(fd: number, data: Uint8Array): Promise<void> {
    return this.run('write', this.pathOf(fd), () => this.inner.writeAll(fd, data));
  }

  async fsync(fd: number): Promise<void> {
    await this.run('fsync', this.pathOf(fd), () => this.inner.fsync(fd));
    this.fileBarriers += 1;
  }

  async syncfs(fd: number): Promise<void> {
    await this.run('syncfs', this.pathOf(fd), () => this.inner.syncfs(fd));
    this.filesystemBarriers += 1;
  }

  fstat(fd: number): Promise<FsStat> {
    return this.run('fstat', this.pathOf(fd), () => this.inner.fstat(fd));
  }

  lstat(path: string): Promise<FsStat> {
    return this.run('lstat', path, () => this.inner.lstat(path));
  }

  rename(from: string, to: string): Promise<void> {
    return this.run('rename', to, () => this.inner.rename(from, to));
  }

  unlink(path: string): Promise<void> {
    return this.run('unlink', path, () => this.inner.unlink(path));
  }

  mkdir(path: string, mode?: number): Promise<void> {
    return this.run('mkdir', path, () => this.inner.mkdir(path, mode));
  }

  readdir(path: string): Promise<string[]> {
    return this.run('readdir', path, () => this.inner.readdir(path));
  }

  utimes(path: string, atimeMs: number, mtimeMs: number): Promise<void> {
    return this.run('utimes', path, () => this.inner.utimes(path, atimeMs, mtimeMs));
  }

  async syncDirectory(path: string): Promise<void> {
    await this.run('syncDirectory', path, () => this.inner.syncDirectory(path));
    this.directoryBarriers += 1;
    this.directoryBarrierPaths.push(path);
  }
}
