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
 * In the `campaign` shape each round also claims as many fresh branches naming no input on the
 * answers table (`bare`): `<store>_campaign_claim_lookup_overhead` is the answers claim over that
 * one, paired per round — what looking the answers up costs a claim, apart from what the answer
 * records the store holds cost every claim of the campaign (etcd: keys beside the lease records').
 *
 * Two shapes of campaign (`--shape`, both by default):
 * - `rewrite`: every round claims the same K groups, so each answered branch's record is
 *   rewritten every round and, past round 64, holds its full 64 settled inputs — the worst case
 *   for a branch asked on input after input. Its fields are `<store>_…` below.
 * - `campaign`: every round claims branches no round claimed before (in both modes), each
 *   answered once, as the frontier asks them: the shape measured in real campaigns (on Lua 5.5's
 *   parser, three coordinators over 105 s, 797 of 858 answer records at version 1 and none past
 *   3, one settled input each). The table still fills round after round, in both modes. Its
 *   fields are `<store>_campaign_…`.
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
 * Usage: npm run bench -- answers [--rounds 101] [--k 16] [--group 8] [--store files,sqlite] [--shape rewrite,campaign] [--dir <tmp>]
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
/** `bare`: claims that name no input on the answers table (its store holds the answer records), releases answering nothing. */
type Round = Mode | 'bare';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '101' },
    k: { type: 'string', default: '16' },
    group: { type: 'string', default: '8' },
    store: { type: 'string', default: 'files,sqlite' },
    shape: { type: 'string', default: 'rewrite,campaign' },
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
const SHAPES = ['rewrite', 'campaign'] as const;
type Shape = (typeof SHAPES)[number];
const shapes = values.shape!.split(',') as Shape[];
for (const s of shapes) {
  if (!SHAPES.includes(s)) {
    console.error(`answers: unknown shape ${JSON.stringify(s)}; known: ${SHAPES.join(', ')}`);
    process.exit(2);
  }
}
const coordination = loadNative() ? 'multi' : 'single';
/** The K groups of a round: the same every round (`rewrite`), or fresh branches each round (`campaign`, `fresh` ≥ 1). */
const groupsOf = (fresh: number): bigint[][] =>
  Array.from({ length: k }, (_, g) => Array.from({ length: groupSize }, (_, i) => BigInt(fresh * k * groupSize + g * groupSize + i + 1)));

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
async function round(table: FencedTargetLeaseTable, mode: Round, groups: readonly bigint[][]): Promise<{ total: number; claim: number }> {
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
    for (const shape of shapes) {
      const tag = shape === 'rewrite' ? store : `${store}_campaign`;
      const tables = {
        plain: await FencedTargetLeaseTable.open(path.join(base, `${store}-${shape}-plain`), { ...options, ...(store === 'etcd' ? { etcdPrefix: `bench-${shape}-p` } : {}) }),
        answers: await FencedTargetLeaseTable.open(path.join(base, `${store}-${shape}-answers`), { ...options, ...(store === 'etcd' ? { etcdPrefix: `bench-${shape}-a` } : {}) }),
      };
      /** Round `r`'s groups (−1: the warm-up). */
      const groupsAt = (r: number): bigint[][] => groupsOf(shape === 'rewrite' ? 0 : r + 1);
      try {
        // Warm-up: lock files and shard directories, and (answers) the released records with answers.
        for (const mode of ['plain', 'answers'] as const) await round(tables[mode], mode, groupsAt(-1));
        const samples: Record<Mode, number[]> = { plain: [], answers: [] };
        const claimSamples: Record<Mode, number[]> = { plain: [], answers: [] };
        const ratios: number[] = [];
        const claimRatios: number[] = [];
        const bareSamples: number[] = [];
        const lookupRatios: number[] = [];
        for (let r = 0; r < rounds; r += 1) {
          const order: Mode[] = r % 2 === 0 ? ['plain', 'answers'] : ['answers', 'plain'];
          const t = {} as Record<Mode, { total: number; claim: number }>;
          for (const mode of order) {
            t[mode] = await round(tables[mode], mode, groupsAt(r));
            samples[mode].push(t[mode].total);
            claimSamples[mode].push(t[mode].claim);
          }
          ratios.push(t.answers.total / t.plain.total);
          claimRatios.push(t.answers.claim / t.plain.claim);
          if (shape === 'campaign') {
            // The same claims naming no input, on the answers table: what the lookup itself costs
            // there, apart from what holding the answer records costs the store.
            const bare = await round(tables.answers, 'bare', groupsOf(rounds + r + 2));
            bareSamples.push(bare.claim);
            lookupRatios.push(t.answers.claim / bare.claim);
          }
        }
        const plain = round2(median(samples.plain));
        const answers = round2(median(samples.answers));
        const claimPlain = round2(median(claimSamples.plain));
        const claimAnswers = round2(median(claimSamples.answers));
        fields[`${tag}_plain_ms`] = plain;
        fields[`${tag}_answers_ms`] = answers;
        fields[`${tag}_overhead`] = round2(median(ratios));
        fields[`${tag}_claim_plain_ms`] = claimPlain;
        fields[`${tag}_claim_answers_ms`] = claimAnswers;
        fields[`${tag}_claim_overhead`] = round2(median(claimRatios));
        fields[`${tag}_claim_ratio_of_medians`] = round2(claimAnswers / claimPlain);
        if (bareSamples.length > 0) {
          fields[`${tag}_claim_bare_ms`] = round2(median(bareSamples));
          fields[`${tag}_claim_lookup_overhead`] = round2(median(lookupRatios));
        }
        console.log(
          `  ${store.padEnd(7)} ${shape.padEnd(8)} round: plain ${String(plain).padStart(8)} ms  answers ${String(answers).padStart(8)} ms  paired ratio ${fields[`${tag}_overhead`]}` +
            `   claims alone: plain ${claimPlain} ms  answers ${claimAnswers} ms  paired ratio ${fields[`${tag}_claim_overhead`]}` +
            (bareSamples.length > 0 ? `   naming no input on the answers table: ${fields[`${tag}_claim_bare_ms`]} ms, lookup ratio ${fields[`${tag}_claim_lookup_overhead`]}` : ''),
        );
      } finally {
        await tables.plain.close();
        await tables.answers.close();
      }
    }
  }
} finally {
  await etcd?.stop();
  await rm(base, { recursive: true, force: true });
}
console.log(JSON.stringify({ bench: 'answers', ...fields }));
