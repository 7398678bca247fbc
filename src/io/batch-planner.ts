/**
 * Picks the requests that may share one group commit. Two requests that touch a common record
 * must not share a batch: the second must observe the first's published result (e.g. a release
 * after a claim of the same group), so it waits for the next batch, keeping its queue position.
 * Requests behind it that touch nothing in the batch may still join (no head-of-line blocking),
 * but never one that overlaps a request which was held back — that would reorder two requests on
 * the same record.
 */
export function createBatchAdmitter<T>(keysOf: (item: T) => readonly string[], maxItems: number): (item: T) => boolean {
  const inBatch = new Set<string>();
  const heldBack = new Set<string>();
  let count = 0;
  return (item) => {
    const keys = keysOf(item);
    const blocked = count >= maxItems || keys.some((key) => inBatch.has(key) || heldBack.has(key));
    if (blocked) {
      for (const key of keys) heldBack.add(key);
      return false;
    }
    for (const key of keys) inBatch.add(key);
    count += 1;
    return true;
  };
}
