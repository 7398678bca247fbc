/**
 * `symfence run`: SymCC beside AFL++. Inputs come from an AFL++ instance's queue
 * (`<afl-out>/<instance>/queue`), each generated input is triaged with `afl-showmap` against the
 * target AFL fuzzes (from the instance's `fuzzer_stats` `command_line`, or given explicitly), and
 * interesting inputs are published to `<afl-out>/<name>/queue` for AFL++ to import.
 *
 * This file checks the settings and builds the components; it never imports `Campaign`, so
 * `Campaign.start` can load it for `solverCommand` without an import cycle (`startAflCampaign`
 * lives in afl-campaign.ts).
 */
import { closeSync, existsSync, fstatSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync, constants as fsConstants } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { OptionsInput } from '../../config/schema.js';
import { AflError, ShowmapSetupError, SolverNotFoundError, SolverNotSymccError, UsageError } from '../../errors.js';
import { resolveProgramPath } from '../../solver/program-lookup.js';
import { resolveSolverOptions } from '../../solver/solver-options.js';
import { resolveSpawnMethod } from '../../solver/spawn-method.js';
import { runShowmap } from '../../solver/showmap.js';
import type { CommandTemplate } from '../../solver/solver-types.js';
import { parseAflCommandLine, readAflTargetCommand, type AflTargetCommand } from '../../triage/afl-queue.js';
import type { CampaignComponentsFactory } from '../campaign-context.js';
import type { CampaignOptions } from '../campaign-options.js';
import type { SOLVER_CAMPAIGN_OPTIONS } from '../../solver/solver-options.js';
import { buildCampaignComponents, campaignTelemetry } from './campaign-components.js';

export interface AflRunSettings {
  /** The SymCC-instrumented binary and its arguments (`@@` = input file). */
  readonly symcc: readonly string[];
  /** afl-showmap command (split on whitespace). Default `afl-showmap` from PATH. */
  readonly showmap?: string;
  /** The AFL target command line (after `--`); default: read from the instance's fuzzer_stats. */
  readonly aflTarget?: string;
  /** Further solver options (caps, kill grace, spawn thread …). */
  readonly solver?: OptionsInput<typeof SOLVER_CAMPAIGN_OPTIONS.specs>;
}

/**
 * Solver runs and afl-showmap execute in per-run scratch directories, so a program given relative
 * to where symfence (and afl-fuzz, whose `command_line` is relative to its own cwd) was started is
 * resolved here; bare names (`afl-showmap`) are left to PATH.
 */
function resolveProgram(program: string): string {
  return program.includes('/') && !path.isAbsolute(program) ? path.resolve(program) : program;
}

function splitCommand(text: string, what: string): string[] {
  const words = text.trim().split(/\s+/).filter((w) => w.length > 0);
  if (words.length === 0) throw new UsageError(`${what} is empty`);
  return words;
}

/**
 * Checks an AFL++ campaign's settings and returns the factory of its components. Contract: every
 * check (options, AFL queue, target command, telemetry source) happens here, before anything is
 * created; failures are `ERR_USAGE`, `ERR_AFL`, `ERR_INVALID_OPTION`, `ERR_SOLVER_NOT_FOUND`,
 * `ERR_SOLVER_NOT_SYMCC`, `ERR_SHOWMAP_SETUP` or `ERR_PRELOAD_UNSUPPORTED`. The solver probe runs
 * when the components are built, after the scheduler's files are checked and before the lease
 * tables open.
 */
export async function aflComponentsFactory(options: CampaignOptions, settings: AflRunSettings): Promise<CampaignComponentsFactory> {
  if (options.aflOut === undefined) throw new UsageError('symfence run needs --afl-out <dir> (the afl-fuzz -o directory)');
  if (options.aflInstance === undefined) throw new UsageError('symfence run needs --afl-instance <name> (the afl-fuzz -M/-S name to read)');
  if (settings.symcc.length === 0) throw new UsageError('symfence run needs the SymCC binary after "--", e.g. -- ./target_symcc @@');
  const instanceDir = path.join(options.aflOut, options.aflInstance);
  const queueDir = path.join(instanceDir, 'queue');
  if (!existsSync(queueDir) || !statSync(queueDir).isDirectory()) {
    throw new AflError(`AFL queue ${queueDir} does not exist (is afl-fuzz running with -o ${options.aflOut} and -M/-S ${options.aflInstance}?)`, { queueDir });
  }
  if (options.name === options.aflInstance) throw new UsageError(`--name ${options.name} is the AFL instance's own directory; pick another name`);
  const target: AflTargetCommand = settings.aflTarget !== undefined ? parseAflCommandLine(`-- ${settings.aflTarget}`) : await readAflTargetCommand(instanceDir);
  const showmapWords = splitCommand(settings.showmap ?? 'afl-showmap', '--showmap');
  const showmap: CommandTemplate = { binary: resolveProgram(showmapWords[0]!), argv: [...showmapWords.slice(1), ...(target.qemu ? ['-Q'] : [])] };
  const symcc: CommandTemplate = { binary: resolveProgram(settings.symcc[0]!), argv: settings.symcc.slice(1) };
  const aflTarget: CommandTemplate = { binary: resolveProgram(target.argv[0]!), argv: target.argv.slice(1) };
  checkSolverCommand(symcc);
  // Decided now: an explicit `--solver-telemetry preload` that cannot work is refused before any seed is spent.
  const telemetry = campaignTelemetry(options, symcc);
  const seed = firstSeed(queueDir);
  await checkShowmap(showmap, aflTarget, target.fileInput ? 'file' : 'stdin', seed, settings.solver);
  return (context) =>
    buildCampaignComponents(context, {
      command: symcc,
      telemetry,
      // The solver must show SymCC's runtime on this seed before any work is claimed (solver-probe.ts).
      probeSeed: seed !== undefined ? { path: seed } : { bytes: new Uint8Array(0) },
      aflQueueDir: queueDir,
      ...(settings.solver ? { solver: settings.solver } : {}),
      triage: {
        showmap,
        target: aflTarget,
        inputMode: target.fileInput ? 'file' : 'stdin',
      },
    });
}

/**
 * Start-up check: the solver command names an executable, found the way the launch will find it
 * (execvp's PATH lookup), that the kernel can run: an ELF file or a `#!` script. Throws
 * `ERR_SOLVER_NOT_FOUND`, or `ERR_SOLVER_NOT_SYMCC` for any other file (execve refuses it with
 * ENOEXEC and execvp would run it with `sh`) — before any work record is claimed.
 */
function checkSolverCommand(symcc: CommandTemplate): void {
  let file: string;
  try {
    file = resolveProgramPath(symcc.binary, process.env['PATH']);
  } catch (error) {
    const errno = (error as NodeJS.ErrnoException).code ?? 'ENOENT';
    throw new SolverNotFoundError(
      `solver ${symcc.binary} ${errno === 'EACCES' ? 'is not executable' : 'not found'} (${errno}); nothing was started and no work was claimed`,
      { binary: symcc.binary, errno },
    );
  }
  const magic = fileMagic(file);
  if (magic !== undefined && !magic.startsWith('\x7fELF') && !magic.startsWith('#!')) {
    throw new SolverNotSymccError(
      `solver ${JSON.stringify(file)} is neither an ELF executable nor a #! script (it starts with ${JSON.stringify(magic)}); ` +
        'execvp would run it with sh. Give the SymCC-instrumented binary; nothing was started and no work was claimed',
      { binary: symcc.binary, file, magic },
    );
  }
}

/** The first 4 bytes of a regular file as latin1 text; undefined when it cannot be read (the launch reports that). */
function fileMagic(file: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(file, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    if (!fstatSync(fd).isFile()) return undefined;
    const head = Buffer.alloc(4);
    const n = readSync(fd, head, 0, 4, 0);
    return head.toString('latin1', 0, n);
  } finally {
    closeSync(fd);
  }
}

/** The first queue entry (AFL's `id:` files in order), or undefined for an empty queue. */
function firstSeed(queueDir: string): string | undefined {
  return readdirSync(queueDir)
    .filter((name) => name.startsWith('id:'))
    .sort()
    .map((name) => path.join(queueDir, name))
    .find((file) => statSync(file).isFile());
}

/**
 * Start-up check: one afl-showmap run on a seed (`seed`, or an empty input) tells
 * whether showmap and the AFL target work at all. A hang or a crash is a verdict on the seed and
 * passes; a showmap that cannot start, or aborts before running the target (missing target, no
 * instrumentation), throws `ERR_SHOWMAP_SETUP` — otherwise every generated input would be misread.
 */
async function checkShowmap(
  showmap: CommandTemplate,
  target: CommandTemplate,
  inputMode: 'stdin' | 'file',
  seed: string | undefined,
  solver: AflRunSettings['solver'],
): Promise<void> {
  const options = resolveSolverOptions(solver ?? {});
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'symfence-showmap-check-'));
  try {
    const shown = await runShowmap({
      showmap,
      target,
      inputMode,
      timeoutMs: options.showmapTimeoutMs,
      workDir,
      candidate: seed !== undefined ? new Uint8Array(readFileSync(seed)) : new Uint8Array(0),
      spawnMethod: resolveSpawnMethod(options.spawnMethod),
    });
    if (shown.setupFailure) {
      throw new ShowmapSetupError(`afl-showmap cannot run the AFL target: ${shown.detail ?? 'set-up failed'}; nothing was started and no work was claimed`, {
        showmap: showmap.binary,
        target: target.binary,
        exitCode: shown.exitCode,
        detail: shown.detail ?? null,
      });
    }
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}
