import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { AdmittedJob } from '../../src/scheduler/admission.js';
import type { LaneName, Proposal } from '../../src/scheduler/lanes/lane.js';
import { MapLocalReservations } from '../../src/scheduler/map-local-reservations.js';
import { Scheduler } from '../../src/scheduler/scheduler.js';
import { ScriptedSharedClaims, sha, tel, type TraceRow } from './scheduler-fixtures.js';

const SEEDS = ['s0', 's1', 's2', 's3', 's4', 's5'];
const GUIDANCE = new Map([[1n, 0], [2n, 3]]);
const OPTIONS = { lanes: 'prefix,cstg,concurrency,edge,fallback', cooldownMs: 5 };

function build(local: MapLocalReservations, shared?: ScriptedSharedClaims): Scheduler {
  const s = new Scheduler({ local, ...(shared ? { shared } : {}), options: OPTIONS, guidance: GUIDANCE });
  SEEDS.forEach((seed, i) => s.addSeed(seed, { bytes: 8, sha256: sha(i + 1), path: `/q/${seed}` }, 0));
  return s;
}

// Small id ranges on purpose: lanes then share targets, so conflicts are common.
const traceRow = fc.tuple(fc.integer({ min: 0, max: 6 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 4 }), fc.constantFrom<0 | 1>(0, 1), fc.constantFrom<0 | 1>(0, 1));
const observation = fc.record({
  seed: fc.constantFrom(...SEEDS),
  trace: fc.array(traceRow, { maxLength: 6 }),
  open: fc.array(fc.integer({ min: 1, max: 12 }), { maxLength: 5 }),
  target: fc.integer({ min: 0, max: 12 }),
  reached: fc.boolean(),
  status: fc.constantFrom('sat' as const, 'unsat' as const, 'unknown' as const, 'none' as const),
  reward: fc.double({ min: 0, max: 1, noNaN: true }),
  withTelemetry: fc.boolean(),
});

const scenario = fc.record({
  observations: fc.array(observation, { maxLength: 14 }),
  foreign: fc.uniqueArray(fc.integer({ min: 1, max: 12 }), { maxLength: 4 }),
  rejected: fc.uniqueArray(fc.integer({ min: 1, max: 12 }), { maxLength: 5 }),
  verdicts: fc.constantFrom('conflict' as const, 'corrupt' as const, 'error' as const),
  throwOnCall: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }),
  multi: fc.boolean(),
  limit: fc.integer({ min: 1, max: 6 }),
  proposalLimit: fc.integer({ min: 0, max: 20 }),
  priorRounds: fc.integer({ min: 0, max: 2 }),
});

describe('transactional admission (property)', () => {
  it('leaves lane state equal to committing only the admitted jobs to a fresh copy, and never half-reserves a group', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (sc) => {
        const now = 1_000;
        const rejected = new Set(sc.rejected.map(BigInt));
        const shared = sc.multi
          ? new ScriptedSharedClaims((group, call) => {
              if (call === sc.throwOnCall) return 'throw';
              return group.some((t) => rejected.has(t)) ? { ok: false, reason: sc.verdicts } : 'grant';
            })
          : undefined;
        const local = new MapLocalReservations();
        const s = build(local, shared);
        sc.observations.forEach((o, i) => {
          const telemetry = o.withTelemetry ? tel({ trace: o.trace as TraceRow[], open: o.open, target: o.target, reached: o.reached, status: o.status }) : null;
          s.observe({ seed: o.seed, telemetry, reward: o.reward }, 10 + i);
        });
        // Earlier rounds put some of this scheduler's own jobs in flight.
        const held: AdmittedJob[] = [];
        for (let r = 0; r < sc.priorRounds; r += 1) {
          try {
            held.push(...(await s.admit(1, 100 + r)));
          } catch {
            // an injected exception in a prior round is fine: the property below covers it
          }
        }
        for (const t of sc.foreign) local.tryReserveGroup([BigInt(t)], 9_000_000);
        const reservedBefore = local.reserved();
        const before = s.toJSON(now);

        let admitted: AdmittedJob[] = [];
        let threw = false;
        try {
          admitted = await s.admit(sc.limit, now, sc.proposalLimit);
        } catch {
          threw = true;
        }

        // Reference: a fresh copy of the pre-admission state with only the admitted jobs committed.
        const fresh = build(new MapLocalReservations());
        fresh.restore(before, now);
        const byLane = new Map<LaneName, Proposal[]>();
        for (const a of admitted) byLane.set(a.lane, [...(byLane.get(a.lane) ?? []), { lane: a.lane, job: a.job, origin: a.origin }]);
        for (const [name, accepted] of byLane) fresh.lane(name)!.commit(accepted, now);
        expect(s.toJSON(now)).toEqual(fresh.toJSON(now));

        if (threw) expect(admitted).toEqual([]);
        expect(admitted.length).toBeLessThanOrEqual(sc.limit);

        // Reservations: exactly what was held before plus every member of every admitted group.
        const expected = new Map(reservedBefore);
        for (const a of admitted) {
          for (const t of a.group) {
            expect(expected.has(t)).toBe(false); // disjoint from foreign, in-flight and each other
            expected.set(t, a.owner);
          }
          if (a.group.length > 0 && sc.multi) expect(a.targetToken).toBeDefined();
          expect(a.group.some((t) => rejected.has(t)) && sc.multi).toBe(false);
        }
        expect(local.reserved()).toEqual(expected);
        for (const h of held) s.release(h);
      }),
      { numRuns: 200 },
    );
  });
});
