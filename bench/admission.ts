/**
 * Admission fill under external rejection: transactional admission with work-conserving back-fill
 * (the whole ranked backlog, one batched shared claim per pass) against a baseline that
 * truncates proposals to `limit` before admitting them.
 *
 *   npm run bench -- admission [--reject 0.5] [--limit 16] [--seeds 1200] [--rounds 200] [--repeats 5]
 *
 * Lanes hold ≥ 1000 candidates (one open branch per seed, seen by every lane). The shared table is
 * simulated: each group is rejected with probability `--reject` (seeded PRNG, same sequence for A
 * and B). Prints one row per repeat, then a JSON line with medians.
 */
import { performance } from 'node:perf_hooks';
import { Admission } from '../src/scheduler/admission.js';
import type { ClaimOutcome, SharedTargetClaims } from '../src/scheduler/admission-ports.js';
import type { LaneName, Proposal } from '../src/scheduler/lanes/lane.js';
import { MapLocalReservations } from '../src/scheduler/map-local-reservations.js';
import { targetGroup } from '../src/scheduler/replay-job.js';
import { Scheduler } from '../src/scheduler/scheduler.js';
import { parseTelemetry } from '../src/scheduler/telemetry.js';

function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isFinite(value) || value < 0) {
    console.error(`bench admission: --${name} expects a number ≥ 0, received ${JSON.stringify(process.argv[at + 1])}`);
    process.exit(2);
  }
  return value;
}

const reject = flag('reject', 0.5);
const limit = Math.max(1, Math.floor(flag('limit', 16)));
const seeds = Math.max(1000, Math.floor(flag('seeds', 1200)));
const rounds = Math.max(1, Math.floor(flag('rounds', 200)));
const repeats = Math.max(1, Math.floor(flag('repeats', 5)));
if (reject > 1) {
  console.error(`bench admission: --reject expects a fraction in [0, 1], received ${reject}`);
  process.exit(2);
}

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class RandomSharedTable implements SharedTargetClaims {
  calls = 0;
  #tokens = 0;
  constructor(private readonly random: () => number) {}
  async claimGroups(groups: readonly (readonly bigint[])[]): Promise<readonly ClaimOutcome[]> {
    this.calls += 1;
    return groups.map(() => (this.random() < reject ? { ok: false, reason: 'conflict' } : { ok: true, token: `t${++this.#tokens}` }));
  }
  async releaseGroups(): Promise<void> {}
}

function populated(shared: SharedTargetClaims, local: MapLocalReservations): Scheduler {
  const s = new Scheduler({ local, shared, options: { cooldownMs: 0, lanes: 'prefix,cstg,edge,fallback' } });
  for (let i = 0; i < seeds; i += 1) {
    const seed = `seed-${i}`;
    s.addSeed(seed, { bytes: 64, sha256: i.toString(16).padStart(64, '0'), path: `/queue/${seed}` }, 0);
    const actual = 1_000_000 + i;
    const opposite = 2_000_000 + i;
    const telemetry = parseTelemetry({
      schema: 'symfence-telemetry/1',
      targetBranch: '0',
      targetReached: false,
      targetStatus: 'none',
      branchTrace: [['0', String(actual), String(opposite), String(10 + i), 1, 0]],
      openBranches: [String(opposite)],
      counters: { queries: 1, sat: 0, unsat: 0, unknown: 0, solverTimeUs: 1000, generated: 0 },
    });
    s.observe({ seed, telemetry, reward: ((i * 7919) % 1000) / 1000 }, 0);
  }
  return s;
}

/** Baseline: the first `limit` proposals only, reserved, claimed in one batch, granted ones committed. */
async function naiveAdmit(admission: Admission, scheduler: Scheduler, local: MapLocalReservations, shared: SharedTargetClaims, now: number): Promise<number> {
  const picked = admission.proposals(limit, limit, now).slice(0, limit);
  const reserved: { p: Proposal; group: readonly bigint[] }[] = [];
  for (const p of picked) {
    const group = targetGroup(p.job);
    if (local.tryReserveGroup(group, 1)) reserved.push({ p, group });
  }
  const outcomes = await shared.claimGroups(reserved.map((r) => r.group), now);
  const byLane = new Map<LaneName, Proposal[]>();
  let admitted = 0;
  reserved.forEach((r, i) => {
    local.releaseGroup(r.group, 1); // the round is over either way: keep the next round comparable
    if (!outcomes[i]!.ok) return;
    admitted += 1;
    byLane.set(r.p.lane, [...(byLane.get(r.p.lane) ?? []), r.p]);
  });
  for (const [name, accepted] of byLane) scheduler.lane(name)!.commit(accepted, now);
  return admitted;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const perSec: number[] = [];
const fill: number[] = [];
const naiveFill: number[] = [];
const naivePerSec: number[] = [];
const claimCalls: number[] = [];
console.log(`admission bench: limit ${limit}, ${seeds} seeds, reject ${reject}, ${rounds} rounds × ${repeats} repeats`);
console.log('repeat  backfill_fill  naive_fill  backfill_adm/s  naive_adm/s  claim_calls/round');
for (let r = 0; r < repeats; r += 1) {
  // A: transactional admission with back-fill.
  const localA = new MapLocalReservations();
  const sharedA = new RandomSharedTable(prng(1000 + r));
  const a = populated(sharedA, localA);
  let admittedA = 0;
  let t0 = performance.now();
  for (let i = 0; i < rounds; i += 1) {
    const jobs = await a.admit(limit, 1 + i);
    admittedA += jobs.length;
    for (const job of jobs) a.release(job);
  }
  const secondsA = (performance.now() - t0) / 1000;

  // B: truncate-then-admit baseline over an identical scheduler and rejection sequence.
  const localB = new MapLocalReservations();
  const sharedB = new RandomSharedTable(prng(1000 + r));
  const b = populated(sharedB, localB);
  const admissionB = new Admission({ lanes: b.lanes(), local: localB, shared: sharedB });
  let admittedB = 0;
  t0 = performance.now();
  for (let i = 0; i < rounds; i += 1) admittedB += await naiveAdmit(admissionB, b, localB, sharedB, 1 + i);
  const secondsB = (performance.now() - t0) / 1000;

  perSec.push(admittedA / secondsA);
  naivePerSec.push(admittedB / secondsB);
  fill.push(admittedA / (rounds * limit));
  naiveFill.push(admittedB / (rounds * limit));
  claimCalls.push(sharedA.calls / rounds);
  console.log(
    `${String(r).padStart(6)}  ${fill.at(-1)!.toFixed(3).padStart(13)}  ${naiveFill.at(-1)!.toFixed(3).padStart(10)}  ${perSec.at(-1)!.toFixed(0).padStart(14)}  ${naivePerSec.at(-1)!.toFixed(0).padStart(11)}  ${claimCalls.at(-1)!.toFixed(2).padStart(17)}`,
  );
}
const result = {
  bench: 'admission',
  limit,
  candidates: seeds,
  reject,
  rounds: rounds * repeats,
  admissions_per_sec: Math.round(median(perSec)),
  naive_admissions_per_sec: Math.round(median(naivePerSec)),
  fill_ratio: Number(median(fill).toFixed(4)),
  naive_fill_ratio: Number(median(naiveFill).toFixed(4)),
  fill_gain: Number((median(fill) / Math.max(1e-9, median(naiveFill))).toFixed(3)),
  shared_claim_calls_per_round: Number(median(claimCalls).toFixed(2)),
};
console.log(JSON.stringify(result));
