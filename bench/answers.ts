/**
 * answers: what the shared answers (docs/leases.md "Shared answers") cost an admission round, on
 * each lease store, beside the same round without them.
 *
 * One round = the I/O thread's unit of an admission round, run directly on the table: one batch
 * of K group claims (`--k`, default 16 groups of `--group` 8 targets, disjoint), then one batch of
 * their K releases.
 * - `plain`: claims name no input, releases answer nothing (records deleted): the cost before.
 * - `answers`: every claim names a fresh input (an input's SHA-256, as in a campaign), so the
 *   table reads each member's answer record beside its lease record; every release answers half
 *   of its members on that input, so it deletes the lease records and writes those answer
 *   records. From the second round on, every member has an answer record that lists the inputs
 *   of the rounds before — the steady state of a campaign, where the same branches are asked on
 *   input after input.
 *
 * Rounds interleave the two modes (order alternating), 101 by default: past round 64 every answer
 * record holds its full 64 settled inputs (docs/lease-format.md "Answers"), the size a long
 * campaign's records have, and a claim batch takes a few ms, so one slow moment of a shared machine
 * moves a median of few rounds. Every ratio is
 * paired: each round's answers time over the plain time of the same round (run back to back, so
 * both see the same load), the median over rounds — as bench/campaign-scaling pairs its ratios;
 * the medians of the times themselves are printed beside it, and `<store>_claim_ratio_of_medians`
 * keeps their ratio. `--store files,sqlite,etcd` (etcd: a local member started here). Last line:
 * one JSON object with, per store, `<store>_plain_ms`, `<store>_answers_ms` and `<store>_overhead`
 * for the whole round, and `<store>_claim_…` for its claim batch alone (the answer lookup is part
 * of the claim): `<store>_claim_overhead` is the shared answers' cost to an admission round.
 *
 * Usage: npm run bench -- answers [--rounds 101] [--k 16] [--group 8] [--store files,sqlite] [--dir <tmp>]
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { LeaseOperation } from '../src/lease/lease-operation.js';
import type { FenceResult, GroupClaimResult } from '../src/lease/lease-results.js';
import { FencedTargetLeaseTable } from '../src/lease/target-lease-table.js';
import { loadNative } from '../src/native/bindings.js';
import { startEtcd, type EtcdCluster } from '../test/helpers/etcd-server.js';

const STORES = ['files', 'sqlite', 'etcd'] as const;
type Store = (typeof STORES)[number];
type Mode = 'plain' | 'answers';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '101' },
    k: { type: 'string', default: '16' },
    group: { type: 'string', default: '8' },
    store: { type: 'string', default: 'files,sqlite' },
    dir: { type: 'string', default: os.tmpdir() },
  },
});

function positiveInt(name: string, text: string, max: number): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1 || n > max) {
    console.error(`answers: --${name} must be an integer in 1..${max}, got ${JSON.stringify(text)}`);
    process.exit(2);
  }
  return n;
}

const rounds = positiveInt('rounds', values.rounds!, 1000);
const k = positiveInt('k', values.k!, 64);
const groupSize = positiveInt('group', values.group!, 64);
const stores = values.store!.split(',') as Store[];
for (const s of stores) {
  if (!STORES.includes(s)) {
    console.error(`answers: unknown store ${JSON.stringify(s)}; known: ${STORES.join(', ')}`);
    process.exit(2);
  }
}
const coordination = loadNative() ? 'multi' : 'single';
const groups = Array.from({ length: k }, (_, g) => Array.from({ length: groupSize }, (_, i) => BigInt(g * groupSize + i + 1)));

const median = (samples: number[]): number => {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const round2 = (n: number): number => Math.round(n * 100) / 100;
/** An input's name as a campaign has it: the SHA-256 of its bytes (here, of a counter). */
const inputOf = (n: number): string => createHash('sha256').update(String(n)).digest('hex');

let clock = 1_000_000;
let inputs = 0;

/** One admission round on `table`: K claims in one batch, then K releases in one batch; ms, and the claim batch's ms. */
async function round(table: FencedTargetLeaseTable, mode: Mode): Promise<{ total: number; claim: number }> {
  const nowMs = (clock += 1);
  const input = mode === 'answers' ? inputOf((inputs += 1)) : undefined;
  const started = performance.now();
  const claims = await table.executeBatch(groups.map((g) => table.planClaimGroup(g, { bench: 'answers' }, { owner: 'bench', nowMs, ...(input !== undefined ? { input } : {}) }) as LeaseOperation<unknown>));
  const claimed = performance.now();
  const tokens = claims.outcomes.map((o, i) => {
    const result = o.ok ? (o.value as GroupClaimResult) : undefined;
    if (!result?.ok) throw new Error(`claim of group ${i} failed: ${o.ok ? (o.value as GroupClaimResult).ok === false && (o.value as { reason: string }).reason : String(o.error)}`);
    return result.token;
  });
  const releases = await table.executeBatch(
    groups.map((g, i) =>
      table.planReleaseGroup(g, tokens[i]!, input !== undefined ? { nowMs, answers: { input, settled: g.filter((_, j) => j % 2 === 0) } } : {}) as LeaseOperation<unknown>,
    ),
  );
  for (const o of releases.outcomes) if (!o.ok || !(o.value as FenceResult).ok) throw new Error('release failed');
  return { total: performance.now() - started, claim: claimed - started };
}

const base = await mkdtemp(path.join(values.dir!, 'symfence-bench-answers-'));
let etcd: EtcdCluster | undefined;
const fields: Record<string, number | string> = { k, group: groupSize, rounds };
try {
  console.log(`answers: admission rounds of ${k} group claims of ${groupSize} targets + their releases, ${rounds} rounds per mode, locker ${coordination === 'multi' ? 'flock' : 'in-process'}`);
  for (const store of stores) {
    const options: Record<string, unknown> = { store, coordination, leaseTtlMs: 3_600_000 };
    if (store === 'files') Object.assign(options, { shardCount: 8, verifyFilesystem: false });
    if (store === 'etcd') {
      etcd ??= await startEtcd();
      Object.assign(options, { etcdEndpoints: etcd.endpoints });
    }
    const tables = {
      plain: await FencedTargetLeaseTable.open(path.join(base, `${store}-plain`), { ...options, ...(store === 'etcd' ? { etcdPrefix: 'bench-plain' } : {}) }),
      answers: await FencedTargetLeaseTable.open(path.join(base, `${store}-answers`), { ...options, ...(store === 'etcd' ? { etcdPrefix: 'bench-answers' } : {}) }),
    };
    try {
      // Warm-up: lock files and shard directories, and (answers) the released records with answers.
      for (const mode of ['plain', 'answers'] as const) await round(tables[mode], mode);
      const samples: Record<Mode, number[]> = { plain: [], answers: [] };
      const claimSamples: Record<Mode, number[]> = { plain: [], answers: [] };
      const ratios: number[] = [];
      const claimRatios: number[] = [];
      for (let r = 0; r < rounds; r += 1) {
        const order: Mode[] = r % 2 === 0 ? ['plain', 'answers'] : ['answers', 'plain'];
        const t = {} as Record<Mode, { total: number; claim: number }>;
        for (const mode of order) {
          t[mode] = await round(tables[mode], mode);
          samples[mode].push(t[mode].total);
          claimSamples[mode].push(t[mode].claim);
        }
        ratios.push(t.answers.total / t.plain.total);
        claimRatios.push(t.answers.claim / t.plain.claim);
      }
      const plain = round2(median(samples.plain));
      const answers = round2(median(samples.answers));
      const claimPlain = round2(median(claimSamples.plain));
      const claimAnswers = round2(median(claimSamples.answers));
      fields[`${store}_plain_ms`] = plain;
      fields[`${store}_answers_ms`] = answers;
      fields[`${store}_overhead`] = round2(median(ratios));
      fields[`${store}_claim_plain_ms`] = claimPlain;
      fields[`${store}_claim_answers_ms`] = claimAnswers;
      fields[`${store}_claim_overhead`] = round2(median(claimRatios));
      fields[`${store}_claim_ratio_of_medians`] = round2(claimAnswers / claimPlain);
      console.log(
        `  ${store.padEnd(7)} round: plain ${String(plain).padStart(8)} ms  answers ${String(answers).padStart(8)} ms  paired ratio ${fields[`${store}_overhead`]}` +
          `   claims alone: plain ${claimPlain} ms  answers ${claimAnswers} ms  paired ratio ${fields[`${store}_claim_overhead`]}`,
      );
    } finally {
      await tables.plain.close();
      await tables.answers.close();
    }
  }
} finally {
  await etcd?.stop();
  await rm(base, { recursive: true, force: true });
}
console.log(JSON.stringify({ bench: 'answers', ...fields }));
