/**
 * The live progress line: one carriage-return-rewritten line on an interactive terminal, nothing
 * at all otherwise (logs and redirected output must not fill with progress noise).
 */
import { formatDuration } from '../config/schema.js';
import { jobsCompleted, type CampaignCounters } from './counters.js';

export function formatProgressLine(elapsedMs: number, c: Readonly<CampaignCounters>, workers: number): string {
  const elapsed = formatDuration(Math.floor(elapsedMs / 1000) * 1000);
  return (
    `[symfence ${elapsed}] jobs ${jobsCompleted(c)}/${c.jobsStarted} · busy ${Math.round(c.fillRatio * workers)}/${workers}` +
    ` · interesting ${c.interesting} · crashes ${c.crashes} · hangs ${c.hangs}` +
    ` · conflicts ${c.conflicts} · stale ${c.staleResults} · edges ${c.edgesCovered}`
  );
}

export interface ProgressStream {
  readonly isTTY?: boolean;
  write(text: string): unknown;
}

export class ProgressLine {
  readonly #stream: ProgressStream;
  #width = 0;

  constructor(stream: ProgressStream) {
    this.#stream = stream;
  }

  get enabled(): boolean {
    return this.#stream.isTTY === true;
  }

  update(line: string): void {
    if (!this.enabled) return;
    const padded = line.padEnd(this.#width);
    this.#width = line.length;
    this.#stream.write(`\r${padded}`);
  }

  /** Ends the line so later output starts on a fresh one. */
  finish(): void {
    if (!this.enabled || this.#width === 0) return;
    this.#stream.write('\n');
    this.#width = 0;
  }
}
