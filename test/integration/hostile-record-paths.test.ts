// Whatever sits at a record path — a socket, FIFO, directory, symlink, character device, a 3 GB
// sparse file — is a corrupt record with a reason: claims refuse it without mutation, scans list
// it and go on, and nothing is read past the record bound.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { mkdir, rename, symlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { readRecord } from '../../src/lease/files/record-files.js';
import { targetRecordId } from '../../src/lease/identity.js';
import { nodeFsLayer } from '../../src/fs/fs-layer.js';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { snapshotTree } from '../helpers/lease-fixtures.js';
import { openTarget, openWork, S, tempRoot } from '../helpers/lease-fixtures.js';

const servers: net.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

type Plant = 'socket' | 'fifo' | 'directory' | 'symlink' | 'device' | 'sparse';
const PLANTS: readonly Plant[] = ['socket', 'fifo', 'directory', 'symlink', 'device', 'sparse'];
const SPARSE_BYTES = 3 * 1024 * 1024 * 1024;

/** A character device that reads like /dev/zero, when this process may create one (root). */
function canMknod(dir: string): boolean {
  try {
    execFileSync('mknod', [path.join(dir, 'probe-zero'), 'c', '1', '5'], { stdio: 'ignore' });
    fs.unlinkSync(path.join(dir, 'probe-zero'));
    return true;
  } catch {
    return false;
  }
}

async function plant(kind: Plant, file: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  switch (kind) {
    case 'socket': {
      const server = net.createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(file, resolve));
      return;
    }
    case 'fifo':
      execFileSync('mkfifo', [file]);
      return;
    case 'directory':
      await mkdir(file);
      return;
    case 'symlink': {
      const target = `${file}.elsewhere`;
      await writeFile(target, '{}');
      await symlink(target, file);
      return;
    }
    case 'device':
      execFileSync('mknod', [file, 'c', '1', '5']);
      return;
    case 'sparse': {
      const fd = fs.openSync(file, 'w');
      fs.ftruncateSync(fd, SPARSE_BYTES);
      fs.closeSync(fd);
      return;
    }
  }
}

const REASONS: Readonly<Record<Plant, RegExp>> = {
  socket: /socket/,
  fifo: /FIFO/,
  directory: /directory/,
  symlink: /symlink/,
  device: /character device/,
  sparse: /over the \d+-byte bound/,
};

/** Type, and bytes for small regular files, of every entry under `root` — never opening a non-file. */
function treeState(root: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const name of fs.readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      const stat = fs.lstatSync(full);
      const rel = path.relative(root, full);
      if (stat.isDirectory()) {
        out.set(rel, 'dir');
        walk(full);
      } else if (stat.isFile()) {
        out.set(rel, stat.size > 1024 * 1024 ? `file ${stat.size}` : fs.readFileSync(full).toString('base64'));
      } else out.set(rel, `special ${stat.mode.toString(8)}`);
    }
  };
  walk(root);
  return out;
}

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { stdout: (t) => (out += t), stderr: (t) => (err += t) });
  return { code, out, err };
}

describe('hostile files at record paths', () => {
  it('reads a socket, FIFO, directory, symlink, character device and 3 GB sparse file as corrupt, each with its reason', async () => {
    const root = await tempRoot('symfence-hostile-');
    const kinds = PLANTS.filter((k) => k !== 'device' || canMknod(root));
    for (const [i, kind] of kinds.entries()) {
      const id = String(i).repeat(64);
      const file = path.join(root, `${id}.json`);
      await plant(kind, file);
      const read = await readRecord(nodeFsLayer, file, id, 'work');
      expect(read.state, kind).toBe('corrupt');
      expect(read.state === 'corrupt' ? read.reason : '', kind).toMatch(REASONS[kind]);
    }
  });

  it('refuses claims over every hostile member with a corrupt result listing each with its reason, changes nothing on disk, and fails a strict snapshot with ERR_LEASE_CORRUPT', async () => {
    const root = await tempRoot('symfence-hostile-');
    const table = await openTarget(root, { coordination: 'single' });
    const kinds = PLANTS.filter((k) => k !== 'device' || canMknod(root));
    const targets = kinds.map((_, i) => BigInt(i + 1));
    for (const [i, kind] of kinds.entries()) await plant(kind, table.recordPath(targetRecordId(targets[i]!)));
    // Lock files exist before the snapshot, as they would after any earlier claim.
    expect(await table.claimGroup(targets, { job: 0 }, { owner: 'warm', nowMs: 1 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
    const before = treeState(root);
    const result = await table.claimGroup(targets, { job: 1 }, { owner: 'x', nowMs: 2 * S });
    expect(result.ok).toBe(false);
    if (result.ok || result.reason !== 'corrupt') throw new Error('expected a corrupt result');
    expect(result.corrupt.map((c) => c.target).sort()).toEqual(targets);
    for (const [i, kind] of kinds.entries()) expect(result.corrupt.find((c) => c.target === targets[i])?.detail, kind).toMatch(REASONS[kind]);
    for (const target of targets) {
      expect(await table.claimGroup([target], { job: 2 }, { owner: 'y', nowMs: 3 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
    }
    expect(treeState(root)).toEqual(before);
    await expect(table.snapshotRecords()).rejects.toMatchObject({ code: 'ERR_LEASE_CORRUPT' });
    expect(await table.snapshotCounts({ nowMs: 3 * S })).toMatchObject({ corrupt: kinds.length, leased: 0 });
  });

  it('refuses a work claim over a socket with a corrupt result, and commit recovery still sees the other records', async () => {
    const root = await tempRoot('symfence-hostile-');
    const table = await openWork(root, { coordination: 'single' });
    const good = 'a'.repeat(64);
    const claimed = await table.claim(good, { p: 1 }, { owner: 'alpha', nowMs: 1 * S });
    if (!claimed.ok) throw new Error('setup');
    expect(await table.beginCommit(good, claimed.token, { nowMs: 1 * S })).toMatchObject({ ok: true });
    const bad = 'b'.repeat(64);
    await plant('socket', table.recordPath(bad));
    // The first claim creates the record's lock file (kept for good); the second must change nothing.
    expect(await table.claim(bad, { p: 2 }, { owner: 'beta', nowMs: 2 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
    const before = treeState(root);
    const result = await table.claim(bad, { p: 2 }, { owner: 'beta', nowMs: 2 * S });
    expect(result).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(result.ok ? '' : JSON.stringify(result)).toMatch(/socket/);
    expect(treeState(root)).toEqual(before);
    expect((await table.snapshotRecords({ corrupt: 'skip' })).map((e) => e.id)).toEqual([good]);
  });

  it('lists every hostile record and a truncated one in `leases check --json`, exiting 1', async () => {
    const root = await tempRoot('symfence-hostile-');
    const table = await openWork(root, { coordination: 'single' });
    const kinds = PLANTS.filter((k) => k !== 'device' || canMknod(root));
    const paths = new Map<string, Plant | 'truncated'>();
    for (const [i, kind] of kinds.entries()) {
      const file = table.recordPath(String(i + 1).repeat(64));
      await plant(kind, file);
      paths.set(file, kind);
    }
    const whole = 'f'.repeat(64);
    const claimed = await table.claim(whole, { p: 1 }, { owner: 'alpha', nowMs: 1 * S });
    if (!claimed.ok) throw new Error('setup');
    const truncated = table.recordPath('e'.repeat(64));
    const bytes = fs.readFileSync(table.recordPath(whole));
    fs.writeFileSync(truncated, bytes.subarray(0, bytes.length >> 1));
    paths.set(truncated, 'truncated');
    const { code, out } = await run('leases', 'check', root, '--json');
    expect(code).toBe(1);
    const parsed = JSON.parse(out) as { tables: { counts: { leased: number }; corrupt: { path: string; reason: string }[] }[] };
    const listed = parsed.tables[0]!.corrupt;
    expect(listed.map((c) => c.path).sort()).toEqual([...paths.keys()].sort());
    for (const c of listed) {
      const kind = paths.get(c.path)!;
      expect(c.reason, kind).toMatch(kind === 'truncated' ? /not valid JSON/ : REASONS[kind]);
    }
    expect(parsed.tables[0]!.counts.leased).toBe(1);
  });

  it('keeps memory bounded when a claim and a scan meet a 3 GB sparse record file', async () => {
    const root = await tempRoot('symfence-hostile-');
    const table = await openTarget(root, { coordination: 'single' });
    await plant('sparse', table.recordPath(targetRecordId(7n)));
    const rssBefore = process.memoryUsage().rss;
    expect(await table.claimGroup([7n], { job: 1 }, { owner: 'x', nowMs: 1 * S })).toMatchObject({ ok: false, reason: 'corrupt' });
    expect(await table.snapshotCounts({ nowMs: 1 * S })).toMatchObject({ corrupt: 1 });
    expect((await run('leases', 'check', root, '--json')).code).toBe(1);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(200 * 1024 * 1024);
  });

  it('lists a record whose fstat fails with EIO as unreadable and still reports every other record; a claim over it rejects ERR_LEASE_IO and changes nothing', async () => {
    const root = await tempRoot('symfence-hostile-');
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openWork(root, { coordination: 'single' }, { fsLayer });
    const ids = ['a', 'b', 'c'].map((c) => c.repeat(64));
    for (const id of ids) expect((await table.claim(id, { id }, { owner: 'alpha', nowMs: 1 * S })).ok).toBe(true);
    const before = await snapshotTree(root);
    const bad = table.recordPath(ids[1]!);
    fsLayer.fail({ op: 'fstat', path: bad, times: Number.POSITIVE_INFINITY, code: 'EIO' });
    expect(await table.snapshotCounts({ nowMs: 2 * S })).toMatchObject({ leased: 2, corrupt: 1 });
    const records = await table.snapshotRecords({ corrupt: 'skip' });
    expect(records.map((r) => r.id)).toEqual([ids[0], ids[2]]);
    await expect(table.claim(ids[1]!, { id: 'x' }, { owner: 'beta', nowMs: 100 * S })).rejects.toMatchObject({ code: 'ERR_LEASE_IO' });
    fsLayer.clearRules();
    expect(await snapshotTree(root)).toEqual(before);
  });

  it('refuses a socket, FIFO or directory at a lock path with ERR_LOCK_PATH and leaves it in place', async () => {
    const root = await tempRoot('symfence-hostile-');
    const table = await openTarget(root, { coordination: 'single' });
    for (const [i, kind] of (['socket', 'fifo', 'directory'] as const).entries()) {
      const target = BigInt(100 + i);
      const lockPath = table.lockPath(targetRecordId(target));
      await plant(kind, lockPath);
      const before = treeState(root);
      await expect(table.claimGroup([target], { job: 1 }, { owner: 'x', nowMs: 1 * S }), kind).rejects.toMatchObject({ code: 'ERR_LOCK_PATH' });
      expect(treeState(root), kind).toEqual(before);
    }
  });

  it('refuses a shard directory swapped for a symlink after first use with ERR_LOCK_PATH, writing nothing through the link', async () => {
    const root = await tempRoot('symfence-hostile-');
    const table = await openTarget(root, { coordination: 'single', shardCount: 1 });
    const first = await table.claimGroup([1n], { job: 1 }, { owner: 'x', nowMs: 1 * S });
    expect(first.ok).toBe(true);
    const shard = table.shardDirOf(targetRecordId(1n));
    const elsewhere = path.join(root, 'elsewhere');
    await rename(shard, elsewhere);
    await symlink(elsewhere, shard);
    const before = treeState(elsewhere);
    await expect(table.claimGroup([2n], { job: 2 }, { owner: 'x', nowMs: 2 * S })).rejects.toMatchObject({ code: 'ERR_LOCK_PATH' });
    expect(treeState(elsewhere)).toEqual(before);
    // A fresh table refuses the same layout the same way.
    const fresh = await openTarget(root, { coordination: 'single', shardCount: 1 });
    await expect(fresh.claimGroup([2n], { job: 2 }, { owner: 'x', nowMs: 2 * S })).rejects.toMatchObject({ code: 'ERR_LOCK_PATH' });
    expect(treeState(elsewhere)).toEqual(before);
  });
});
