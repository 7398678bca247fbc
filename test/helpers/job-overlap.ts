import type { JobLogEntry } from '../../src/telemetry/job-log.js';

/**
 * Pairs of `jobs.jsonl` entries that hold a target in common and whose solver intervals
 * overlap: the target leases promise there are none. Replay lines ran no solver and are skipped.
 */
export function overlappingTargetPairs(jobs: readonly JobLogEntry[]): string[] {
  const runs = jobs.filter((j) => j.replay !== true);
  const bad: string[] = [];
  for (let i = 0; i < runs.length; i++) {
    for (let j = i + 1; j < runs.length; j++) {
      const a = runs[i]!;
      const b = runs[j]!;
      if (!a.targets.some((t) => b.targets.includes(t))) continue;
      if (a.startMs < b.endMs && b.startMs < a.endMs) bad.push(`${a.coordinator}:${a.workId.slice(0, 8)} / ${b.coordinator}:${b.workId.slice(0, 8)}`);
    }
  }
  return bad;
}
