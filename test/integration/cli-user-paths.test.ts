// Output and log paths the CLI cannot use end the command at once: exit 2, one stderr line with
// `[ERR_INVALID_OPTION]`, the option's flag and the path — never a spin, never a stray directory.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanedAfterEach, fakeAflOut, REFERENCE_SOLVER, runCliProcess } from '../helpers/cli-process.js';

const { dirs, children } = cleanedAfterEach();

function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'symfence-userpaths-'));
  dirs.push(dir);
  return dir;
}

/** Runs the built CLI; a child still alive after 60 s (the old procfs spin) is killed and fails the test. */
async function cli(args: readonly string[], cwd?: string): Promise<{ code: number | null; stderr: string; stdout: string; killed: boolean }> {
  const run = runCliProcess(args, cwd ? { cwd } : {});
  children.push(run.child);
  let killed = false;
  const guard = setTimeout(() => {
    killed = true;
    run.child.kill('SIGKILL');
  }, 60_000);
  const exit = await run.exit;
  clearTimeout(guard);
  return { code: exit.code, stderr: exit.stderr, stdout: exit.stdout, killed };
}

function expectOneCodedLine(result: { code: number | null; stderr: string; killed: boolean }, flag: string, file: string): void {
  expect(result.killed).toBe(false);
  expect(result.code).toBe(2);
  const lines = result.stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toContain('[ERR_INVALID_OPTION]');
  expect(lines[0]).toContain(flag);
  expect(lines[0]).toContain(file);
}

describe('CLI user paths', () => {
  it('refuses --out-dir under /proc, at a file, under a file and under a dangling symlink, creating nothing', async () => {
    const root = tempDir();
    const file = path.join(root, 'plain-file');
    writeFileSync(file, 'x');
    symlinkSync(path.join(root, 'missing-target'), path.join(root, 'dangling'));
    const cases = ['/proc/symfence-nope', '/proc/symfence-nope/a/b', file, path.join(file, 'sub'), path.join(root, 'dangling', 'sub')];
    for (const outDir of cases) {
      const result = await cli(['demo', '--out-dir', outDir, '--duration', '30s', '--workers', '1']);
      expectOneCodedLine(result, '--out-dir', outDir);
    }
    expect(existsSync(path.join(root, 'missing-target'))).toBe(false);
    expect(existsSync('/proc/symfence-nope')).toBe(false);
  });

  it('refuses `run --out-dir /proc/…` with a coded line instead of spinning', async () => {
    const root = tempDir();
    const out = fakeAflOut(root, ['AAAA'], 'builtin:demo @@');
    // A working triage set-up (the reference showmap mode), so the out-dir is what gets refused.
    const showmap = `${process.execPath} ${REFERENCE_SOLVER} showmap`;
    const result = await cli(['run', '--afl-out', out, '--afl-instance', 'main', '--out-dir', '/proc/symfence-nope', '--duration', '5s', '--showmap', showmap, '--', process.execPath, REFERENCE_SOLVER, 'builtin:demo', '@@']);
    expectOneCodedLine(result, '--out-dir', '/proc/symfence-nope');
  });

  it('refuses a --solver-scratch-dir that is missing or a file before any job, and runs its solvers under a usable one', async () => {
    const root = tempDir();
    const file = path.join(root, 'plain-file');
    writeFileSync(file, 'x');
    for (const scratch of [path.join(root, 'missing'), file]) {
      const outDir = path.join(root, `out-${path.basename(scratch)}`);
      const result = await cli(['demo', '--out-dir', outDir, '--solver-scratch-dir', scratch, '--duration', '30s', '--workers', '1']);
      expectOneCodedLine(result, '--solver-scratch-dir', scratch);
      expect(existsSync(path.join(outDir, 'jobs.jsonl'))).toBe(false);
    }
    expect(existsSync(path.join(root, 'missing'))).toBe(false);
    // A usable one: the pool's scratch directory is made there. With no removal budget at close,
    // its closed directory stays behind for the next start's sweep, which shows where it was.
    const scratch = path.join(root, 'scratch');
    mkdirSync(scratch);
    const outDir = path.join(root, 'out');
    const run = runCliProcess(['demo', '--out-dir', outDir, '--solver-scratch-dir', scratch, '--duration', '30s', '--workers', '1', '--json'], {
      env: { SYMFENCE_SOLVER_CLOSE_REMOVAL_ENTRIES: '0' },
    });
    children.push(run.child);
    const exit = await run.exit;
    expect(exit.code, exit.stderr).toBe(0);
    expect(readFileSync(path.join(outDir, 'jobs.jsonl'), 'utf8').trim().split('\n').length).toBeGreaterThan(0);
    const left = readdirSync(scratch);
    expect(left).toHaveLength(1);
    expect(left[0]).toMatch(/^symfence-solver-\d+-\d+-.*\.closed$/);
    expect(readdirSync(path.join(scratch, left[0]!)).some((name) => name.startsWith('slot-') || name === 'trash')).toBe(true);
  });

  it('refuses a --log-file whose directory is missing outside the output directory, under a file or on procfs, creating no directory', async () => {
    const root = tempDir();
    const file = path.join(root, 'plain-file');
    writeFileSync(file, 'x');
    const outDir = path.join(root, 'out');
    const cases = [path.join(root, 'elsewhere', 'deeper', 'a.log'), path.join(file, 'a.log'), '/proc/symfence-nope.log'];
    for (const logFile of cases) {
      const result = await cli(['demo', '--out-dir', outDir, '--log-file', logFile, '--duration', '30s', '--workers', '1']);
      expectOneCodedLine(result, '--log-file', logFile);
    }
    expect(existsSync(path.join(root, 'elsewhere'))).toBe(false);
  });

  it('creates a missing --log-file directory inside the output directory and runs', async () => {
    const root = tempDir();
    const outDir = path.join(root, 'out');
    const logFile = path.join(outDir, 'logs', 'deep', 'a.log');
    const result = await cli(['demo', '--out-dir', outDir, '--log-file', logFile, '--duration', '1s', '--workers', '1', '--json']);
    expect(result.killed).toBe(false);
    expect(result.code).toBe(0);
    expect(existsSync(logFile)).toBe(true);
  });

  it('refuses --out-dir and --log-file on sysfs, where even root may not create (EPERM, EACCES or EROFS), with a coded line', async (ctx) => {
    if (!existsSync('/sys/kernel')) ctx.skip();
    const outDir = '/sys/symfence-nope';
    expectOneCodedLine(await cli(['demo', '--out-dir', outDir, '--duration', '30s', '--workers', '1']), '--out-dir', outDir);
    const root = tempDir();
    const logFile = '/sys/symfence-nope.log';
    expectOneCodedLine(await cli(['demo', '--out-dir', path.join(root, 'out'), '--log-file', logFile, '--duration', '30s', '--workers', '1']), '--log-file', logFile);
  });

  it('refuses an unwritable --out-dir with a coded line (skipped as root: root writes anywhere, the cases above fail for root too)', async (ctx) => {
    if (process.getuid?.() === 0) ctx.skip();
    const root = tempDir();
    const locked = path.join(root, 'locked');
    mkdirSync(locked, { mode: 0o500 });
    const outDir = path.join(locked, 'out');
    const result = await cli(['demo', '--out-dir', outDir, '--duration', '30s', '--workers', '1']);
    expectOneCodedLine(result, '--out-dir', outDir);
  });
});
