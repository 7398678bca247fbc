/**
 * The injected clock. It lives below every component folder because lease tables, the coordinator,
 * the stats reporter and the tests all take one (docs/architecture.md "Layers").
 */

/** Milliseconds on a monotonic-enough clock. Injected everywhere tests must control time. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
