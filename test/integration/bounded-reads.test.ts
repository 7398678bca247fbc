// Staged findings and the lane state file go through the same bounded read as lease records: a
// FIFO, a device, a directory or an oversized file is refused with the component's own code,
// without being read and without blocking.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildCommitManifest, manifestJson, stagedRelativePath } from '../../src/commit/commit-manifest.js';
import { readFindingFile, StagedFindings } from '../../src/commit/staged-findings.js';
import { readStateFile } from '../../src/scheduler/lane-state-file.js';
import { tempRoot } from '../helpers/lease-fixtures.js';

const WORK = 'a'.repeat(64);
const noClient = { ensureDir: async () => undefined, listDir: async () => [], stageFiles: async () => undefined, removeFiles: async () => 0 };

async function codeOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
    return 'resolved';
  } catch (error) {
    return { code: (error as { code?: string }).code, reason: (error as { details?: { reason?: string } }).details?.reason };
  }
}

describe('bounded reads of staged findings and lane state', () => {
  it('reads a regular finding and one behind a symlink, and refuses a FIFO, a directory and a sparse 3 GB file with errno codes', async () => {
    const root = await tempRoot('symfence-bounded-');
    await writeFile(path.join(root, 'plain'), 'bytes');
    await symlink(path.join(root, 'plain'), path.join(root, 'link'));
    execFileSync('mkfifo', [path.join(root, 'fifo')]);
    await mkdir(path.join(root, 'dir'));
    const fd = fs.openSync(path.join(root, 'sparse'), 'w');
    fs.ftruncateSync(fd, 3 * 1024 ** 3);
    fs.closeSync(fd);
    expect(Buffer.from(await readFindingFile(path.join(root, 'plain'))).toString()).toBe('bytes');
    expect(Buffer.from(await readFindingFile(path.join(root, 'link'))).toString()).toBe('bytes');
    expect(await codeOf(readFindingFile(path.join(root, 'fifo')))).toMatchObject({ code: 'EINVAL' });
    expect(await codeOf(readFindingFile(path.join(root, 'dir')))).toMatchObject({ code: 'EINVAL' });
    expect(await codeOf(readFindingFile(path.join(root, 'sparse')))).toMatchObject({ code: 'EFBIG' });
    expect(await codeOf(readFindingFile(path.join(root, 'missing')))).toMatchObject({ code: 'ENOENT' });
  });

  it('refuses a FIFO planted at a staged finding with ERR_STAGED_FINDING (unreadable), without blocking recovery', async () => {
    const root = await tempRoot('symfence-bounded-');
    const sha256 = createHash('sha256').update('finding').digest('hex');
    const manifest = manifestJson(buildCommitManifest(WORK, 'ok', '1', [{ kind: 'queue', sha256, size: 7 }]));
    await mkdir(path.join(root, 'staged'));
    execFileSync('mkfifo', [path.join(root, stagedRelativePath(WORK, sha256))]);
    const staged = await StagedFindings.open(root, noClient);
    expect(await codeOf(staged.load(WORK, manifest))).toEqual({ code: 'ERR_STAGED_FINDING', reason: 'unreadable' });
  });

  it('refuses a FIFO or an oversized file at the lane state path with ERR_LANE_STATE, and reads a state file behind a symlink', async () => {
    const root = await tempRoot('symfence-bounded-');
    execFileSync('mkfifo', [path.join(root, 'fifo.json')]);
    expect(await codeOf(readStateFile(path.join(root, 'fifo.json'), 1024))).toMatchObject({ code: 'ERR_LANE_STATE' });
    await writeFile(path.join(root, 'big.json'), `"${'x'.repeat(2000)}"`);
    expect(await codeOf(readStateFile(path.join(root, 'big.json'), 1024))).toMatchObject({ code: 'ERR_LANE_STATE' });
    await writeFile(path.join(root, 'state.json'), '{"schema":"s"}');
    await symlink(path.join(root, 'state.json'), path.join(root, 'link.json'));
    expect(await readStateFile(path.join(root, 'link.json'), 1024)).toEqual({ schema: 's' });
    expect(await readStateFile(path.join(root, 'missing.json'), 1024)).toBeUndefined();
  });
});
