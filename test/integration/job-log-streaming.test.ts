/**
 * `jobs.jsonl` is streamed, never read whole: `forEachJobLogEntry` reads a journal of hundreds of
 * MB 1 MiB at a time through the fs layer with bounded memory, and `report` / `status` of a
 * campaign never read its journal (a 4 GiB sparse one costs them nothing).
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { NodeFsLayer } from '../../src/fs/fs-layer.js';
import { writeReport } from '../../src/report/write-report.js';
import { readCampaignStatus } from '../../src/telemetry/campaign-status.js';
import { createCounters } from '../../src/telemetry/counters.js';
import { forEachJobLogEntry, type JobLogEntry } from '../../src/telemetry/job-log.js';
import { makeSnapshot } from '../../src/telemetry/stats-file.js';
import { builtFile } from '../../src/util/paths.js';
import { codeOfAsync } from '../helpers/error-code.js';

const MB = 1_000_000;
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tmp(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-job-log-'));
  dirs.push(dir);
  return dir;
}

function entry(i: number): JobLogEntry {
  return {
    workId: i.toString(16).padStart(12, '0'), targets: [String(i * 7), String(i * 7 + 1)], coordinator: 'c', startMs: 1_700_000_000_000 + i, endMs: 1_700_000_000_100 + i,
    status: 'ok', generated: i % 5, interesting: i % 2, kind: 'full', slot: i % 4, queuedMs: 3, claimMs: 1, spawnMs: 2, solverMs: 90, collectMs: 1, commitMs: 2,
  };
}

/** Writes entries until the journal is about `bytes` long; returns how many. */
function writeJournal(file: string, bytes: number): number {
  const fd = openSync(file, 'w');
  let written = 0;
  let count = 0;
  try {
    while (written < bytes) {
      let batch = '';
      for (let k = 0; k < 10_000; k++) batch += `${JSON.stringify(entry(count++))}\n`;
      written += writeSync(fd, batch);
    }
  } finally {
    closeSync(fd);
  }
  return count;
}

/** Counts what is read through it, per path. */
class CountingFsLayer extends NodeFsLayer {
  readonly bytesByPath = new Map<string, number>();
  largestRead = 0;
  readonly #paths = new Map<number, string>();

  override async open(file: string, flags: number, mode?: number): Promise<number> {
    const fd = await super.open(file, flags, mode);
    this.#paths.set(fd, file);
    this.bytesByPath.set(file, this.bytesByPath.get(file) ?? 0);
    return fd;
  }

  override async readAll(fd: number, maxBytes: number): Promise<Buffer> {
    const bytes = await super.readAll(fd, maxBytes);
    const file = this.#paths.get(fd) ?? '?';
    this.bytesByPath.set(file, (this.bytesByPath.get(file) ?? 0) + bytes.length);
    return bytes;
  }

  override async readAt(fd: number, buffer: Buffer, position: number): Promise<number> {
    const n = await super.readAt(fd, buffer, position);
    const file = this.#paths.get(fd) ?? '?';
    this.bytesByPath.set(file, (this.bytesByPath.get(file) ?? 0) + n);
    this.largestRead = Math.max(this.largestRead, buffer.length);
    return n;
  }
}

describe('jobs.jsonl streaming', () => {
  it('reads a 256 MB journal 1 MiB at a time through the fs layer, every entry once and in order', async () => {
    const file = path.join(tmp(), 'jobs.jsonl');
    const count = writeJournal(file, 256 * MB);
    const fsLayer = new CountingFsLayer();
    let next = 0;
    let inOrder = true;
    const read = await forEachJobLogEntry(file, (e) => {
      if (e.workId !== entry(next).workId) inOrder = false;
      next++;
    }, { fsLayer });
    expect(read).toBe(count);
    expect(next).toBe(count);
    expect(inOrder).toBe(true);
    expect(fsLayer.bytesByPath.get(file)).toBe(statSync(file).size);
    expect(fsLayer.largestRead).toBeLessThanOrEqual(1 << 20);
  }, 240_000);

  it('streams a 256 MB journal with peak RSS under 100 MB (a child process that only reads it)', () => {
    const file = path.join(tmp(), 'jobs.jsonl');
    const count = writeJournal(file, 256 * MB);
    const script = `
      const { forEachJobLogEntry } = await import(${JSON.stringify(builtFile('src/telemetry/job-log.js'))});
      let ok = 0;
      const read = await forEachJobLogEntry(${JSON.stringify(file)}, (e) => { if (e.status === 'ok') ok++; });
      const hwmKiB = Number((await import('node:fs')).readFileSync('/proc/self/status', 'utf8').match(/VmHWM:\\s*(\\d+)/)[1]);
      console.log(JSON.stringify({ read, ok, maxRss: hwmKiB * 1024 }));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    const result = JSON.parse(out.trim().split('\n').pop()!) as { read: number; ok: number; maxRss: number };
    expect(result.read).toBe(count);
    expect(result.ok).toBe(count);
    expect(result.maxRss).toBeLessThan(100 * MB);
  }, 240_000);

  it('skips a truncated last line and refuses a bad line before it with ERR_CAMPAIGN_STATE naming file and line', async () => {
    const dir = tmp();
    const good = path.join(dir, 'good.jsonl');
    writeFileSync(good, `${JSON.stringify(entry(0))}\n${JSON.stringify(entry(1))}\n{"workId":"tru`);
    const seen: string[] = [];
    expect(await forEachJobLogEntry(good, (e) => seen.push(e.workId))).toBe(2);
    expect(seen).toEqual([entry(0).workId, entry(1).workId]);
    const bad = path.join(dir, 'bad.jsonl');
    writeFileSync(bad, `${JSON.stringify(entry(0))}\n{"workId":\n${JSON.stringify(entry(1))}\n`);
    expect(await codeOfAsync(forEachJobLogEntry(bad, () => undefined))).toBe('ERR_CAMPAIGN_STATE');
    await expect(forEachJobLogEntry(bad, () => undefined)).rejects.toMatchObject({ details: { file: bad, line: 2 } });
    const array = path.join(dir, 'array.jsonl');
    writeFileSync(array, '[1,2]\n');
    await expect(forEachJobLogEntry(array, () => undefined)).rejects.toMatchObject({ code: 'ERR_CAMPAIGN_STATE', details: { line: 1 } });
    expect(await forEachJobLogEntry(path.join(dir, 'absent.jsonl'), () => undefined)).toBe(0);
    mkdirSync(path.join(dir, 'dir.jsonl'));
    expect(await codeOfAsync(forEachJobLogEntry(path.join(dir, 'dir.jsonl'), () => undefined))).toBe('ERR_CAMPAIGN_STATE');
  });

  it('report and status of a campaign whose jobs.jsonl is a 4 GiB sparse file never read it', async () => {
    const root = tmp();
    const dir = path.join(root, 'c');
    mkdirSync(dir);
    const stats = makeSnapshot({ coordinator: 'c', name: 'journal', state: 'stopped', startedMs: 1_700_000_000_000, updatedMs: 1_700_000_060_000, statsIntervalMs: 1000, workers: 2, counters: createCounters() });
    writeFileSync(path.join(dir, 'stats.json'), JSON.stringify(stats));
    const journal = path.join(dir, 'jobs.jsonl');
    writeFileSync(journal, '');
    truncateSync(journal, 4 * 1024 ** 3);
    const fsLayer = new CountingFsLayer();
    const written = await writeReport([dir], { outputDir: path.join(root, 'report'), fsLayer, nowMs: 1_700_000_060_000 });
    expect(written.coordinators).toEqual(['journal']);
    expect(fsLayer.bytesByPath.has(journal)).toBe(false);
    // Something was read through the layer (the stats file), so the count is not vacuous.
    expect(fsLayer.bytesByPath.get(path.join(dir, 'stats.json'))).toBeGreaterThan(0);
    const status = readCampaignStatus(dir, 1_700_000_060_000);
    expect(status.map((s) => s.stats.name)).toEqual(['journal']);
  }, 120_000);
});
