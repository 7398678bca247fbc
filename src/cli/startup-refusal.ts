/**
 * A campaign command's start-up refusals: a coded error thrown while the campaign starts — options,
 * paths, the solver probe, a lease store that cannot be opened (an unreachable etcd included) —
 * means nothing ran and the command line cannot work as given, so it exits 2 like a usage error
 * (docs/campaign.md, the `run` command), whatever its code. Failures after the start exit 1.
 */
import { SymfenceError } from '../errors.js';

const refusals = new WeakSet<object>();

/** Runs the start step; a `SymfenceError` it throws is marked as a start-up refusal and rethrown. */
export async function asStartupStep<T>(start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (error) {
    if (error instanceof SymfenceError) refusals.add(error);
    throw error;
  }
}

export function isStartupRefusal(error: unknown): boolean {
  return typeof error === 'object' && error !== null && refusals.has(error);
}
