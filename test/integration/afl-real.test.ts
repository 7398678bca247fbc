import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEMO_MAZE } from '../../src/reference/demo-maze.js';
import { mazeToC } from '../../src/reference/maze-c.js';
import { aflToolEnv } from '../../src/solver/solver-env.js';
import { campaignDiagnosis, lastJsonLine, REFERENCE_SOLVER, runCliProcess, waitFor } from '../helpers/cli-process.js';

function which(name: string): string | undefined {
  try {
    return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}
const missing = !which('afl-cc') || !which('afl-fuzz') || !which('afl-showmap');

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Known AFL++ variables only: an unknown AFL_* name costs a 2 s sleep per tool start. */
const AFL_ENV = { AFL_NO_UI: '1', AFL_SKIP_CPUFREQ: '1', AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES: '1', AFL_NO_AFFINITY: '1' };

function aflFuzz(cwd: string, args: readonly string[], extraEnv: Record<string, string> = {}): Promise<number | null> {
  return new Promise((resolve) => {
    // aflToolEnv drops every AFL_* name but a few; afl-fuzz's own known switches are added after.
    const child = spawn('afl-fuzz', args, { cwd, env: { ...aflToolEnv(process.env), ...AFL_ENV, ...extraEnv }, stdio: 'ignore' });
    child.on('close', (code) => resolve(code));
  });
}

describe.skipIf(missing)('symfence run beside real AFL++', () => {
  it('publishes queue entries that afl-fuzz -M reads from the symfence peer', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'symfence-afl-'));
    dirs.push(dir);
    writeFileSync(path.join(dir, 'maze.c'), mazeToC(DEMO_MAZE));
    execFileSync('afl-cc', ['-O0', '-o', path.join(dir, 'maze_afl'), path.join(dir, 'maze.c')], { env: aflToolEnv(process.env, { AFL_QUIET: '1' }), stdio: 'pipe' });
    mkdirSync(path.join(dir, 'in'));
    writeFileSync(path.join(dir, 'in', 'seed'), 'AAAAAAAAAAAAAAAA');

    // AFL++ creates its instance (queue, fuzzer_stats with the target command line), bounded by
    // executions, not time: a fast machine's two seconds of AFL++ once found every maze edge the
    // solver can reach, and symfence then rightly published nothing new.
    expect(await aflFuzz(dir, ['-i', 'in', '-o', 'out', '-M', 'main', '-E', '50', '--', './maze_afl', '@@'])).toBe(0);
    expect(existsSync(path.join(dir, 'out', 'main', 'fuzzer_stats'))).toBe(true);

    // symfence reads AFL's queue and triages with the real afl-showmap on AFL's target.
    const run = runCliProcess(
      ['run', '--afl-out', 'out', '--afl-instance', 'main', '--name', 'symfence', '--workers', '1', '--duration', '150s', '--json', '--log-level', 'warn',
        '--', process.execPath, REFERENCE_SOLVER, 'builtin:demo', '@@'],
      { cwd: dir },
    );
    const queue = path.join(dir, 'out', 'symfence', 'queue');
    await waitFor(() => (existsSync(queue) && readdirSync(queue).some((n) => n.startsWith('id:')) ? true : undefined), 120_000, 'a symfence queue entry', () => campaignDiagnosis(path.join(dir, 'out', 'symfence'), run.stderrSoFar())); // a hang guard: a loaded CI machine has taken over 40 s

    // AFL++ resumes beside the running coordinator and imports its peer's entries first.
    expect(await aflFuzz(dir, ['-i', '-', '-o', 'out', '-M', 'main', '-V', '2', '--', './maze_afl', '@@'], { AFL_AUTORESUME: '1', AFL_IMPORT_FIRST: '1' })).toBe(0);
    // AFL++ keeps a per-peer cursor, `.synced/<peer>`: the next id it will take from that peer. It
    // moves past every entry AFL read; entries that added coverage for AFL also appear in its queue
    // as `sync:symfence` (whether any does depends on what AFL had already found by itself).
    const cursorFile = path.join(dir, 'out', 'main', '.synced', 'symfence');
    expect(existsSync(cursorFile)).toBe(true);
    const cursor = readFileSync(cursorFile).readUInt32LE(0);
    expect(cursor).toBeGreaterThan(0);
    const imported = readdirSync(path.join(dir, 'out', 'main', 'queue')).filter((n) => n.includes('sync:symfence'));
    for (const name of imported) expect(Number(/src:(\d+)/.exec(name)?.[1])).toBeLessThan(cursor);

    run.child.kill('SIGINT'); // first signal: clean stop
    const exit = await run.exit;
    expect(exit.code, exit.stderr).toBe(0);
    expect(lastJsonLine(exit.stdout)).toMatchObject({ shutdown: expect.any(Object) });
    expect(readdirSync(queue).every((n) => /^id:\d{6},src:\d{6}$/.test(n))).toBe(true);
  }, 240_000);
});
