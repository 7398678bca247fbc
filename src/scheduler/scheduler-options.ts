/**
 * Scheduler options: one schema for library input, `--flags` and `SYMFENCE_*` variables.
 */
import { defineOptionSchema, type ResolvedOptions } from '../config/schema.js';

export const SCHEDULER_OPTIONS = defineOptionSchema('scheduler', {
  cooldownMs: {
    kind: 'duration',
    default: 30_000,
    min: 0,
    flag: 'replay-cooldown',
    env: 'SYMFENCE_REPLAY_COOLDOWN',
    description: 'minimum time before the same lane entry (node, transition, row, record) is dispatched again',
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
  lanes: {
    kind: 'string',
    default: 'prefix,cstg,concurrency,edge,fallback',
    flag: 'lanes',
    env: 'SYMFENCE_LANES',
    description: 'enabled lanes, comma-separated, in priority order (prefix and cstg are interleaved)',
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
});

export type SchedulerOptions = ResolvedOptions<typeof SCHEDULER_OPTIONS.specs>;
