// The shared traces' size cap (docs/campaign.md "Shared traces"): over the cap, the commit scan
// evicts the least recently used traces (written, or adopted since) of work done for a whole work
// TTL, and keeps the done records; a coordinator that then meets an evicted input neither runs it
// nor counts a failure. Real lease table, I/O service and result commits on every store, wired as
// a campaign wires them (on etcd the traces and their use keys live in etcd), on a fault-injecting
// filesystem layer with an injected clock; the assertions read what is left on disk or in etcd.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readdir, stat, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { TRACES_DIR } from '../../src/commit/commit-manifest.js';
import { EtcdStagedFindings, TRACE_USE_DIR } from '../../src/commit/etcd-staged-findings.js';
import { openResultCommits } from '../../src/coordinator/adapters/campaign-components.js';
import type { IoResultCommits } from '../../src/coordinator/adapters/io-result-commits.js';
import { IoWorkLeases } from '../../src/coordinator/adapters/io-lease-adapters.js';
import { Coordinator, type CoordinatorHooks } from '../../src/coordinator/coordinator.js';
import type { CoordinatorJob } from '../../src/coordinator/ports.js';
import { untargetedJob } from '../../src/coordinator/seed-work-source.js';
import { jobWorkId } from '../../src/coordinator/work-identity.js';
import { FaultInjectingFsLayer } from '../../src/fs/fault-fs-layer.js';
import { IoDurableWriter } from '../../src/io/io-adapters.js';
import { IoService } from '../../src/io/io-service.js';
import { LEASE_TABLE_OPTIONS } from '../../src/lease/lease-table-options.js';
import type { FencedWorkLeaseTable } from '../../src/lease/work-lease-table.js';
import { createCounters, type CampaignCounters } from '../../src/telemetry/counters.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { QueuePublisher } from '../../src/triage/queue-publisher.js';
import { FakeReservations, FakeSolver, ManualClock, sha } from '../helpers/coordinator-fakes.js';
import { LocalIoClient } from '../helpers/local-io-client.js';
import { openWork, S, tempRoot } from '../helpers/lease-fixtures.js';
import { describeEachStore, type StoreContext } from '../helpers/lease-stores.js';
import { TELEMETRY, TRACED, TraceRecordingSource } from '../helpers/trace-fixtures.js';

const TTL_MS = 10 * S;
const T0 = 5_000_000;

interface Node {
  readonly coordinator: Coordinator;
  readonly solver: FakeSolver;
  readonly source: TraceRecordingSource;
  readonly counters: CampaignCounters;
  readonly table: FencedWorkLeaseTable;
  readonly fsLayer: FaultInjectingFsLayer;
  readonly commits: IoResultCommits;
  close(): Promise<void>;
}

let inputsDir = '';
beforeAll(() => {
  inputsDir = mkdtempSync(path.join(tmpdir(), 'symfence-tracecap-inputs-'));
});
afterAll(() => rmSync(inputsDir, { recursive: true, force: true }));

function traceJob(name: string): CoordinatorJob {
  const file = path.join(inputsDir, name);
  writeFileSync(file, name);
  return untargetedJob({ path: file, sha256: sha(name), depth: 0, origin: 'afl' }, 'trace');
}

describeEachStore('trace store cap', (store: StoreContext) => {
  const etcd = store.name === 'etcd';

  async function startNode(leaseRoot: string, outDir: string, id: string, clock: ManualClock, capBytes: number, hooks?: CoordinatorHooks): Promise<Node> {
    const fsLayer = new FaultInjectingFsLayer();
    const table = await openWork(path.join(leaseRoot, 'work'), { leaseTtlMs: TTL_MS, fileBarrier: 'fsync', ...store.options() }, { fsLayer });
    const service = await IoService.start({ coordinatorId: id, work: table, fsLayer, options: { fileBarrier: 'fsync' } }, T0);
    const client = new LocalIoClient(service);
    const publisher = await QueuePublisher.open(outDir, new IoDurableWriter(client));
    const staging = etcd ? await EtcdStagedFindings.open(LEASE_TABLE_OPTIONS.resolve({ ...store.options() }), leaseRoot) : undefined;
    const commits = await openResultCommits(client, leaseRoot, publisher, staging, { traceStoreMaxBytes: capBytes, clock, fsLayer });
    const solver = new FakeSolver();
    const source = new TraceRecordingSource([]);
    const counters = createCounters();
    const coordinator = new Coordinator(
      { coordinatorId: id, workers: 1, workLeaseTtlMs: TTL_MS, maxPendingJobs: 8, recoverExpiredWork: true },
      { clock, logger: silentLogger(), counters, workLeases: new IoWorkLeases(client), reservations: new FakeReservations(), solver, source, commits, ...(hooks ? { hooks } : {}) },
    );
    return {
      coordinator,
      solver,
      source,
      counters,
      table,
      fsLayer,
      commits,
      close: async () => {
        await service.close();
        await staging?.close();
      },
    };
  }

  async function runToCommit(node: Node, job: CoordinatorJob): Promise<void> {
    const runs = node.solver.runs.length;
    node.source.queue.push({ job, owner: 1 });
    await node.coordinator.tick();
    await node.solver.started(runs + 1);
    node.solver.runs.at(-1)!.resolve(TRACED);
    await node.coordinator.settled();
  }

  async function offer(node: Node, job: CoordinatorJob): Promise<void> {
    node.source.queue.push({ job, owner: 1 });
    await node.coordinator.tick();
    await node.coordinator.settled();
  }

  /** The trace names stored for `leaseRoot`: files under traces/, or keys in etcd. */
  async function storedTraces(leaseRoot: string): Promise<string[]> {
    if (!etcd) return (await readdir(path.join(leaseRoot, TRACES_DIR))).filter((n) => !n.startsWith('.')).sort();
    return keysUnder(TRACES_DIR);
  }

  async function keysUnder(dir: string): Promise<string[]> {
    const options = store.options();
    const client = new Etcd3({ hosts: String(options['etcdEndpoints']).split(',').map((e) => `http://${e}`) });
    try {
      const base = `${String(options['etcdPrefix'])}/${dir}/`;
      return (await client.getAll().prefix(base).keys()).map((k) => k.slice(base.length)).sort();
    } finally {
      client.close();
    }
  }

  async function setup(capTraces: number, hooks?: CoordinatorHooks) {
    const root = await tempRoot('symfence-tracecap-');
    const leaseRoot = path.join(root, 'leases');
    const clock = new ManualClock(T0);
    // Every trace here holds the same telemetry, so they all have the size of the probe's.
    const a = await startNode(leaseRoot, path.join(root, 'a'), 'a', clock, Number.MAX_SAFE_INTEGER, hooks);
    const probe = traceJob('probe');
    await runToCommit(a, probe);
    const record = (await a.table.snapshotRecords()).find((e) => e.id === jobWorkId(probe))!.record;
    const traceBytes = (record.commit as { trace: { size: number } }).trace.size;
    await a.close();
    const capBytes = Math.floor(capTraces * traceBytes);
    const a2 = await startNode(leaseRoot, path.join(root, 'a'), 'a', clock, capBytes, hooks);
    const b = await startNode(leaseRoot, path.join(root, 'b'), 'b', clock, capBytes);
    return { leaseRoot, clock, a: a2, b, probe, traceBytes, close: () => Promise.all([a2.close(), b.close()]) };
  }

  /** The trace file name of a done record. */
  async function traceName(node: Node, job: CoordinatorJob): Promise<string> {
    const record = (await node.table.snapshotRecords()).find((e) => e.id === jobWorkId(job))!.record;
    return path.basename((record.commit as { trace: { path: string } }).trace.path);
  }

  /** On disk the write time is the kernel's: each trace's mtime is set to when it was written on the injected clock. */
  async function datedWrite(leaseRoot: string, name: string, ms: number): Promise<void> {
    if (!etcd) await utimes(path.join(leaseRoot, TRACES_DIR, name), ms / 1000, ms / 1000);
  }

  it('evicts the least recently used traces of settled work over the cap, keeps the done records, and an evicted input is neither run again nor a failure', async () => {
    // Probe + 4 inputs: 5 traces against a cap of 4.5 → down to 0.9 × 4.5 = 4.05, so one goes.
    const { leaseRoot, clock, a, b, probe, close } = await setup(4.5);
    try {
      await datedWrite(leaseRoot, await traceName(a, probe), T0);
      const jobs = ['input-1', 'input-2', 'input-3', 'input-4'].map(traceJob);
      for (const job of jobs) {
        clock.advance(S);
        await runToCommit(a, job);
        await datedWrite(leaseRoot, await traceName(a, job), clock.now());
      }
      // b adopts the probe's trace: its use is now the newest; input-1's is the oldest.
      clock.advance(S);
      await offer(b, traceJob('probe'));
      expect(b.counters.tracesAdopted).toBe(1);
      const probeName = await traceName(a, probe);
      if (!etcd) expect((await stat(path.join(leaseRoot, TRACES_DIR, probeName))).mtimeMs).toBe(clock.now());
      else expect(await keysUnder(TRACE_USE_DIR)).toEqual([probeName]);
      const names = await Promise.all(jobs.map((j) => traceName(a, j)));
      expect(await storedTraces(leaseRoot)).toEqual([probeName, ...names].sort());

      // Within a work TTL of the last completion only the probe and input-1 are settled; the probe
      // was used last, so input-1 goes.
      clock.ms = T0 + TTL_MS + 1.5 * S;
      await a.coordinator.recoverCommits();
      expect(a.counters.tracesEvicted).toBe(1);
      expect(await storedTraces(leaseRoot)).toEqual([probeName, ...names.slice(1)].sort());
      if (etcd) expect(await keysUnder(TRACE_USE_DIR)).toEqual([probeName]);
      // Under the low-water mark now: the next pass removes nothing.
      await a.coordinator.recoverCommits();
      expect(a.counters.tracesEvicted).toBe(1);

      // Every done record stays, the evicted one included.
      const records = await a.table.snapshotRecords();
      for (const job of [probe, ...jobs]) expect(records.find((e) => e.id === jobWorkId(job))!.record.status).toBe('done');

      // b meets input-1: not run, nothing adopted, counted as missing, not as a failure.
      await offer(b, traceJob('input-1'));
      expect(b.solver.runs).toHaveLength(0);
      expect(b.source.adopted.map((a) => a.workId)).toEqual([jobWorkId(probe)]);
      expect(b.counters).toMatchObject({ tracesAdopted: 1, traceAdoptMissing: 1, traceAdoptFailures: 0 });
      // …and a trace still stored is adopted as before.
      await offer(b, traceJob('input-2'));
      expect(b.counters).toMatchObject({ tracesAdopted: 2, traceAdoptMissing: 1, traceAdoptFailures: 0 });
    } finally {
      await close();
    }
  });

  it('never evicts the trace of work still committing, nor of work done within a work TTL, however far over the cap', async () => {
    let held!: () => void;
    const gate = new Promise<void>((resolve) => (held = resolve));
    let reached!: () => void;
    const atCommit = new Promise<void>((resolve) => (reached = resolve));
    let holding = false;
    const hooks: CoordinatorHooks = {
      afterBeginCommit: async () => {
        if (!holding) return;
        reached();
        await gate;
      },
    };
    const { leaseRoot, clock, a, probe, close } = await setup(0.01, hooks);
    try {
      const probeName = await traceName(a, probe);
      clock.advance(S);
      await runToCommit(a, traceJob('fresh')); // done now: not settled for a TTL
      const freshName = await traceName(a, traceJob('fresh'));
      holding = true;
      const job = traceJob('committing');
      a.source.queue.push({ job, owner: 1 });
      await a.coordinator.tick();
      await a.solver.started(2);
      a.solver.runs[1]!.resolve(TRACED);
      await atCommit; // staged and committing, held before its publication
      const stored = await storedTraces(leaseRoot);
      expect(stored).toHaveLength(3);
      const committingName = stored.find((n) => n !== probeName && n !== freshName)!;

      clock.ms = T0 + TTL_MS + S / 2; // the probe is settled; `fresh` is not; `committing` is not done
      await a.coordinator.recoverCommits();
      expect(a.counters.tracesEvicted).toBe(1);
      expect(await storedTraces(leaseRoot)).toEqual([freshName, committingName].sort());

      held();
      await a.coordinator.settled();
      expect((await a.table.snapshotRecords()).find((e) => e.id === jobWorkId(job))!.record.status).toBe('done');
      expect(await storedTraces(leaseRoot)).toEqual([freshName, committingName].sort());
    } finally {
      held();
      await close();
    }
  });

  it.skipIf(etcd)('keeps an adoption when marking the trace used fails, and leaves the trace in place when its removal fails, evicting it at the next pass', async () => {
    const { leaseRoot, clock, a, b, probe, close } = await setup(1.5);
    try {
      const probeName = await traceName(a, probe);
      await datedWrite(leaseRoot, probeName, T0);
      clock.advance(S);
      await runToCommit(a, traceJob('second'));
      const secondName = await traceName(a, traceJob('second'));
      await datedWrite(leaseRoot, secondName, clock.now());

      b.fsLayer.fail({ op: 'utimes', path: probeName });
      clock.advance(S);
      await offer(b, traceJob('probe'));
      expect(b.counters).toMatchObject({ tracesAdopted: 1, traceAdoptFailures: 0 });
      expect((await stat(path.join(leaseRoot, TRACES_DIR, probeName))).mtimeMs).toBe(T0);

      a.fsLayer.fail({ op: 'unlink', path: probeName });
      clock.ms = T0 + 2 * TTL_MS;
      await a.coordinator.recoverCommits();
      expect(a.counters.tracesEvicted).toBe(0);
      expect(await storedTraces(leaseRoot)).toEqual([probeName, secondName].sort());
      await a.coordinator.recoverCommits();
      expect(a.counters.tracesEvicted).toBe(1);
      expect(await storedTraces(leaseRoot)).toEqual([secondName]);
    } finally {
      await close();
    }
  });
});
