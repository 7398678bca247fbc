/**
 * A time series kept in bounded memory while it streams past: at most `2 × target` evenly spaced
 * rows, whatever the number of rows (docs/report.md "Large files").
 *
 * Row i is kept when i is a multiple of the stride. When the kept rows reach `2 × target`, every
 * other one is dropped and the stride doubles, so the kept rows stay evenly spaced over the whole
 * series (the first row included). The last row seen is kept apart and always ends the series, so
 * a chart reaches the campaign's latest sample. Memory: `2 × target + 1` rows; time: O(1) per row
 * amortised.
 */
export class DecimatedSeries<T> {
  readonly target: number;
  #kept: T[] = [];
  #stride = 1;
  #count = 0;
  #last: T | undefined;
  #lastKept = false;

  constructor(target: number) {
    if (!Number.isInteger(target) || target < 2) throw new RangeError(`target must be an integer of at least 2, got ${target}`);
    this.target = target;
  }

  /** Rows offered so far. */
  get count(): number {
    return this.#count;
  }

  push(row: T): void {
    const index = this.#count++;
    this.#last = row;
    this.#lastKept = index % this.#stride === 0;
    if (!this.#lastKept) return;
    this.#kept.push(row);
    if (this.#kept.length >= 2 * this.target) {
      this.#kept = this.#kept.filter((_, i) => i % 2 === 0);
      this.#stride *= 2;
      // The newest kept row sat at an odd position when the count was even: it may be gone now.
      this.#lastKept = (this.#count - 1) % this.#stride === 0;
    }
  }

  /** The kept rows in order, ending with the last row offered. */
  rows(): T[] {
    if (this.#last === undefined) return [];
    return this.#lastKept ? [...this.#kept] : [...this.#kept, this.#last];
  }
}
