import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { SolverPool } from '../../src/solver/solver-pool.js';

// Real SymCC is never built or downloaded here: set SYMFENCE_SYMCC to the `symcc` compiler wrapper
// of an existing installation (QSYM backend) to run this test.
const symcc = process.env.SYMFENCE_SYMCC;

it.skipIf(!symcc)('runs a real SymCC-compiled program and gets at least one generated input (needs SYMFENCE_SYMCC)', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-symcc-'));
  const pool = new SolverPool({ solver: { workers: 1, timeoutMs: 60_000 }, scratchParent: dir });
  try {
    writeFileSync(
      path.join(dir, 'tiny.c'),
      `#include <stdio.h>
#include <unistd.h>
int main(void) {
  unsigned char buf[16] = {0};
  if (read(0, buf, sizeof buf) < 4) return 0;
  if (buf[0] == 'S' && buf[1] == 'Y' && buf[2] == 'M') puts("deep");
  return 0;
}
`,
    );
    const binary = path.join(dir, 'tiny');
    execFileSync(symcc!, ['-o', binary, path.join(dir, 'tiny.c')], { stdio: 'pipe' });
    const result = await pool.run({ input: { bytes: Buffer.from('AAAAAAAAAAAAAAAA') }, command: { binary, argv: [] } });
    expect(result.status).toBe('ok');
    expect(result.generated.length).toBeGreaterThanOrEqual(1);
    expect(result.generated.every((g) => g.sizeBytes === 16)).toBe(true);
  } finally {
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

it.skipIf(!symcc)('a stock SymCC binary through the preload library: a directed run at one open branch solves only that branch, and its output flips it (needs SYMFENCE_SYMCC)', async () => {
  const { preloadLibraryPath } = await import('../../src/solver/preload-library.js');
  const { decideSolverTelemetry } = await import('../../src/solver/solver-telemetry.js');
  const { parseTelemetry } = await import('../../src/scheduler/telemetry.js');
  const preload = preloadLibraryPath();
  expect(preload, 'the preload library is built').not.toBeNull();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'symfence-symcc-preload-'));
  const pool = new SolverPool({ solver: { workers: 1, timeoutMs: 60_000 }, scratchParent: dir, parseTelemetry });
  try {
    writeFileSync(
      path.join(dir, 'branches.c'),
      `#include <stdio.h>
#include <unistd.h>
int main(void) {
  unsigned char b[8] = {0};
  if (read(0, b, sizeof b) < 8) return 0;
  int s = 0;
  if (b[0] == 'A') s += 1;
  if (b[1] == 'B') s += 2;
  if (b[2] == 'C') s += 4;
  printf("%d\\n", s);
  return 0;
}
`,
    );
    const binary = path.join(dir, 'branches');
    execFileSync(symcc!, ['-o', binary, path.join(dir, 'branches.c')], { stdio: 'pipe' });
    // auto picks the preload library for a stock (dynamically linked) SymCC binary.
    const decision = decideSolverTelemetry({ requested: 'auto', binary, preloadLibrary: preload, env: process.env });
    expect(decision.mode).toBe('preload');
    const input = Buffer.from('xxxxxxxx');
    const trace = await pool.run({ input: { bytes: input }, command: { binary, argv: [] }, preload: preload!, job: { targetBranch: 0n, actions: [], traceOnly: true } });
    expect(trace.generated).toHaveLength(0);
    const rows = trace.telemetry!.branchTrace;
    expect(rows.length).toBeGreaterThanOrEqual(3);
    const target = rows[1]!.opposite; // b[1] == 'B' the other way
    const directed = await pool.run({ input: { bytes: input }, command: { binary, argv: [] }, preload: preload!, job: { targetBranch: target, actions: [] } });
    expect(directed.telemetry!.counters.queries).toBe(1);
    expect(directed.telemetry!.targetStatus).toBe('sat');
    expect(directed.generated.length).toBeGreaterThanOrEqual(1);
    for (const g of directed.generated) {
      const bytes = Buffer.from(g.bytes!);
      expect(bytes[1]).toBe('B'.charCodeAt(0));
      expect(bytes[0]).not.toBe('A'.charCodeAt(0));
    }
  } finally {
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
