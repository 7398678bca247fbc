/**
 * What `symfence status <out-dir>` reports: the stats of every campaign found at that path —
 * `<dir>/stats.json` itself, or `<dir>/<name>/stats.json` for an AFL output directory holding one or
 * more symfence coordinators' directories. A `running` campaign whose file has not been rewritten
 * for three intervals is reported as `stale` (its coordinator probably died).
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { CampaignStateError } from '../errors.js';
import { formatDuration } from '../config/schema.js';
import { readStatsFile, STATS_FILE_NAME, type StatsSnapshot } from './stats-file.js';
import { formatSlotTime } from './counters.js';
import { escapeForTerminal } from '../util/terminal-text.js';

export interface CampaignStatus {
  readonly path: string;
  /** `running`, `stopped`, or `stale` (running but not updated for 3 stats intervals). */
  readonly liveness: 'running' | 'stopped' | 'stale';
  readonly stats: StatsSnapshot;
}

export function findStatsFiles(dir: string): string[] {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new CampaignStateError(`${dir} is not a directory`, { dir });
  }
  const direct = path.join(dir, STATS_FILE_NAME);
  if (existsSync(direct)) return [direct];
  const nested = readdirSync(dir)
    .sort()
    .map((name) => path.join(dir, name, STATS_FILE_NAME))
    .filter((file) => existsSync(file));
  if (nested.length === 0) throw new CampaignStateError(`no symfence ${STATS_FILE_NAME} in ${dir} or its subdirectories`, { dir });
  return nested;
}

export function readCampaignStatus(dir: string, nowMs: number = Date.now()): CampaignStatus[] {
  return findStatsFiles(dir).map((file) => {
    const stats = readStatsFile(file);
    const stale = stats.state === 'running' && nowMs - stats.updatedMs > 3 * Math.max(stats.statsIntervalMs, 1000);
    return { path: file, liveness: stale ? 'stale' : stats.state, stats };
  });
}

/** The detailed block of one campaign; names and ids read from disk are escaped for a terminal. */
export function formatCampaignStatus(status: CampaignStatus): string {
  const s = status.stats;
  const c = s.counters;
  const elapsed = formatDuration(Math.max(0, Math.round((s.updatedMs - s.startedMs) / 1000)) * 1000);
  return [
    `campaign ${escapeForTerminal(s.name)} (coordinator ${escapeForTerminal(s.coordinator)}, pid ${s.pid}): ${status.liveness}, ${elapsed}, updated ${new Date(s.updatedMs).toISOString()}`,
    `  jobs       started ${c.jobsStarted}, completed ${s.jobsCompleted} (ok ${c.jobsOk}, timeout ${c.jobsTimeout}, crash ${c.jobsCrash}, error ${c.jobsError}), aborted ${c.jobsAborted}, ${s.jobsPerSec.toFixed(2)}/s`,
    `  findings   generated ${c.generated}, interesting ${c.interesting}, crashes ${c.crashes}, hangs ${c.hangs}, edges ${c.edgesCovered}`,
    `  admission  admitted ${c.admissions}, conflicts ${c.conflicts}, back-fills ${c.backFills}, answered elsewhere ${c.answeredElsewhere}, backing off elsewhere ${c.openElsewhere}, traces adopted ${c.tracesAdopted} (deferred ${c.tracesDeferred}, failed ${c.traceAdoptFailures}, own relearned ${c.tracesRelearned}, evicted before adoption ${c.traceAdoptMissing}), rollbacks ${c.dispatchRollbacks} (on store failures ${c.workGivenBack}), fill ${(c.fillRatio * 100).toFixed(0)}% of ${s.workers}, average ${(s.solverUtilisation * 100).toFixed(0)}%`,
    `  leases     stale results ${c.staleResults}, steals ${c.leaseSteals}, expiries ${c.leaseExpiries}, release failures ${c.releaseFailures}, heartbeats ${c.heartbeatsOk} ok / ${c.heartbeatsFailed} failed`,
    `  solver     ${(c.solverTimeMs / 1000).toFixed(1)} s; ${formatSlotTime(c, s.workers, s.updatedMs - s.startedMs)}`,
    `  recovery   commit retries ${c.commitRetries}, replayed ${c.commitsReplayed}, replay failures ${c.commitReplayFailures}, staged swept ${c.stagedSwept}, traces evicted ${c.tracesEvicted}, temps swept ${c.tempsSwept}`,
    ...formatCoverageLines(s),
  ].join('\n');
}

/** The AFL++ peers (imports of our inputs, their coverage) and the coverage frontier, when the file has them. */
function formatCoverageLines(s: StatsSnapshot): string[] {
  const lines: string[] = [];
  if (s.afl !== undefined) {
    const each = Object.entries(s.afl.instances).map(([name, p]) => `${name} imported ${p.imported} (queue ${p.queue}, +cov ${p.cov}, edges ${p.edges})`);
    lines.push(`  afl++      imported ${s.afl.imported} of our inputs${each.length > 0 ? `: ${each.join('; ')}` : ''}; their coverage added ${s.afl.mergedEdges} edges to ours`);
  }
  if (s.frontier !== undefined) {
    const f = s.frontier;
    lines.push(`  frontier   ${f.takenPairs} (site, direction) pairs taken, ${f.buckets} buckets, ${f.saturatedPairs} saturated; asked tier 1 ${f.askedByTier[1]}, tier 2 ${f.askedByTier[2]}, tier 3 ${f.askedByTier[3]}`);
  }
  if (s.yield !== undefined) {
    const y = s.yield;
    lines.push(`  yield      full ${y.full.edgesPerSolverSecond.toFixed(3)} new edges/run-s (${y.full.newEdges} in ${(y.full.solverMs / 1000).toFixed(1)} s), directed ${y.directed.edgesPerSolverSecond.toFixed(3)} (${y.directed.newEdges} in ${(y.directed.solverMs / 1000).toFixed(1)} s); full share now ${(y.fullShare * 100).toFixed(0)}%`);
  }
  return lines;
}
