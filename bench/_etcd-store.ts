/**
 * The etcd section of lease-cycle (`--store etcd`), apart so lease-cycle.ts stays easy to merge:
 * a single local etcd member (started here on free loopback ports, stopped at the end) and
 *
 * - `etcd`: one 64-target claimGroup + releaseGroup per cycle on an etcd table, directly — two
 *   transactions (plus two reads) per cycle;
 * - `etcd_groupcommit`: K callers through the real I/O thread (bench/_groupcommit.ts), K disjoint
 *   groups; a group is the most one etcd transaction takes, so the thread's batch becomes K
 *   transactions, sent one after another.
 *
 * Rounds interleave with a file-store table of the same shape (batched barriers, the last shard
 * configuration) so that `files_ms` and `etcd_ms` come from the same minutes of the same run.
 */
import path from 'node:path';
import { claimReleaseCycle } from './_claim-release.js';
import { FencedTargetLeaseTable } from '../src/lease/target-lease-table.js';
import { startEtcd } from '../test/helpers/etcd-server.js';
import { groupCommitRunner } from './_groupcommit.js';

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const round2 = (n: number): number => Math.round(n * 100) / 100;

export async function runEtcdSection(base: string, config: { shards: number; rounds: number; targetsPerGroup: number; coordination: string; ks: readonly number[] }): Promise<Record<string, unknown>> {
  const etcd = await startEtcd();
  const targets = Array.from({ length: config.targetsPerGroup }, (_, i) => BigInt(i + 1));
  const etcdOptions = { store: 'etcd', etcdEndpoints: etcd.endpoints };
  try {
    const tables = {
      etcd: await FencedTargetLeaseTable.open(path.join(base, 'etcd-direct'), { ...etcdOptions, etcdPrefix: 'bench-direct', coordination: config.coordination, leaseTtlMs: 3_600_000 }),
      files: await FencedTargetLeaseTable.open(path.join(base, 'etcd-files'), { store: 'files', shardCount: config.shards, coordination: config.coordination, leaseTtlMs: 3_600_000, verifyFilesystem: false }),
    };
    let now = 1_000_000;
    const cycle = (table: FencedTargetLeaseTable): Promise<number> => claimReleaseCycle(table, targets, (now += 1));
    const samples = { etcd: [] as number[], files: [] as number[] };
    try {
      await cycle(tables.etcd); // warm-up: session grant, connections
      await cycle(tables.files);
      for (let round = 0; round < config.rounds; round += 1) {
        const order = round % 2 === 0 ? (['etcd', 'files'] as const) : (['files', 'etcd'] as const);
        for (const store of order) samples[store].push(await cycle(tables[store]));
      }
    } finally {
      await tables.etcd.close();
      await tables.files.close();
    }
    const direct = { etcd_ms: round2(median(samples.etcd)), files_ms: round2(median(samples.files)) };
    console.log(`  etcd (1 local member)  median ${direct.etcd_ms} ms/cycle  files (batched, ${config.shards} shards) ${direct.files_ms} ms/cycle  samples etcd ${samples.etcd.map(round2).join(' ')}`);

    const byK: Record<string, number>[] = [];
    for (const k of config.ks) {
      const gc = await groupCommitRunner(path.join(base, `etcd-groupcommit-${k}`), {
        shards: config.shards,
        k,
        targetsPerGroup: config.targetsPerGroup,
        coordination: config.coordination,
        fileBarrier: 'fsync',
        leaseOptions: { ...etcdOptions, etcdPrefix: `bench-gc-${k}` },
      });
      const files = await groupCommitRunner(path.join(base, `etcd-groupcommit-files-${k}`), { shards: config.shards, k, targetsPerGroup: config.targetsPerGroup, coordination: config.coordination, fileBarrier: 'fsync' });
      try {
        await gc.round();
        await files.round();
        const gcSamples: number[] = [];
        const fileSamples: number[] = [];
        for (let round = 0; round < config.rounds; round += 1) {
          if (round % 2 === 0) {
            gcSamples.push(await gc.round());
            fileSamples.push(await files.round());
          } else {
            fileSamples.push(await files.round());
            gcSamples.push(await gc.round());
          }
        }
        const row = { k, etcd_groupcommit_ms: round2(median(gcSamples)), files_groupcommit_ms: round2(median(fileSamples)) };
        byK.push(row);
        console.log(`  etcd groupcommit K=${String(k).padStart(2)} median ${row.etcd_groupcommit_ms} ms/group cycle  files (fsync) ${row.files_groupcommit_ms} ms/group cycle`);
      } finally {
        await gc.close();
        await files.close();
      }
    }
    const top = byK.at(-1);
    return {
      store: 'etcd',
      ...direct,
      ratio_etcd_files: round2(direct.etcd_ms / direct.files_ms),
      ...(top ? { etcd_groupcommit_k: top.k, etcd_groupcommit_ms: top.etcd_groupcommit_ms, files_groupcommit_ms: top.files_groupcommit_ms } : {}),
      etcd_groupcommit_by_k: byK,
    };
  } finally {
    await etcd.stop();
  }
}
