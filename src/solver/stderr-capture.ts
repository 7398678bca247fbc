/**
 * Bounded capture of a solver's stderr. SymCC can be chatty (one line per query); we keep only a
 * tail of `capBytes` for diagnostics, but scan every complete line as it streams past so the last
 * `[STAT] SMT:` line is found even when it scrolled out of the tail. A single line longer than the
 * line cap is skipped, not buffered.
 */

const STAT_PREFIX = '[STAT] SMT:';
const NEW_TESTCASE_PREFIX = '[INFO] New testcase:';
const MAX_LINE_BYTES = 16 * 1024;

export class StderrCapture {
  readonly #capBytes: number;
  #chunks: Buffer[] = [];
  #bufferedBytes = 0;
  #truncated = false;
  #partial = '';
  #skippingLongLine = false;
  #lastSolvingTimeUs: number | null = null;
  #newTestcaseLines = 0;

  constructor(capBytes: number) {
    this.#capBytes = capBytes;
  }

  push(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#bufferedBytes += chunk.length;
    while (this.#bufferedBytes - (this.#chunks[0]?.length ?? 0) >= this.#capBytes && this.#chunks.length > 1) {
      this.#bufferedBytes -= this.#chunks.shift()!.length;
      this.#truncated = true;
    }
    this.#scanLines(chunk.toString('latin1'));
  }

  /** Flushes the last unterminated line. */
  end(): void {
    if (this.#partial.length > 0 && !this.#skippingLongLine) this.#scanLine(this.#partial);
    this.#partial = '';
  }

  get tail(): string {
    const all = Buffer.concat(this.#chunks);
    if (all.length <= this.#capBytes) return all.toString('utf8');
    return all.subarray(all.length - this.#capBytes).toString('utf8');
  }

  get truncated(): boolean {
    return this.#truncated || this.#bufferedBytes > this.#capBytes;
  }

  /** Cumulative solver time from the last `[STAT] SMT:` line carrying `solving_time`, in µs. */
  get solvingTimeUs(): number | null {
    return this.#lastSolvingTimeUs;
  }

  get newTestcaseLines(): number {
    return this.#newTestcaseLines;
  }

  #scanLines(text: string): void {
    let start = 0;
    for (;;) {
      const newline = text.indexOf('\n', start);
      if (newline < 0) break;
      const piece = text.slice(start, newline);
      if (!this.#skippingLongLine) this.#scanLine(this.#partial + piece);
      this.#partial = '';
      this.#skippingLongLine = false;
      start = newline + 1;
    }
    if (this.#skippingLongLine) return;
    this.#partial += text.slice(start);
    if (this.#partial.length > MAX_LINE_BYTES) {
      this.#partial = '';
      this.#skippingLongLine = true;
    }
  }

  #scanLine(line: string): void {
    if (line.startsWith(NEW_TESTCASE_PREFIX)) {
      this.#newTestcaseLines += 1;
      return;
    }
    if (!line.startsWith(STAT_PREFIX)) return;
    const value = parseSolvingTimeUs(line.slice(STAT_PREFIX.length));
    if (value !== null) this.#lastSolvingTimeUs = value;
  }
}

/** `{ "solving_time": 123, "total_time": 456 }` → 123; anything else → null. */
export function parseSolvingTimeUs(jsonText: string): number | null {
  try {
    const parsed: unknown = JSON.parse(jsonText);
    if (typeof parsed !== 'object' || parsed === null) return null;
    const value = (parsed as { solving_time?: unknown }).solving_time;
    return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
  } catch {
    return null;
  }
}
