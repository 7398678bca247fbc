import { describe, expect, it } from 'vitest';
import { classify, detectFilesystemKind, NETWORK_FILESYSTEMS } from '../../src/lease/filesystem-kind.js';

describe('filesystem kind (statfs f_type)', () => {
  it('calls NFS, SMB/CIFS, SMB2, AFS, Ceph, Lustre and FUSE network filesystems, each by name', () => {
    for (const [type, name] of [[0x6969, 'nfs'], [0x517b, 'smb'], [0xff534d42, 'cifs'], [0xfe534d42, 'smb2'], [0x5346414f, 'afs'], [0x00c36400, 'ceph'], [0x0bd00bd0, 'lustre'], [0x65735546, 'fuse']] as const) {
      expect(classify('/x', type)).toMatchObject({ network: true, name, type });
    }
    expect(NETWORK_FILESYSTEMS.size).toBeGreaterThanOrEqual(8);
  });

  it('calls ext4, xfs, btrfs, tmpfs and an unknown type local', () => {
    for (const [type, name] of [[0xef53, 'ext4'], [0x58465342, 'xfs'], [0x9123683e, 'btrfs'], [0x01021994, 'tmpfs'], [0x1234, '0x1234']] as const) {
      expect(classify('/x', type)).toMatchObject({ network: false, name });
    }
  });

  it('judges a directory that does not exist yet by its nearest existing ancestor', async () => {
    const seen: string[] = [];
    const kind = await detectFilesystemKind('/mnt/share/a/b', async (dir) => {
      seen.push(dir);
      if (dir !== '/mnt/share') throw Object.assign(new Error('missing'), { code: 'ENOENT' });
      return { type: 0x6969 };
    });
    expect(seen).toEqual(['/mnt/share/a/b', '/mnt/share/a', '/mnt/share']);
    expect(kind).toMatchObject({ dir: '/mnt/share', network: true, name: 'nfs' });
  });

  it('passes on a statfs failure other than a missing directory', async () => {
    await expect(detectFilesystemKind('/x', async () => { throw Object.assign(new Error('io'), { code: 'EIO' }); })).rejects.toMatchObject({ code: 'EIO' });
  });
});
