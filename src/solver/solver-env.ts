/**
 * Environments of the processes symfence starts: the SymCC solver (contract variables) and AFL++
 * tools (stray `AFL_*` variables removed).
 */
import { invalidOption } from '../config/values.js';

/**
 * Variables the runner owns. A task may not set them: a wrong `SYMCC_OUTPUT_DIR` would make the
 * runner collect nothing (or someone else's files), a shared `SYMCC_AFL_COVERAGE_MAP` races.
 */
export const CONTRACT_VARIABLES: readonly string[] = [
  'SYMCC_OUTPUT_DIR',
  'SYMCC_INPUT_FILE',
  'SYMCC_ENABLE_LINEARIZATION',
  'SYMCC_AFL_COVERAGE_MAP',
  'SYMCC_TARGET_BRANCH',
  'SYMCC_S2F_ACTIONS',
  'SYMCC_TELEMETRY_OUT',
  'SYMFENCE_TRACE_ONLY',
  // The preload library's tuning: coordinators sharing leases must name branches alike, so a
  // stray value in one coordinator's environment never reaches its solvers.
  'SYMFENCE_BRANCH_CONTEXT',
  'SYMFENCE_PRELOAD_EARLY_EXIT',
  'SYMFENCE_PRELOAD_QSYM',
  'SYMFENCE_PRELOAD_FORK',
  'SYMFENCE_PRELOAD_MAX_FORKS',
  'SYMFENCE_PRELOAD_FORK_CPU_MS',
  'SYMFENCE_PRELOAD_HUGE',
  'SYMFENCE_PRELOAD_IN_PLACE',
  'SYMFENCE_WANTED',
];

export interface SolverContractEnv {
  readonly outputDir: string;
  /** Set in file mode only. */
  readonly inputFile: string | null;
  /**
   * QSYM's pruning map, or null to leave `SYMCC_AFL_COVERAGE_MAP` unset (QSYM then starts from a
   * fresh in-memory map: a directed run must not have its target pruned as already seen).
   */
  readonly pruningMapPath: string | null;
  readonly targetBranch: bigint | null;
  readonly actionsFile: string | null;
  readonly telemetryOut: string | null;
  /** `SYMFENCE_TRACE_ONLY=1`: record the branch trace, solve nothing. */
  readonly traceOnly?: boolean;
  /** The preload library, prepended to any `LD_PRELOAD` of the base or the task. */
  readonly preload?: string | null;
  /** `SYMFENCE_WANTED`: the trace run's wanted-branch file, or null. */
  readonly wantedFile?: string | null;
  /** `SYMFENCE_PRELOAD_FORK_CPU_MS`: the CPU the run's answers (forked or in place) may use in all. */
  readonly forkCpuBudgetMs?: number | null;
}

/** Refuses task environments that try to set a contract variable or carry a non-string value. */
export function validateTaskEnv(env: Readonly<Record<string, unknown>> | undefined): Readonly<Record<string, string>> {
  if (env === undefined) return {};
  if (typeof env !== 'object' || env === null || Array.isArray(env)) {
    throw invalidOption('env', 'an object of string variables', env);
  }
  for (const [name, value] of Object.entries(env)) {
    if (CONTRACT_VARIABLES.includes(name)) {
      throw invalidOption(`env.${name}`, 'no value: the solver runner sets it, a task may not override it', value);
    }
    if (typeof value !== 'string' || name.length === 0 || name.includes('=') || name.includes('\0') || value.includes('\0')) {
      throw invalidOption(`env.${name}`, 'a string value without NUL bytes', value);
    }
  }
  return env as Readonly<Record<string, string>>;
}

/**
 * The solver's environment: the parent's, minus inherited `SYMCC_*` (a stray `SYMCC_INPUT_FILE`
 * in the coordinator's environment would silently switch the input mode), plus the task's extras,
 * plus the contract variables, which always win.
 */
export function buildSolverEnv(
  base: NodeJS.ProcessEnv,
  taskEnv: Readonly<Record<string, string>>,
  contract: SolverContractEnv,
): NodeJS.ProcessEnv {
  return buildSolverEnvFromBase(solverBaseEnv(base), taskEnv, contract);
}

/**
 * The parent's environment as every solver run starts from it: defined values only, inherited
 * `SYMCC_*` and contract variables removed (a stray `SYMFENCE_TRACE_ONLY` would turn every run
 * into one that solves nothing), frozen. A solver worker computes it once, so a run copies a clean object
 * instead of filtering the whole environment again.
 */
export function solverBaseEnv(base: NodeJS.ProcessEnv): Readonly<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(base)) {
    if (value !== undefined && !name.startsWith('SYMCC_') && !CONTRACT_VARIABLES.includes(name)) env[name] = value;
  }
  return Object.freeze(env);
}

/** `buildSolverEnv` for a base that already went through `solverBaseEnv`. */
export function buildSolverEnvFromBase(
  cleanBase: Readonly<Record<string, string>>,
  taskEnv: Readonly<Record<string, string>>,
  contract: SolverContractEnv,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...cleanBase, ...taskEnv };
  env.SYMCC_OUTPUT_DIR = contract.outputDir;
  env.SYMCC_ENABLE_LINEARIZATION = '1';
  if (contract.pruningMapPath !== null) env.SYMCC_AFL_COVERAGE_MAP = contract.pruningMapPath;
  if (contract.traceOnly === true) env.SYMFENCE_TRACE_ONLY = '1';
  if (contract.preload) env.LD_PRELOAD = prependPreload(contract.preload, env.LD_PRELOAD);
  if (contract.inputFile !== null) env.SYMCC_INPUT_FILE = contract.inputFile;
  if (contract.targetBranch !== null && contract.targetBranch > 0n) env.SYMCC_TARGET_BRANCH = contract.targetBranch.toString(10);
  if (contract.actionsFile !== null) env.SYMCC_S2F_ACTIONS = contract.actionsFile;
  if (contract.telemetryOut !== null) env.SYMCC_TELEMETRY_OUT = contract.telemetryOut;
  if (contract.wantedFile) env.SYMFENCE_WANTED = contract.wantedFile;
  if (contract.forkCpuBudgetMs != null) env.SYMFENCE_PRELOAD_FORK_CPU_MS = String(Math.max(1, Math.floor(contract.forkCpuBudgetMs)));
  return env;
}

/**
 * `LD_PRELOAD` with `library` first: the user's own preloads still load (after ours, so our hook
 * sees the runtime's symbol through `RTLD_NEXT` whatever they interpose). The loader accepts
 * colons and spaces as separators; an empty or duplicate entry of ours is dropped.
 */
function prependPreload(library: string, existing: string | undefined): string {
  const rest = (existing ?? '').split(/[:\s]+/).filter((entry) => entry !== '' && entry !== library);
  return [library, ...rest].join(':');
}

/**
 * `AFL_*` names symfence deliberately lets through to AFL++ tools. AFL++ treats any `AFL_*`
 * variable it does not know as a typo and sleeps 2 s at every start, so everything else is
 * removed rather than guessed at.
 */
const ALLOWED_AFL_VARIABLES: readonly string[] = ['AFL_MAP_SIZE', 'AFL_QUIET', 'AFL_SKIP_BIN_CHECK', 'AFL_DEBUG'];

export function aflToolEnv(base: NodeJS.ProcessEnv, extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries({ ...base, ...extra })) {
    if (value === undefined) continue;
    if (name.startsWith('AFL_') && !ALLOWED_AFL_VARIABLES.includes(name)) continue;
    env[name] = value;
  }
  return env;
}

/** Replaces every `@@` argument by `inputPath` (SymCC's helper replaces each occurrence). */
export function substituteInputPath(argv: readonly string[], inputPath: string): string[] {
  return argv.map((arg) => (arg === '@@' ? inputPath : arg.includes('@@') ? arg.split('@@').join(inputPath) : arg));
}

export function argvWantsFile(argv: readonly string[]): boolean {
  return argv.some((arg) => arg.includes('@@'));
}
