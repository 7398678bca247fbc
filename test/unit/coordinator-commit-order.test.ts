// The order of a crash-safe commit with in-memory fakes: findings staged before beginCommit (which
// carries the manifest), published and completed in one fenced step, staged copies discarded only
// once done; a staging failure drops the result and releases the work; a stale result stages but
// never publishes and leaves its copies to the sweep.
import { describe, expect, it } from 'vitest';
import { buildCommitManifest } from '../../src/commit/commit-manifest.js';
import { Coordinator } from '../../src/coordinator/coordinator.js';
import type { CommitOutcome, CommitPublication, CommitScan, FindingItem, ResultCommits, StagedResult } from '../../src/coordinator/ports.js';
import { jobWorkId } from '../../src/coordinator/work-identity.js';
import { createCounters } from '../../src/telemetry/counters.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { FakeReservations, FakeSink, FakeSolver, FakeSource, FakeWorkLeases, ManualClock, makeJob, sha } from '../helpers/coordinator-fakes.js';

const TTL_MS = 30_000;

class FakeCommits implements ResultCommits {
  stageError = false;
  outcome: CommitOutcome = 'completed';
  constructor(private readonly log: string[]) {}
  async stage(workId: string, items: readonly FindingItem[]): Promise<StagedResult> {
    this.log.push(`stage ${items.length}`);
    if (this.stageError) throw Object.assign(new Error('injected staging failure'), { code: 'ERR_PUBLISH' });
    const findings = items.map((i) => {
      const bytes = i.content instanceof Uint8Array ? i.content : new TextEncoder().encode(i.content.path);
      return { kind: i.kind, bytes, sha256: sha(bytes) };
    });
    return { manifest: buildCommitManifest(workId, 'ok', '000000', findings.map((f) => ({ kind: f.kind, sha256: f.sha256, size: f.bytes.length }))), findings };
  }
  async publish(workId: string, token: string, _manifest: unknown, findings: StagedResult['findings']): Promise<CommitPublication> {
    this.log.push(`publish ${findings.length}`);
    const entries = this.outcome === 'completed' ? findings.map((f, id) => ({ kind: f.kind, id, path: `${f.kind}/${id}`, sha256: f.sha256 })) : [];
    return { outcome: this.outcome, entries };
  }
  async scan(): Promise<CommitScan> {
    return { committing: [], done: new Map() };
  }
  async load(): Promise<StagedResult> {
    throw new Error('not used');
  }
  async discard(): Promise<void> {
    this.log.push('discard');
  }
  async sweep(): Promise<number> {
    return 0;
  }
}

function setup() {
  const log: string[] = [];
  const clock = new ManualClock();
  const workLeases = new FakeWorkLeases(TTL_MS);
  const manifests: unknown[] = [];
  const beginCommit = workLeases.beginCommit.bind(workLeases);
  workLeases.beginCommit = async (workId, token, now, manifest?) => {
    log.push('beginCommit');
    manifests.push(manifest);
    return beginCommit(workId, token, now);
  };
  const commits = new FakeCommits(log);
  const solver = new FakeSolver();
  const source = new FakeSource();
  const counters = createCounters();
  const coordinator = new Coordinator(
    { coordinatorId: 'c1', workers: 1, workLeaseTtlMs: TTL_MS, maxPendingJobs: 8, recoverExpiredWork: false },
    { clock, logger: silentLogger(), counters, workLeases, reservations: new FakeReservations(), solver, source, findings: new FakeSink(), commits },
  );
  return { log, clock, workLeases, manifests, commits, solver, source, counters, coordinator };
}

const found = new TextEncoder().encode('new coverage');
const outcome = { status: 'ok' as const, elapsedMs: 1, generated: [{ bytes: found, sha256: sha(found), interesting: true }] };

async function runOne(t: ReturnType<typeof setup>, before?: () => void): Promise<string> {
  const job = makeJob('a');
  t.source.queue.push({ job, owner: 1 });
  await t.coordinator.tick();
  await t.solver.started(1);
  before?.();
  t.solver.runs[0]!.resolve(outcome);
  await t.coordinator.settled();
  return jobWorkId(job);
}

describe('crash-safe commit order', () => {
  it('stages, then beginCommit with the manifest, then one fenced publish + complete, then discards the staged copies', async () => {
    const t = setup();
    await runOne(t);
    expect(t.log).toEqual(['stage 1', 'beginCommit', 'publish 1', 'discard']);
    expect(t.manifests[0]).toMatchObject({ schema: 'symfence-commit/1', items: [{ kind: 'queue', sha256: sha(found) }] });
    expect(t.counters).toMatchObject({ interesting: 1, jobsOk: 1, stagingFailures: 0 });
  });

  it('drops the result and releases the work when staging fails, before any beginCommit', async () => {
    const t = setup();
    t.commits.stageError = true;
    const workId = await runOne(t);
    expect(t.log).toEqual(['stage 1']);
    expect(t.workLeases.records.has(workId)).toBe(false); // abandoned: the work can run again
    expect(t.counters).toMatchObject({ stagingFailures: 1, jobsOk: 0, interesting: 0 });
  });

  it('does not count findings a replaying coordinator published first (already)', async () => {
    const t = setup();
    t.commits.outcome = 'already';
    await runOne(t);
    expect(t.log).toEqual(['stage 1', 'beginCommit', 'publish 1', 'discard']);
    expect(t.counters).toMatchObject({ interesting: 0, jobsOk: 1, commitPublishFailures: 0 });
  });

  it('never publishes a stale result and leaves its staged copies to the sweep', async () => {
    const t = setup();
    const workId = jobWorkId(makeJob('a'));
    await runOne(t, () => t.workLeases.steal(workId, t.clock.now()));
    expect(t.log).toEqual(['stage 1', 'beginCommit']);
    expect(t.counters).toMatchObject({ staleResults: 1, interesting: 0 });
  });

  it('counts a refused fenced publication of its own committing record', async () => {
    const t = setup();
    t.commits.outcome = 'stale';
    await runOne(t);
    expect(t.log).toEqual(['stage 1', 'beginCommit', 'publish 1']);
    expect(t.counters).toMatchObject({ commitPublishFailures: 1, interesting: 0 });
  });
});
