/**
 * How often the coordinator renews its leases. A lease must be renewed well inside its TTL: a third
 * of the shorter TTL leaves two missed renewals before anyone may take it over. The cap keeps long
 * TTLs from turning into rare renewals that hide a dead lease directory for minutes; the floor keeps
 * a tiny TTL from turning the coordinator into a busy loop of lease writes.
 */

/** Upper bound of the renewal period. */
const MAX_HEARTBEAT_INTERVAL_MS = 30_000;
/** Lower bound of the renewal period. */
const MIN_HEARTBEAT_INTERVAL_MS = 100;
/** TTL assumed when none of the given TTLs is a positive finite number. */
const FALLBACK_LEASE_TTL_MS = 3_000;

/**
 * min(valid TTLs) / 3, clamped to [0.1 s, 30 s]. TTLs that are not positive finite numbers are
 * ignored (a table that is not in use passes `undefined`); with none left, 3 s is assumed.
 */
export function heartbeatIntervalMs(...leaseTtlsMs: ReadonlyArray<number | undefined>): number {
  const valid = leaseTtlsMs.filter((ttl): ttl is number => typeof ttl === 'number' && Number.isFinite(ttl) && ttl > 0);
  const ttlMs = valid.length > 0 ? Math.min(...valid) : FALLBACK_LEASE_TTL_MS;
  return Math.min(MAX_HEARTBEAT_INTERVAL_MS, Math.max(MIN_HEARTBEAT_INTERVAL_MS, ttlMs / 3));
}
