/**
 * Bench: how to make a batch of freshly written temp files durable with the fewest, cheapest
 * barriers (docs/native.md "Which file barrier is faster"). Per batch of N files of a lease record's size:
 *
 * - `serial`   — write + fsync each file in turn (the one-barrier-per-file protocol, the baseline);
 * - `parallel` — write all, then fsync all at once on the libuv pool (`Promise.all(handle.sync())`);
 * - `syncfs`   — write all, then one `syncfs(fd)` from the native addon.
 *
 * Renames and directory barriers are identical in every mode and left out. `syncfs` flushes the
 * whole filesystem, so other writers on the same disk make it slower and noisier: measure on the
 * disk that will hold the lease directory (`--dir`). Rounds interleave the modes; medians.
 *
 * `npm run bench -- file-barrier [--files N] [--rounds R] [--dir PATH]`. Last line: one JSON object.
 */
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadNative, nativeLoadError } from '../src/native/bindings.js';

function argument(name: string): string | undefined {
  const at = process.argv.indexOf(`--${name}`);
  return at < 0 ? undefined : process.argv[at + 1];
}
function positive(name: string, fallback: number): number {
  const raw = argument(name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    console.error(`file-barrier bench: --${name} expects a positive integer, got ${JSON.stringify(raw)}`);
    process.exit(2);
  }
  return value;
}

const files = positive('files', 64);
const rounds = positive('rounds', 7);
const native = loadNative();
if (!native) {
  console.error(`file-barrier bench: the native addon is not built (${nativeLoadError()?.message ?? 'unknown'}); run npm run build:native`);
  process.exit(2);
}
const root = await fsp.mkdtemp(path.join(argument('dir') ?? os.tmpdir(), 'symfence-file-barrier-'));
const payload = JSON.stringify({ schema: 1, id: 'f'.repeat(64), owner: 'host:worker:12345:1700000000000000000', expiresAtMs: 1_700_000_000_000, target: '18446744073709551615' });

async function writeAll(dir: string): Promise<fsp.FileHandle[]> {
  return Promise.all(
    Array.from({ length: files }, async (_, i) => {
      const handle = await fsp.open(path.join(dir, `record-${i}.json.${process.pid}.tmp`), 'w');
      await handle.writeFile(payload);
      return handle;
    }),
  );
}

const modes: Record<string, (dir: string) => Promise<void>> = {
  serial: async (dir) => {
    for (let i = 0; i < files; i++) {
      const handle = await fsp.open(path.join(dir, `record-${i}.json.${process.pid}.tmp`), 'w');
      await handle.writeFile(payload);
      await handle.sync();
      await handle.close();
    }
  },
  parallel: async (dir) => {
    const handles = await writeAll(dir);
    await Promise.all(handles.map((h) => h.sync()));
    await Promise.all(handles.map((h) => h.close()));
  },
  syncfs: async (dir) => {
    const handles = await writeAll(dir);
    native.syncfs(handles[0]!.fd);
    await Promise.all(handles.map((h) => h.close()));
  },
};

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const timings: Record<string, number[]> = { serial: [], parallel: [], syncfs: [] };
try {
  console.log(`file-barrier: ${files} files of ${payload.length} bytes per batch, ${rounds} rounds, in ${root}`);
  console.log('round   serial_ms  parallel_ms  syncfs_ms');
  for (let round = 0; round <= rounds; round++) {
    const row: number[] = [];
    for (const [name, run] of Object.entries(modes)) {
      const dir = path.join(root, `${name}-${round}`);
      await fsp.mkdir(dir);
      const started = performance.now();
      await run(dir);
      const elapsed = performance.now() - started;
      await fsp.rm(dir, { recursive: true, force: true });
      if (round > 0) timings[name]!.push(elapsed); // round 0 is warm-up
      row.push(elapsed);
    }
    if (round > 0) console.log(`${String(round).padStart(5)}  ${row.map((v, i) => v.toFixed(2).padStart(i === 0 ? 10 : 11)).join(' ')}`);
  }
} finally {
  await fsp.rm(root, { recursive: true, force: true });
}
const serialMs = median(timings.serial!);
const parallelMs = median(timings.parallel!);
const syncfsMs = median(timings.syncfs!);
const winner = syncfsMs < parallelMs ? 'syncfs' : 'parallel';
console.log(`median: serial ${serialMs.toFixed(2)} ms, parallel fsync ${parallelMs.toFixed(2)} ms, syncfs ${syncfsMs.toFixed(2)} ms → ${winner} wins by ×${(Math.max(parallelMs, syncfsMs) / Math.min(parallelMs, syncfsMs)).toFixed(2)}`);
console.log(
  JSON.stringify({
    bench: 'file-barrier',
    files,
    rounds,
    serial_ms: Number(serialMs.toFixed(3)),
    parallel_ms: Number(parallelMs.toFixed(3)),
    syncfs_ms: Number(syncfsMs.toFixed(3)),
    ratio_serial_parallel: Number((serialMs / parallelMs).toFixed(3)),
    ratio_serial_syncfs: Number((serialMs / syncfsMs).toFixed(3)),
    ratio_parallel_syncfs: Number((parallelMs / syncfsMs).toFixed(3)),
    winner,
  }),
);
