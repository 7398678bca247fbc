/**
 * `<out>/<name>/stats.json`: the campaign's counters, rewritten every few seconds and at shutdown.
 * Readers (`symfence status`, dashboards) may read at any moment, so the file is replaced
 * atomically: written to a hidden temp file in the same directory, then renamed over the old one.
 * A reader sees the previous or the next snapshot, never a torn one. (No fsync: the file is
 * rewritten seconds later and losing the last snapshot in a power cut costs nothing.)
 */
import { writeFileAtomic } from '../fs/durable-files.js';
import { readBoundedFileSync } from '../fs/bounded-read.js';
import path from 'node:path';
import { CampaignStateError } from '../errors.js';
import type { AflPeersSnapshot } from '../triage/afl-peers.js';
import type { YieldFigures } from './yield-figures.js';
import { COUNTER_NAMES, LATER_COUNTER_NAMES, cpuMsPerAnswer, generatedPerQuery, jobsCompleted, solverUtilisation, targetNotReachedByLane, type CampaignCounters } from './counters.js';

const STATS_SCHEMA = 'symfence-stats/1';
export const STATS_FILE_NAME = 'stats.json';
/** A stats file is a few KiB; anything over this bound is not one and is refused unread. */
export const MAX_STATS_FILE_BYTES = 1 << 20;

export interface StatsSnapshot {
  readonly schema: typeof STATS_SCHEMA;
  readonly coordinator: string;
  readonly name: string;
  readonly pid: number;
  /** `running` while the coordinator works; `stopped` after a clean shutdown. */
  readonly state: 'running' | 'stopped';
  readonly startedMs: number;
  readonly updatedMs: number;
  /** How often the file is rewritten while running, ms (lets readers spot a dead coordinator). */
  readonly statsIntervalMs: number;
  readonly workers: number;
  readonly counters: Readonly<CampaignCounters>;
  readonly jobsCompleted: number;
  readonly jobsPerSec: number;
  /** Generated inputs per solved branch query. */
  readonly generatedPerQuery: number;
  /**
   * Time-averaged solver utilisation since the start, in [0, 1]: solver processes' lifetime
   * (`counters.solverProcessMs`) over `workers × (updatedMs - startedMs)` — the share of the slots'
   * time a solver process actually ran (docs/campaign.md "Where slot time goes"). Files written
   * before that counter existed hold the `slotOccupancy` figure here.
   */
  readonly solverUtilisation: number;
  /**
   * Slot occupancy since the start, in [0, 1]: the time slots were held by a job, from its run's
   * start until its solver exited (`counters.solverBusyMs`), over `workers × elapsed` — includes
   * the spawn and output collection that `solverUtilisation` leaves out. `counters.fillRatio` is
   * the instant's value. Absent in files of earlier versions.
   */
  readonly slotOccupancy?: number;
  /** CPU ms per answer by job kind (docs/solver.md "What an answer costs"); absent in files of earlier versions. */
  readonly cpuMsPerAnswer?: ReturnType<typeof cpuMsPerAnswer>;
  /** Directed jobs and those whose target was not on the path, per scheduler lane; absent in files of earlier versions. */
  readonly targetNotReachedByLane?: ReturnType<typeof targetNotReachedByLane>;
  /** The lease directory the campaign uses (absent in files of earlier versions). */
  readonly leaseDir?: string;
  /** AFL++ campaigns: per instance, our inputs it imported, its queue, `+cov` entries and covered edges. */
  readonly afl?: AflPeersSnapshot;
  /** The scheduler's coverage frontier (docs/scheduler.md "Coverage frontier"). */
  readonly frontier?: FrontierFigures;
  /** New edges per run-second (slot plus triage; fields keep their names) of full and directed runs, and the full share they set. */
  readonly yield?: YieldFigures;
}

/** The coverage frontier's figures as stats.json carries them (the scheduler's `stats().frontier`). */
interface FrontierFigures {
  readonly takenPairs: number;
  readonly buckets: number;
  readonly saturatedPairs: number;
  readonly traces: number;
  readonly gainingTraces: number;
  readonly askedByTier: Readonly<Record<1 | 2 | 3, number>>;
}

export function makeSnapshot(
  fields: Omit<
    StatsSnapshot,
    'schema' | 'jobsCompleted' | 'jobsPerSec' | 'pid' | 'generatedPerQuery' | 'solverUtilisation' | 'slotOccupancy' | 'cpuMsPerAnswer' | 'targetNotReachedByLane'
  >,
): StatsSnapshot {
  const completed = jobsCompleted(fields.counters);
  const elapsedS = Math.max(0.001, (fields.updatedMs - fields.startedMs) / 1000);
  return {
    schema: STATS_SCHEMA,
    pid: process.pid,
    ...fields,
    counters: { ...fields.counters },
    jobsCompleted: completed,
    jobsPerSec: completed / elapsedS,
    generatedPerQuery: generatedPerQuery(fields.counters),
    solverUtilisation: solverUtilisation(fields.counters.solverProcessMs, fields.workers, fields.updatedMs - fields.startedMs),
    slotOccupancy: solverUtilisation(fields.counters.solverBusyMs, fields.workers, fields.updatedMs - fields.startedMs),
    cpuMsPerAnswer: cpuMsPerAnswer(fields.counters),
    targetNotReachedByLane: targetNotReachedByLane(fields.counters),
  };
}

/** Replaces `file` with `snapshot` atomically, off the caller's thread (src/fs/durable-files.ts `writeFileAtomic`). */
export function writeStatsAtomic(file: string, snapshot: StatsSnapshot): Promise<void> {
  return writeFileAtomic(file, JSON.stringify(snapshot, null, 2) + '\n');
}

/** Reads and validates a stats file. Anything else is `ERR_CAMPAIGN_STATE`. */
export function readStatsFile(file: string): StatsSnapshot {
  let text: string;
  try {
    const read = readBoundedFileSync(file, { maxBytes: MAX_STATS_FILE_BYTES });
    if (read.state === 'absent') throw new Error('no such file');
    if (read.state === 'refused') throw new Error(read.reason);
    text = read.bytes.toString('utf8');
  } catch (error) {
    throw new CampaignStateError(`cannot read campaign stats ${file}: ${(error as Error).message}`, { file });
  }
  return parseStatsFile(file, text);
}

/** Validates the text of a stats file (named `file` in errors). Anything else is `ERR_CAMPAIGN_STATE`. */
export function parseStatsFile(file: string, text: string): StatsSnapshot {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new CampaignStateError(`cannot read campaign stats ${file}: ${(error as Error).message}`, { file });
  }
  const snap = data as Partial<StatsSnapshot>;
  if (typeof data !== 'object' || data === null || snap.schema !== STATS_SCHEMA) {
    throw new CampaignStateError(`${file} is not a ${STATS_SCHEMA} stats file`, { file });
  }
  const field = fieldChecker(file, snap as Record<string, unknown>);
  const counters = snap.counters as Record<string, unknown> | undefined;
  if (typeof counters !== 'object' || counters === null || Array.isArray(counters)) {
    throw new CampaignStateError(`${file}: field counters is missing or not an object`, { file, field: 'counters' });
  }
  const counter = fieldChecker(file, counters, 'counters.');
  // A file written before the later counters existed: they were 0 then.
  const filled = Object.fromEntries(
    COUNTER_NAMES.map((k) => [k, counters[k] === undefined && LATER_COUNTER_NAMES.has(k) ? 0 : counter(k, k === 'fillRatio' ? RATIO : COUNT)]),
  ) as unknown as StatsSnapshot['counters'];
  const startedMs = field('startedMs', TIME);
  const updatedMs = field('updatedMs', TIME);
  const workers = field('workers', { ...COUNT, integer: true, max: MAX_WORKERS });
  const stringField = (name: 'coordinator' | 'name'): string => {
    if (typeof snap[name] !== 'string') throw new CampaignStateError(`${file}: field ${name} is missing or not a string`, { file, field: name });
    return snap[name];
  };
  if (snap.state !== 'running' && snap.state !== 'stopped') {
    throw new CampaignStateError(`${file}: field state must be running or stopped, got ${JSON.stringify(snap.state)}`, { file, field: 'state' });
  }
  const completed = jobsCompleted(filled);
  const elapsedS = Math.max(0.001, (updatedMs - startedMs) / 1000);
  const optional = (name: string, range: NumberRange, fallback: number): number => (snap[name as keyof StatsSnapshot] === undefined ? fallback : field(name, range));
  const { afl, frontier, yield: yieldFigures, slotOccupancy, ...rest } = snap as StatsSnapshot;
  return {
    ...rest,
    coordinator: stringField('coordinator'),
    name: stringField('name'),
    pid: optional('pid', { ...COUNT, integer: true }, 0),
    startedMs,
    updatedMs,
    statsIntervalMs: optional('statsIntervalMs', { ...COUNT, max: MAX_TIME_MS }, 0),
    workers,
    counters: filled,
    jobsCompleted: optional('jobsCompleted', COUNT, completed),
    jobsPerSec: optional('jobsPerSec', COUNT, completed / elapsedS),
    generatedPerQuery: optional('generatedPerQuery', COUNT, generatedPerQuery(filled)),
    solverUtilisation: optional('solverUtilisation', RATIO, solverUtilisation(filled.solverBusyMs, workers, updatedMs - startedMs)),
    ...(slotOccupancy === undefined ? {} : { slotOccupancy: field('slotOccupancy', RATIO) }),
    // Derived from the counters just checked, never taken from the file as written.
    cpuMsPerAnswer: cpuMsPerAnswer(filled),
    targetNotReachedByLane: targetNotReachedByLane(filled),
    // Optional sections are shown, never trusted: a malformed one is dropped, the file still read.
    ...(validAfl(afl) ? { afl } : {}),
    ...(validFrontier(frontier) ? { frontier } : {}),
    ...(validYield(yieldFigures) ? { yield: yieldFigures } : {}),
  };
}

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function validAfl(v: unknown): v is AflPeersSnapshot {
  if (!isObject(v) || !isCount(v.imported) || !isCount(v.mergedEdges) || !isObject(v.instances)) return false;
  return Object.values(v.instances).every((p) => isObject(p) && isCount(p.imported) && isCount(p.queue) && isCount(p.cov) && isCount(p.edges));
}

function validFrontier(v: unknown): v is FrontierFigures {
  if (!isObject(v) || !isObject(v.askedByTier)) return false;
  const t = v.askedByTier;
  return [v.takenPairs, v.buckets, v.saturatedPairs, v.traces, v.gainingTraces, t[1], t[2], t[3]].every(isCount);
}

function validYield(v: unknown): v is YieldFigures {
  const arm = (a: unknown): boolean => isObject(a) && [a.newEdges, a.solverMs, a.runs, a.edgesPerSolverSecond].every(isCount);
  return isObject(v) && arm(v.full) && arm(v.directed) && isCount(v.fullShare) && v.fullShare <= 1;
}

interface NumberRange {
  readonly min: number;
  readonly max: number;
  readonly integer?: boolean;
}

/** The latest time a JavaScript `Date` can hold, ms since the epoch: later stamps cannot be printed. */
const MAX_TIME_MS = 8.64e15;
const TIME: NumberRange = { min: 0, max: MAX_TIME_MS };
/** Counters and rates: finite and never negative. */
const COUNT: NumberRange = { min: 0, max: Number.MAX_VALUE };
const RATIO: NumberRange = { min: 0, max: 1 };
const MAX_WORKERS = 1 << 20;

/**
 * A reader of the numeric fields of one object of the file: each must be a finite number within
 * its range (JSON.parse turns `1e999` into Infinity), else `ERR_CAMPAIGN_STATE` naming the file
 * and the field (`details.field`).
 */
function fieldChecker(file: string, object: Record<string, unknown>, prefix = ''): (name: string, range: NumberRange) => number {
  return (name, range) => {
    const value = object[name];
    const ok = typeof value === 'number' && Number.isFinite(value) && value >= range.min && value <= range.max && (!range.integer || Number.isInteger(value));
    if (!ok) {
      const expected = `${range.integer ? 'an integer' : 'a finite number'} in [${range.min}, ${range.max === Number.MAX_VALUE ? '∞)' : `${range.max}]`}`;
      throw new CampaignStateError(`${file}: field ${prefix}${name} must be ${expected}, got ${typeof value === 'number' ? String(value) : value === undefined ? 'none' : JSON.stringify(value)}`, {
        file,
        field: `${prefix}${name}`,
      });
    }
    return value as number;
  };
}

