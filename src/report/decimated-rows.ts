/**
 * Numeric rows of a fixed width kept in bounded memory while they stream past: at most
 * `2 × target` evenly spaced rows (the first included) plus the last row, which always ends the
 * series (docs/report.md "Large files"), stored in one preallocated `Float64Array`, so streaming
 * millions of rows allocates nothing per row.
 *
 * Row i is kept when i is a multiple of the stride. When the kept rows reach `2 × target`, every
 * other one is dropped and the stride doubles, so the kept rows stay evenly spaced over the whole
 * series. Time: O(1) per row amortised.
 *
 * Why not objects: every row a series keeps survives the young-generation collections until it is
 * promoted, and V8 grows the young generation to its maximum (tens of MB of RSS) once enough bytes
 * have survived, however few rows are live at any moment. Rows copied into one typed array survive
 * nothing.
 *
 * Use: parse a row straight into `data` at `nextOffset()`, then `commit()` it; a line that turns
 * out not to be a row is simply not committed (the slot is reused). Layout: `2 × target` kept
 * rows, then two spare rows that hold the last row when it is not a kept one (one of them is always
 * free, so writing the next row never overwrites the last committed one).
 */
export class DecimatedRows {
  readonly target: number;
  readonly width: number;
  readonly data: Float64Array;
  #kept = 0;
  #stride = 1;
  #count = 0;
  /** Row index (in `data`) of the last committed row; -1 before the first. */
  #last = -1;

  constructor(target: number, width: number) {
    if (!Number.isInteger(target) || target < 2) throw new RangeError(`target must be an integer of at least 2, got ${target}`);
    if (!Number.isInteger(width) || width < 1) throw new RangeError(`width must be a positive integer, got ${width}`);
    this.target = target;
    this.width = width;
    this.data = new Float64Array((2 * target + 2) * width).fill(Number.NaN);
  }

  /** Rows committed so far. */
  get count(): number {
    return this.#count;
  }

  /** Where in `data` the next row is to be written (`width` numbers from there). */
  nextOffset(): number {
    return this.#nextSlot() * this.width;
  }

  #nextSlot(): number {
    if (this.#count % this.#stride === 0) return this.#kept;
    const spare = 2 * this.target;
    return this.#last === spare ? spare + 1 : spare;
  }

  /** The row written at `nextOffset()` is complete: count it (and keep it if its index is on the stride). */
  commit(): void {
    const slot = this.#nextSlot();
    this.#count++;
    this.#last = slot;
    if (slot >= 2 * this.target) return;
    this.#kept++;
    if (this.#kept < 2 * this.target) return;
    // Full: keep every other row and double the stride. The newest kept row sits at an odd
    // position, so it is dropped from the kept rows; it stays the last row in a spare.
    const { data, width } = this;
    const spare = 2 * this.target;
    data.copyWithin(spare * width, slot * width, (slot + 1) * width);
    this.#last = spare;
    for (let i = 1; i < this.target; i++) data.copyWithin(i * width, 2 * i * width, (2 * i + 1) * width);
    this.#kept = this.target;
    this.#stride *= 2;
  }

  /** Offsets in `data` of the rows in order: the kept rows, ending with the last committed row. */
  offsets(): number[] {
    if (this.#last < 0) return [];
    const out = Array.from({ length: this.#kept }, (_, i) => i * this.width);
    if (this.#last >= 2 * this.target) out.push(this.#last * this.width);
    return out;
  }
}
