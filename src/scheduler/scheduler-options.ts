/**
 * Scheduler options: one schema for library input, `--flags` and `SYMFENCE_*` variables.
 */
import { defineOptionSchema, type ResolvedOptions } from '../config/schema.js';

/**
 * Lanes enabled when `lanes` is not set. The concurrency lane ranks by guidance distances alone,
 * so without guidance it never proposes anything: it joins the default only when guidance is
 * given (`GUIDED_LANES`), see docs/scheduler.md "Lanes".
 */
export const DEFAULT_LANES = 'frontier,prefix,cstg,edge,fallback';
/** The default lanes when the scheduler has guidance (`--guidance`). */
export const GUIDED_LANES = 'frontier,prefix,cstg,concurrency,edge,fallback';

export const SCHEDULER_OPTIONS = defineOptionSchema('scheduler', {
  cooldownMs: {
    kind: 'duration',
    default: 30_000,
    min: 0,
    flag: 'replay-cooldown',
    env: 'SYMFENCE_REPLAY_COOLDOWN',
    description: 'minimum time before the same lane entry (node, transition, row, record) is dispatched again; a fallback record with open branches goes sooner when nothing else would run',
  },
  prefixNodes: {
    kind: 'integer',
    default: 4096,
    min: 128,
    max: 65536,
    flag: 'prefix-nodes',
    env: 'SYMFENCE_PREFIX_NODES',
    description: 'Prefix DAG node budget',
  },
  cstgTransitions: {
    kind: 'integer',
    default: 8192,
    min: 128,
    max: 1_000_000,
    flag: 'cstg-transitions',
    env: 'SYMFENCE_CSTG_TRANSITIONS',
    description: 'CSTG transition budget',
  },
  edgeRows: {
    kind: 'integer',
    default: 4096,
    min: 128,
    max: 1_000_000,
    flag: 'edge-rows',
    env: 'SYMFENCE_EDGE_ROWS',
    description: 'edge-dependence row budget',
  },
  replayRecords: {
    kind: 'integer',
    default: 262144,
    min: 128,
    max: 1_000_000,
    flag: 'replay-records',
    env: 'SYMFENCE_REPLAY_RECORDS',
    description: 'fallback-replay and concurrency record budget (LRU)',
  },
  actionsPerSeed: {
    kind: 'integer',
    default: 16,
    min: 1,
    max: 64,
    flag: 'actions-per-seed',
    env: 'SYMFENCE_ACTIONS_PER_SEED',
    description: 'S2F actions per Prefix/CSTG job',
  },
  highQueueFraction: {
    kind: 'number',
    default: 0.75,
    min: 0,
    max: 1,
    flag: 'high-queue-fraction',
    env: 'SYMFENCE_HIGH_QUEUE_FRACTION',
    description: 'share of each round reserved for the Prefix high queue',
  },
  samplingBudget: {
    kind: 'integer',
    default: 2,
    min: 0,
    max: 1000,
    flag: 'sampling-budget',
    env: 'SYMFENCE_SAMPLING_BUDGET',
    description: 'sampling attempts per Prefix node before exact solving only',
  },
  frontierTargets: {
    kind: 'integer',
    default: 8,
    min: 1,
    max: 64,
    flag: 'frontier-targets',
    env: 'SYMFENCE_FRONTIER_TARGETS',
    description: 'branches of one input per directed job of the frontier and fallback lanes, answered in one run (docs/solver.md "In-place answers")',
  },
  /**
   * Asks of one (site, direction) without the campaign gaining coverage on it (it stays untaken,
   * or no new hit bucket) before its questions drop to the last tier (docs/scheduler.md,
   * "Coverage frontier"). Default 4.
   */
  frontierSaturation: {
    kind: 'integer',
    default: 4,
    min: 1,
    max: 1_000_000,
    flag: 'frontier-saturation',
    env: 'SYMFENCE_FRONTIER_SATURATION',
    description: 'asks of one (site, direction) without new coverage before its questions drop to the last tier',
  },
  /**
   * Frontier-lane order: `value` (coverage tiers first, then questions per expected
   * run-second) or `age` (inputs in arrival order, every open branch alike). Default `value`.
   */
  frontierOrder: {
    kind: 'enum',
    values: ['value', 'age'] as const,
    default: 'value',
    flag: 'frontier-order',
    env: 'SYMFENCE_FRONTIER_ORDER',
    description: 'frontier-lane order: value (coverage tiers, then questions per expected run-second) or age (arrival order)',
  },
  targetAttempts: {
    kind: 'integer',
    default: 3,
    min: 1,
    max: 100,
    flag: 'target-attempts',
    env: 'SYMFENCE_TARGET_ATTEMPTS',
    description: 'runs that may leave one (input, branch) pair open (unknown, timeout, not reached) before it is given up, counted across every coordinator of a shared lease directory; sat/unsat pairs are never asked again',
  },
  lanes: {
    kind: 'string',
    default: DEFAULT_LANES,
    flag: 'lanes',
    env: 'SYMFENCE_LANES',
    description: 'enabled lanes, comma-separated, in priority order (frontier first, then prefix and cstg interleaved; concurrency needs --guidance)',
    defaultHelp: `${DEFAULT_LANES} (with --guidance: ${GUIDED_LANES})`,
  },
  maxStateBytes: {
    kind: 'size',
    default: 256 * 1024 * 1024,
    min: 1024 * 1024,
    max: 1024 * 1024 * 1024,
    flag: 'scheduler-state-max',
    env: 'SYMFENCE_SCHEDULER_STATE_MAX',
    description: 'largest lane-state file written or read',
  },
  /**
   * How often a campaign saves its lane state to `<outDir>/scheduler-state.json` (it also saves
   * at stop), ms. 0 = only at stop. Default 5 min.
   */
  stateIntervalMs: {
    kind: 'duration',
    default: 300_000,
    min: 0,
    max: 86_400_000,
    flag: 'scheduler-state-interval',
    env: 'SYMFENCE_SCHEDULER_STATE_INTERVAL',
    description: 'how often a campaign saves its lane state to <out-dir>/scheduler-state.json besides at stop (0 = only at stop)',
  },
  /**
   * Dispatch hints file (JSON lines keyed by input SHA-256, docs/scheduler.md "Hints"), read once
   * at start; a bad file refuses the start (`ERR_HINT_INVALID`). Default none.
   */
  hintsFile: {
    kind: 'string',
    default: undefined,
    flag: 'hints',
    env: 'SYMFENCE_HINTS',
    description: 'dispatch hints file: JSON lines keyed by input sha256 (docs/scheduler.md "Hints")',
  },
  /**
   * Site → distance guidance file (`parseGuidance` forms, docs/scheduler.md "Guidance"), read
   * once at start; enables the concurrency lane when `lanes` is not set. Default none.
   */
  guidanceFile: {
    kind: 'string',
    default: undefined,
    flag: 'guidance',
    env: 'SYMFENCE_GUIDANCE',
    description: 'site-to-distance guidance file; enables the concurrency lane (docs/scheduler.md "Guidance")',
  },
});

export type SchedulerOptions = ResolvedOptions<typeof SCHEDULER_OPTIONS.specs>;
