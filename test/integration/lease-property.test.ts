import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { targetRecordId } from '../../src/lease/identity.js';
import type { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { S, openTarget as openTargetTable, tempRoot } from '../helpers/lease-fixtures.js';
import { describeEachStore } from '../helpers/lease-stores.js';

const TTL_MS = 10 * S;
const UNIVERSE = [1n, 2n, 3n, 4n, 5n, 6n];

type Op =
  | { kind: 'claim'; by: 0 | 1; group: bigint[] }
  | { kind: 'heartbeat'; by: 0 | 1; pick: number }
  | { kind: 'release'; by: 0 | 1; pick: number }
  | { kind: 'advance'; ms: number };

const groupArb = fc.subarray(UNIVERSE, { minLength: 1, maxLength: 3 });
const byArb = fc.constantFrom(0 as const, 1 as const);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('claim' as const), by: byArb, group: groupArb }),
  fc.record({ kind: fc.constant('heartbeat' as const), by: byArb, pick: fc.nat(20) }),
  fc.record({ kind: fc.constant('release' as const), by: byArb, pick: fc.nat(20) }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 15 * S }) }),
);

interface Grant {
  readonly group: bigint[];
  readonly token: string;
}

/** Compares every record on disk with the model: same holders, same expiry points, all valid. */
async function expectDiskMatches(table: FencedTargetLeaseTable, model: Map<bigint, { token: string; updatedMs: number }>): Promise<void> {
  const records = await table.snapshotRecords(); // throws on any corrupt record
  const onDisk = new Map(records.map((e) => [e.id, e.record]));
  expect(onDisk.size).toBe(model.size);
  for (const [target, held] of model) {
    const record = onDisk.get(targetRecordId(target));
    expect(record?.token).toBe(held.token);
    expect(record?.updatedMs).toBe(held.updatedMs);
  }
}

describeEachStore('target leases under random interleavings', (store) => {
  // Every property run gets its own root and its own namespace of the store.
  const openTarget = (root: string, options: Record<string, unknown> = {}) => openTargetTable(root, { ...store.options(), ...options });

  it('never gives two live holders one target, and the disk always equals the model', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 24 }), async (ops) => {
        const root = await tempRoot();
        store.fresh();
        const tables = [await openTarget(root, { leaseTtlMs: TTL_MS }), await openTarget(root, { leaseTtlMs: TTL_MS })];
        const model = new Map<bigint, { token: string; updatedMs: number }>();
        const grants: Grant[][] = [[], []];
        let nowMs = 0;
        for (const op of ops) {
          if (op.kind === 'advance') {
            nowMs += op.ms;
            continue;
          }
          const table = tables[op.by]!;
          if (op.kind === 'claim') {
            const free = op.group.every((t) => {
              const held = model.get(t);
              return !held || nowMs - held.updatedMs >= TTL_MS;
            });
            const result = await table.claimGroup(op.group, { by: op.by }, { owner: `owner-${op.by}`, nowMs });
            expect(result.ok).toBe(free);
            if (result.ok) {
              for (const t of op.group) model.set(t, { token: result.token, updatedMs: nowMs });
              grants[op.by]!.push({ group: op.group, token: result.token });
            }
          } else {
            const mine = grants[op.by]!;
            if (mine.length === 0) continue;
            const grant = mine[op.pick % mine.length]!;
            const holds = grant.group.every((t) => model.get(t)?.token === grant.token);
            if (op.kind === 'heartbeat') {
              const result = await table.heartbeatGroup(grant.group, grant.token, { nowMs });
              expect(result.ok).toBe(holds);
              if (result.ok) for (const t of grant.group) model.set(t, { token: grant.token, updatedMs: nowMs });
            } else {
              const result = await table.releaseGroup(grant.group, grant.token);
              expect(result.ok).toBe(holds);
              if (result.ok) for (const t of grant.group) model.delete(t);
            }
          }
          await expectDiskMatches(tables[0]!, model);
          // At most one live holder per target: every live model entry belongs to one token.
          for (const [t, held] of model) {
            if (nowMs - held.updatedMs >= TTL_MS) continue;
            const liveGrants = grants.flat().filter((g) => g.group.includes(t) && g.group.every((m) => model.get(m)?.token === g.token));
            expect(new Set(liveGrants.map((g) => g.token)).size).toBeLessThanOrEqual(1);
          }
        }
      }),
      { numRuns: 25 },
    );
  });

  it('admits at most one of two concurrent overlapping claims from two table instances', async () => {
    await fc.assert(
      fc.asyncProperty(groupArb, groupArb, async (left, right) => {
        const root = await tempRoot();
        store.fresh();
        const [a, b] = [await openTarget(root), await openTarget(root)];
        const [ra, rb] = await Promise.all([
          a.claimGroup(left, { side: 'a' }, { owner: 'a', nowMs: 10 * S }),
          b.claimGroup(right, { side: 'b' }, { owner: 'b', nowMs: 10 * S }),
        ]);
        const overlap = left.some((t) => right.includes(t));
        if (overlap) expect(ra.ok !== rb.ok).toBe(true);
        else expect(ra.ok && rb.ok).toBe(true);
        const records = await a.snapshotRecords();
        const expected = [...(ra.ok ? left : []), ...(rb.ok ? right : [])].map(targetRecordId).sort();
        expect(records.map((e) => e.id).sort()).toEqual(expected);
      }),
      { numRuns: 30 },
    );
  });
});
