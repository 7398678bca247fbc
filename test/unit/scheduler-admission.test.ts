import { describe, expect, it } from 'vitest';
import { Admission } from '../../src/scheduler/admission.js';
import { InflightTargetSet } from '../../src/inflight/inflight-target-set.js';
import type { Lane, LaneName, Proposal } from '../../src/scheduler/lanes/lane.js';
import { MapLocalReservations } from '../../src/scheduler/map-local-reservations.js';
import { normalizeJob } from '../../src/scheduler/replay-job.js';
import { parseGuidance } from '../../src/scheduler/guidance-map.js';
import { TargetLedger } from '../../src/scheduler/target-ledger.js';
import type { ClaimAsk } from '../../src/scheduler/admission-ports.js';
import type { ClaimOutcome } from '../../src/lease/claim-outcome.js';
import type { SymfenceError } from '../../src/errors.js';
import { cstgSnapshot, prefixSnapshot, REJECT, ScriptedSharedClaims, scheduler, tel } from './scheduler-fixtures.js';

const NOW = 100_000;

/** A lane that proposes a fixed list and records what it was asked to commit. */
class ScriptedLane implements Lane {
  readonly committed: Proposal[][] = [];
  constructor(
    readonly name: LaneName,
    private readonly jobs: { seed: string; target: number; actions?: [number, string][] }[],
  ) {}
  size(): number {
    return this.jobs.length;
  }
  propose(_limit: number, _proposalLimit: number, _now: number, excluded: ReadonlySet<bigint>): readonly Proposal[] {
    return this.jobs
      .map((j, i) => ({ lane: this.name, origin: String(i), job: normalizeJob({ seed: j.seed, targetBranch: j.target, actions: j.actions ?? [[j.target, 'solve']] }) }))
      .filter((p) => !excluded.has(p.job.targetBranch));
  }
  commit(accepted: readonly Proposal[]): void {
    this.committed.push([...accepted]);
  }
  observe(): void {}
  toJSON(): unknown {
    return { committed: this.committed.map((c) => c.map((p) => p.origin)) };
  }
  restore(): void {}
}

function targets(jobs: readonly { job: { targetBranch: bigint } }[]): bigint[] {
  return jobs.map((j) => j.job.targetBranch);
}

describe('admission across Prefix and CSTG', () => {
  it('admits one job when Prefix and CSTG propose the same target, and CSTG commits nothing', async () => {
    const { s, local } = scheduler(['prefix-seed', 'cstg-seed'], { lanes: 'prefix,cstg' });
    s.lane('prefix')!.restore(prefixSnapshot([{ id: 77, seeds: ['prefix-seed'] }]), NOW);
    s.lane('cstg')!.restore(cstgSnapshot([{ id: 77, seeds: ['cstg-seed'] }]), NOW);
    const jobs = await s.admit(2, NOW);
    expect(jobs.map((j) => [j.lane, j.job.seed, j.job.targetBranch])).toEqual([['prefix', 'prefix-seed', 77n]]);
    expect([...local.reserved().keys()]).toEqual([77n]);
    expect(s.lane('cstg')!.scheduled).toBe(0);
    expect(s.lane('cstg')!.transition(77n)!.lastScheduledMs).toBeNull();
    expect(s.lane('prefix')!.node(77n)!.attempts).toBe(1);
    expect(s.stats().admission.backFills).toBe(0);
  });

  it('back-fills past a conflicting first pair and returns [77, 88] for two workers', async () => {
    const { s } = scheduler(['prefix-seed', 'duplicate-seed', 'alternate-seed'], { lanes: 'prefix,cstg' });
    s.lane('prefix')!.restore(prefixSnapshot([{ id: 77, seeds: ['prefix-seed'] }]), NOW);
    s.lane('cstg')!.restore(cstgSnapshot([{ id: 77, seeds: ['duplicate-seed'] }, { id: 88, seeds: ['alternate-seed'] }]), NOW);
    const jobs = await s.admit(2, NOW);
    expect(targets(jobs)).toEqual([77n, 88n]);
    // 88 ranked third: it took the slot of the duplicate 77, so it is a back-fill.
    expect(s.stats().admission.backFills).toBe(1);
    expect(s.lane('prefix')!.node(77n)!.attempts).toBe(1);
    expect(s.lane('cstg')!.scheduled).toBe(1);
    expect(s.lane('cstg')!.transition(77n)!.lastScheduledMs).toBeNull();
    expect(s.lane('cstg')!.transition(88n)!.lastScheduledMs).toBe(NOW);
  });

  it('back-fills to 88 when the shared table rejects 77 twice, leaving no attempt or cooldown on 77', async () => {
    const shared = new ScriptedSharedClaims((g) => (g.includes(77n) ? REJECT : 'grant'));
    const { s, local } = scheduler(['prefix-77', 'cstg-77', 'cstg-88'], { lanes: 'prefix,cstg', shared });
    s.lane('prefix')!.restore(prefixSnapshot([{ id: 77, seeds: ['prefix-77'] }]), NOW);
    s.lane('cstg')!.restore(cstgSnapshot([{ id: 77, seeds: ['cstg-77'] }, { id: 88, seeds: ['cstg-88'] }]), NOW);
    const jobs = await s.admit(1, NOW);
    expect(targets(jobs)).toEqual([88n]);
    expect(s.stats().admission.backFills).toBe(1);
    expect(jobs[0]!.targetToken).toBe('tok-1');
    expect(shared.primaries()).toEqual([77n, 77n, 88n]);
    expect(shared.calls.every((call) => call.length === 1)).toBe(true);
    expect(s.lane('prefix')!.node(77n)).toMatchObject({ attempts: 0, lastScheduledMs: null });
    expect(s.lane('prefix')!.queueEpoch).toBe(0);
    expect(s.lane('cstg')!.transition(77n)).toMatchObject({ attempts: 0, lastScheduledMs: null });
    expect(s.lane('cstg')!.scheduled).toBe(1);
    expect(s.lane('cstg')!.transition(88n)!.lastScheduledMs).toBe(NOW);
    expect([...local.reserved().keys()]).toEqual([88n]);
    expect(s.stats().admission.sharedConflicts).toBe(2);
  });

  it('lets a smaller same-primary group through after a larger one conflicted (seen only on admission)', async () => {
    const prefix = new ScriptedLane('prefix', [
      { seed: 'first', target: 77, actions: [[77, 'solve'], [99, 'solve']] },
      { seed: 'shared', target: 88, actions: [[88, 'solve'], [99, 'solve']] },
    ]);
    const cstg = new ScriptedLane('cstg', [
      { seed: 'duplicate', target: 77 },
      { seed: 'shared', target: 88 },
    ]);
    const admission = new Admission({ lanes: [prefix, cstg], local: new MapLocalReservations() });
    const jobs = await admission.admit(2, 2, NOW);
    expect(jobs.map((j) => [j.job.seed, j.job.targetBranch, j.lane])).toEqual([
      ['first', 77n, 'prefix'],
      ['shared', 88n, 'cstg'],
    ]);
    expect(prefix.committed.map((c) => c.map((p) => p.job.seed))).toEqual([['first']]);
    expect(cstg.committed.map((c) => c.map((p) => p.job.seed))).toEqual([['shared']]);
  });

  it('retries a proposal that only clashed with a pending job once that job is rejected', async () => {
    const shared = new ScriptedSharedClaims((g) => (g[0] === 77n && g.length === 2 ? REJECT : 'grant'));
    const prefix = new ScriptedLane('prefix', [{ seed: 'big', target: 77, actions: [[77, 'solve'], [99, 'solve']] }]);
    const cstg = new ScriptedLane('cstg', [{ seed: 'small', target: 77 }]);
    const admission = new Admission({ lanes: [prefix, cstg], local: new MapLocalReservations(), shared });
    const jobs = await admission.admit(2, 2, NOW);
    expect(jobs.map((j) => j.job.seed)).toEqual(['small']);
    expect(shared.calls).toEqual([[[77n, 99n]], [[77n]]]);
  });

  it('claims every group of a pass in one batched request', async () => {
    const shared = new ScriptedSharedClaims();
    const fallback = new ScriptedLane('fallback', [1, 2, 3, 4].map((t) => ({ seed: `s${t}`, target: t })));
    const admission = new Admission({ lanes: [fallback], local: new MapLocalReservations(), shared });
    const jobs = await admission.admit(3, 4, NOW);
    expect(targets(jobs)).toEqual([1n, 2n, 3n]);
    expect(shared.calls).toEqual([[[1n], [2n], [3n]]]);
    expect(admission.stats()).toMatchObject({ passes: 1, sharedClaimCalls: 1, admitted: 3 });
  });

  it('never sends an untargeted job to the shared table', async () => {
    const shared = new ScriptedSharedClaims();
    const edge = new ScriptedLane('edge', [{ seed: 'plain', target: 0, actions: [] }]);
    const admission = new Admission({ lanes: [edge], local: new MapLocalReservations(), shared });
    const jobs = await admission.admit(1, 1, NOW);
    expect(jobs).toEqual([expect.objectContaining({ group: [], lane: 'edge' })]);
    expect(jobs[0]!.targetToken).toBeUndefined();
    expect(shared.calls).toEqual([]);
  });

  it.each(['corrupt', 'error'] as const)('treats a shared %s verdict as a rejection and back-fills', async (reason) => {
    const shared = new ScriptedSharedClaims((g) => (g[0] === 1n ? { ok: false, reason } : 'grant'));
    const lane = new ScriptedLane('fallback', [{ seed: 'a', target: 1 }, { seed: 'b', target: 2 }]);
    const local = new MapLocalReservations();
    const admission = new Admission({ lanes: [lane], local, shared });
    expect(targets(await admission.admit(1, 2, NOW))).toEqual([2n]);
    expect([...local.reserved().keys()]).toEqual([2n]);
    expect(admission.stats()[reason === 'corrupt' ? 'sharedCorrupt' : 'sharedErrors']).toBe(1);
  });

  it('releases every local reservation, gives back earlier shared claims and commits nothing when the shared claim throws', async () => {
    const shared = new ScriptedSharedClaims((g, call) => (call === 0 ? (g[0] === 1n ? REJECT : 'grant') : 'throw'));
    const lane = new ScriptedLane('fallback', [1, 2, 3, 4].map((t) => ({ seed: `s${t}`, target: t })));
    const local = new MapLocalReservations();
    const admission = new Admission({ lanes: [lane], local, shared });
    let error: SymfenceError | undefined;
    try {
      await admission.admit(2, 4, NOW);
    } catch (e) {
      error = e as SymfenceError;
    }
    expect(error?.code).toBe('EIO');
    expect(shared.calls).toEqual([[[1n], [2n]], [[3n]]]);
    expect(local.reserved().size).toBe(0);
    expect(shared.released).toEqual([[{ targets: [2n], token: 'tok-1' }]]);
    expect(lane.committed).toEqual([]);
    expect(admission.inflightTargets().size).toBe(0);
  });

  it('rolls the whole call back, giving back earlier shared claims, when the real in-flight set runs full in a back-fill pass', async () => {
    // Capacity 3: pass 1 reserves 1, 2, 3 and the shared table rejects 1; the back-fill pass then
    // needs 2 more slots for the group [4, 5] while 2 and 3 are held, and the set refuses.
    const set = InflightTargetSet.create(3);
    const shared = new ScriptedSharedClaims((g) => (g[0] === 1n ? REJECT : 'grant'));
    const lane = new ScriptedLane('fallback', [
      { seed: 'a', target: 1 },
      { seed: 'b', target: 2 },
      { seed: 'c', target: 3 },
      { seed: 'd', target: 4, actions: [[4, 'solve'], [5, 'solve']] },
    ]);
    const admission = new Admission({ lanes: [lane], local: set, shared });
    await expect(admission.admit(3, 4, NOW)).rejects.toMatchObject({ code: 'ERR_INFLIGHT_FULL' });
    expect(set.size()).toBe(0);
    expect(shared.released.flat().map((c) => c.targets)).toEqual([[2n], [3n]]);
    expect(lane.committed).toEqual([]);
    expect(admission.inflightTargets().size).toBe(0);
  });

  it('names each group\'s seed in its shared claim, any input for a lane that asks a branch once, and settles what the table says was answered', async () => {
    const seedA = 'a'.repeat(64);
    const seedB = 'b'.repeat(64);
    const once = Object.assign(new ScriptedLane('frontier', [{ seed: seedA, target: 1, actions: [[2, 'solve']] }]), { asksOncePerCampaign: true });
    const plain = new ScriptedLane('prefix', [{ seed: seedB, target: 3 }]);
    const asked: (readonly (ClaimAsk | undefined)[])[] = [];
    const ledger = new TargetLedger();
    const admission = new Admission({
      lanes: [once, plain],
      local: new MapLocalReservations(),
      ledger,
      shared: {
        claimGroups: async (groups, _now, asks) => {
          asked.push(asks ?? []);
          // Member 2 of the frontier's group was answered elsewhere; the prefix group is free.
          return groups.map((g): ClaimOutcome => (g.includes(2n) ? { ok: false, reason: 'answered', answered: [2n] } : { ok: true, token: `t${g[0]}` }));
        },
        releaseGroups: async () => {},
      },
    });
    const first = await admission.admit(2, 2, NOW);
    expect(first.map((j) => [j.lane, j.job.targetBranch])).toEqual([['prefix', 3n]]);
    const backoff = { baseMs: 30_000, maxAttempts: 3 };
    expect(asked[0]).toEqual([
      { input: seedA, anyInput: true, backoff },
      { input: seedB, backoff },
    ]);
    // A later claim of the same job's group (a re-claim at dispatch) asks the same; work of an unknown lane asks as a lane that may ask again.
    expect(admission.askFor('frontier', seedA)).toEqual(asked[0]![0]);
    expect(admission.askFor('prefix', seedB)).toEqual(asked[0]![1]);
    expect(admission.askFor(undefined, seedB)).toEqual({ input: seedB, backoff });
    expect(admission.stats().sharedAnswered).toBe(1);
    expect(ledger.isSettled(seedA, 2n)).toBe(true);
    expect(ledger.answered(2n)).toBe(true);
    expect(once.committed.flat()).toEqual([]);
    // Next round the ledger strips the answered member: the group is asked without it, and granted.
    const second = await admission.admit(1, 1, NOW);
    expect(second.map((j) => [j.lane, j.group])).toEqual([['frontier', [1n]]]);
  });

  it('does not claim a proposal that a refusal earlier in the round ruled out: one claim, not two, for a branch answered elsewhere', async () => {
    const seedA = 'a'.repeat(64);
    const seedB = 'b'.repeat(64);
    // Two lanes that ask a branch once per campaign propose branch 5, on two inputs.
    const first = Object.assign(new ScriptedLane('frontier', [{ seed: seedA, target: 5 }]), { asksOncePerCampaign: true });
    const second = Object.assign(new ScriptedLane('fallback', [{ seed: seedB, target: 5 }, { seed: seedB, target: 6 }]), { asksOncePerCampaign: true });
    const claimed: string[] = [];
    const ledger = new TargetLedger();
    const admission = new Admission({
      lanes: [first, second],
      local: new MapLocalReservations(),
      ledger,
      shared: {
        claimGroups: async (groups, _now, asks) => {
          groups.forEach((g, i) => claimed.push(`${asks![i]!.input.slice(0, 1)}:${g.join(',')}`));
          return groups.map((g): ClaimOutcome => (g.includes(5n) ? { ok: false, reason: 'answered', answered: [5n] } : { ok: true, token: `t${g[0]}` }));
        },
        releaseGroups: async () => {},
      },
    });
    const admitted = await admission.admit(2, 4, NOW);
    expect(admitted.map((j) => [j.job.seed.slice(0, 1), j.job.targetBranch])).toEqual([['b', 6n]]);
    // Branch 5 on seed b waited for the claim of 5 on seed a (a clash in one pass), which was
    // refused answered: the ledger then rules it out for a lane that asks once, so it is not claimed.
    expect(claimed).toEqual(['a:5', 'b:6']);
    expect(admission.stats().sharedAnswered).toBe(1);
  });

  it('takes the campaign\'s attempts and back-off of a question left open elsewhere, and gives it up at the last attempt', async () => {
    const seedA = 'a'.repeat(64);
    const lane = new ScriptedLane('prefix', [
      { seed: seedA, target: 1 },
      { seed: seedA, target: 2 },
      { seed: seedA, target: 3 },
    ]);
    const ledger = new TargetLedger({ maxAttempts: 3, retryBaseMs: 1000 });
    const asked: (readonly bigint[])[] = [];
    const admission = new Admission({
      lanes: [lane],
      local: new MapLocalReservations(),
      ledger,
      shared: {
        claimGroups: async (groups) => {
          asked.push(...groups);
          // Target 1: left open twice elsewhere, last 400 ms ago; target 2: three times (given up
          // under this policy); target 3: free.
          return groups.map((g): ClaimOutcome => {
            if (g[0] === 1n) return { ok: false, reason: 'backoff', open: [{ target: 1n, attempts: 2, lastOpenMs: NOW - 400 }] };
            if (g[0] === 2n) return { ok: false, reason: 'backoff', open: [{ target: 2n, attempts: 3, lastOpenMs: NOW - 60_000 }] };
            return { ok: true, token: `t${g[0]}` };
          });
        },
        releaseGroups: async () => {},
      },
    });
    const first = await admission.admit(3, 3, NOW);
    expect(first.map((j) => j.job.targetBranch)).toEqual([3n]);
    expect(admission.stats().sharedBackoff).toBe(2);
    // Attempt 2 backs off 1000 · 2 ms from when it was left open: allowed again 1600 ms from now.
    expect(ledger.allowed(seedA, 1n, NOW + 1599)).toBe(false);
    expect(ledger.allowed(seedA, 1n, NOW + 1600)).toBe(true);
    expect(ledger.isSettled(seedA, 1n)).toBe(false);
    expect(ledger.isSettled(seedA, 2n)).toBe(true);
    expect(ledger.answered(2n)).toBe(false);
    expect(ledger.stats().givenUp).toBe(1);
    // Within the back-off the lane's proposal is dropped before any claim; after it, asked again.
    asked.length = 0;
    expect(await admission.admit(3, 3, NOW + 1000)).toEqual([]);
    expect(asked).toEqual([]);
    await admission.admit(3, 3, NOW + 1600);
    expect(asked).toEqual([[1n]]);
  });

  it('fails closed with ERR_ADMISSION_PROTOCOL when the shared table answers the wrong number of outcomes', async () => {
    const local = new MapLocalReservations();
    const lane = new ScriptedLane('fallback', [{ seed: 'a', target: 1 }, { seed: 'b', target: 2 }]);
    const admission = new Admission({
      lanes: [lane],
      local,
      shared: { claimGroups: async () => [{ ok: true, token: 't' }], releaseGroups: async () => {} },
    });
    await expect(admission.admit(2, 2, NOW)).rejects.toMatchObject({ code: 'ERR_ADMISSION_PROTOCOL' });
    expect(local.reserved().size).toBe(0);
    expect(lane.committed).toEqual([]);
  });

  it('excludes in-flight targets from later rounds until the job is released', async () => {
    const lane = new ScriptedLane('fallback', [{ seed: 'a', target: 1 }]);
    const local = new MapLocalReservations();
    const admission = new Admission({ lanes: [lane], local });
    const [job] = await admission.admit(1, 1, NOW);
    expect(await admission.admit(1, 1, NOW)).toEqual([]);
    admission.release(job!);
    expect(local.reserved().size).toBe(0);
    expect(targets(await admission.admit(1, 1, NOW))).toEqual([1n]);
  });

  it('rejects a job whose group is held by another owner of the in-flight set and commits nothing for it', async () => {
    const local = new MapLocalReservations();
    local.tryReserveGroup([1n], 424242);
    const lane = new ScriptedLane('fallback', [{ seed: 'a', target: 1 }, { seed: 'b', target: 2 }]);
    const admission = new Admission({ lanes: [lane], local });
    expect(targets(await admission.admit(2, 2, NOW))).toEqual([2n]);
    expect(local.ownerOf(1n)).toBe(424242);
    expect(admission.stats().localConflicts).toBe(1);
  });

  it('rejects non-integer limits and a non-finite now without proposing or committing', async () => {
    const lane = new ScriptedLane('fallback', [{ seed: 'a', target: 1 }]);
    const local = new MapLocalReservations();
    const admission = new Admission({ lanes: [lane], local });
    for (const [limit, proposalLimit, now] of [[1.5, 1, NOW], [-1, 1, NOW], [1, Number.NaN, NOW], [1, 1, Number.NaN], [1, 1, Number.NEGATIVE_INFINITY]] as const) {
      await expect(admission.admit(limit, proposalLimit, now)).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION' });
    }
    expect(lane.committed).toEqual([]);
    expect(local.reserved().size).toBe(0);
    expect(admission.stats().proposals).toBe(0);
  });

  it('returns nothing for a limit of zero', async () => {
    const lane = new ScriptedLane('fallback', [{ seed: 'a', target: 1 }]);
    expect(await new Admission({ lanes: [lane], local: new MapLocalReservations() }).admit(0, 5, NOW)).toEqual([]);
  });
});

describe('admission of the replay lanes', () => {
  it('admits one job when two edge rows point at one target, and the rows were scheduled exactly once in total', async () => {
    const { s } = scheduler(['a', 'b'], { lanes: 'edge' });
    const edge = s.lane('edge')!;
    s.observe({ seed: 'a', telemetry: tel({ trace: [[1, 2, 900, 11, 1, 0]] }), reward: 0 }, 10_000);
    s.observe({ seed: 'b', telemetry: tel({ trace: [[1, 3, 900, 22, 1, 0]] }), reward: 0 }, 20_000);
    const jobs = await s.admit(2, NOW);
    expect(targets(jobs)).toEqual([900n]);
    expect(edge.rows().reduce((sum, r) => sum + r.scheduled, 0)).toBe(1);
    expect(await s.admit(2, NOW + 1)).toEqual([]);
    s.release(jobs[0]!);
    expect(targets(await s.admit(2, NOW + 2))).toEqual([900n]);
  });

  it('leaves the fallback cursor and replay time unmoved after an external rejection', async () => {
    const shared = new ScriptedSharedClaims(() => REJECT);
    const { s, local } = scheduler(['seed'], { lanes: 'fallback', shared });
    s.observe({ seed: 'seed', telemetry: tel({ open: [91, 92] }), reward: 0.5 }, 0);
    expect(await s.admit(1, NOW)).toEqual([]);
    expect(s.lane('fallback')!.record('seed')).toMatchObject({ cursor: 0, lastReplayMs: null });
    expect(local.reserved().size).toBe(0);
  });

  it('starts the cooldown only of the concurrency record whose job was admitted', async () => {
    const { s } = scheduler(['first', 'second'], { lanes: 'concurrency', guidance: parseGuidance('11 0') });
    for (const seed of ['first', 'second']) s.observe({ seed, telemetry: tel({ trace: [[1, 2, 900, 11, 1, 0]] }), reward: 0.2 }, 10_000);
    const jobs = await s.admit(2, NOW);
    expect(targets(jobs)).toEqual([900n]);
    const stamps = ['first', 'second'].map((seed) => s.lane('concurrency')!.record(seed)!.lastScheduledMs);
    expect(stamps.filter((t) => t === NOW)).toHaveLength(1);
    expect(stamps.filter((t) => t === null)).toHaveLength(1);
  });

  it('does not propose seeds that were removed', async () => {
    const { s } = scheduler(['gone'], { lanes: 'fallback' });
    s.observe({ seed: 'gone', telemetry: tel({ open: [5] }), reward: 0.5 }, 0);
    s.removeSeed('gone');
    expect(await s.admit(1, NOW)).toEqual([]);
  });

  it('fills every worker from a deep backlog when one proposal per worker would leave them idle', async () => {
    const shared = new ScriptedSharedClaims((g) => (g[0]! % 2n === 0n ? REJECT : 'grant'));
    const lane = new ScriptedLane('fallback', Array.from({ length: 40 }, (_, i) => ({ seed: `s${i}`, target: i + 1 })));
    const admission = new Admission({ lanes: [lane], local: new MapLocalReservations(), shared });
    const jobs = await admission.admit(16, 40, NOW);
    expect(jobs).toHaveLength(16);
    expect(jobs.every((j) => j.job.targetBranch % 2n === 1n)).toBe(true);
  });
});

/** A lane with `n` proposals (targets 1..n) that honours the depth it is asked for and records it. */
class DeepLane implements Lane {
  readonly asked: number[] = [];
  constructor(
    readonly name: LaneName,
    private readonly n: number,
  ) {}
  size(): number {
    return this.n;
  }
  propose(limit: number, proposalLimit: number, _now: number, excluded: ReadonlySet<bigint>): readonly Proposal[] {
    const depth = Math.max(limit, proposalLimit);
    this.asked.push(depth);
    const out: Proposal[] = [];
    for (let t = 1; t <= this.n && out.length < depth; t += 1) {
      if (excluded.has(BigInt(t))) continue;
      out.push({ lane: this.name, origin: `seed-${t}`, job: normalizeJob({ seed: `seed-${t}`, targetBranch: t, actions: [[t, 'solve']] }) });
    }
    return out;
  }
  commit(): void {}
  observe(): void {}
  toJSON(): unknown {
    return {};
  }
  restore(): void {}
}

describe('admission work per round', () => {
  it('asks the lanes for a shallow backlog, not the whole lane, when the first candidates fill the round', async () => {
    const lane = new DeepLane('frontier', 100_000);
    const admission = new Admission({ lanes: [lane], local: new MapLocalReservations() });
    const jobs = await admission.admit(2, lane.size(), NOW);
    expect(targets(jobs)).toEqual([1n, 2n]);
    expect(lane.asked).toEqual([32]);
    expect(admission.stats().proposals).toBe(32);
  });

  it('looks four times deeper when every shallow candidate is refused, and retries none of the refused ones', async () => {
    const lane = new DeepLane('frontier', 1000);
    const shared = new ScriptedSharedClaims((g) => (g[0]! <= 40n ? REJECT : 'grant'));
    const admission = new Admission({ lanes: [lane], local: new MapLocalReservations(), shared });
    const jobs = await admission.admit(2, lane.size(), NOW);
    expect(targets(jobs)).toEqual([41n, 42n]);
    expect(lane.asked).toEqual([32, 128]);
    // Each of 1..42 was claimed exactly once: the deeper backlog skipped the 32 already refused.
    expect(shared.primaries().sort((a, b) => Number(a - b))).toEqual(Array.from({ length: 42 }, (_, i) => BigInt(i + 1)));
    expect(admission.stats().sharedConflicts).toBe(40);
    expect(admission.stats().backFills).toBe(2);
  });

  it('never asks deeper than the caller\'s proposalLimit, and stops when the lane has nothing more', async () => {
    const lane = new DeepLane('frontier', 50);
    const shared = new ScriptedSharedClaims(() => REJECT);
    const admission = new Admission({ lanes: [lane], local: new MapLocalReservations(), shared });
    expect(await admission.admit(2, 100, NOW)).toEqual([]);
    expect(lane.asked).toEqual([32, 100]);
    expect(shared.primaries()).toHaveLength(50);
    const capped = new DeepLane('frontier', 1000);
    const admission2 = new Admission({ lanes: [capped], local: new MapLocalReservations(), shared: new ScriptedSharedClaims(() => REJECT) });
    expect(await admission2.admit(1, 40, NOW)).toEqual([]);
    expect(capped.asked).toEqual([32, 40]);
  });
});
