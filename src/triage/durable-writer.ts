/**
 * The one durable operation queue publication needs: make a batch of files appear in a directory
 * under their final names, each complete and durable before its name exists, and every name
 * durable before the call resolves. AFL++ reads a peer's `id:` entries as soon as it sees them, so
 * a name must never point at a partial file, not even after a crash.
 *
 * The I/O thread implements it (`IoDurableWriter`, src/io/io-adapters.ts), since it owns every
 * durable mutation of the process.
 */

export interface DurableFile {
  /** Final name inside the directory (must not start with `.`). */
  readonly name: string;
  readonly bytes: Uint8Array;
}

export interface DurableWriter {
  /** Creates `dir` (and parents) durably if missing. */
  ensureDir(dir: string): Promise<void>;
  /** Names currently in `dir`. */
  list(dir: string): Promise<string[]>;
  /**
   * Publishes `files` into `dir` in order. Contract: every file's content is durable before its
   * final name appears; the names appear in array order; the directory entry is durable before
   * the promise resolves. On failure nothing half-written carries a final name (staging files
   * are hidden and removed best-effort).
   */
  publish(dir: string, files: readonly DurableFile[]): Promise<void>;
}
