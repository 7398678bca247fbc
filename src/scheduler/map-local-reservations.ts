/**
 * A plain-Map `LocalReservations` for single-threaded use: tests, benches, and embedding without
 * the SharedArrayBuffer mirror. Same contract as `InflightTargetSet`: whole-group all-or-nothing,
 * release only removes members still held by the releasing owner.
 */
import type { LocalReservations } from './admission-ports.js';

export class MapLocalReservations implements LocalReservations {
  readonly #owners = new Map<bigint, number>();

  /** Reserves every member for `owner`, or nothing when any member is held (by anyone). */
  tryReserveGroup(targets: readonly bigint[], owner: number): boolean {
    for (const t of targets) if (this.#owners.has(t)) return false;
    for (const t of targets) this.#owners.set(t, owner);
    return true;
  }

  /** Releases the members held by `owner`; returns how many were released. */
  releaseGroup(targets: readonly bigint[], owner: number): number {
    let released = 0;
    for (const t of targets) {
      if (this.#owners.get(t) === owner) {
        this.#owners.delete(t);
        released += 1;
      }
    }
    return released;
  }

  has(target: bigint): boolean {
    return this.#owners.has(target);
  }

  ownerOf(target: bigint): number | undefined {
    return this.#owners.get(target);
  }

  /** Snapshot of reserved targets (for tests and diagnostics). */
  reserved(): ReadonlyMap<bigint, number> {
    return new Map(this.#owners);
  }
}
