/** One timed lease cycle of the benches: claim a group, release it; ms. Throws if either is refused. */
import { performance } from 'node:perf_hooks';
import type { FencedTargetLeaseTable } from '../src/lease/target-lease-table.js';

export async function claimReleaseCycle(table: FencedTargetLeaseTable, targets: readonly bigint[], nowMs: number): Promise<number> {
  const started = performance.now();
  const claim = await table.claimGroup(targets, { bench: 'lease-cycle' }, { owner: 'bench', nowMs });
  if (!claim.ok) throw new Error(`claim failed: ${claim.reason}`);
  const release = await table.releaseGroup(targets, claim.token);
  if (!release.ok) throw new Error(`release failed: ${release.reason}`);
  return performance.now() - started;
}
