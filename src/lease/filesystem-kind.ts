/**
 * What kind of filesystem a lease directory lives on, from `statfs(2)`'s `f_type` magic number:
 * the one fact that decides whether the SQLite store may be used there (docs/leases.md "Lease
 * stores", docs/fs-probe.md "Filesystem kind").
 *
 * SQLite's WAL journal keeps its index in a shared-memory file (`-shm`) that every connection maps
 * and locks with POSIX byte-range locks. Both only work between processes of one kernel: on a
 * network filesystem two hosts map two different copies of the index, and byte-range locks are
 * emulated (or silently local), so two writers can commit over each other. A network or
 * cluster filesystem — or one whose locking and mmap semantics are unknown (FUSE) — therefore
 * gets the file store, whose `flock` protocol the filesystem probe qualifies step by step.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';

/** `f_type` magic numbers of filesystems SQLite's WAL must not be used on, with their names. */
export const NETWORK_FILESYSTEMS: ReadonlyMap<number, string> = new Map([
  [0x6969, 'nfs'],
  [0x517b, 'smb'],
  [0xff534d42, 'cifs'],
  [0xfe534d42, 'smb2'],
  [0x5346414f, 'afs'],
  [0x6b414653, 'kafs'],
  [0x00c36400, 'ceph'],
  [0x0bd00bd0, 'lustre'],
  [0x47504653, 'gpfs'],
  [0x19830326, 'beegfs'],
  [0x20030528, 'orangefs'],
  [0x01161970, 'gfs2'],
  [0x7461636f, 'ocfs2'],
  [0x73757245, 'coda'],
  [0x564c, 'ncp'],
  [0x01021997, '9p'],
  [0x786f4256, 'vboxsf'],
  // Every FUSE filesystem shares one magic number: GlusterFS, sshfs, s3fs, ceph-fuse, virtiofs,
  // fuse-overlayfs … Most are remote and none promises SQLite's shared-memory semantics.
  [0x65735546, 'fuse'],
]);

/** A few local ones, named in reports only (any type not in `NETWORK_FILESYSTEMS` is local). */
const LOCAL_NAMES: ReadonlyMap<number, string> = new Map([
  [0xef53, 'ext4'],
  [0x58465342, 'xfs'],
  [0x9123683e, 'btrfs'],
  [0x01021994, 'tmpfs'],
  [0x794c7630, 'overlayfs'],
  [0x2fc12fc1, 'zfs'],
  [0xf2f52010, 'f2fs'],
]);

export interface FilesystemKind {
  /** The directory examined: the lease directory, or its nearest existing ancestor. */
  readonly dir: string;
  /** `statfs` `f_type`. */
  readonly type: number;
  /** A name for reports (`ext4`, `nfs`, `0x1234abcd` when unknown). */
  readonly name: string;
  /** True for a filesystem in `NETWORK_FILESYSTEMS`: the SQLite store is refused there. */
  readonly network: boolean;
  /** Why the SQLite store may or may not be used here, one sentence. */
  readonly reason: string;
}

/** `statfs` of one existing path (injectable: tests simulate an NFS mount). */
export type StatFilesystem = (dir: string) => Promise<{ readonly type: number }>;

const nodeStatFilesystem: StatFilesystem = (dir) => fsp.statfs(dir);

/**
 * Classifies the filesystem that holds (or will hold) `dir`. A directory that does not exist yet
 * is judged by its nearest existing ancestor: that is where it will be created.
 */
export async function detectFilesystemKind(dir: string, statfs: StatFilesystem = nodeStatFilesystem): Promise<FilesystemKind> {
  let current = path.resolve(dir);
  for (;;) {
    try {
      const { type } = await statfs(current);
      return classify(current, type);
    } catch (error) {
      const parent = path.dirname(current);
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || parent === current) throw error;
      current = parent;
    }
  }
}

export function classify(dir: string, type: number): FilesystemKind {
  const networkName = NETWORK_FILESYSTEMS.get(type);
  if (networkName !== undefined) {
    return {
      dir,
      type,
      name: networkName,
      network: true,
      reason: `${dir} is on ${networkName} (f_type 0x${type.toString(16)}), a network or FUSE filesystem: SQLite's WAL index is shared memory that processes on different hosts (or behind FUSE) do not share, so only the file store may be used`,
    };
  }
  const name = LOCAL_NAMES.get(type) ?? `0x${type.toString(16)}`;
  return { dir, type, name, network: false, reason: `${dir} is on a local filesystem (${name}): the SQLite store can be used` };
}
