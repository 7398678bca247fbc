/**
 * The `afl-whatsup`-style overview `symfence status` prints for an AFL output directory: one line
 * per symfence coordinator found under it — alive, stale or finished, jobs, findings, edges,
 * utilisation, last update — and a totals line. (A single coordinator's directory keeps the
 * detailed block of `formatCampaignStatus`.)
 */
import { formatDuration } from '../config/schema.js';
import type { CampaignStatus } from './campaign-status.js';
import { escapeForTerminal } from '../util/terminal-text.js';

/** What a user calls the liveness: a running coordinator that still writes its stats is alive. */
type CoordinatorState = 'alive' | 'stale' | 'finished';

export function coordinatorState(status: CampaignStatus): CoordinatorState {
  return status.liveness === 'running' ? 'alive' : status.liveness === 'stale' ? 'stale' : 'finished';
}

function ago(nowMs: number, thenMs: number): string {
  const s = Math.max(0, Math.round((nowMs - thenMs) / 1000));
  return s < 60 ? `${s}s ago` : s < 3600 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s ago` : `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m ago`;
}

const pct = (x: number): string => `${(x * 100).toFixed(0)}%`;

/** Columns padded to their widest cell, two spaces apart. */
function columns(rows: readonly (readonly string[])[]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ').trimEnd());
}

/**
 * The overview text. `escape` makes names and ids from disk safe for a terminal (the caller's
 * control-character escaping); `dir` is the directory that was asked about.
 */
export function formatCampaignOverview(dir: string, statuses: readonly CampaignStatus[], nowMs: number, escape: (text: string) => string = escapeForTerminal): string {
  const header = ['coordinator', 'id', 'state', 'elapsed', 'updated', 'jobs done/started', 'jobs/s', 'queue/crashes/hangs', 'edges', 'solver avg', 'fill'];
  const rows = statuses.map((st) => {
    const s = st.stats;
    const c = s.counters;
    return [
      escape(s.name),
      escape(s.coordinator),
      coordinatorState(st),
      formatDuration(Math.max(0, Math.round((s.updatedMs - s.startedMs) / 1000)) * 1000),
      ago(nowMs, s.updatedMs),
      `${s.jobsCompleted}/${c.jobsStarted}`,
      s.jobsPerSec.toFixed(2),
      `${c.interesting}/${c.crashes}/${c.hangs}`,
      String(c.edgesCovered),
      pct(s.solverUtilisation),
      `${pct(c.fillRatio)} of ${s.workers}`,
    ];
  });
  const count = (state: CoordinatorState): number => statuses.filter((s) => coordinatorState(s) === state).length;
  const sum = (f: (s: CampaignStatus) => number): number => statuses.reduce((n, s) => n + f(s), 0);
  const alive = statuses.filter((s) => coordinatorState(s) === 'alive');
  const workersAlive = alive.reduce((n, s) => n + s.stats.workers, 0);
  const busyAlive = alive.reduce((n, s) => n + s.stats.counters.fillRatio * s.stats.workers, 0);
  return [
    `symfence coordinators in ${escape(dir)}: ${statuses.length} (${count('alive')} alive, ${count('stale')} stale, ${count('finished')} finished)`,
    '',
    ...columns([header, ...rows]).map((line) => `  ${line}`),
    '',
    `  total  jobs ${sum((s) => s.stats.jobsCompleted)} done of ${sum((s) => s.stats.counters.jobsStarted)} started, ${sum((s) => (coordinatorState(s) === 'alive' ? s.stats.jobsPerSec : 0)).toFixed(2)}/s alive; ` +
      `findings queue ${sum((s) => s.stats.counters.interesting)}, crashes ${sum((s) => s.stats.counters.crashes)}, hangs ${sum((s) => s.stats.counters.hangs)}; ` +
      `solvers busy now ${Math.round(busyAlive)} of ${workersAlive} alive`,
  ].join('\n');
}
