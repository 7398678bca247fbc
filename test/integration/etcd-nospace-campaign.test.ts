/**
 * A demo campaign on an etcd that runs out of space in the middle of the campaign (its NOSPACE
 * alarm; a real local member started with a 4 MiB quota), and gets its space back: nothing the
 * campaign found or was about to run is lost, and it goes on to reach every maze branch once the
 * store answers again (docs/campaign.md "When the lease store fails").
 *
 * Deterministic: the first job's `afterBeginCommit` hook fills etcd until it refuses, so that
 * job's publication fails; the space is given back only once the campaign has logged a failure.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Etcd3 } from 'etcd3';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemo } from '../../src/coordinator/adapters/demo-campaign.js';
import { etcdUnavailable, giveSpaceBack, startEtcd, type EtcdCluster } from '../helpers/etcd-server.js';

const unavailable = etcdUnavailable();
if (unavailable !== undefined && process.env['CI'] === 'true') throw new Error(`etcd tests cannot run in CI: ${unavailable}`);

const QUOTA_BYTES = 4 * 1024 * 1024;

describe.skipIf(unavailable !== undefined)('a campaign whose etcd runs out of space', () => {
  let cluster: EtcdCluster;
  let client: Etcd3;
  const dirs: string[] = [];
  beforeAll(async () => {
    cluster = await startEtcd({ extraArgs: ['--quota-backend-bytes', String(QUOTA_BYTES)] });
    client = new Etcd3({ hosts: cluster.endpoints });
  });
  afterAll(async () => {
    client?.close();
    await cluster?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** Puts 100 KB values until etcd refuses one (its NOSPACE alarm); the refusal's message. */
  async function fill(): Promise<string> {
    for (let i = 0; i < 400; i++) {
      try {
        await client.put(`fill/${i}`).value(Buffer.alloc(100_000, 'f'));
      } catch (error) {
        return (error as Error).message;
      }
    }
    throw new Error(`etcd took 40 MB under a quota of ${QUOTA_BYTES} bytes`);
  }

  it('keeps what it found and what it was to run, and reaches every branch once etcd has space again', async () => {
    const outDir = mkdtempSync(path.join(tmpdir(), 'symfence-nospace-campaign-'));
    dirs.push(outDir);
    const lines: Array<Record<string, unknown>> = [];
    let failureLogged!: () => void;
    const failed = new Promise<void>((resolve) => (failureLogged = resolve));
    const stream = new Writable({
      write(chunk, _enc, done) {
        for (const text of String(chunk).split('\n').filter(Boolean)) {
          const line = JSON.parse(text) as Record<string, unknown>;
          lines.push(line);
          if (line['level'] === 50) failureLogged();
        }
        done();
      },
    });
    let full: string | undefined;
    const demo = await startDemo(
      { workers: 2, durationMs: '100s', statsIntervalMs: '1s', outDir, lease: { store: 'etcd', etcdEndpoints: cluster.endpoints, etcdPrefix: 'nospace-campaign' } },
      {
        logger: pino({ level: 'info' }, stream),
        hooks: {
          afterBeginCommit: async () => {
            full ??= await fill();
          },
        },
      },
    );
    await failed;
    expect(full).toContain('database space exceeded');
    await giveSpaceBack(cluster.endpoints, 'fill/');
    const summary = await demo.done;

    expect(summary.complete).toBe(true);
    expect(summary.branchesReached).toBe(summary.branchesTotal);
    // The first job's publication failed while etcd was full, and was replayed once it had space.
    expect(summary.counters.commitPublishFailures).toBeGreaterThanOrEqual(1);
    expect(summary.counters.commitsReplayed).toBeGreaterThanOrEqual(1);
    const failures = lines.filter((l) => l['level'] === 50);
    expect(failures.length).toBeGreaterThanOrEqual(1);
    expect(JSON.stringify(failures[0])).toContain('etcdctl alarm disarm');
  }, 120_000);
});
