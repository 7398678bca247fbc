// Leftover temp files of crashed writers, swept only when their writer is provably gone: through
// the injectable filesystem layer, asserting on the files left on disk. Linux: the pid-reuse rule
// reads process start times from /proc.
import { spawnSync } from 'node:child_process';
import { mkdir, rename, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { STAGED_DIR } from '../../src/commit/commit-manifest.js';
import { StagedFindings, type StagingClient } from '../../src/commit/staged-findings.js';
import { runCli } from '../../src/cli/program.js';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { LeaseLayout } from '../../src/lease/table-layout.js';
import { sweepLeaseTableTemps } from '../../src/lease/temp-sweep.js';
import { currentWriterTag, formatWriterTag, type WriterTag } from '../../src/lease/temp-writer.js';
import { listFiles, openWork, tempRoot } from '../helpers/lease-fixtures.js';

const HOUR = 3_600_000;
const SELF = currentWriterTag();
/** A pid that provably names no process: a child that has exited and been reaped. */
const DEAD_PID = spawnSync(process.execPath, ['-e', '']).pid!;
const FOREIGN: WriterTag = { host: SELF.host === 'f0f0f0f0f0f0' ? '0f0f0f0f0f0f' : 'f0f0f0f0f0f0', pid: process.pid, startTicks: SELF.startTicks };

const ID = (c: string): string => c.repeat(64);

/** A file with an mtime `ageMs` in the past. */
async function leftover(file: string, ageMs: number): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, 'partial record');
  const when = new Date(Date.now() - ageMs);
  await utimes(file, when, when);
}

/** One temp of every kind next to the records of a work table; returns its root and the names. */
async function tableWithLeftovers() {
  const dir = await tempRoot('symfence-temps-');
  const root = path.join(dir, 'work');
  const table = await openWork(root, { coordination: 'single' });
  const now = Date.now();
  const claimed = await table.claim(ID('a'), { p: 1 }, { owner: 'alpha', nowMs: now });
  expect(claimed.ok).toBe(true);
  await table.close();
  const layout = new LeaseLayout(root, 4);
  const temp = (id: string, tag: string) => `${layout.recordPath(id)}.${tag}.123.tmp`;
  const files = {
    live: temp(ID('a'), formatWriterTag(SELF)), // this process: alive, however old
    dead: temp(ID('b'), formatWriterTag({ ...SELF, pid: DEAD_PID })),
    reused: temp(ID('c'), formatWriterTag({ ...SELF, startTicks: SELF.startTicks + 1 })),
    foreignRecent: temp(ID('d'), formatWriterTag(FOREIGN)),
    foreignOld: temp(ID('e'), formatWriterTag(FOREIGN)),
    legacyRecent: `${layout.recordPath(ID('f'))}.${process.pid}.99.tmp`,
    legacyOld: `${layout.recordPath(ID('1'))}.${process.pid}.98.tmp`,
  };
  await leftover(files.live, 2 * HOUR);
  await leftover(files.dead, 0);
  await leftover(files.reused, 0);
  await leftover(files.foreignRecent, HOUR / 2);
  await leftover(files.foreignOld, 2 * HOUR);
  await leftover(files.legacyRecent, HOUR / 2);
  await leftover(files.legacyOld, 2 * HOUR);
  return { dir, root, files, record: table.recordPath(ID('a')), lock: table.lockPath(ID('a')) };
}

describe('sweeping leftover temp files', () => {
  it('removes from a lease table only the temps of dead, pid-reused, old foreign and old untagged writers', async () => {
    const { root, files, record, lock } = await tableWithLeftovers();
    const fsLayer = new FaultInjectingFsLayer();
    const report = await sweepLeaseTableTemps(root, { nowMs: Date.now(), staleTempAgeMs: HOUR, fsLayer });
    const rel = (f: string) => path.relative(root, f);
    expect(report).toEqual({ swept: 4, kept: 3 });
    const left = await listFiles(root);
    expect(left).toEqual(
      [
        'lease-table.json',
        'lease-table.json.lock',
        rel(record),
        rel(lock),
        rel(files.live),
        rel(files.foreignRecent),
        rel(files.legacyRecent),
      ].sort(),
    );
    expect(fsLayer.count('unlink')).toBe(report.swept);
  });

  it('never fails on a temp its live writer renamed between the listing and the look at it', async () => {
    const { root, files } = await tableWithLeftovers();
    const fsLayer = new FaultInjectingFsLayer();
    const published = `${files.dead}.published`;
    // Handshake: the "writer" publishes the temp exactly when the sweeper is about to stat it.
    fsLayer.hook({ op: 'lstat', path: files.dead, run: () => rename(files.dead, published) });
    const report = await sweepLeaseTableTemps(root, { nowMs: Date.now(), staleTempAgeMs: HOUR, fsLayer });
    expect(report.swept).toBe(3);
    expect(await listFiles(root)).toContain(path.relative(root, published));
  });

  it('leaves every temp in place when an unlink fails, and reports the failure', async () => {
    const { root } = await tableWithLeftovers();
    const fsLayer = new FaultInjectingFsLayer();
    const before = await listFiles(root);
    fsLayer.fail({ op: 'unlink', times: Infinity, code: 'EACCES' });
    await expect(sweepLeaseTableTemps(root, { nowMs: Date.now(), staleTempAgeMs: HOUR, fsLayer })).rejects.toMatchObject({ code: 'EACCES' });
    expect(await listFiles(root)).toEqual(before);
  });

  it('removes from staged/ the staging temps of gone writers, keeping the live one and the staged findings', async () => {
    const dir = await tempRoot('symfence-temps-staged-');
    const client: StagingClient = {
      ensureDir: (d) => mkdir(d, { recursive: true }).then(() => undefined),
      listDir: async () => [],
      stageFiles: async () => undefined,
      removeFiles: async () => 0,
    };
    const staged = await StagedFindings.open(dir, client);
    const at = (name: string) => path.join(dir, STAGED_DIR, name);
    const finding = at(`${ID('a')}.${ID('b')}`);
    await leftover(finding, 2 * HOUR);
    await leftover(at(`.symfence-io-${formatWriterTag(SELF)}-1.tmp`), 2 * HOUR);
    await leftover(at(`.symfence-io-${formatWriterTag({ ...SELF, pid: DEAD_PID })}-2.tmp`), 0);
    await leftover(at(`.symfence-io-${formatWriterTag(FOREIGN)}-3.tmp`), HOUR / 2);
    await leftover(at(`.symfence-io-${formatWriterTag(FOREIGN)}-4.tmp`), 2 * HOUR);
    await leftover(at(`.symfence-io-${DEAD_PID}-deadbeef-5.tmp`), 2 * HOUR); // legacy name
    const fsLayer = new FaultInjectingFsLayer();
    expect(await staged.sweepTemps({ nowMs: Date.now(), staleTempAgeMs: HOUR, fsLayer })).toEqual({ swept: 3, kept: 2 });
    expect(await listFiles(path.join(dir, STAGED_DIR))).toEqual(
      [`${ID('a')}.${ID('b')}`, `.symfence-io-${formatWriterTag(SELF)}-1.tmp`, `.symfence-io-${formatWriterTag(FOREIGN)}-3.tmp`].sort(),
    );
  });

  it('leases check sweeps them too and says how many, in text and in --json', async () => {
    const { dir, root, files } = await tableWithLeftovers();
    await leftover(path.join(dir, STAGED_DIR, `.symfence-io-${formatWriterTag({ ...SELF, pid: DEAD_PID })}-9.tmp`), 0);
    let out = '';
    const code = await runCli(['leases', 'check', dir], { stdout: (t) => (out += t), stderr: () => undefined });
    expect(code).toBe(0);
    // dead, reused, old foreign, old untagged in the table, the dead stager's in staged/.
    expect(out).toContain('temps: swept 5 leftover temp file(s) of writers that are gone, kept 3 of live or possibly live writers');
    expect(await listFiles(root)).toContain(path.relative(root, files.live));
    expect(await listFiles(root)).not.toContain(path.relative(root, files.dead));

    // Nothing left to sweep; a shorter bound (flag) now takes the recent foreign and untagged temps.
    let json = '';
    await runCli(['leases', 'check', dir, '--json', '--stale-temp-age', '1m'], { stdout: (t) => (json += t), stderr: () => undefined });
    const parsed = JSON.parse(json) as { temps: { swept: number; kept: number; staleTempAgeMs: number } };
    expect(parsed.temps).toEqual({ swept: 2, kept: 1, staleTempAgeMs: 60_000 });
    expect((await listFiles(root)).filter((f) => f.endsWith('.tmp'))).toEqual([path.relative(root, files.live)]);
  });

  it('leases check refuses a --stale-temp-age below one minute, naming the flag', async () => {
    const { dir } = await tableWithLeftovers();
    let err = '';
    const code = await runCli(['leases', 'check', dir, '--stale-temp-age', '5s'], { stdout: () => undefined, stderr: (t) => (err += t) });
    expect(code).toBe(2);
    expect(err).toContain('--stale-temp-age');
    expect(err).toContain('ERR_INVALID_OPTION');
  });
});
