import { describe, expect, it } from 'vitest';
import { AnswerEntry, AnswersView, NO_ANSWER, VersionedAnswers, generationOf, inputKey, nextGeneration, type AnswerGeneration } from '../../src/lease/answers-view.js';
import { answerGenerationRecordId, answerRecordId, targetRecordId } from '../../src/lease/identity.js';
import { MAX_GENERATION_CHANGES, parseRecordText, serializeRecord, type LeaseRecord, type RecordRead } from '../../src/lease/lease-record.js';

const WRITER = { owner: 'c', token: 'c:0:1:abc', worker: 0, nowMs: 1000 };
const NONE = generationOf({ state: 'absent' })!;
const input = (n: number): string => n.toString(16).padStart(64, '0');

/** An answer record of `target` settled on `inputs`. */
function answerRecord(target: bigint, inputs: readonly string[]): RecordRead {
  return {
    state: 'valid',
    record: { answered: true, attempts: 0, completedMs: 1, id: answerRecordId(target), kind: 'target', owner: 'c', payload: {}, previousOwner: '', role: 'answers', schema: 1, settled: inputs, status: 'done', steals: 0, target: String(target), token: 't', updatedMs: 1, worker: 0 } as LeaseRecord,
  };
}

/** The generation after a release wrote `targets` on top of `previous`, as a store would read it back. */
function bump(previous: AnswerGeneration, targets: readonly bigint[]): AnswerGeneration {
  const record = nextGeneration(previous, targets, WRITER);
  // What a writer stores, a reader accepts.
  const read = parseRecordText(serializeRecord(record).toString('utf8'), answerGenerationRecordId(), 'target');
  expect(read.state).toBe('valid');
  return generationOf(read)!;
}

describe('answer generation record', () => {
  it('starts an epoch at generation 1, then counts one generation per release and lists each target once, at its newest write', () => {
    const first = bump(NONE, [5n, 6n]);
    expect(first).toMatchObject({ generation: 1, since: 0, changed: [[1, '5'], [1, '6']] });
    expect(first.epoch).toMatch(/^[0-9a-f]{16}$/);
    const second = bump(first, [6n, 7n]);
    expect(second).toEqual({ epoch: first.epoch, generation: 2, since: 0, changed: [[1, '5'], [2, '6'], [2, '7']] });
    // Another epoch each time the record is written afresh.
    expect(bump(NONE, [5n]).epoch).not.toBe(first.epoch);
  });

  it('keeps the newest writes within the bound, whole generations at a time, and moves since past the rest', () => {
    let g = NONE;
    for (let i = 0; i < MAX_GENERATION_CHANGES / 2; i += 1) g = bump(g, [BigInt(2 * i + 1), BigInt(2 * i + 2)]);
    expect(g.changed).toHaveLength(MAX_GENERATION_CHANGES);
    expect(g.since).toBe(0);
    // Three more targets in one release: one list entry too many drops the oldest two generations' entries.
    g = bump(g, [1001n, 1002n, 1003n]);
    expect(g.since).toBe(2);
    expect(g.changed).toHaveLength(MAX_GENERATION_CHANGES - 4 + 3);
    expect(g.changed.every(([at]) => at > g.since)).toBe(true);
    expect(g.changed.at(-1)).toEqual([g.generation, '1003']);
  });

  it('is refused by the reader when its fields disagree', () => {
    const good = nextGeneration(NONE, [5n], WRITER);
    const problem = (patch: Record<string, unknown>, id = answerGenerationRecordId()): string | undefined => {
      const read = parseRecordText(JSON.stringify({ ...good, ...patch }), id, 'target');
      return read.state === 'corrupt' ? read.reason : undefined;
    };
    expect(problem({})).toBeUndefined();
    expect(problem({ id: answerRecordId(5n) }, answerRecordId(5n))).toMatch(/not the answer generation record/);
    expect(problem({ status: 'leased' })).toMatch(/not done/);
    expect(problem({ target: '5' })).toMatch(/names targets/);
    expect(problem({ settled: [input(1)], answered: true })).toMatch(/carries answers/);
    expect(problem({ epoch: 'XYZ' })).toMatch(/epoch/);
    expect(problem({ generation: 0 })).toMatch(/generation/);
    expect(problem({ since: 1 })).toMatch(/since/);
    expect(problem({ changed: [[1, '5'], [1, '5']] })).toMatch(/twice/);
    expect(problem({ changed: [[2, '5']] })).toMatch(/outside/);
    expect(problem({ generation: 3, changed: [[3, '5'], [2, '6']] })).toMatch(/out of order/);
    expect(problem({ changed: [[1, '05']] })).toMatch(/decimal target/);
    expect(problem({ changed: Array.from({ length: MAX_GENERATION_CHANGES + 1 }, (_, i) => [1, String(i + 1)]) })).toMatch(/at most/);
  });
});

describe('AnswersView', () => {
  it('holds what it learnt at its generation, and drops exactly the targets written since when it moves on', () => {
    const view = new AnswersView();
    const g1 = bump(NONE, [1n]);
    view.advance(g1);
    expect(view.at(g1)).toBe(true);
    view.learn(g1, 1n, answerRecord(1n, [input(1)]));
    view.learn(g1, 2n, { state: 'absent' });
    view.learn(g1, 3n, { state: 'absent' });
    const g2 = bump(g1, [2n]);
    // Learnt at an older generation: ignored.
    view.advance(g2);
    view.learn(g1, 4n, { state: 'absent' });
    expect(view.lookup(4n)).toBeUndefined();
    expect(view.lookup(2n)).toBeUndefined();
    expect(view.lookup(1n)?.read).toEqual(answerRecord(1n, [input(1)]));
    expect(view.lookup(3n)?.read).toEqual({ state: 'absent' });
    // An older generation read by a slower batch changes nothing.
    view.advance(g1);
    expect(view.at(g2)).toBe(true);
    expect(view.lookup(3n)).toBeDefined();
  });

  it('starts over on another epoch and when the store has moved on further than the record lists', () => {
    const view = new AnswersView();
    let g = bump(NONE, [1n]);
    view.advance(g);
    view.learn(g, 9n, { state: 'absent' });
    const other = bump(NONE, [1n]);
    view.advance(other);
    expect(view.lookup(9n)).toBeUndefined();
    view.learn(other, 9n, { state: 'absent' });
    // Far enough ahead that the list no longer reaches the view's generation.
    g = other;
    for (let i = 0; i < MAX_GENERATION_CHANGES + 1; i += 1) g = bump(g, [BigInt(100 + i)]);
    expect(g.since).toBeGreaterThan(other.generation);
    view.advance(g);
    expect(view.lookup(9n)).toBeUndefined();
    expect(view.at(g)).toBe(true);
  });

  it('keeps at most its capacity, the least recently learnt going first, and never a corrupt read', () => {
    const view = new AnswersView(2);
    view.advance(NONE);
    view.learn(NONE, 1n, { state: 'absent' });
    view.learn(NONE, 2n, { state: 'absent' });
    view.learn(NONE, 3n, { state: 'absent' });
    view.learn(NONE, 4n, { state: 'corrupt', reason: 'x' });
    expect([view.lookup(1n), view.lookup(2n), view.lookup(3n), view.lookup(4n)].map((e) => e !== undefined)).toEqual([false, true, true, false]);
    expect(view.size).toBe(2);
  });

  it('finds a settled input by its key first, and only the input itself', () => {
    const settled = [input(0x10), input(0x20), 'f'.repeat(63) + '0', input(0x30)];
    const entry = new AnswerEntry(answerRecord(1n, settled) as RecordRead & { state: 'valid' });
    for (const s of settled) expect(entry.settles(s, inputKey(s))).toBe(true);
    // Same first 32 bits, another input.
    const twin = 'f'.repeat(63) + '1';
    expect(inputKey(twin)).toBe(inputKey(settled[2]!));
    expect(entry.settles(twin, inputKey(twin))).toBe(false);
    expect(inputKey('ffffffff' + '0'.repeat(56))).toBe(0xffffffff);
    expect(inputKey('0123abcd' + '0'.repeat(56))).toBe(0x0123abcd);
    expect(new AnswerEntry({ state: 'absent' }).settles(input(1), inputKey(input(1)))).toBe(false);
  });

  it('finds each of 64 settled inputs, in any order, and none between them', () => {
    // Inputs whose first 32 bits differ: the search by halves, not the list, decides.
    const leading = (n: number): string => n.toString(16).padStart(8, '0').repeat(8);
    const settled = Array.from({ length: 64 }, (_, i) => leading(((i * 37) % 64) * 2 + 2));
    const entry = new AnswerEntry(answerRecord(1n, settled) as RecordRead & { state: 'valid' });
    for (const s of settled) expect(entry.settles(s, inputKey(s))).toBe(true);
    for (const n of [0, 1, 3, 65, 129, 200, 0xffffffff]) expect(entry.settles(leading(n), inputKey(leading(n)))).toBe(false);
  });

  it('keeps the version of the record it holds, 0 for none', () => {
    expect(new AnswerEntry({ state: 'valid', record: { ...answerRecord(1n, [input(1)]).record, version: 7 } } as RecordRead & { state: 'valid' }).version).toBe(7);
    expect(new AnswerEntry({ state: 'absent' }).version).toBe(0);
  });
});

describe('AnswersView, complete', () => {
  /** What a scan lists for an answer record of `target`: its id and the target it names. */
  const listedOf = (target: bigint): readonly [string, unknown] => [answerRecordId(target), target.toString(10)];

  it('answers NO_ANSWER for a branch the scan did not list, and asks for a read of every branch it did, by target or by id', () => {
    const view = new AnswersView();
    const g = bump(NONE, [1n]);
    expect(view.isComplete).toBe(false);
    expect(view.lookup(50n)).toBeUndefined();
    // Listed: 1 by its target; 2 by id only (the file store's names); 3's record names another
    // target (4), so it is kept by id and 4 is not trusted; the generation record is no answer record.
    view.complete(g, [listedOf(1n), [answerRecordId(2n), undefined], [answerRecordId(3n), '4'], [answerGenerationRecordId(), undefined]]);
    expect(view.isComplete).toBe(true);
    expect(view.lookup(1n)).toBeUndefined();
    expect(view.lookup(2n)).toBeUndefined();
    expect(view.lookup(3n)).toBeUndefined();
    expect(view.lookup(4n)).toBe(NO_ANSWER);
    expect(view.lookup(50n)).toBe(NO_ANSWER);
    expect(NO_ANSWER.read).toEqual({ state: 'absent' });
    // What it learns it answers from its entries.
    view.learn(g, 1n, answerRecord(1n, [input(1)]));
    expect(view.lookup(1n)?.read).toEqual(answerRecord(1n, [input(1)]));
  });

  it('counts every branch a newer generation lists as having a record, also once its entry is evicted', () => {
    const view = new AnswersView(2);
    const g1 = bump(NONE, [1n]);
    view.complete(g1, [listedOf(1n)]);
    const g2 = bump(g1, [7n]);
    view.advance(g2);
    expect(view.lookup(7n)).toBeUndefined();
    expect(view.lookup(8n)).toBe(NO_ANSWER);
    view.learn(g2, 7n, answerRecord(7n, [input(1)]));
    view.learn(g2, 1n, answerRecord(1n, [input(1)]));
    view.learn(g2, 9n, { state: 'absent' });
    // 7's entry was evicted: read again, never taken for a branch without a record.
    expect(view.lookup(7n)).toBeUndefined();
    expect(view.lookup(9n)?.read).toEqual({ state: 'absent' });
    expect(view.isComplete).toBe(true);
  });

  it('is complete no more once it starts over, and takes no scan older than itself', () => {
    const view = new AnswersView();
    const g1 = bump(NONE, [1n]);
    view.complete(g1, []);
    expect(view.lookup(5n)).toBe(NO_ANSWER);
    let g = g1;
    for (let i = 0; i < MAX_GENERATION_CHANGES + 1; i += 1) g = bump(g, [BigInt(100 + i)]);
    view.advance(g);
    expect(view.isComplete).toBe(false);
    expect(view.lookup(5n)).toBeUndefined();
    // A scan made before the view moved on cannot make it complete.
    view.complete(g1, []);
    expect(view.isComplete).toBe(false);
    view.complete(g, []);
    expect(view.isComplete).toBe(true);
    // Another epoch: over again.
    view.advance(bump(NONE, [1n]));
    expect(view.isComplete).toBe(false);
  });

  it('gives completeness up past its bound of branches', () => {
    const view = new AnswersView(8, 3);
    const g1 = bump(NONE, [1n]);
    view.complete(g1, [listedOf(1n), listedOf(2n), listedOf(3n), listedOf(4n)]);
    expect(view.isComplete).toBe(false);
    view.complete(g1, [listedOf(1n), listedOf(2n)]);
    expect(view.isComplete).toBe(true);
    view.advance(bump(g1, [5n, 6n]));
    expect(view.isComplete).toBe(false);
    expect(view.lookup(9n)).toBeUndefined();
  });
});

describe('VersionedAnswers, complete', () => {
  it('declares no answer for a branch the store did not list, keeps what it learns, and adds the branches it learns answered', () => {
    const view = new VersionedAnswers(2);
    expect(view.lookup(1n, targetRecordId(1n))).toBeUndefined();
    view.complete(new Set([targetRecordId(1n)]));
    expect(view.isComplete).toBe(true);
    expect(view.lookup(1n, targetRecordId(1n))).toBeUndefined();
    expect(view.lookup(2n, targetRecordId(2n))).toBe(NO_ANSWER);
    view.learn(2n, targetRecordId(2n), { state: 'valid', record: { ...answerRecord(2n, [input(1)]).record, version: 3 } } as RecordRead);
    expect(view.lookup(2n, targetRecordId(2n))?.version).toBe(3);
    // Evicted, 2 is still known to have a record: read, not declared absent.
    view.learn(3n, targetRecordId(3n), { state: 'absent' });
    view.learn(4n, targetRecordId(4n), { state: 'absent' });
    expect(view.lookup(2n, targetRecordId(2n))).toBeUndefined();
    expect(view.lookup(3n, targetRecordId(3n))?.read).toEqual({ state: 'absent' });
    expect(view.lookup(4n, targetRecordId(4n))?.read).toEqual({ state: 'absent' });
  });

  it('stays incomplete when the listing is past its bound', () => {
    const view = new VersionedAnswers(8, 1);
    view.complete(new Set([targetRecordId(1n), targetRecordId(2n)]));
    expect(view.isComplete).toBe(false);
    expect(view.lookup(3n, targetRecordId(3n))).toBeUndefined();
  });
});

describe('AnswersView, complete from a scan that is not one snapshot', () => {
  const listedOf = (target: bigint): readonly [string, unknown] => [answerRecordId(target), target.toString(10)];

  it('counts every branch written from the first read of the generation on, and needs the second read to reach back that far', () => {
    let g = bump(NONE, [1n]);
    const before = bump(g, [2n]);
    // Written while the store was listed: 3, and 2 again, at generations after `before`'s.
    g = bump(bump(before, [3n]), [2n]);
    const view = new AnswersView();
    expect(view.complete(g, [listedOf(1n)], before)).toBe('complete');
    expect(view.lookup(2n)).toBeUndefined();
    expect(view.lookup(3n)).toBeUndefined();
    expect(view.lookup(1n)).toBeUndefined();
    expect(view.lookup(4n)).toBe(NO_ANSWER);
    // From no generation record: every write since must be listed (`since` 0).
    expect(new AnswersView().complete(bump(NONE, [5n]), [], NONE)).toBe('complete');
    // A second read that no longer lists what was written from the first on: behind.
    let far = before;
    for (let i = 0; i < MAX_GENERATION_CHANGES + 1; i += 1) far = bump(far, [BigInt(100 + i)]);
    expect(new AnswersView().complete(far, [], before)).toBe('behind');
    // Another epoch between the reads: behind.
    expect(new AnswersView().complete(bump(NONE, [5n]), [], before)).toBe('behind');
  });

  it('never completes without a generation record, and skips the lease records a scan lists', () => {
    const view = new AnswersView();
    expect(view.complete(NONE, [])).toBe('none');
    expect(view.isComplete).toBe(false);
    const g = bump(NONE, [1n]);
    // 6's lease record names 6 and is its lease record: no answer record, and nothing to hash for.
    expect(view.complete(g, [[targetRecordId(6n), '6'], listedOf(1n)])).toBe('complete');
    expect(view.lookup(6n)).toBe(NO_ANSWER);
    expect(new AnswersView(8, 1).complete(g, [listedOf(1n), listedOf(2n)])).toBe('too-large');
  });
});
