/**
 * The ELF reader's allocation budget is one bound for the whole file: a hostile 4 GiB sparse file
 * whose headers point at several tables, each under any per-table limit, is refused as malformed
 * before the read that would pass the budget — measured as the peak RSS of a child process that
 * only reads the file.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync, ftruncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { builtFile } from '../../src/util/paths.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/**
 * ELF64 LE: one PT_LOAD mapping the whole file, a 60 MiB PT_DYNAMIC naming a 60 MiB DT_STRTAB,
 * and two symbol tables linking to distinct 64 MiB and 60 MiB string tables — 244 MiB of tables
 * in a 4 GiB file that is all holes.
 */
function hostileElf(file: string): void {
  const size = 4 * GiB;
  const dynAt = 1 * GiB;
  const strAt = 2 * GiB;
  const sym1At = 3 * GiB;
  const sym2At = 3 * GiB + 512 * MiB;
  const header = Buffer.alloc(64 + 2 * 56);
  header.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1], 0);
  header.writeUInt16LE(2, 0x10);
  header.writeUInt16LE(0x3e, 0x12);
  header.writeUInt32LE(1, 0x14);
  header.writeBigUInt64LE(64n, 0x20); // phoff
  const shoff = 4096;
  header.writeBigUInt64LE(BigInt(shoff), 0x28);
  header.writeUInt16LE(64, 0x34);
  header.writeUInt16LE(56, 0x36);
  header.writeUInt16LE(2, 0x38);
  header.writeUInt16LE(64, 0x3a);
  header.writeUInt16LE(4, 0x3c);
  const ph = (i: number, type: number, offset: number, vaddr: number, filesz: number): void => {
    const at = 64 + i * 56;
    header.writeUInt32LE(type, at);
    header.writeBigUInt64LE(BigInt(offset), at + 0x08);
    header.writeBigUInt64LE(BigInt(vaddr), at + 0x10);
    header.writeBigUInt64LE(BigInt(filesz), at + 0x20);
  };
  ph(0, 1, 0, 0, size);
  ph(1, 2, dynAt, dynAt, 60 * MiB);
  const sections = Buffer.alloc(4 * 64);
  const sh = (i: number, type: number, offset: number, sizeBytes: number, link: number): void => {
    const at = i * 64;
    sections.writeUInt32LE(type, at + 0x04);
    sections.writeBigUInt64LE(BigInt(offset), at + 0x18);
    sections.writeBigUInt64LE(BigInt(sizeBytes), at + 0x20);
    sections.writeUInt32LE(link, at + 0x28);
  };
  sh(0, 2, 0, 0, 1);
  sh(1, 3, sym1At, 64 * MiB, 0);
  sh(2, 2, 0, 0, 3);
  sh(3, 3, sym2At, 60 * MiB, 0);
  const dynamic = Buffer.alloc(3 * 16);
  dynamic.writeBigInt64LE(5n, 0); // DT_STRTAB
  dynamic.writeBigUInt64LE(BigInt(strAt), 8);
  dynamic.writeBigInt64LE(10n, 16); // DT_STRSZ
  dynamic.writeBigUInt64LE(BigInt(60 * MiB), 24);
  const fd = openSync(file, 'w', 0o755);
  try {
    writeSync(fd, header, 0, header.length, 0);
    writeSync(fd, sections, 0, sections.length, shoff);
    writeSync(fd, dynamic, 0, dynamic.length, dynAt);
    ftruncateSync(fd, size);
  } finally {
    closeSync(fd);
  }
}

describe('ELF reader allocation bound', () => {
  it('refuses a 4 GiB sparse hostile file as malformed while its peak RSS stays far below the tables it names', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'symfence-elf-'));
    dirs.push(dir);
    const file = path.join(dir, 'hostile');
    hostileElf(file);
    const script = `
      const { readElfInfo } = await import(${JSON.stringify(builtFile('src/solver/elf-dynamic.js'))});
      const baseline = process.memoryUsage().rss;
      const info = readElfInfo(${JSON.stringify(file)});
      // VmHWM: this process's own peak RSS (getrusage's maxRSS would include the forking parent's).
      const hwmKiB = Number((await import('node:fs')).readFileSync('/proc/self/status', 'utf8').match(/VmHWM:\\s*(\\d+)/)[1]);
      console.log(JSON.stringify({ kind: info.kind, reason: info.reason, baselineRss: baseline, maxRss: hwmKiB * 1024 }));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    const result = JSON.parse(out.trim().split('\n').pop()!) as { kind: string; reason: string; baselineRss: number; maxRss: number };
    expect(result.kind).toBe('malformed');
    // The budget is 64 MiB in all: the peak above the baseline stays within it (plus slack for
    // the runtime), far below the 244 MiB the tables would take.
    expect(result.maxRss - result.baselineRss).toBeLessThan(64 * MiB + 24 * MiB);
    expect(result.reason).toContain('64 MiB');
  });
});
