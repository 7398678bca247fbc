/**
 * A coordinator killed while it releases a group with answers, on the files store: at every step
 * of the release's publication (each rename, unlink and directory barrier, in turn), a child
 * process SIGKILLs itself, and the table it leaves must tell every reader the same thing. A table
 * whose answers view already held the branch (at the generation before the release) decides as a
 * freshly opened one does: an answer record that reached the disk was announced by the answer
 * generation record first (docs/lease-format.md "Answer generation").
 */
import { fork } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { expect, it } from 'vitest';
import { answerGenerationRecordId, answerRecordId } from '../../src/lease/identity.js';
import type { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { builtFile } from '../../src/util/paths.js';
import { S, openTarget, tempRoot } from '../helpers/lease-fixtures.js';

const X = 'a'.repeat(64);
const OTHER = 'b'.repeat(64);
const TARGETS = [5n, 6n];
const OPTIONS = { shardCount: 4, leaseTtlMs: 10_000 };

/** Runs the child to its end or its kill; the steps the release took when it was not killed. */
async function runChild(root: string, killAt: number): Promise<{ signal: NodeJS.Signals | null; steps?: number }> {
  const child = fork(builtFile('test/fixtures/answers-crash-child.js'), [root, String(killAt), X, TARGETS.join(',')], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  let steps: number | undefined;
  child.on('message', (m) => {
    steps = (m as { steps?: number }).steps;
  });
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, sig) => resolve(sig)));
  return { signal, ...(steps !== undefined ? { steps } : {}) };
}

/** A store at answer generation 1 (branch 100 answered), and a table whose view holds TARGETS at it. */
async function prepared(): Promise<{ root: string; warm: FencedTargetLeaseTable }> {
  const root = await tempRoot();
  const first = await openTarget(root, OPTIONS);
  const held = await first.claimGroup([100n], {}, { owner: 'first', nowMs: 1 * S });
  if (!held.ok) throw new Error('claim of 100');
  expect(await first.releaseGroup([100n], held.token, { nowMs: 1 * S, answers: { input: OTHER, settled: [100n] } })).toEqual({ ok: true });
  await first.close();
  const warm = await openTarget(root, OPTIONS);
  const asked = await warm.claimGroup(TARGETS, {}, { owner: 'warm', nowMs: 2 * S, input: X });
  if (!asked.ok) throw new Error('warm claim');
  expect(await warm.releaseGroup(TARGETS, asked.token)).toEqual({ ok: true });
  return { root, warm };
}

/** `ok` or the refusal's reason, releasing what was granted. */
async function ask(table: FencedTargetLeaseTable, nowMs: number): Promise<string> {
  const outcome = await table.claimGroup(TARGETS, {}, { owner: 'asker', nowMs, input: X });
  if (!outcome.ok) return outcome.reason;
  expect(await table.releaseGroup(TARGETS, outcome.token)).toEqual({ ok: true });
  return 'ok';
}

it('a release killed at any step of its publication leaves answers every table reads alike', async () => {
  // The whole release once, to count its steps.
  const whole = await prepared();
  const run = await runChild(whole.root, 0);
  await whole.warm.close();
  expect(run.signal).toBeNull();
  const steps = run.steps!;
  expect(steps).toBeGreaterThanOrEqual(5); // the generation record, its barrier, two answer records, two lease records, barriers
  const seen = new Set<string>();
  for (let killAt = 1; killAt <= steps; killAt += 1) {
    const { root, warm } = await prepared();
    try {
      expect((await runChild(root, killAt)).signal, `kill at step ${killAt}`).toBe('SIGKILL');
      const answerFiles = await Promise.all(TARGETS.map((t) => readFile(warm.recordPath(answerRecordId(t)), 'utf8').catch(() => undefined)));
      const generation = JSON.parse(await readFile(warm.recordPath(answerGenerationRecordId()), 'utf8')) as { generation: number; changed: [number, string][] };
      // On disk: an answer record written means a generation that names its branch came first.
      TARGETS.forEach((t, i) => {
        if (answerFiles[i] !== undefined) expect(generation.changed.some(([g, target]) => g >= 2 && target === String(t)), `kill at step ${killAt}: branch ${t}`).toBe(true);
      });
      seen.add(answerFiles.map((f) => (f === undefined ? '-' : 'a')).join(''));
      // Past the child's lease: the warm view and a fresh table give the same answer.
      const fresh = await openTarget(root, OPTIONS);
      const fromFresh = await ask(fresh, 60 * S);
      await fresh.close();
      expect(await ask(warm, 61 * S), `kill at step ${killAt}`).toBe(fromFresh);
    } finally {
      await warm.close();
    }
  }
  // The kills landed before, between and after the answer records' publication.
  expect(seen.has('--')).toBe(true);
  expect(seen.has('aa')).toBe(true);
}, 120_000);
