// Shared traces (docs/campaign.md "Shared traces"): one trace per input per campaign. The
// coordinator that wins an input's trace claim stores the trace beside its result under
// <lease-root>/traces/; another coordinator whose claim is refused by the done record loads it
// (size and SHA-256 checked) and its lanes learn it without a run; one refused while the trace is
// being made puts the input off and offers it again later; a coordinator restarted from a lane state
// saved before its own trace learns that trace from the store. Real lease table, I/O service and
// result commits on every store, in-process, on a fault-injecting filesystem layer; a fake solver
// and an injected clock.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { readFile, readdir, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { MAX_TRACE_BYTES, TRACES_DIR } from '../../src/commit/commit-manifest.js';
import { StagedFindings } from '../../src/commit/staged-findings.js';
import { IoResultCommits } from '../../src/coordinator/adapters/io-result-commits.js';
import { IoWorkLeases } from '../../src/coordinator/adapters/io-lease-adapters.js';
import { Coordinator, type CoordinatorHooks } from '../../src/coordinator/coordinator.js';
import type { AdmittedWork, CoordinatorJob, LocalReservations, SeedInput, SolverOutcome, WorkSource } from '../../src/coordinator/ports.js';
import { SchedulerAdapter } from '../../src/coordinator/adapters/scheduler-adapter.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { MapLocalReservations } from '../../src/scheduler/map-local-reservations.js';
import { SCHEDULER_STATE_FILE } from '../../src/scheduler/lane-state-keeper.js';
import { SeedWorkSource, TRACE_RETRY_FIRST_MS, TRACE_RETRY_MAX_MS, untargetedJob } from '../../src/coordinator/seed-work-source.js';
import { jobWorkId } from '../../src/coordinator/work-identity.js';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { IoDurableWriter } from '../../src/io/io-adapters.js';
import { IoService } from '../../src/io/io-service.js';
import type { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { parseTelemetry, telemetryToJson } from '../../src/scheduler/telemetry.js';
import { createCounters, type CampaignCounters } from '../../src/telemetry/counters.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { QueuePublisher } from '../../src/triage/queue-publisher.js';
import { FakeReservations, FakeSolver, ManualClock, sha } from '../helpers/coordinator-fakes.js';
import { LocalIoClient } from '../helpers/local-io-client.js';
import { openWork, S, tempRoot } from '../helpers/lease-fixtures.js';
import { describeEachStore, type LeaseStoreHooks } from '../helpers/lease-stores.js';
import { telemetryJson } from '../unit/scheduler-fixtures.js';
import { TELEMETRY, TRACED, TraceRecordingSource } from '../helpers/trace-fixtures.js';

let currentStore: (LeaseStoreHooks & { options(): Record<string, unknown> }) | undefined;
function storeOfTest(): LeaseStoreHooks & { options(): Record<string, unknown> } {
  if (!currentStore) throw new Error('no lease store selected for this block');
  return currentStore;
}

const TTL_MS = 10 * S;
const T0 = 5_000_000;

interface Node {
  readonly coordinator: Coordinator;
  readonly solver: FakeSolver;
  readonly source: TraceRecordingSource;
  readonly counters: CampaignCounters;
  readonly service: IoService;
  readonly table: FencedWorkLeaseTable;
  readonly fsLayer: FaultInjectingFsLayer;
}

/** A coordinator `id` over the shared lease root, with `source` and `reservations` as its work source and local reservations. */
async function startCoordinator<S extends WorkSource>(
  leaseRoot: string,
  outDir: string,
  id: string,
  clock: ManualClock,
  parts: { readonly source: S; readonly reservations: LocalReservations; readonly hooks?: CoordinatorHooks },
): Promise<Omit<Node, 'source'> & { readonly source: S }> {
  const fsLayer = new FaultInjectingFsLayer();
  const table = await openWork(path.join(leaseRoot, 'work'), { leaseTtlMs: TTL_MS, fileBarrier: 'fsync', ...storeOfTest().options() }, { fsLayer });
  const service = await IoService.start({ coordinatorId: id, work: table, fsLayer, options: { fileBarrier: 'fsync' } }, T0);
  const client = new LocalIoClient(service);
  const publisher = await QueuePublisher.open(outDir, new IoDurableWriter(client));
  const commits = await IoResultCommits.open(leaseRoot, client, publisher, { fsLayer });
  const solver = new FakeSolver();
  const counters = createCounters();
  const { source, reservations, hooks } = parts;
  const coordinator = new Coordinator(
    { coordinatorId: id, workers: 1, workLeaseTtlMs: TTL_MS, maxPendingJobs: 8, recoverExpiredWork: true },
    { clock, logger: silentLogger(), counters, workLeases: new IoWorkLeases(client), reservations, solver, source, commits, ...(hooks ? { hooks } : {}) },
  );
  return { coordinator, solver, source, counters, service, table, fsLayer };
}

function startNode(leaseRoot: string, outDir: string, id: string, clock: ManualClock, hooks?: CoordinatorHooks): Promise<Node> {
  return startCoordinator(leaseRoot, outDir, id, clock, { source: new TraceRecordingSource([]), reservations: new FakeReservations(), ...(hooks ? { hooks } : {}) });
}

/** One round of `node`: the runs it starts (directed runs at what its lanes know) end without findings. */
async function tickToEnd(node: { readonly coordinator: Coordinator; readonly solver: FakeSolver }): Promise<void> {
  await node.coordinator.tick();
  for (const run of node.solver.runs) run.resolve({ status: 'ok', elapsedMs: 5, generated: [] });
  await node.coordinator.settled();
}

/** The trace runs `node` started. */
function traceRuns(node: { readonly solver: FakeSolver }): CoordinatorJob[] {
  return node.solver.runs.map((r) => r.task.job).filter((job) => job.mode === 'trace');
}

/**
 * One life of coordinator `id` as a campaign wires it: the seed work source over the scheduler,
 * whose lanes are loaded from `stateFile` first (as `LaneStateKeeper.load` does at start).
 */
async function startLife(leaseRoot: string, outDir: string, id: string, clock: ManualClock, stateFile: string, seeds: readonly SeedInput[], lanes = 'frontier') {
  const scheduler = new Scheduler({ local: new MapLocalReservations(), options: { lanes } });
  await scheduler.loadState(stateFile, clock.now());
  const reservations = new SchedulerAdapter(scheduler, new FakeReservations());
  const source = new SeedWorkSource({ scheduler: reservations, initialSeeds: seeds, firstRun: 'trace' });
  return { scheduler, ...(await startCoordinator(leaseRoot, outDir, id, clock, { source, reservations })) };
}

/** Where the inputs live (a crashing run publishes its parent, read from here). */
let inputsDir = '';

function traceJob(name: string): CoordinatorJob {
  const file = path.join(inputsDir, name);
  writeFileSync(file, name);
  return untargetedJob({ path: file, sha256: sha(name), depth: 0, origin: 'afl' }, 'trace');
}

/** Runs `job` on `node` to its commit with `outcome`. */
async function runToCommit(node: Node, job: CoordinatorJob, outcome: SolverOutcome): Promise<void> {
  const runs = node.solver.runs.length;
  node.source.queue.push({ job, owner: 1 } satisfies AdmittedWork);
  await node.coordinator.tick();
  await node.solver.started(runs + 1);
  node.solver.runs.at(-1)!.resolve(outcome);
  await node.coordinator.settled();
}

/** Offers `job` to `node`, whose claim is expected to be refused (no run starts). */
async function offer(node: Node, job: CoordinatorJob): Promise<void> {
  node.source.queue.push({ job, owner: 1 });
  await node.coordinator.tick();
  await node.coordinator.settled();
}

async function setup() {
  const root = await tempRoot('symfence-traces-');
  const leaseRoot = path.join(root, 'leases');
  const clock = new ManualClock(T0);
  const a = await startNode(leaseRoot, path.join(root, 'a'), 'a', clock);
  const b = await startNode(leaseRoot, path.join(root, 'b'), 'b', clock);
  return { root, leaseRoot, clock, a, b, close: () => Promise.all([a.service.close(), b.service.close()]) };
}

beforeAll(() => {
  inputsDir = mkdtempSync(path.join(tmpdir(), 'symfence-traces-inputs-'));
});
afterAll(() => rmSync(inputsDir, { recursive: true, force: true }));

describeEachStore('shared traces', (store) => {
  beforeAll(() => {
    currentStore = store;
  });

  it('stores a trace run\'s trace under traces/ with its result, and another coordinator adopts it without running the input', async () => {
    const { leaseRoot, a, b, close } = await setup();
    try {
      const job = traceJob('input-1');
      const workId = jobWorkId(job);
      await runToCommit(a, job, TRACED);
      const record = (await a.table.snapshotRecords()).find((e) => e.id === workId)!.record;
      expect(record).toMatchObject({ status: 'done', owner: 'a' });
      const trace = (record.commit as { trace: { path: string; sha256: string; size: number } }).trace;
      expect(trace.path).toBe(`${TRACES_DIR}/${workId}.${trace.sha256}`);
      const bytes = await readFile(path.join(leaseRoot, trace.path));
      expect(bytes.length).toBe(trace.size);
      expect(sha(bytes)).toBe(trace.sha256);
      expect(parseTelemetry(bytes.toString('utf8'))).toEqual(TELEMETRY);
      // The trace outlives the commit: the staged findings are discarded, the trace is not.
      expect(await readdir(path.join(leaseRoot, TRACES_DIR))).toEqual([`${workId}.${trace.sha256}`]);

      await offer(b, traceJob('input-1'));
      expect(b.solver.runs).toHaveLength(0);
      expect(b.source.adopted).toHaveLength(1);
      expect(b.source.adopted[0]!.workId).toBe(workId);
      expect(b.source.adopted[0]!.telemetry).toEqual(TELEMETRY);
      expect(b.source.deferred).toEqual([]);
      expect(b.counters).toMatchObject({ tracesAdopted: 1, traceAdoptFailures: 0, tracesDeferred: 0 });

      // The coordinator that made the trace learnt it from its own run: a second offer adopts nothing.
      await offer(a, traceJob('input-1'));
      expect(a.solver.runs).toHaveLength(1);
      expect(a.source.adopted).toEqual([]);
      expect(a.source.observed.map((o) => o.workId)).toEqual([workId]);
      expect(a.counters.tracesAdopted).toBe(0);
    } finally {
      await close();
    }
  });

  it('learns its own stored trace again when restarted from a lane state saved before that trace, and nothing when the saved state has it', async () => {
    const root = await tempRoot('symfence-traces-restart-');
    const leaseRoot = path.join(root, 'leases');
    const outDir = path.join(root, 'out');
    const clock = new ManualClock(T0);
    const job = traceJob('input-8');
    const seed: SeedInput = { path: job.inputPath, sha256: job.inputSha256, depth: 0, origin: 'afl' };
    const before = path.join(root, 'before', SCHEDULER_STATE_FILE);
    const after = path.join(root, 'after', SCHEDULER_STATE_FILE);

    // First life: the lane state is saved, then the input's trace runs and commits, and the
    // process is killed before its next save.
    const first = await startLife(leaseRoot, outDir, 'a', clock, before, [seed]);
    try {
      await first.scheduler.saveState(before, clock.now());
      await first.coordinator.tick();
      await first.solver.started(1);
      expect(first.solver.runs[0]!.task.job).toMatchObject({ inputSha256: seed.sha256, mode: 'trace' });
      first.solver.runs[0]!.resolve(TRACED);
      await first.coordinator.settled();
      expect(first.scheduler.knowsInput(seed.sha256)).toBe(true);
      expect(first.scheduler.lane('frontier')!.openOf(seed.sha256)).toEqual([3n, 6n]);
      await first.scheduler.saveState(after, clock.now());
    } finally {
      await first.service.close();
    }

    // Restarted from the older save: our own done record refuses the trace claim, and the lanes,
    // which do not know the input, learn the stored trace instead of never learning it.
    const stale = await startLife(leaseRoot, outDir, 'a', clock, before, [seed]);
    try {
      expect(stale.scheduler.knowsInput(seed.sha256)).toBe(false);
      await tickToEnd(stale);
      expect(traceRuns(stale)).toEqual([]);
      expect(stale.counters).toMatchObject({ tracesRelearned: 1, tracesAdopted: 0, traceAdoptFailures: 0, tracesDeferred: 0 });
      expect(stale.scheduler.knowsInput(seed.sha256)).toBe(true);
      expect(stale.scheduler.lane('frontier')!.openOf(seed.sha256)).toEqual([3n, 6n]);
    } finally {
      await stale.service.close();
    }

    // Restarted from the save that has the trace: the lanes know the input, nothing is learnt again.
    const current = await startLife(leaseRoot, outDir, 'a', clock, after, [seed]);
    try {
      expect(current.scheduler.knowsInput(seed.sha256)).toBe(true);
      await tickToEnd(current);
      expect(traceRuns(current)).toEqual([]);
      expect(current.counters).toMatchObject({ tracesRelearned: 0, tracesAdopted: 0, traceAdoptFailures: 0, tracesDeferred: 0 });
    } finally {
      await current.service.close();
    }
  });

  it('gives a coordinator that adopts the traces the same coverage frontier as the one that ran them', async () => {
    const root = await tempRoot('symfence-traces-frontier-');
    const leaseRoot = path.join(root, 'leases');
    const clock = new ManualClock(T0);
    const jobs = [traceJob('input-9'), traceJob('input-10')];
    const seeds: SeedInput[] = jobs.map((job) => ({ path: job.inputPath, sha256: job.inputSha256, depth: 0, origin: 'afl' }));
    // The second input takes other sites, one of them three times (another hit bucket).
    const other = parseTelemetry(telemetryJson({ trace: [[1, 20, 21, 8, 1, 0], [20, 22, 23, 9, 0, 1], [22, 24, 25, 9, 0, 1], [24, 26, 27, 9, 0, 1]], open: [21, 23] }));
    const outcomes: SolverOutcome[] = [TRACED, { ...TRACED, telemetry: other }];
    // No lane that turns the traces into directed runs: the traces alone make the frontier here.
    const a = await startLife(leaseRoot, path.join(root, 'a'), 'a', clock, path.join(root, 'a-state', SCHEDULER_STATE_FILE), seeds, 'concurrency');
    const b = await startLife(leaseRoot, path.join(root, 'b'), 'b', clock, path.join(root, 'b-state', SCHEDULER_STATE_FILE), seeds, 'concurrency');
    try {
      // Each run is answered once it starts; the next one may start the moment one exits.
      const outcomeOf = new Map(seeds.map((seed, i) => [seed.sha256, outcomes[i]!]));
      for (const n of [1, 2]) {
        await a.coordinator.tick();
        await a.solver.started(n);
        const run = a.solver.runs[n - 1]!;
        run.resolve(outcomeOf.get(run.task.job.inputSha256)!);
      }
      await a.coordinator.settled();
      expect(traceRuns(a).map((job) => job.inputSha256)).toEqual(seeds.map((seed) => seed.sha256));
      const ran = a.scheduler.coverageFrontier.stats();
      expect(ran).toMatchObject({ takenPairs: 4, traces: 2 });

      await tickToEnd(b);
      await tickToEnd(b);
      expect(traceRuns(b)).toEqual([]);
      expect(b.counters.tracesAdopted).toBe(2);
      expect(b.scheduler.coverageFrontier.stats()).toEqual(ran);
      expect(b.scheduler.coverageFrontier.toJSON()).toEqual(a.scheduler.coverageFrontier.toJSON());
    } finally {
      await Promise.all([a.service.close(), b.service.close()]);
    }
  });

  it('puts an input off while another coordinator is tracing it, and adopts the trace once it is done', async () => {
    const { a, b, close } = await setup();
    try {
      const job = traceJob('input-2');
      a.source.queue.push({ job, owner: 1 });
      await a.coordinator.tick();
      await a.solver.started(1); // a holds the trace claim, running

      await offer(b, traceJob('input-2'));
      expect(b.solver.runs).toHaveLength(0);
      expect(b.source.deferred.map(jobWorkId)).toEqual([jobWorkId(job)]);
      expect(b.counters).toMatchObject({ tracesDeferred: 1, tracesAdopted: 0 });

      a.solver.runs[0]!.resolve(TRACED);
      await a.coordinator.settled();
      await offer(b, traceJob('input-2'));
      expect(b.source.adopted.map((x) => x.workId)).toEqual([jobWorkId(job)]);
      expect(b.counters).toMatchObject({ tracesDeferred: 1, tracesAdopted: 1 });
    } finally {
      await close();
    }
  });

  it('adopts the trace of a tracer that died after its beginCommit once a commit scan replays the record, instead of forgetting the input it put off', async () => {
    const root = await tempRoot('symfence-traces-');
    const leaseRoot = path.join(root, 'leases');
    const clock = new ManualClock(T0);
    let reached!: () => void;
    const atCommit = new Promise<void>((resolve) => (reached = resolve));
    // a commits its trace run and dies right after its beginCommit: it never publishes.
    const a = await startNode(leaseRoot, path.join(root, 'a'), 'a', clock, {
      afterBeginCommit: () => {
        reached();
        return new Promise<void>(() => {});
      },
    });
    const b = await startNode(leaseRoot, path.join(root, 'b'), 'b', clock);
    try {
      const job = traceJob('input-dies');
      a.source.queue.push({ job, owner: 1 });
      await a.coordinator.tick();
      await a.solver.started(1);
      a.solver.runs[0]!.resolve(TRACED);
      await atCommit;
      // b meets the input while its trace record is committing: put off.
      await offer(b, traceJob('input-dies'));
      expect(b.counters).toMatchObject({ tracesDeferred: 1, tracesAdopted: 0 });
      // After a's silence of a whole TTL, one of b's commit scans replays a's record.
      for (let i = 0; i < 12 && b.counters.commitsReplayed === 0; i += 1) {
        clock.advance(TTL_MS);
        await tickToEnd(b);
      }
      expect(b.counters.commitsReplayed).toBe(1);
      expect(b.source.adopted.map((x) => x.workId)).toEqual([jobWorkId(job)]);
      expect(b.counters).toMatchObject({ tracesAdopted: 1, traceAdoptFailures: 0 });
      expect(traceRuns(b)).toHaveLength(0);
    } finally {
      await Promise.all([a.service.close(), b.service.close()]);
    }
  });

  it('shares nothing from a trace run that crashed or wrote no telemetry: the refusal adopts nothing and fails nothing', async () => {
    const { leaseRoot, a, b, close } = await setup();
    try {
      await runToCommit(a, traceJob('input-3'), { status: 'ok', elapsedMs: 5, generated: [] });
      await runToCommit(a, traceJob('input-4'), { status: 'crash', elapsedMs: 5, generated: [], telemetry: TELEMETRY });
      expect(await readdir(path.join(leaseRoot, TRACES_DIR))).toEqual([]);
      await offer(b, traceJob('input-3'));
      await offer(b, traceJob('input-4'));
      expect(b.solver.runs).toHaveLength(0);
      expect(b.source.adopted).toEqual([]);
      expect(b.counters).toMatchObject({ tracesAdopted: 0, traceAdoptFailures: 0 });
    } finally {
      await close();
    }
  });

  it('sweeps the trace a run staged before its beginCommit was refused, once the work is done elsewhere, and keeps the trace the done record names', async () => {
    const { leaseRoot, clock, a, b, close } = await setup();
    try {
      const job = traceJob('input-7');
      const workId = jobWorkId(job);
      a.source.queue.push({ job, owner: 1 });
      await a.coordinator.tick();
      await a.solver.started(1);
      // a stops renewing; b takes the expired work over and finishes it with a trace of its own.
      clock.advance(TTL_MS);
      await runToCommit(b, traceJob('input-7'), { ...TRACED, telemetry: { ...TELEMETRY, openBranches: [6n] } });
      const kept = (await b.table.snapshotRecords()).find((e) => e.id === workId)!.record;
      expect(kept).toMatchObject({ status: 'done', owner: 'b' });
      const keptName = path.basename((kept.commit as { trace: { path: string } }).trace.path);
      // a's run ends now: its trace is staged, its beginCommit refused, and its file left behind.
      a.solver.runs[0]!.resolve(TRACED);
      await a.coordinator.settled();
      expect(a.counters.staleResults).toBe(1);
      const left = await readdir(path.join(leaseRoot, TRACES_DIR));
      expect(left.sort()).toEqual([keptName, left.find((n) => n !== keptName)!].sort());
      expect(left).toHaveLength(2);

      // Within a TTL of the completion nothing is swept (a done record may still roll back).
      expect(await a.coordinator.recoverCommits()).toBe(0);
      expect(await readdir(path.join(leaseRoot, TRACES_DIR))).toHaveLength(2);
      clock.advance(TTL_MS);
      await a.coordinator.recoverCommits();
      expect(await readdir(path.join(leaseRoot, TRACES_DIR))).toEqual([keptName]);
      expect(a.counters.stagedSwept).toBe(1);
      // The kept trace still serves: a third look adopts it.
      await offer(a, traceJob('input-7'));
      expect(a.source.adopted.map((x) => x.workId)).toEqual([workId]);
    } finally {
      await close();
    }
  });

  it('fails closed on a shared trace whose bytes were altered, and counts a removed one apart: neither adopted, the input not run again', async () => {
    const { leaseRoot, a, b, close } = await setup();
    try {
      const altered = traceJob('input-5');
      const removed = traceJob('input-6');
      await runToCommit(a, altered, TRACED);
      await runToCommit(a, removed, { ...TRACED, telemetry: { ...TELEMETRY, openBranches: [6n] } });
      const names = await readdir(path.join(leaseRoot, TRACES_DIR));
      const alteredName = names.find((n) => n.startsWith(jobWorkId(altered)))!;
      const removedName = names.find((n) => n.startsWith(jobWorkId(removed)))!;
      const original = await readFile(path.join(leaseRoot, TRACES_DIR, alteredName));
      const forged = Buffer.from(JSON.stringify({ ...telemetryToJson(TELEMETRY), openBranches: ['9'] }).padEnd(original.length, ' ').slice(0, original.length));
      await writeFile(path.join(leaseRoot, TRACES_DIR, alteredName), forged);
      await unlink(path.join(leaseRoot, TRACES_DIR, removedName));

      await offer(b, traceJob('input-5'));
      await offer(b, traceJob('input-6'));
      expect(b.solver.runs).toHaveLength(0);
      expect(b.source.adopted).toEqual([]);
      // A trace gone is what the trace store's cap leaves: not a failure.
      expect(b.counters).toMatchObject({ tracesAdopted: 0, traceAdoptFailures: 1, traceAdoptMissing: 1 });
      // Nothing was rewritten: the altered bytes are as planted.
      expect(await readFile(path.join(leaseRoot, TRACES_DIR, alteredName))).toEqual(forged);
    } finally {
      await close();
    }
  });
});

it('loads a staged trace only when its size and SHA-256 match, keeps it through discard and refuses one over the cap before writing', async () => {
  const root = await tempRoot('symfence-traces-staged-');
  const written = new Map<string, Uint8Array>();
  const client = {
    ensureDir: async () => {},
    stageFiles: async (dir: string, files: readonly { name: string; bytes: Uint8Array }[]) => {
      for (const f of files) written.set(path.join(dir, f.name), f.bytes);
    },
    removeFiles: async (dir: string, names: readonly string[]) => {
      for (const n of names) written.delete(path.join(dir, n));
      return names.length;
    },
  };
  const readFromMap = async (file: string): Promise<Uint8Array> => {
    const bytes = written.get(file);
    if (!bytes) throw Object.assign(new Error(`ENOENT: ${file}`), { code: 'ENOENT' });
    return bytes;
  };
  const staged = await StagedFindings.open(root, client as never, readFromMap);
  const workId = 'a'.repeat(64);
  const trace = new TextEncoder().encode(JSON.stringify(telemetryToJson(TELEMETRY)));
  const result = await staged.stage(workId, [{ kind: 'queue', content: Buffer.from('found') }], { status: 'ok', source: '000001', trace });
  const commit = JSON.parse(JSON.stringify(result.manifest)) as unknown;
  expect(await staged.loadTrace(workId, commit)).toEqual(trace);
  await staged.discard(result.manifest);
  expect([...written.keys()].map((f) => path.relative(root, f))).toEqual([result.manifest.trace!.path]);
  expect(await staged.loadTrace(workId, commit)).toEqual(trace);

  written.set(path.join(root, result.manifest.trace!.path), trace.slice(1));
  await expect(staged.loadTrace(workId, commit)).rejects.toMatchObject({ code: 'ERR_STAGED_FINDING', details: { reason: 'mismatch' } });
  written.clear();
  await expect(staged.loadTrace(workId, commit)).rejects.toMatchObject({ code: 'ERR_STAGED_FINDING', details: { reason: 'missing' } });
  await expect(staged.loadTrace('b'.repeat(64), commit)).rejects.toMatchObject({ code: 'ERR_COMMIT_MANIFEST' });
  expect(await staged.loadTrace(workId, JSON.parse(JSON.stringify({ ...result.manifest, trace: undefined })))).toBeUndefined();

  await expect(staged.stage(workId, [], { status: 'ok', source: '000001', trace: new Uint8Array(MAX_TRACE_BYTES + 1) })).rejects.toMatchObject({ code: 'ERR_STAGED_FINDING_TOO_LARGE' });
  expect(written.size).toBe(0);
});

it('offers an input put off for a trace made elsewhere again after a delay that doubles per refusal, and forgets it once adopted', async () => {
  const scheduler = { observed: [] as unknown[], observe(feedback: unknown) { this.observed.push(feedback); }, wantedFor: () => [], admit: async () => [], addSeed: () => {} };
  const source = new SeedWorkSource({ owner: 1, scheduler: scheduler as never, firstRun: 'trace' });
  const job = traceJob('input-7');
  let now = 1_000;
  source.deferTrace(job, now);
  expect(source.backlog).toBe(1);
  expect(await source.take(4, now + TRACE_RETRY_FIRST_MS - 1)).toEqual([]);
  now += TRACE_RETRY_FIRST_MS;
  const again = await source.take(4, now);
  expect(again.map((w) => jobWorkId(w.job))).toEqual([jobWorkId(job)]);
  // Refused again: each delay doubles, up to the last.
  const delays: number[] = [];
  for (let i = 0; i < 8; i++) {
    source.deferTrace(job, now);
    let step = 0;
    while ((await source.take(4, now + step)).length === 0) step += 500;
    delays.push(step);
    now += step;
  }
  expect(delays).toEqual([2000, 4000, 8000, 16000, TRACE_RETRY_MAX_MS, TRACE_RETRY_MAX_MS, TRACE_RETRY_MAX_MS, TRACE_RETRY_MAX_MS]);
  source.deferTrace(job, now);
  source.adoptTrace(job, jobWorkId(job), TELEMETRY, now);
  expect(source.backlog).toBe(0);
  expect(await source.take(4, now + TRACE_RETRY_MAX_MS)).toEqual([]);
  expect(scheduler.observed).toEqual([{ job, workId: jobWorkId(job), status: 'ok', telemetry: TELEMETRY, findings: [] }]);
  // After an adoption the delays start over.
  source.deferTrace(job, now);
  expect(await source.take(4, now + TRACE_RETRY_FIRST_MS)).toHaveLength(1);
});
