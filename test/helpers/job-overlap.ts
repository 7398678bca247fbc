import path from 'node:path';
import { expect } from 'vitest';
import { readJobLog, type JobLogEntry } from '../../src/telemetry/job-log.js';
import { COMMITTED_STATUSES } from './cli-process.js';

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

/**
 * Reads the `jobs.jsonl` of every coordinator in `names` under `out` and checks what a shared
 * campaign promises: no exact work committed twice, no two solver runs overlapping on a target,
 * and progress by every coordinator. Returns every job and the committed ones.
 */
export function expectExclusiveProgress(out: string, names: readonly string[]): { jobs: JobLogEntry[]; committed: JobLogEntry[] } {
  const jobs = names.flatMap((name) => readJobLog(path.join(out, name, 'jobs.jsonl')));
  const committed = jobs.filter((j) => COMMITTED_STATUSES.has(j.status));
  expect(new Set(committed.map((j) => j.workId)).size).toBe(committed.length);
  expect(overlappingTargetPairs(jobs)).toEqual([]);
  for (const name of names) expect(committed.filter((j) => j.coordinator === name).length, `${name} made progress`).toBeGreaterThan(0);
  return { jobs, committed };
}

/**
 * (input, branch) questions asked again after a run answered them: for every committed job's
 * `settled` member, the jobs on the same input that started after it ended and name that member.
 * Target leases make "started after it ended" the same as "claimed after its release", the
 * release that recorded the answer (docs/leases.md "Shared answers"). Replay lines are skipped.
 */
export function reaskedAnswers(jobs: readonly JobLogEntry[]): string[] {
  const runs = jobs.filter((j) => j.replay !== true && COMMITTED_STATUSES.has(j.status) && j.input !== undefined);
  const byInput = new Map<string, JobLogEntry[]>();
  for (const j of runs) byInput.set(j.input!, [...(byInput.get(j.input!) ?? []), j]);
  const bad: string[] = [];
  for (const j of runs) {
    for (const branch of j.settled ?? []) {
      for (const k of byInput.get(j.input!)!) {
        if (k.startMs > j.endMs && k.targets.includes(branch)) bad.push(`${j.coordinator}->${k.coordinator} ${j.input!.slice(0, 8)}/${branch}`);
      }
    }
  }
  return bad;
}
