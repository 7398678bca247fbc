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
