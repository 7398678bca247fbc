/**
 * Just enough of an ELF reader to tell whether a SymCC binary can be interposed: is it
 * dynamically linked, which libraries does it need (`DT_NEEDED`), where does it look for them
 * (`DT_RUNPATH`/`DT_RPATH`), and which symbol names does it import or define.
 *
 * Reads only headers, the dynamic segment and string tables through one file descriptor, all of
 * them together within one allocation budget (`MAX_TOTAL_READ_BYTES`): a hostile file whose headers
 * point at several huge (sparse) tables is refused before the read that would pass the budget; a file that is not ELF, or is truncated or inconsistent, is reported as such
 * (`kind: 'not-elf'` / `'malformed'`), never thrown at the caller — this runs on user input
 * before a campaign starts, and a clear verdict is more useful than a stack trace.
 */
import { closeSync, fstatSync, openSync, readSync, constants as fsConstants } from 'node:fs';

export type ElfInfo =
  | { readonly kind: 'not-elf' }
  | { readonly kind: 'malformed'; readonly reason: string }
  | {
      readonly kind: 'elf';
      /** Has a `PT_DYNAMIC` segment (an interpreter or a shared object). */
      readonly dynamic: boolean;
      readonly needed: readonly string[];
      /** `DT_RUNPATH` (or `DT_RPATH` when there is no RUNPATH), split on `:`. */
      readonly runpath: readonly string[];
      /** Does a string table (dynamic, or the static symbol table's) contain this name? */
      hasSymbolName(name: string): boolean;
      /** Does the dynamic string table (names resolved by the dynamic loader) contain it? */
      hasDynamicSymbolName(name: string): boolean;
    };

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const DT_NULL = 0;
const DT_NEEDED = 1;
const DT_STRTAB = 5;
const DT_STRSZ = 10;
const DT_RPATH = 15;
const DT_RUNPATH = 29;
const SHT_SYMTAB = 2;
/**
 * Every byte the reader allocates for one file, headers and tables together (a real SymCC target's
 * dynamic segment and string tables are a few MiB). A file needing more is `malformed`.
 */
const MAX_TOTAL_READ_BYTES = 64 * 1024 * 1024;
const MAX_HEADERS = 4096;
/** More DT_NEEDED entries than a real binary has, or a longer name, makes the file malformed. */
const MAX_NEEDED = 1024;
const MAX_NAME_BYTES = 4096;

interface Reader {
  readonly size: number;
  /** Bytes `bytes()` may still allocate for this file. */
  remaining(): number;
  bytes(offset: number, length: number): Buffer;
}

class Layout {
  constructor(
    readonly is64: boolean,
    readonly little: boolean,
  ) {}
  u16(b: Buffer, at: number): number {
    return this.little ? b.readUInt16LE(at) : b.readUInt16BE(at);
  }
  u32(b: Buffer, at: number): number {
    return this.little ? b.readUInt32LE(at) : b.readUInt32BE(at);
  }
  /** An address or offset: u64 on ELF64 (as a number; files beyond 2^53 are not a concern). */
  word(b: Buffer, at: number): number {
    if (!this.is64) return this.u32(b, at);
    return Number(this.little ? b.readBigUInt64LE(at) : b.readBigUInt64BE(at));
  }
  /** Signed tag of a dynamic entry. */
  tag(b: Buffer, at: number): number {
    if (!this.is64) return this.little ? b.readInt32LE(at) : b.readInt32BE(at);
    return Number(this.little ? b.readBigInt64LE(at) : b.readBigInt64BE(at));
  }
}

class Malformed extends Error {}

function check(condition: boolean, reason: string): asserts condition {
  if (!condition) throw new Malformed(reason);
}

/** Reads the ELF facts of `file`. Throws only for a file that cannot be opened (ENOENT, EACCES …). */
export function readElfInfo(file: string): ElfInfo {
  const fd = openSync(file, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { kind: 'not-elf' };
    let allocated = 0;
    const reader: Reader = {
      size: stat.size,
      remaining: () => MAX_TOTAL_READ_BYTES - allocated,
      bytes(offset, length) {
        check(offset >= 0 && length >= 0 && offset + length <= stat.size, `read past the end of the file (${offset}+${length} > ${stat.size})`);
        // Charged before allocating: the refusal costs nothing.
        check(allocated + length <= MAX_TOTAL_READ_BYTES, `headers and tables beyond the ${MAX_TOTAL_READ_BYTES / (1024 * 1024)} MiB bound of any real binary`);
        allocated += length;
        const buffer = Buffer.alloc(length);
        let done = 0;
        while (done < length) {
          const n = readSync(fd, buffer, done, length - done, offset + done);
          check(n > 0, 'file shrank while being read');
          done += n;
        }
        return buffer;
      },
    };
    try {
      return parse(reader);
    } catch (error) {
      if (error instanceof Malformed) return { kind: 'malformed', reason: error.message };
      throw error;
    }
  } finally {
    closeSync(fd);
  }
}

function parse(r: Reader): ElfInfo {
  if (r.size < 52) return { kind: 'not-elf' };
  const ident = r.bytes(0, 16);
  if (ident[0] !== 0x7f || ident[1] !== 0x45 || ident[2] !== 0x4c || ident[3] !== 0x46) return { kind: 'not-elf' };
  check(ident[4] === 1 || ident[4] === 2, `unknown ELF class ${ident[4]}`);
  check(ident[5] === 1 || ident[5] === 2, `unknown ELF data encoding ${ident[5]}`);
  const L = new Layout(ident[4] === 2, ident[5] === 1);
  const header = r.bytes(0, L.is64 ? 64 : 52);
  const phoff = L.word(header, L.is64 ? 0x20 : 0x1c);
  const shoff = L.word(header, L.is64 ? 0x28 : 0x20);
  const phentsize = L.u16(header, L.is64 ? 0x36 : 0x2a);
  const phnum = L.u16(header, L.is64 ? 0x38 : 0x2c);
  const shentsize = L.u16(header, L.is64 ? 0x3a : 0x2e);
  const shnum = L.u16(header, L.is64 ? 0x3c : 0x30);
  check(phnum <= MAX_HEADERS && shnum <= MAX_HEADERS, 'too many program or section headers');
  check(phnum === 0 || phentsize >= (L.is64 ? 56 : 32), `program header entries of ${phentsize} bytes`);

  const loads: { vaddr: number; offset: number; filesz: number }[] = [];
  let dynamicSegment: { offset: number; filesz: number } | undefined;
  if (phnum > 0) {
    const table = r.bytes(phoff, phnum * phentsize);
    for (let i = 0; i < phnum; i++) {
      const at = i * phentsize;
      const type = L.u32(table, at);
      const offset = L.word(table, at + (L.is64 ? 0x08 : 0x04));
      const vaddr = L.word(table, at + (L.is64 ? 0x10 : 0x08));
      const filesz = L.word(table, at + (L.is64 ? 0x20 : 0x10));
      if (type === PT_LOAD) loads.push({ vaddr, offset, filesz });
      else if (type === PT_DYNAMIC) dynamicSegment = { offset, filesz };
    }
  }

  const stringTables: Buffer[] = [];
  let dynamicStrings: Buffer | undefined;
  const needed: string[] = [];
  let runpath: string[] = [];
  if (dynamicSegment !== undefined) {
    const dyn = r.bytes(dynamicSegment.offset, dynamicSegment.filesz);
    const entry = L.is64 ? 16 : 8;
    const half = entry / 2;
    const entries: { tag: number; value: number }[] = [];
    for (let at = 0; at + entry <= dyn.length; at += entry) {
      const tag = L.tag(dyn, at);
      if (tag === DT_NULL) break;
      entries.push({ tag, value: L.word(dyn, at + half) });
    }
    const strtabAddr = entries.find((e) => e.tag === DT_STRTAB)?.value;
    const strsz = entries.find((e) => e.tag === DT_STRSZ)?.value;
    check(strtabAddr !== undefined && strsz !== undefined, 'dynamic segment without DT_STRTAB/DT_STRSZ');
    // DT_STRTAB is a virtual address: find the loaded segment that maps it to file bytes.
    const load = loads.find((l) => strtabAddr >= l.vaddr && strtabAddr + strsz <= l.vaddr + l.filesz);
    check(load !== undefined, 'DT_STRTAB lies outside every loaded segment');
    const strtab = r.bytes(load.offset + (strtabAddr - load.vaddr), strsz);
    stringTables.push(strtab);
    dynamicStrings = strtab;
    const str = (offset: number): string => {
      check(offset < strtab.length, `string offset ${offset} past the dynamic string table`);
      const end = strtab.indexOf(0, offset);
      check(end >= 0 && end - offset <= MAX_NAME_BYTES, `unterminated or over-long name at string offset ${offset}`);
      return strtab.toString('utf8', offset, end);
    };
    for (const e of entries) {
      if (e.tag !== DT_NEEDED) continue;
      check(needed.length < MAX_NEEDED, `more than ${MAX_NEEDED} DT_NEEDED entries`);
      needed.push(str(e.value));
    }
    const rp = entries.find((e) => e.tag === DT_RUNPATH) ?? entries.find((e) => e.tag === DT_RPATH);
    if (rp !== undefined) runpath = str(rp.value).split(':').filter((p) => p !== '');
  }

  // The static symbol table's names (a statically linked SymCC binary still names the runtime's
  // functions there unless stripped).
  if (shnum > 0 && shentsize >= (L.is64 ? 64 : 40) && shoff > 0 && shoff + shnum * shentsize <= r.size) {
    const sections = r.bytes(shoff, shnum * shentsize);
    const readTables = new Set<string>();
    const field = (i: number, off64: number, off32: number, wide: boolean): number =>
      wide ? L.word(sections, i * shentsize + (L.is64 ? off64 : off32)) : L.u32(sections, i * shentsize + (L.is64 ? off64 : off32));
    for (let i = 0; i < shnum; i++) {
      if (field(i, 0x04, 0x04, false) !== SHT_SYMTAB) continue;
      const link = field(i, 0x28, 0x18, false);
      if (link >= shnum) continue;
      const offset = field(link, 0x18, 0x10, true);
      const size = field(link, 0x20, 0x14, true);
      const key = `${offset}:${size}`;
      // A static string table that does not fit what is left of the budget is skipped (a huge
      // debug build), not fatal: it only tells a statically linked SymCC binary apart.
      if (readTables.has(key) || offset + size > r.size || size > r.remaining()) continue;
      readTables.add(key);
      stringTables.push(r.bytes(offset, size));
    }
  }

  return {
    kind: 'elf',
    dynamic: dynamicSegment !== undefined,
    needed,
    runpath,
    hasSymbolName(name: string): boolean {
      return stringTables.some((t) => tableHas(t, name));
    },
    hasDynamicSymbolName(name: string): boolean {
      return dynamicStrings !== undefined && tableHas(dynamicStrings, name);
    },
  };
}

/** A string table holds NUL-terminated names; the first may start at offset 0. */
function tableHas(table: Buffer, name: string): boolean {
  const needle = Buffer.from(`\0${name}\0`);
  return table.indexOf(needle) >= 0 || (table.length >= name.length + 1 && table.subarray(0, name.length + 1).equals(needle.subarray(1)));
}
