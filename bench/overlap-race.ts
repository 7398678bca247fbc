/**
 * overlap-race: N OS processes claim overlapping 32-target groups on one lease root (process i:
 * targets 16i+1 … 16i+32; 2 processes = 1..32 vs 17..48), 8 shards, in handshake-synchronised
 * rounds. Counts single- and double-winner rounds, partial publications, records left after the
 * winners release, and hangs. Not a fairness measure (wins per process are printed for interest).
 *
 * Usage: npm run bench -- overlap-race [--processes 2] [--rounds 50] [--shards 8] [--store files|sqlite|etcd] [--dir <tmp>]
 * `--store sqlite`: the same race on the SQLite store (`--shards` is then irrelevant). `--store etcd`
 * races on a single local etcd member started for the run (every process its own client and
 * session; the root directory only holds lease-table.json).
 * Last line: one JSON object.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadNative } from '../src/native/bindings.js';
import { runOverlapRace } from '../test/fixtures/lease-race-driver.js';
import { startEtcd, type EtcdCluster } from '../test/helpers/etcd-server.js';

const { values } = parseArgs({
  options: {
    processes: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '50' },
    shards: { type: 'string', default: '8' },
    store: { type: 'string', default: 'files' },
    dir: { type: 'string', default: os.tmpdir() },
  },
});

function positiveInt(name: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    console.error(`overlap-race: --${name} must be an integer in ${min}..${max}, got ${JSON.stringify(text)}`);
    process.exit(2);
  }
  return n;
}

const processes = positiveInt('processes', values.processes!, 2, 64);
const rounds = positiveInt('rounds', values.rounds!, 1, 1_000_000);
const shardCount = positiveInt('shards', values.shards!, 1, 4096);
if (!loadNative()) {
  console.error('overlap-race: the native flock addon is not built; a cross-process race needs it (run npm ci)');
  process.exit(1);
}

const store = values.store!;
if (store !== 'files' && store !== 'sqlite' && store !== 'etcd') {
  console.error(`overlap-race: --store must be files, sqlite or etcd, got ${JSON.stringify(store)}`);
  process.exit(2);
}

const root = await mkdtemp(path.join(values.dir!, 'symfence-bench-overlap-race-'));
let etcd: EtcdCluster | undefined;
try {
  if (store === 'etcd') etcd = await startEtcd();
  const storeOptions = etcd ? { store: 'etcd', etcdEndpoints: etcd.endpoints, etcdPrefix: 'overlap-race' } : { store };
  console.log(`overlap-race: ${processes} processes x ${rounds} rounds, groups of 32 overlapping by 16, ${store === 'etcd' ? 'etcd store (1 local member)' : store === 'sqlite' ? 'sqlite store' : `${shardCount} shards`}, dir ${root}`);
  const every = Math.max(1, Math.floor(rounds / 10));
  const report = await runOverlapRace({
    root,
    processes,
    rounds,
    shardCount,
    storeOptions,
    onRound: (round, r) => {
      if ((round + 1) % every === 0 && round + 1 < rounds) {
        console.log(`  round ${round + 1}/${rounds}: single-winner ${r.single_winner_rounds}  double-winner ${r.double_winner_rounds}  partial ${r.partial_publications}  residual ${r.residual_records}`);
      }
    },
  });
  console.log(`  single-winner rounds ${report.single_winner_rounds}/${report.rounds}  double-winner rounds ${report.double_winner_rounds}`);
  console.log(`  partial publications ${report.partial_publications}  residual records ${report.residual_records}  hangs ${report.hangs}`);
  console.log(`  wins per process ${report.wins.join(' ')}  total ${report.total_ms} ms`);
  const { wins: _wins, ...fields } = report;
  console.log(JSON.stringify({ bench: 'overlap-race', store, shards: shardCount, ...fields }));
} finally {
  await etcd?.stop();
  await rm(root, { recursive: true, force: true });
}
