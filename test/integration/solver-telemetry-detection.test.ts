import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readElfInfo } from '../../src/solver/elf-dynamic.js';
import { decideSolverTelemetry, checkSolverTelemetryMode, resolveOnPath } from '../../src/solver/solver-telemetry.js';
import { codeOf as codeOfThrown } from '../helpers/error-code.js';

/**
 * Small ELF fixtures built with the system C compiler: a "SymCC runtime" shared library exporting
 * the branch hook, a program linked against it dynamically, the same program linked statically,
 * and a runtime that embeds the telemetry schema name (one that writes telemetry itself).
 */
let dir: string;
let dynamicProgram: string;
let staticProgram: string;
let ownTelemetryProgram: string;
let linkedInProgram: string;
let fakePreload: string;

function cc(args: string[]): void {
  execFileSync('cc', args, { stdio: 'pipe' });
}

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-elf-'));
  const runtimeC = path.join(dir, 'runtime.c');
  writeFileSync(runtimeC, '#include <stdint.h>\nvoid _sym_push_path_constraint(void *c, int t, uintptr_t s) { (void)c; (void)t; (void)s; }\n');
  const ownC = path.join(dir, 'own.c');
  writeFileSync(ownC, '#include <stdint.h>\nconst char *symfence_schema = "symfence-telemetry/1";\nvoid _sym_push_path_constraint(void *c, int t, uintptr_t s) { (void)c; (void)t; (void)s; }\n');
  const mainC = path.join(dir, 'main.c');
  writeFileSync(mainC, '#include <stdint.h>\nvoid _sym_push_path_constraint(void *c, int t, uintptr_t s);\nint main(int argc, char **argv) { _sym_push_path_constraint(argv, argc > 1, 7); return 0; }\n');
  mkdirp(path.join(dir, 'stock'));
  mkdirp(path.join(dir, 'own'));
  cc(['-shared', '-fPIC', '-o', path.join(dir, 'stock', 'libSymRuntime.so'), runtimeC]);
  cc(['-shared', '-fPIC', '-o', path.join(dir, 'own', 'libSymRuntime.so'), ownC]);
  dynamicProgram = path.join(dir, 'target.symcc');
  cc(['-o', dynamicProgram, mainC, `-L${path.join(dir, 'stock')}`, '-lSymRuntime', `-Wl,-rpath,${path.join(dir, 'stock')}`]);
  ownTelemetryProgram = path.join(dir, 'target-own.symcc');
  cc(['-o', ownTelemetryProgram, mainC, `-L${path.join(dir, 'own')}`, '-lSymRuntime', '-Wl,-rpath,$ORIGIN/own']);
  staticProgram = path.join(dir, 'target-static.symcc');
  cc(['-static', '-o', staticProgram, mainC, runtimeC]);
  linkedInProgram = path.join(dir, 'target-linked-in.symcc');
  cc(['-o', linkedInProgram, mainC, runtimeC]);
  fakePreload = path.join(dir, 'preload.so');
  writeFileSync(fakePreload, '');
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function mkdirp(d: string): void {
  execFileSync('mkdir', ['-p', d]);
}

describe('ELF dynamic section reader', () => {
  it('lists DT_NEEDED and RUNPATH of a dynamically linked program and finds the hook it imports', () => {
    const info = readElfInfo(dynamicProgram);
    expect(info.kind).toBe('elf');
    if (info.kind !== 'elf') return;
    expect(info.dynamic).toBe(true);
    expect(info.needed).toContain('libSymRuntime.so');
    expect(info.runpath).toEqual([path.join(dir, 'stock')]);
    expect(info.hasSymbolName('_sym_push_path_constraint')).toBe(true);
    expect(info.hasSymbolName('_sym_push_path')).toBe(false);
  });

  it('sees a statically linked program as not dynamic, with the hook in its symbol table', () => {
    const info = readElfInfo(staticProgram);
    expect(info.kind).toBe('elf');
    if (info.kind !== 'elf') return;
    expect(info.dynamic).toBe(false);
    expect(info.needed).toEqual([]);
    expect(info.hasSymbolName('_sym_push_path_constraint')).toBe(true);
  });

  it('reports a script as not ELF and a truncated ELF as malformed, without throwing', () => {
    const script = path.join(dir, 'script.sh');
    writeFileSync(script, '#!/bin/sh\nexit 0\n');
    expect(readElfInfo(script).kind).toBe('not-elf');
    const truncated = path.join(dir, 'truncated');
    const bytes = execFileSync('head', ['-c', '200', dynamicProgram]);
    writeFileSync(truncated, bytes);
    expect(readElfInfo(truncated).kind).toBe('malformed');
  });
});

/** A little-endian ELF64 with one PT_LOAD over the whole file and a PT_DYNAMIC of `entries`. */
function syntheticElf(entries: [number, number][], strtab: Buffer): Buffer {
  const dynOffset = 64 + 2 * 56;
  const strOffset = dynOffset + entries.length * 16;
  const file = Buffer.alloc(strOffset + strtab.length);
  Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]).copy(file, 0);
  file.writeUInt16LE(2, 0x10); // ET_EXEC
  file.writeUInt16LE(62, 0x12);
  file.writeBigUInt64LE(64n, 0x20); // phoff
  file.writeUInt16LE(56, 0x36);
  file.writeUInt16LE(2, 0x38);
  const ph = (i: number, type: number, offset: number, size: number) => {
    const at = 64 + i * 56;
    file.writeUInt32LE(type, at);
    file.writeBigUInt64LE(BigInt(offset), at + 0x08);
    file.writeBigUInt64LE(BigInt(offset), at + 0x10);
    file.writeBigUInt64LE(BigInt(size), at + 0x20);
  };
  ph(0, 1, 0, file.length);
  ph(1, 2, dynOffset, entries.length * 16);
  entries.forEach(([tag, value], i) => {
    file.writeBigInt64LE(BigInt(tag), dynOffset + i * 16);
    file.writeBigUInt64LE(BigInt(value), dynOffset + i * 16 + 8);
  });
  strtab.copy(file, strOffset);
  return file;
}

describe('ELF reader on hostile files', () => {
  it('reports a file with 100k DT_NEEDED entries into an unterminated 1 MiB string table as malformed, with memory bounded', () => {
    const strtab = Buffer.alloc(1 << 20, 0x61);
    const dynOffset = 64 + 2 * 56;
    const count = 100_000;
    const entries: [number, number][] = [[5, dynOffset + (count + 3) * 16], [10, strtab.length]];
    for (let i = 0; i < count; i++) entries.push([1, 0]);
    entries.push([0, 0]);
    const file = path.join(dir, 'hostile.elf');
    writeFileSync(file, syntheticElf(entries, strtab));
    const before = process.memoryUsage().rss;
    const info = readElfInfo(file);
    expect(info.kind).toBe('malformed');
    expect(process.memoryUsage().rss - before).toBeLessThan(200 * 1024 * 1024);
  });

  it('reads a well-formed synthetic file with a terminated name', () => {
    const strtab = Buffer.from('\0libSymRuntime.so\0_sym_push_path_constraint\0');
    const dynOffset = 64 + 2 * 56;
    const entries: [number, number][] = [[5, dynOffset + 4 * 16], [10, strtab.length], [1, 1], [0, 0]];
    const file = path.join(dir, 'good.elf');
    writeFileSync(file, syntheticElf(entries, strtab));
    const info = readElfInfo(file);
    expect(info.kind).toBe('elf');
    if (info.kind === 'elf') {
      expect(info.needed).toEqual(['libSymRuntime.so']);
      expect(info.hasDynamicSymbolName('_sym_push_path_constraint')).toBe(true);
    }
  });
});

describe('choosing the telemetry source', () => {
  const decide = (requested: 'auto' | 'preload' | 'runtime' | 'off', binary: string, preloadLibrary: string | null = fakePreload) =>
    decideSolverTelemetry({ requested, binary, preloadLibrary, env: {} });

  it('auto uses the preload library for a dynamically linked stock SymCC binary, without a warning', () => {
    const d = decide('auto', dynamicProgram);
    expect(d).toMatchObject({ mode: 'preload', preload: fakePreload });
    expect(d.warning).toBeUndefined();
  });

  it('auto leaves a runtime that writes its own telemetry alone (found through $ORIGIN in RUNPATH)', () => {
    expect(decide('auto', ownTelemetryProgram).mode).toBe('runtime');
  });

  it('auto falls back to the solver\'s own telemetry for a statically linked SymCC binary, with one warning', () => {
    const d = decide('auto', staticProgram);
    expect(d.mode).toBe('runtime');
    expect(d.warning).toMatch(/statically/);
  });

  it('treats a dynamically linked program whose SymCC runtime is compiled into the executable as not interposable', () => {
    const d = decide('auto', linkedInProgram);
    expect(d.mode).toBe('runtime');
    expect(d.warning).toMatch(/statically/);
    expect(codeOfThrown(() => decide('preload', linkedInProgram))).toBe('ERR_PRELOAD_UNSUPPORTED');
  });

  it('auto uses the solver\'s own telemetry, silently, for a program that is not SymCC (the reference solver runs on node)', () => {
    const d = decide('auto', process.execPath);
    expect(d.mode).toBe('runtime');
    expect(d.warning).toBeUndefined();
  });

  it('auto warns and falls back when the preload library was not built', () => {
    const d = decide('auto', dynamicProgram, null);
    expect(d.mode).toBe('runtime');
    expect(d.warning).toMatch(/not built/);
  });

  it('refuses an explicit preload that cannot work with ERR_PRELOAD_UNSUPPORTED', () => {
    expect(codeOfThrown(() => decide('preload', staticProgram))).toBe('ERR_PRELOAD_UNSUPPORTED');
    expect(codeOfThrown(() => decide('preload', dynamicProgram, null))).toBe('ERR_PRELOAD_UNSUPPORTED');
    expect(codeOfThrown(() => decide('preload', path.join(dir, 'missing')))).toBe('ERR_PRELOAD_UNSUPPORTED');
  });

  it('honours runtime and off as asked, and names the option and value of a bad mode', () => {
    expect(decide('runtime', dynamicProgram).mode).toBe('runtime');
    expect(decide('off', dynamicProgram).mode).toBe('off');
    expect(codeOfThrown(() => checkSolverTelemetryMode('sometimes'))).toBe('ERR_INVALID_OPTION');
  });

  it('reads an executable found through PATH when the command is a bare name', () => {
    const bin = path.join(dir, 'bin');
    mkdirp(bin);
    const linked = path.join(bin, 'target-on-path');
    execFileSync('cp', [dynamicProgram, linked]);
    chmodSync(linked, 0o755);
    const resolved = resolveOnPath('target-on-path', { PATH: `/nonexistent:${bin}` });
    expect(resolved).toBe(linked);
    expect(decideSolverTelemetry({ requested: 'auto', binary: resolved, preloadLibrary: fakePreload, env: {} }).mode).toBe('preload');
    expect(resolveOnPath('no-such-program', { PATH: bin })).toBe('no-such-program');
  });
});
