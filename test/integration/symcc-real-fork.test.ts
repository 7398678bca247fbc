/**
 * Fork at the target and stable branch ids on a real SymCC (QSYM backend) through the preload
 * library. Skipped unless SYMFENCE_SYMCC names the `symcc` compiler wrapper of an existing
 * installation (symfence never builds or downloads SymCC).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTelemetry, type Telemetry } from '../../src/scheduler/telemetry.js';
import { preloadLibraryPath } from '../../src/solver/preload-library.js';
import { SolverPool } from '../../src/solver/solver-pool.js';
import { stableSite } from '../helpers/fake-symcc.js';

const symcc = process.env.SYMFENCE_SYMCC;
const preload = preloadLibraryPath();
const BYTES = 80;

/** 80 independent byte comparisons (b[i] == 'A' + i % 26), each its own site, a memcmp and a hard nonlinear branch. */
const PROGRAM = `#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void) {
  unsigned char b[${BYTES} + 16] = {0};
  if (read(0, b, sizeof b) < (ssize_t)sizeof b) return 0;
  int s = 0;
${Array.from({ length: BYTES }, (_, i) => `  if (b[${i}] == ${65 + (i % 26)}) s += ${i + 1};`).join('\n')}
  if (memcmp(b + ${BYTES}, "MAGIC", 5) == 0) s += 100;
  uint64_t x = 0;
  memcpy(&x, b + ${BYTES} + 8, 8);
  if (getenv("HARD") && (x * x * x + 7 * x) % 1000000007ULL == 123456789ULL) s += 1000;
  printf("%d\\n", s);
  return 0;
}
`;

/** Every running process whose executable is `binary`. */
function processesOf(binary: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/exe`) === binary) {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        if (!stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) out.push(Number(entry));
      }
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

describe.skipIf(!symcc || preload === null)('fork at the target on real SymCC (needs SYMFENCE_SYMCC)', () => {
  let dir: string;
  let binary: string;
  let pool: SolverPool<Telemetry>;
  const input = Buffer.alloc(BYTES + 16, 'z'.charCodeAt(0));

  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-symcc-fork-'));
    writeFileSync(path.join(dir, 'many.c'), PROGRAM);
    binary = path.join(dir, 'many');
    execFileSync(symcc!, ['-O0', '-o', binary, path.join(dir, 'many.c')], { stdio: 'pipe' });
    pool = new SolverPool({ solver: { workers: 1, timeoutMs: 120_000 }, scratchParent: dir, parseTelemetry });
  }, 120_000);
  afterAll(async () => {
    await pool?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const trace = () => pool.run({ input: { bytes: input }, command: { binary, argv: [] }, preload: preload!, job: { targetBranch: 0n, actions: [], traceOnly: true } });

  it('two runs of one input give identical branch ids, the libc wrapper sites included', async () => {
    const [a, b] = [await trace(), await trace()];
    const rows = a.telemetry!.branchTrace;
    expect(rows.length).toBeGreaterThanOrEqual(BYTES + 1);
    expect(b.telemetry!.branchTrace).toEqual(rows);
    expect(b.telemetry!.openBranches).toEqual(a.telemetry!.openBranches);
    // The memcmp's site is the runtime wrapper's own address (it moves with ASLR): it is named by
    // the library's basename and its offset instead.
    const runtime = path.join(path.dirname(symcc!), 'libSymRuntime.so');
    const symbols = execFileSync('nm', ['-D', '--defined-only', runtime], { encoding: 'utf8' }).split('\n');
    const memcmp = symbols.find((l) => l.endsWith(' memcmp_symbolized'));
    if (memcmp !== undefined) expect(rows.at(-1)!.site).toBe(stableSite('libSymRuntime.so', BigInt(`0x${memcmp.split(' ')[0]}`)));
    const raw = JSON.parse(a.telemetryText!) as { preload: Record<string, unknown> };
    console.log(`trace: ${rows.length} rows, ${a.telemetry!.preload!.symbolicEvents} symbolic events, preload ${JSON.stringify(raw.preload)}`);
  }, 120_000);

  it('answers a 64-target group in one process, with one fork and the rest in place, each file attributed to the branch it flips', async () => {
    const rows = (await trace()).telemetry!.branchTrace;
    // The first 64 byte comparisons, in path order: row i is b[i] == 'A' + i % 26.
    const group = rows.slice(0, 64).map((r) => r.opposite);
    const byBranch = new Map(group.map((b, i) => [b, i]));
    const result = await pool.run({
      input: { bytes: input },
      command: { binary, argv: [] },
      preload: preload!,
      job: { targetBranch: group[0]!, actions: group.slice(1).map((branch) => ({ branch, kind: 'solve' as const })) },
    });
    expect(result.status).toBe('ok');
    const t = result.telemetry!;
    const raw = JSON.parse(result.telemetryText!) as { preload: Record<string, unknown>; generatedBy: [string, string, string][] };
    console.log(`directed, 64 targets: status ${result.status}, ${result.elapsedMs} ms, counters ${JSON.stringify(t.counters)}, preload ${JSON.stringify(raw.preload)}`);
    // One forked child proves QSYM's decision comes through the library; QSYM then solves exactly
    // the 63 other group branches in the process (negatePath calls), nothing it would inherit.
    expect(raw.preload).toMatchObject({ fork: true, forks: 1, inPlace: 63, negations: 63, interposed: true, forkFailed: false, forkCapped: false, threadsAtFork: 1 });
    expect(t.answers).toHaveLength(64);
    expect(t.answers!.every((a) => a.status === 'sat')).toBe(true);
    expect(t.targetStatus).toBe('sat');
    const files = new Map(result.generated.map((g) => [g.name, Buffer.from(g.bytes!)]));
    let checked = 0;
    for (const [name, opposite] of raw.generatedBy) {
      const i = byBranch.get(BigInt(opposite));
      expect(i, `${name} attributed to a group branch`).toBeDefined();
      const bytes = files.get(name);
      if (bytes === undefined) continue; // a duplicate of another output, dropped by content
      expect(bytes[i!], `${name} flips b[${i}]`).toBe('A'.charCodeAt(0) + (i! % 26));
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(64);
    // Forking every answer gives the same verdicts (the library's own switch, set on the process
    // directly: the solver pool keeps the library's variables to itself).
    const run = path.join(dir, 'forked');
    mkdirSync(path.join(run, 'out'), { recursive: true });
    writeFileSync(path.join(run, 'actions'), group.slice(1).map((b) => `${b} solve\n`).join(''));
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      LD_PRELOAD: preload!,
      SYMCC_OUTPUT_DIR: path.join(run, 'out'),
      SYMCC_TELEMETRY_OUT: path.join(run, 'telemetry.json'),
      SYMCC_TARGET_BRANCH: group[0]!.toString(),
      SYMCC_S2F_ACTIONS: path.join(run, 'actions'),
      SYMFENCE_PRELOAD_IN_PLACE: '0',
    };
    expect(spawnSync(binary, [], { env, input, stdio: ['pipe', 'ignore', 'ignore'], timeout: 120_000 }).status).toBe(0);
    const forkedText = readFileSync(path.join(run, 'telemetry.json'), 'utf8');
    const forkedRaw = JSON.parse(forkedText) as { preload: Record<string, unknown> };
    console.log(`directed, 64 targets, every answer forked: preload ${JSON.stringify(forkedRaw.preload)}`);
    expect(forkedRaw.preload).toMatchObject({ forks: 64, inPlace: 0, negations: 0 });
    expect(parseTelemetry(forkedText).answers!.map((a) => [a.branch, a.status])).toEqual(t.answers!.map((a) => [a.branch, a.status]));
  }, 180_000);

  it('leaves no process of the run behind when the run is aborted while a forked child solves', async () => {
    // A hard nonlinear branch: its child spends seconds in Z3, long enough to abort it mid-solve.
    const rows = (await pool.run({ input: { bytes: input }, command: { binary, argv: [] }, env: { HARD: '1' }, preload: preload!, job: { targetBranch: 0n, actions: [], traceOnly: true } })).telemetry!
      .branchTrace;
    const hard = rows.at(-1)!.opposite;
    const controller = new AbortController();
    const running = pool.run(
      // A second group branch the path never reaches keeps the group open, so the hard branch is
      // forked (a group's last open branch would be answered in place, with no child).
      { input: { bytes: input }, command: { binary, argv: [] }, env: { HARD: '1' }, preload: preload!, job: { targetBranch: hard, actions: [{ branch: 12345n, kind: 'solve' as const }] } },
      { signal: controller.signal },
    );
    const deadline = Date.now() + 60_000;
    let seen: number[] = [];
    while (Date.now() < deadline) {
      seen = processesOf(binary);
      if (seen.length >= 2) break; // the run and its forked child
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    console.log(`mid-fork: processes of the run before the abort: ${JSON.stringify(seen)}`);
    expect(seen.length).toBeGreaterThanOrEqual(2);
    controller.abort();
    await expect(running).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    expect(processesOf(binary)).toEqual([]);
  }, 180_000);
});
