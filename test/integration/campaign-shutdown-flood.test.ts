/**
 * `symfence run` stops promptly while its solver floods the run directory: the stop aborts the run, the run's directory goes into the pool's trash with one rename, and close()
 * removes only its entry budget (docs/solver.md, "Where a run's directory goes"). So the stop costs
 * the same whatever the flood's size, and the next start removes what was left.
 *
 * Handshake, not timing: the flooding solver publishes its pid once all its files exist, and only
 * then does the test stop the campaign (SIGINT, the same `stop()` a `--duration` deadline calls), so
 * the stop meets the whole flood however slow the machine is. The
 * close budget is set through its environment variable (`SYMFENCE_SOLVER_CLOSE_REMOVAL_ENTRIES=0`)
 * so the assertion is on what is left on disk: with a stop that unlinks the flood before it exits,
 * nothing would be left. The only time bounds are hang guards.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/util/paths.js';
import { cleanedAfterEach, fakeAflOut, REFERENCE_SOLVER, runCliProcess } from '../helpers/cli-process.js';
import { isAlive, waitForFile } from '../helpers/processes.js';

const { dirs, children } = cleanedAfterEach();

const FLOOD_FILES = 20_000;
const FLOODER = path.join(PACKAGE_ROOT, 'test', 'fixtures', 'flooding-solver.sh');
/** Only a broken fixture or a stop that hangs (or unlinks for minutes) exceeds these. */
const HANDSHAKE_GUARD_MS = 120_000;
const HANG_GUARD_MS = 90_000;

function runArgs(out: string, name: string, duration: string, scratch: string): string[] {
  return [
    'run', '--afl-out', out, '--afl-instance', 'main', '--name', name, '--coordinator-id', name, '--solver-scratch-dir', scratch,
    '--workers', '1', '--duration', duration, '--solver-telemetry', 'off', '--solver-kill-grace', '200ms',
    '--stats-interval', '200ms', '--json', '--log-level', 'warn',
    '--showmap', `${process.execPath} ${REFERENCE_SOLVER} showmap`,
    '--', FLOODER, '@@',
  ];
}

/** Every `symfence-solver-…` scratch directory below `root` (open or closed), at any depth. */
function scratchDirs(root: string): string[] {
  return (readdirSync(root, { recursive: true }) as string[]).filter((p) => path.basename(p).startsWith('symfence-solver-')).map((p) => path.join(root, p));
}

/** Flood files per run directory left in the trash of the scratch directory `scratch`. */
function trashedFloods(scratch: string): number[] {
  const trash = path.join(scratch, 'trash');
  if (!existsSync(trash)) return [];
  return readdirSync(trash).map((run) => {
    const output = path.join(trash, run, 'output');
    return existsSync(output) ? readdirSync(output).length : 0;
  });
}

it('a campaign stopped while its solver is flooding its output stops without unlinking the flood, and the next start removes it', async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'symfence-flood-campaign-'));
  dirs.push(root);
  const out = fakeAflOut(root, ['seed-a', 'seed-b'], 'builtin:demo @@');
  const pidFile = path.join(root, 'flood.pid');
  // The solver's scratch under the test's directory (by default it is memory-backed, shared by every pool).
  const scratch = path.join(root, 'scratch');
  mkdirSync(scratch);
  const started = Date.now();
  // The duration is only a bound: the test stops the campaign itself once the flood is complete.
  const run = runCliProcess(runArgs(out, 'flood', '10m', scratch), {
    env: { SYMFENCE_TEST_FILES: String(FLOOD_FILES), SYMFENCE_TEST_PIDFILE: pidFile, SYMFENCE_SOLVER_CLOSE_REMOVAL_ENTRIES: '0' },
  });
  children.push(run.child);
  const solverPid = Number((await waitForFile(pidFile, HANDSHAKE_GUARD_MS)).trim());
  run.child.kill('SIGINT'); // first signal: the clean stop
  const hang = new Promise<'hang'>((resolve) => setTimeout(() => resolve('hang'), HANG_GUARD_MS).unref());
  const exit = await Promise.race([run.exit, hang]);
  if (exit === 'hang') throw new Error(`symfence run had not exited ${HANG_GUARD_MS} ms after SIGINT`);
  expect(exit, exit.stderr).toMatchObject({ code: 0, signal: null });
  expect(statSync(pidFile).mtimeMs).toBeGreaterThanOrEqual(started - 1000);
  expect(isAlive(solverPid)).toBe(false);

  // What the stop left: the closed scratch directory, the whole flood still in its trash.
  const closed = scratchDirs(scratch).filter((d) => d.endsWith('.closed'));
  expect(closed).toHaveLength(1);
  expect(trashedFloods(closed[0]!)).toContain(FLOOD_FILES);

  // The next start on the same out-dir sweeps it (its own solver floods nothing this time).
  const again = runCliProcess(runArgs(out, 'flood', '1s', scratch), { env: { SYMFENCE_TEST_FILES: '0' } });
  children.push(again.child);
  const second = await Promise.race([again.exit, new Promise<'hang'>((resolve) => setTimeout(() => resolve('hang'), HANG_GUARD_MS).unref())]);
  if (second === 'hang') throw new Error('the second run did not exit');
  expect(second, second.stderr).toMatchObject({ code: 0 });
  expect(scratchDirs(scratch).filter((d) => d === closed[0])).toEqual([]);
  for (const dir of scratchDirs(scratch)) expect(trashedFloods(dir).filter((n) => n > 0)).toEqual([]);
}, 240_000);
