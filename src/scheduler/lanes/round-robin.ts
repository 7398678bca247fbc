/**
 * Round-robin cursors over a lane entry's targets (edge rows, concurrency records, fallback
 * records) and the insertion-order LRU the lanes keep their entries in. Shared so that "the cursor
 * moves only on admission" means the same thing in every lane.
 */

/** First target at or after `cursor` (wrapping) that is not excluded and, if given, whose index `usable` accepts. */
export function pickFromCursor(targets: readonly bigint[], cursor: number, excluded: ReadonlySet<bigint>, usable?: (index: number) => boolean): bigint | undefined {
  for (let i = 0; i < targets.length; i += 1) {
    const index = (cursor + i) % targets.length;
    const t = targets[index]!;
    if (!excluded.has(t) && (usable === undefined || usable(index))) return t;
  }
  return undefined;
}

/** Up to `count` targets from `cursor` (wrapping, each once) that are not excluded and that `usable` accepts, in cursor order. */
export function pickGroupFromCursor(targets: readonly bigint[], cursor: number, excluded: ReadonlySet<bigint>, count: number, usable?: (target: bigint) => boolean): bigint[] {
  const picked: bigint[] = [];
  for (let i = 0; i < targets.length && picked.length < count; i += 1) {
    const t = targets[(cursor + i) % targets.length]!;
    if (!excluded.has(t) && (usable === undefined || usable(t))) picked.push(t);
  }
  return picked;
}

/**
 * Commit-time cursor move: just past the target that was dispatched, so the next proposal starts
 * with the following one. A target no longer in the list (pruned meanwhile) leaves the cursor.
 */
export function cursorPast(targets: readonly bigint[], cursor: number, dispatched: bigint): number {
  const index = targets.indexOf(dispatched);
  return index >= 0 ? (index + 1) % targets.length : cursor;
}

/** Drops the oldest entries (Map insertion order; callers re-insert on use) beyond `max`. */
export function evictOldest<K, V>(map: Map<K, V>, max: number): void {
  while (map.size > max) map.delete(map.keys().next().value as K);
}
