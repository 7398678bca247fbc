/** The target ledger in the saved lane state: what a restarted campaign still knows it answered. */
import { describe, expect, it } from 'vitest';
import { TargetLedger } from '../../src/scheduler/target-ledger.js';
import { normalizeJob } from '../../src/scheduler/replay-job.js';
import type { SymfenceError } from '../../src/errors.js';
import { scheduler, tel } from './scheduler-fixtures.js';

function thrown(fn: () => unknown): SymfenceError {
  try {
    fn();
  } catch (error) {
    return error as SymfenceError;
  }
  throw new Error('expected an error');
}

/** A ledger that settled (a, 10), backs (a, 11) off from t = 1 000 and gave (b, 12) one attempt. */
function learned(): TargetLedger {
  const ledger = new TargetLedger({ retryBaseMs: 30_000, maxAttempts: 3 });
  ledger.record(normalizeJob({ seed: 'a', targetBranch: 10 }), [10n], tel({ target: 10, reached: true, status: 'sat' }), false, 0);
  ledger.record(normalizeJob({ seed: 'a', targetBranch: 11 }), [11n], tel({ target: 11, reached: true, status: 'unknown' }), false, 1_000);
  ledger.record(normalizeJob({ seed: 'b', targetBranch: 12 }), [12n], tel({ target: 12, reached: true, status: 'unknown' }), false, 2_000);
  return ledger;
}

describe('target ledger state', () => {
  it('makes a branch answered on some input when a pair given up first is answered later', () => {
    const x = 'a'.repeat(64);
    const ledger = new TargetLedger({ maxAttempts: 1 });
    ledger.record({ seed: x, targetBranch: 7n, actions: [] }, [7n], null, true, 0);
    expect([ledger.isSettled(x, 7n), ledger.answered(7n)]).toEqual([true, false]);
    // An untargeted run (or an adopted trace) on the same input answers it afterwards.
    ledger.noteAnswered(x, [7n]);
    expect(ledger.answered(7n)).toBe(true);
    expect(ledger.stats().settledPairs).toBe(1);
  });

  it('keeps settled pairs, back-offs (as time left, on a new clock), answered branches and the eviction order across toJSON and restore', () => {
    const saved = learned().toJSON(5_000);
    expect(saved).toEqual({
      schema: 1,
      seeds: ['a', 'b'],
      pairs: [
        [0, '10', 0, 0],
        [0, '11', 1, 26_000],
        [1, '12', 1, 27_000],
      ],
      answered: ['10'],
    });
    // A restarted process: its monotonic clock starts near zero.
    const restored = new TargetLedger({ retryBaseMs: 30_000, maxAttempts: 3 });
    restored.restore(JSON.parse(JSON.stringify(saved)), 100);
    expect(restored.isSettled('a', 10n)).toBe(true);
    expect(restored.allowed('a', 10n, 1e12)).toBe(false);
    expect(restored.allowed('a', 11n, 26_099)).toBe(false);
    expect(restored.allowed('a', 11n, 26_100)).toBe(true);
    expect(restored.answered(10n)).toBe(true);
    expect(restored.stats()).toMatchObject({ settledPairs: 1, retryingPairs: 2, answeredBranches: 1 });
    expect(restored.toJSON(100)).toEqual(saved);
    // The attempt count survives: two more open runs give (a, 11) up.
    restored.record(normalizeJob({ seed: 'a', targetBranch: 11 }), [11n], null, false, 30_000);
    expect(restored.isSettled('a', 11n)).toBe(false);
    restored.record(normalizeJob({ seed: 'a', targetBranch: 11 }), [11n], null, false, 100_000);
    expect(restored.isSettled('a', 11n)).toBe(true);
  });

  it('keeps the newest pairs when the saved ledger is larger than this one may hold', () => {
    const big = new TargetLedger({ maxPairs: 2048 });
    for (let i = 1; i <= 2048; i++) big.noteAnswered('s', [BigInt(i)]);
    const small = new TargetLedger({ maxPairs: 1024, maxAnswered: 1024 });
    small.restore(big.toJSON(0), 0);
    expect(small.stats()).toMatchObject({ settledPairs: 1024, answeredBranches: 1024 });
    expect(small.isSettled('s', 1024n)).toBe(false);
    expect(small.isSettled('s', 1025n)).toBe(true);
  });

  it('writes a fractional back-off as whole ms, reads what it wrote, and keeps a seed that holds a NUL', () => {
    const ledger = new TargetLedger({ retryBaseMs: 1.5 });
    ledger.record(normalizeJob({ seed: 'odd\u0000seed', targetBranch: 7 }), [7n], null, false, 0.25);
    const saved = ledger.toJSON(0.5) as { pairs: unknown[] };
    expect(saved.pairs).toEqual([[0, '7', 1, 2]]);
    const restored = new TargetLedger({ retryBaseMs: 1.5 });
    restored.restore(JSON.parse(JSON.stringify(saved)), 0);
    expect(restored.allowed('odd\u0000seed', 7n, 1.9)).toBe(false);
    expect(restored.allowed('odd\u0000seed', 7n, 2)).toBe(true);
  });

  it('keeps digest seeds and 64-bit ids (held packed) apart from every other seed and id, across toJSON and restore', () => {
    const digest = 'ab'.repeat(32);
    const max = (1n << 64n) - 1n;
    const ledger = new TargetLedger();
    ledger.noteAnswered(digest, [1n, max, 0n]);
    // Not packed: upper-case hex is another seed; a short or non-hex name.
    ledger.noteAnswered(digest.toUpperCase(), [2n]);
    ledger.noteAnswered('ab', [3n]);
    ledger.noteAnswered(`${'z'.repeat(63)}\u0000`, [4n]);
    const pairs: [string, bigint][] = [
      [digest, 1n],
      [digest, max],
      [digest, 0n],
      [digest.toUpperCase(), 2n],
      ['ab', 3n],
      [`${'z'.repeat(63)}\u0000`, 4n],
    ];
    for (const [seed, branch] of pairs) expect(ledger.isSettled(seed, branch)).toBe(true);
    expect(ledger.isSettled(digest, 2n)).toBe(false);
    expect(ledger.isSettled(digest.toUpperCase(), 1n)).toBe(false);
    expect(ledger.isSettled('cd'.repeat(32), 1n)).toBe(false);
    const saved = ledger.toJSON(0);
    expect(saved).toEqual({
      schema: 1,
      seeds: [digest, digest.toUpperCase(), 'ab', `${'z'.repeat(63)}\u0000`],
      pairs: [
        [0, '1', 0, 0],
        [0, String(max), 0, 0],
        [0, '0', 0, 0],
        [1, '2', 0, 0],
        [2, '3', 0, 0],
        [3, '4', 0, 0],
      ],
      answered: ['1', String(max), '0', '2', '3', '4'],
    });
    const restored = new TargetLedger();
    restored.restore(JSON.parse(JSON.stringify(saved)), 0);
    for (const [seed, branch] of pairs) expect(restored.isSettled(seed, branch)).toBe(true);
    expect(restored.toJSON(0)).toEqual(saved);
  });

  it('counts a pair given twice once (the later row wins) and gives up a pair saved with more attempts than it allows', () => {
    const ledger = new TargetLedger({ maxAttempts: 2 });
    ledger.restore({ schema: 1, seeds: ['a'], pairs: [[0, '1', 0, 0], [0, '1', 0, 0], [0, '2', 1, 5], [0, '2', 0, 0], [0, '3', 4, 100]], answered: ['1', '1'] }, 0);
    expect(ledger.stats()).toMatchObject({ settledPairs: 3, retryingPairs: 0, answeredBranches: 1 });
    expect(ledger.isSettled('a', 3n)).toBe(true);
  });

  it.each([
    ['not an object', 7, 'ledger'],
    ['another schema', { schema: 2, seeds: [], pairs: [], answered: [] }, 'ledger.schema'],
    ['a seed index out of range', { schema: 1, seeds: ['a'], pairs: [[1, '5', 0, 0]], answered: [] }, 'ledger.pairs[0][0]'],
    ['a branch that is not a u64', { schema: 1, seeds: ['a'], pairs: [[0, '-5', 0, 0]], answered: [] }, 'ledger.pairs[0][1]'],
    ['a negative retry delay', { schema: 1, seeds: ['a'], pairs: [[0, '5', 1, -1]], answered: [] }, 'ledger.pairs[0][3]'],
    ['a short row', { schema: 1, seeds: ['a'], pairs: [[0, '5', 0]], answered: [] }, 'ledger.pairs[0]'],
    ['a bad answered branch', { schema: 1, seeds: [], pairs: [], answered: ['x'] }, 'ledger.answered[0]'],
  ])('refuses %s with ERR_LANE_STATE naming the field, and changes nothing', (_name, document, field) => {
    const ledger = learned();
    const before = ledger.toJSON(5_000);
    const error = thrown(() => ledger.restore(document, 5_000));
    expect(error.code).toBe('ERR_LANE_STATE');
    expect(error.details).toMatchObject({ path: field });
    expect(ledger.toJSON(5_000)).toEqual(before);
  });

  it('is part of the scheduler state: a restored scheduler does not ask a pair the saved one had settled', async () => {
    const open = { seed: 'a', telemetry: tel({ open: [456, 789] }), reward: 0.6 };
    const first = scheduler(['a'], { lanes: 'fallback' }).s;
    first.observe(open, 0);
    first.observe({ seed: 'a', job: normalizeJob({ seed: 'a', targetBranch: 456 }), telemetry: tel({ target: 456, reached: true, status: 'unsat' }), reward: 0 }, 1);
    const saved = JSON.parse(JSON.stringify(first.toJSON(2))) as { ledger: unknown };
    expect(saved.ledger).toMatchObject({ pairs: [[0, '456', 0, 0]] });

    // Fresh schedulers that learn the same open branches; only the one given the saved ledger skips 456.
    const ledgerOnly = { schema: 'symfence-scheduler-state/1', lanes: {}, ledger: saved.ledger };
    const restored = scheduler(['a'], { lanes: 'fallback' }).s;
    restored.restore(ledgerOnly, 0);
    restored.observe(open, 0);
    const without = scheduler(['a'], { lanes: 'fallback' }).s;
    without.observe(open, 0);
    expect((await without.admit(1, 10)).map((a) => a.job.targetBranch)).toEqual([456n]);
    expect((await restored.admit(1, 10)).map((a) => a.job.targetBranch)).toEqual([789n]);
  });

  it('restores nothing, lanes included, when the ledger part is malformed', () => {
    const { s } = scheduler(['a'], { lanes: 'fallback' });
    s.observe({ seed: 'a', telemetry: tel({ open: [3] }), reward: 0.5 }, 0);
    const before = s.toJSON(1_000);
    const other = scheduler(['a'], { lanes: 'fallback' }).s;
    other.observe({ seed: 'a', telemetry: tel({ open: [4, 5] }), reward: 0.9 }, 0);
    const document = { ...(other.toJSON(1_000) as object), ledger: { schema: 1, seeds: [], pairs: [[0, '1', 0, 0]], answered: [] } };
    expect(thrown(() => s.restore(document, 1_000)).code).toBe('ERR_LANE_STATE');
    expect(s.toJSON(1_000)).toEqual(before);
  });
});
