import { describe, expect, it } from 'vitest';
import { StderrCapture, parseSolvingTimeUs } from '../../src/solver/stderr-capture.js';

describe('StderrCapture', () => {
  it('takes the solver time from the last [STAT] SMT line that carries solving_time', () => {
    const capture = new StderrCapture(4096);
    capture.push(Buffer.from('[STAT] SMT: { "solving_time": 10, "total_time": 20 }\n[STAT] SMT: { "total_time": 99 }\n'));
    capture.push(Buffer.from('[STAT] SMT: { "solving_t'));
    capture.push(Buffer.from('ime": 30 }\n[INFO] New testcase: /tmp/out/000000\n'));
    capture.end();
    expect(capture.solvingTimeUs).toBe(30);
    expect(capture.newTestcaseLines).toBe(1);
  });

  it('finds the stat line even after it scrolled out of the bounded tail', () => {
    const capture = new StderrCapture(1024);
    capture.push(Buffer.from('[STAT] SMT: { "solving_time": 5 }\n'));
    for (let i = 0; i < 100; i++) capture.push(Buffer.from(`noise ${i} ${'x'.repeat(50)}\n`));
    capture.end();
    expect(capture.solvingTimeUs).toBe(5);
    expect(capture.truncated).toBe(true);
    expect(Buffer.byteLength(capture.tail)).toBeLessThanOrEqual(1024);
    expect(capture.tail.endsWith('noise 99 ' + 'x'.repeat(50) + '\n')).toBe(true);
  });

  it('skips an overlong line without buffering it and keeps parsing after it', () => {
    const capture = new StderrCapture(1024);
    capture.push(Buffer.from('[STAT] SMT: { "solving_time": 1 ' + ' '.repeat(40_000)));
    capture.push(Buffer.from('}\n[STAT] SMT: { "solving_time": 2 }\n'));
    capture.end();
    expect(capture.solvingTimeUs).toBe(2);
  });

  it('handles a last line without a newline', () => {
    const capture = new StderrCapture(1024);
    capture.push(Buffer.from('[STAT] SMT: { "solving_time": 8 }'));
    capture.end();
    expect(capture.solvingTimeUs).toBe(8);
  });

  it('rejects non-numeric, negative and malformed solving times', () => {
    expect(parseSolvingTimeUs('{ "solving_time": "12" }')).toBeNull();
    expect(parseSolvingTimeUs('{ "solving_time": -1 }')).toBeNull();
    expect(parseSolvingTimeUs('not json')).toBeNull();
    expect(parseSolvingTimeUs('null')).toBeNull();
  });
});
