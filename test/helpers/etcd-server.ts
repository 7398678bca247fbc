/**
 * Real etcd servers for tests: one member, or a cluster of members, on 127.0.0.1 with free ports
 * and temp data directories. Readiness is a client handshake (a write through the cluster that
 * must be committed by a leader), bounded by a deadline; nothing waits on a sleep.
 *
 * Always `stop()` what you start (in `afterAll`): the members are killed with SIGKILL (after a
 * SIGCONT, in case a test stopped one) and their data directories removed.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Etcd3 } from 'etcd3';

/** Why etcd cannot run here, or undefined when the `etcd` binary is on PATH. */
export function etcdUnavailable(): string | undefined {
  const probe = spawnSync('etcd', ['--version'], { encoding: 'utf8' });
  return probe.status === 0 ? undefined : 'the etcd binary (Debian etcd-server) is not installed';
}

/** A free TCP port on 127.0.0.1 (the kernel's pick; closed again before etcd binds it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface EtcdMember {
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  /** `127.0.0.1:<clientPort>` */
  readonly endpoint: string;
  process: ChildProcess | undefined;
  readonly dataDir: string;
  /** Collected stderr/stdout (for a failing test's message). */
  log: string;
}

export interface EtcdCluster {
  readonly members: readonly EtcdMember[];
  /** Every member's client endpoint, comma-separated (the `etcdEndpoints` option). */
  readonly endpoints: string;
  /** Name of the member that leads now (asks the cluster). */
  leader(): Promise<EtcdMember>;
  /** SIGKILLs one member (it stays down). */
  kill(member: EtcdMember): Promise<void>;
  /** Starts a killed member again on its ports and data directory. */
  restart(member: EtcdMember): Promise<void>;
  /** Stops every member and removes the data directories. Idempotent. */
  stop(): Promise<void>;
}

export interface StartEtcdOptions {
  /** Members of the cluster (1 = a single local member). Default 1. */
  readonly members?: number;
  /** Deadline for the cluster to commit a write, ms. Default 30 s. */
  readonly readyTimeoutMs?: number;
  /** Extra flags for every member. */
  readonly extraArgs?: readonly string[];
  /**
   * Serve clients over TLS with this server certificate, requiring client certificates signed by
   * `caFile`; readiness is checked with `client` (a certificate and key signed by that CA).
   */
  readonly tls?: { readonly certFile: string; readonly keyFile: string; readonly caFile: string; readonly client: { readonly certFile: string; readonly keyFile: string } };
}

function spawnMember(member: EtcdMember, cluster: string, state: 'new' | 'existing', extraArgs: readonly string[], tls: StartEtcdOptions['tls']): void {
  const scheme = tls ? 'https' : 'http';
  const child = spawn(
    'etcd',
    [
      '--name', member.name,
      '--data-dir', member.dataDir,
      '--listen-client-urls', `${scheme}://127.0.0.1:${member.clientPort}`,
      '--advertise-client-urls', `${scheme}://127.0.0.1:${member.clientPort}`,
      ...(tls ? ['--cert-file', tls.certFile, '--key-file', tls.keyFile, '--trusted-ca-file', tls.caFile, '--client-cert-auth'] : []),
      '--listen-peer-urls', `http://127.0.0.1:${member.peerPort}`,
      '--initial-advertise-peer-urls', `http://127.0.0.1:${member.peerPort}`,
      '--initial-cluster', cluster,
      '--initial-cluster-state', state,
      '--initial-cluster-token', `symfence-test-${process.pid}`,
      // Loopback: short election timeouts make leader loss tests quick.
      '--heartbeat-interval', '50',
      '--election-timeout', '500',
      '--log-level', 'warn',
      ...extraArgs,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  member.process = child;
  const append = (chunk: Buffer): void => {
    member.log = (member.log + chunk.toString('utf8')).slice(-20_000);
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
}

/** True until the member's process has exited (normally or by a signal). */
function isRunning(member: EtcdMember): boolean {
  return member.process !== undefined && member.process.exitCode === null && member.process.signalCode === null;
}

async function waitReady(endpoints: string[], members: readonly EtcdMember[], deadlineMs: number, tls?: StartEtcdOptions['tls']): Promise<void> {
  const client = new Etcd3({
    hosts: endpoints.map((e) => `${tls ? 'https' : 'http'}://${e}`),
    dialTimeout: 2000,
    ...(tls ? { credentials: { rootCertificate: readFileSync(tls.caFile), certChain: readFileSync(tls.client.certFile), privateKey: readFileSync(tls.client.keyFile) } } : {}),
  });
  const start = Date.now();
  try {
    for (;;) {
      for (const member of members) {
        if (member.process && !isRunning(member)) throw new Error(`etcd member ${member.name} exited (${member.process.exitCode}): ${member.log}`);
      }
      try {
        await client.put('symfence-test/ready').value(String(Date.now())).options({ deadline: Date.now() + 2000 }).exec();
        return;
      } catch (error) {
        if (Date.now() - start > deadlineMs) throw new Error(`etcd did not become ready in ${deadlineMs} ms: ${(error as Error).message}\n${members.map((m) => m.log).join('\n')}`);
        // Retry pacing for a server still starting (not an ordering sleep).
        await delay(50);
      }
    }
  } finally {
    client.close();
  }
}

/** Starts etcd (see `StartEtcdOptions`) and resolves once it commits a write. */
export async function startEtcd(options: StartEtcdOptions = {}): Promise<EtcdCluster> {
  const count = options.members ?? 1;
  const root = await mkdtemp(path.join(os.tmpdir(), 'symfence-etcd-'));
  const members: EtcdMember[] = [];
  for (let i = 0; i < count; i++) {
    members.push({ name: `m${i}`, clientPort: await freePort(), peerPort: await freePort(), endpoint: '', process: undefined, dataDir: path.join(root, `m${i}`), log: '' });
  }
  for (const m of members) (m as { endpoint: string }).endpoint = `127.0.0.1:${m.clientPort}`;
  const initialCluster = members.map((m) => `${m.name}=http://127.0.0.1:${m.peerPort}`).join(',');
  const extra = options.extraArgs ?? [];
  for (const m of members) spawnMember(m, initialCluster, 'new', extra, options.tls);
  const endpoints = members.map((m) => m.endpoint);
  let stopped = false;
  const cluster: EtcdCluster = {
    members,
    endpoints: endpoints.join(','),
    async leader() {
      const client = new Etcd3({ hosts: endpoints.filter((_, i) => isRunning(members[i]!)), dialTimeout: 2000 });
      try {
        for (const m of members) {
          if (!isRunning(m)) continue;
          const single = new Etcd3({ hosts: m.endpoint, dialTimeout: 2000 });
          try {
            const status = await single.maintenance.status({ deadline: Date.now() + 2000 });
            if (status.leader === status.header.member_id) return m;
          } catch {
            // not answering (stopped): ask the next one
          } finally {
            single.close();
          }
        }
        throw new Error('no member reports itself as leader');
      } finally {
        client.close();
      }
    },
    async kill(member) {
      const child = member.process;
      if (!child || !isRunning(member)) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGCONT');
      child.kill('SIGKILL');
      await exited;
    },
    async restart(member) {
      spawnMember(member, initialCluster, 'existing', extra, options.tls);
      await waitReady([member.endpoint], [member], options.readyTimeoutMs ?? 30_000, options.tls);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await Promise.all(members.map((m) => cluster.kill(m)));
      await rm(root, { recursive: true, force: true });
    },
  };
  try {
    await waitReady(endpoints, members, options.readyTimeoutMs ?? 30_000, options.tls);
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  return cluster;
}

/** The kernel's state letters of every thread of a process (`/proc/<pid>/task/<tid>/stat`); empty once it is gone. */
function threadStates(pid: number): string[] {
  try {
    return readdirSync(`/proc/${pid}/task`).map((tid) => {
      try {
        return readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1]?.[0] ?? '?';
      } catch {
        return 'gone';
      }
    });
  } catch {
    return [];
  }
}

/**
 * Freezes `member` with SIGSTOP and resolves once the kernel reports every one of its threads
 * stopped (state `T`): `kill()` returns before the group stop has reached each thread of the Go
 * runtime, and on a loaded machine a thread still running can answer a request sent right after
 * it. Bounded: rejects after 10 s.
 */
export async function freezeMember(member: EtcdMember): Promise<void> {
  const child = member.process;
  if (!child?.pid) throw new Error(`etcd member ${member.name} is not running`);
  const pid = child.pid;
  child.kill('SIGSTOP');
  const stopped = (): boolean => {
    const states = threadStates(pid).filter((state) => state !== 'gone');
    return states.length > 0 && states.every((state) => state === 'T' || state === 't');
  };
  const deadline = Date.now() + 10_000;
  while (!stopped()) {
    if (Date.now() > deadline) throw new Error(`etcd member ${member.name} did not stop within 10 s (threads ${threadStates(pid).join('') || 'gone'})`);
    await delay(5);
  }
}

/**
 * What an operator does for an etcd out of space (docs/leases.md "History and compaction"): drop
 * `dropPrefix` if given, compact the history, defragment, disarm every alarm. From a client of its
 * own: a client whose writes were refused may have stopped talking to the member.
 */
export async function giveSpaceBack(endpoints: string, dropPrefix?: string): Promise<void> {
  const operator = new Etcd3({ hosts: endpoints });
  try {
    if (dropPrefix !== undefined) await operator.delete().prefix(dropPrefix);
    const revision = (await operator.maintenance.status()).header.revision;
    await operator.kv.compact({ revision, physical: true });
    await operator.maintenance.defragment({});
    const alarms = await operator.maintenance.alarm({ action: 'Get', memberID: 0, alarm: 'None' });
    for (const alarm of alarms.alarms) await operator.maintenance.alarm({ action: 'Deactivate', memberID: alarm.memberID, alarm: alarm.alarm });
  } finally {
    operator.close();
  }
}
