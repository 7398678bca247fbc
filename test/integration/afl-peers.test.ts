import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoverageBitmap } from '../../src/solver/coverage-bitmap.js';
import { aflToolEnv } from '../../src/solver/solver-env.js';
import { AflPeers, countQueueNames } from '../../src/triage/afl-peers.js';

function which(name: string): string | undefined {
  try {
    return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}
const missing = !which('afl-cc') || !which('afl-fuzz') || !which('afl-showmap');

const AFL_ENV = { AFL_NO_UI: '1', AFL_SKIP_CPUFREQ: '1', AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES: '1', AFL_NO_AFFINITY: '1' };

function aflFuzz(cwd: string, args: readonly string[], extraEnv: Record<string, string> = {}): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn('afl-fuzz', args, { cwd, env: { ...aflToolEnv(process.env), ...AFL_ENV, ...extraEnv }, stdio: 'ignore' });
    child.on('close', (code) => resolve(code));
  });
}

/** A magic-bytes parser: AFL++ alone rarely gets past the second byte in a few seconds. */
const TARGET_C = String.raw`
#include <stdio.h>
int main(int argc, char **argv) {
  char b[64] = {0}; FILE *f = fopen(argv[1], "rb"); if (!f) return 1;
  size_t n = fread(b, 1, 63, f); fclose(f);
  int s = 0;
  if (n > 3 && b[0] == 'S' && b[1] == 'Y') { s++; if (b[2] == 'M' && b[3] == 'F') { s++; if (n > 5 && b[4] == 'E' && b[5] == 'N') s++; } }
  for (size_t i = 0; i < n; i++) if (b[i] == 'x') s += 2;
  printf("%d\n", s);
  return 0;
}
`;

let dir = '';
beforeAll(async () => {
  if (missing) return;
  dir = mkdtempSync(path.join(tmpdir(), 'symfence-afl-peers-'));
  writeFileSync(path.join(dir, 't.c'), TARGET_C);
  execFileSync('afl-cc', ['-O0', '-o', path.join(dir, 't_afl'), path.join(dir, 't.c')], { env: aflToolEnv(process.env, { AFL_QUIET: '1' }), stdio: 'pipe' });
  mkdirSync(path.join(dir, 'in'));
  writeFileSync(path.join(dir, 'in', 'seed'), 'AAAAxx');
  expect(await aflFuzz(dir, ['-i', 'in', '-o', 'out', '-M', 'main', '-V', '3', '--', './t_afl', '@@'])).toBe(0);
}, 60_000);
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Union of `afl-showmap -b` maps over every entry of `queue`, bucketed as the global map keeps it. */
function showmapUnion(queue: string): { union: CoverageBitmap; maps: Uint8Array[] } {
  const union = new CoverageBitmap();
  const maps: Uint8Array[] = [];
  const mapFile = path.join(dir, 'one.map');
  for (const name of readdirSync(queue).filter((n) => n.startsWith('id:'))) {
    execFileSync('afl-showmap', ['-q', '-b', '-m', 'none', '-t', '2000', '-o', mapFile, '--', path.join(dir, 't_afl'), path.join(queue, name)], {
      env: aflToolEnv(process.env),
      stdio: 'pipe',
    });
    const map = new Uint8Array(readFileSync(mapFile));
    maps.push(map);
    union.claim(map);
  }
  return { union, maps };
}

describe.skipIf(missing)('the campaign map seeded from real AFL++ instances', () => {
  it('merges an instance’s fuzz_bitmap: exactly the union of showmap maps of its queue, so no entry of it is new afterwards', async () => {
    const bitmap = new CoverageBitmap();
    const peers = new AflPeers({ aflOut: path.join(dir, 'out'), ourName: 'symfence', merge: (m) => bitmap.claim(m).newBytes });
    await peers.refresh();
    const { union, maps } = showmapUnion(path.join(dir, 'out', 'main', 'queue'));
    const snap = peers.snapshot();
    expect(snap.instances.main!.queue).toBe(maps.length);
    expect(snap.mergedEdges).toBe(union.edgesCovered());
    expect(snap.instances.main!.edges).toBe(union.edgesCovered());
    // Every AFL++ entry is now old news to triage.
    for (const map of maps) expect(bitmap.claim(map)).toEqual({ newBytes: 0, newBits: 0 });
    // Merging again adds nothing.
    await peers.refresh();
    expect(peers.snapshot().mergedEdges).toBe(union.edgesCovered());
  }, 60_000);

  it('counts the inputs of ours an instance imported, matching sync:<name> entries to our ids by their src field', async () => {
    const ours = path.join(dir, 'out', 'symfence', 'queue');
    mkdirSync(ours, { recursive: true });
    // Two inputs AFL++ lacks (deeper magic), one it has (the seed again).
    const published = new Map([
      ['000000', 'SYMFxx'],
      ['000001', 'SYMFENxx'],
      ['000002', 'AAAAxx'],
    ]);
    for (const [id, text] of published) writeFileSync(path.join(ours, `id:${id},src:000000`), text);
    expect(await aflFuzz(dir, ['-i', '-', '-o', 'out', '-M', 'main', '-V', '2', '--', './t_afl', '@@'], { AFL_AUTORESUME: '1', AFL_IMPORT_FIRST: '1' })).toBe(0);

    const peers = new AflPeers({ aflOut: path.join(dir, 'out'), ourName: 'symfence' });
    await peers.refresh();
    const main = peers.snapshot().instances.main!;
    const queue = path.join(dir, 'out', 'main', 'queue');
    const imports = readdirSync(queue).filter((n) => n.includes(',sync:symfence,'));
    // AFL++ keeps the two new ones, not the one it had.
    expect(main.imported).toBe(2);
    expect(peers.snapshot().imported).toBe(2);
    for (const name of imports) {
      const src = /src:(\d+)/.exec(name)![1]!;
      expect(readFileSync(path.join(queue, name), 'utf8')).toBe(published.get(src));
    }
    // Our own directory is never read as a peer.
    expect(peers.snapshot().instances.symfence).toBeUndefined();
  }, 60_000);
});

describe('queue name counting', () => {
  it('counts distinct src ids of one peer’s sync entries, not another peer’s or a peer whose name only starts the same', () => {
    const names = [
      'id:000000,time:0,execs:0,orig:seed',
      'id:000001,src:000000,time:5,execs:9,op:havoc,rep:2,+cov',
      'id:000002,sync:symfence,src:000004',
      'id:000003,sync:symfence,src:000004',
      'id:000004,sync:symfence,src:000007,+cov',
      'id:000005,sync:symfence2,src:000001',
      'id:000006,sync:other,src:000002',
      '.state',
    ];
    expect(countQueueNames(names, 'symfence')).toEqual({ imported: 2, queue: 7, cov: 2 });
  });
});
