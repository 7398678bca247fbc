import { describe, expect, it } from 'vitest';
import { createCounters } from '../../src/telemetry/counters.js';
import { formatProgressLine, ProgressLine } from '../../src/telemetry/progress-line.js';

describe('progress line', () => {
  it('writes nothing when the stream is not a TTY', () => {
    const written: string[] = [];
    const line = new ProgressLine({ isTTY: false, write: (t: string) => written.push(t) });
    line.update('hello');
    line.finish();
    expect(written).toEqual([]);
  });

  it('rewrites one line on a TTY, padding over a longer previous line, and ends it on finish', () => {
    const written: string[] = [];
    const line = new ProgressLine({ isTTY: true, write: (t: string) => written.push(t) });
    line.update('long line');
    line.update('short');
    line.finish();
    expect(written).toEqual(['\rlong line', '\rshort    ', '\n']);
  });

  it('shows completed over started jobs, busy slots and findings', () => {
    const c = { ...createCounters(), jobsStarted: 5, jobsOk: 3, jobsCrash: 1, interesting: 7, fillRatio: 0.5 };
    expect(formatProgressLine(61_500, c, 4)).toBe(
      '[symfence 61s] jobs 4/5 · busy 2/4 · interesting 7 · crashes 0 · hangs 0 · conflicts 0 · stale 0 · edges 0',
    );
  });
});
