/**
 * Which store `--lease-store auto` gives a lease directory that has none yet (docs/leases.md
 * "Lease stores"): SQLite on a local filesystem, the file store on a network or FUSE filesystem,
 * where SQLite's WAL index cannot be shared (filesystem-kind.ts).
 */
import { detectFilesystemKind, type FilesystemKind, type StatFilesystem } from './filesystem-kind.js';
import type { LeaseStoreKind } from './backend-contract.js';
import { loadSqlite } from './sqlite/sqlite-database.js';

/** The store `auto` gives a new lease directory, and why (reported by the filesystem probe). */
interface DefaultStoreChoice {
  readonly store: LeaseStoreKind;
  readonly filesystem: FilesystemKind;
  readonly reason: string;
}

/**
 * `auto` for a new lease directory: SQLite on a local filesystem (when better-sqlite3 loads), the
 * file store on a network or FUSE filesystem (filesystem-kind.ts says why).
 */
export async function defaultStoreFor(root: string, statFilesystem?: StatFilesystem): Promise<DefaultStoreChoice> {
  const filesystem = await detectFilesystemKind(root, statFilesystem);
  if (filesystem.network) return { store: 'files', filesystem, reason: `${filesystem.reason}; auto picks the file store` };
  if (!loadSqlite()) return { store: 'files', filesystem, reason: `${filesystem.reason}, but better-sqlite3 is not loadable; auto picks the file store` };
  return { store: 'sqlite', filesystem, reason: `${filesystem.reason}; auto picks the SQLite store` };
}

