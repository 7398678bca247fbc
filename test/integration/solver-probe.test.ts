/**
 * The solver probe on its own: what each kind of solver shows of SymCC's runtime. The real-SymCC
 * case runs only with `SYMFENCE_SYMCC` pointing at SymCC's `symcc` compiler wrapper.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { probeSolverCommand } from '../../src/coordinator/adapters/solver-probe.js';
import { campaignTelemetry } from '../../src/coordinator/adapters/campaign-components.js';
import { CAMPAIGN_OPTIONS } from '../../src/coordinator/campaign-options.js';
import { codeOfAsync } from '../helpers/error-code.js';
import { buildFakeSymcc, fakeSymccUnavailable } from '../helpers/fake-symcc.js';
import { fakeAflOut, REFERENCE_SOLVER } from '../helpers/cli-process.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempRoot(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-probe-'));
  dirs.push(dir);
  return dir;
}

describe('the solver probe', () => {
  it('passes the reference solver, which writes its own telemetry', async () => {
    const root = tempRoot();
    const out = fakeAflOut(root, ['s0'], 'builtin:demo @@');
    const command = { binary: process.execPath, argv: [REFERENCE_SOLVER, 'builtin:demo', '@@'] };
    const telemetry = campaignTelemetry(CAMPAIGN_OPTIONS.resolve({ aflOut: out }), command);
    const seed = path.join(out, 'main', 'queue', 'id:000000,time:0,execs:0,orig:seed0');
    expect(await probeSolverCommand({ command, telemetry, seed: { path: seed }, timeoutMs: 30_000 })).toBe('own-telemetry');
  });

  it('refuses /bin/true with ERR_SOLVER_NOT_SYMCC', async () => {
    const command = { binary: '/bin/true', argv: ['@@'] };
    const telemetry = campaignTelemetry(CAMPAIGN_OPTIONS.resolve({ outDir: tempRoot() }), command);
    expect(await codeOfAsync(probeSolverCommand({ command, telemetry, seed: { bytes: new Uint8Array([0x41]) }, timeoutMs: 30_000 }))).toBe('ERR_SOLVER_NOT_SYMCC');
  });

  it.skipIf(fakeSymccUnavailable() !== null)('sees the preload events of a stock-SymCC-like binary (the fake SymCC runtime, no banner)', async () => {
    const fake = buildFakeSymcc();
    const command = { binary: fake.program, argv: ['@@'] };
    const telemetry = campaignTelemetry(CAMPAIGN_OPTIONS.resolve({ outDir: tempRoot() }), command);
    expect(telemetry.mode).toBe('preload');
    expect(await probeSolverCommand({ command, telemetry, seed: { bytes: new TextEncoder().encode('AAAAAAAA') }, timeoutMs: 30_000 })).toBe('preload-events');
  });
});

const SYMCC = process.env['SYMFENCE_SYMCC'];

describe.skipIf(SYMCC === undefined || !existsSync(SYMCC))('the real SymCC passes the probe', () => {
  it('a target built with symcc shows its runtime through the preload library (or its banner)', async () => {
    const root = tempRoot();
    const source = path.join(root, 't.c');
    writeFileSync(source, '#include <stdio.h>\nint main(int c, char **v) { char b[4] = {0}; FILE *f = fopen(v[1], "rb"); if (!f) return 1; fread(b, 1, 4, f); if (b[0] == 0x41) puts("A"); return 0; }\n');
    const binary = path.join(root, 't_symcc');
    execFileSync(SYMCC!, ['-O1', '-o', binary, source], { stdio: 'pipe' });
    const out = fakeAflOut(root, ['AB'], 'builtin:demo @@');
    const command = { binary, argv: ['@@'] };
    const telemetry = campaignTelemetry(CAMPAIGN_OPTIONS.resolve({ aflOut: out }), command);
    const seed = path.join(out, 'main', 'queue', 'id:000000,time:0,execs:0,orig:seed0');
    const evidence = await probeSolverCommand({ command, telemetry, seed: { path: seed }, timeoutMs: 30_000 });
    // A dynamically linked SymCC (the default build) is interposed: the preload library counts its branch hooks.
    expect(telemetry.mode).toBe('preload');
    expect(evidence).toBe('preload-events');
  });
});
