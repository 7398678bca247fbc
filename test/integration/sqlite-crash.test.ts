/**
 * Crash atomicity of the SQLite store: a child process runs claim and release batches of several
 * groups each, back to back, and is SIGKILLed at a random moment; after every kill the table is
 * reopened and every group must be wholly present (every member, one token, the whole group in
 * each member) or wholly absent — never partial. 500 rounds, each a fresh child.
 *
 * The rounds run in `LANES` independent lanes (each its own table root, observer and children), so
 * a child's start-up — most of a round — overlaps another lane's kill and check. A hang is caught
 * per round (`ROUND_GUARD_MS`, far above a round even at a load of 30 on 2 cores), so the test's
 * own timeout only has to cover the rounds' total at high load, not detect a hang.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { targetRecordId } from '../../src/lease/identity.js';
import { FencedTargetLeaseTable } from '../../src/lease/target-lease-table.js';
import { builtFile } from '../../src/util/paths.js';
import { CRASH_GROUPS } from '../fixtures/sqlite-crash-groups.js';
import { tempRoot } from '../helpers/lease-fixtures.js';
import { leaseStoreUnderTest } from '../helpers/lease-stores.js';

const ROUNDS = Number(process.env['SYMFENCE_CRASH_ROUNDS'] ?? 500);
const LANES = 2;
/** One round (spawn is overlapped; kill, reopen-check, release) taking this long is a hang. */
const ROUND_GUARD_MS = 90_000;
/** Kill moments are drawn from 0 … this many ms after the child reports ready (a few batches). */
const MAX_KILL_DELAY_MS = 25;

/** A small deterministic PRNG: a failing round can be replayed from the seed in the message. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

interface CrashChild {
  readonly process: ChildProcess;
  readonly exited: Promise<NodeJS.Signals | number | null>;
  /** Resolves with the next message of the child, or false once it exited. */
  next(): Promise<unknown>;
}

/** Forks a child; it loads its modules and waits for `go` (so the next round's child warms up early). */
function spawnChild(root: string): CrashChild {
  const child = fork(builtFile('test/fixtures/sqlite-crash-child.js'), [root], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const inbox: unknown[] = [];
  let wake: (() => void) | undefined;
  child.on('message', (m) => {
    inbox.push(m);
    wake?.();
  });
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  void exited.then(() => wake?.());
  return {
    process: child,
    exited,
    async next() {
      while (inbox.length === 0) {
        if (child.exitCode !== null || child.signalCode !== null) return false;
        await new Promise<void>((resolve) => (wake = resolve));
      }
      return inbox.shift();
    },
  };
}

async function expectMessage(child: CrashChild, type: string): Promise<void> {
  const message = await child.next();
  if ((message as { type?: unknown } | false)?.type !== type) throw new Error(`the crash child sent ${JSON.stringify(message)} instead of ${type} (exit ${String(child.process.exitCode ?? child.process.signalCode)})`);
}

async function runChildUntilKilled(child: CrashChild, delayMs: number): Promise<void> {
  await expectMessage(child, 'loaded');
  child.process.send({ type: 'go' });
  await expectMessage(child, 'ready');
  // A random moment, chosen by the parent, is the point of the test (not a way to order events).
  await new Promise<void>((resolve) => setTimeout(resolve, delayMs));
  child.process.kill('SIGKILL');
  const how = await child.exited;
  if (how !== 'SIGKILL') throw new Error(`the crash child ended by ${String(how)}, not by the SIGKILL`);
}

/** `promise`, or a rejection naming `what` once `ms` pass first. */
async function guarded<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not finish in ${ms} ms`)), ms)));
  try {
    return await Promise.race([promise, hang]);
  } finally {
    clearTimeout(timer);
  }
}

const groupOf = new Map<string, number>();
CRASH_GROUPS.forEach((group, g) => group.forEach((t) => groupOf.set(targetRecordId(t), g)));

/** Runs `rounds` kill rounds on a fresh root; returns how many of them found groups held. */
async function runLane(lane: number, rounds: number, seed: number): Promise<number> {
  const root = await tempRoot(`symfence-sqlite-crash-${lane}-`);
  const random = prng(seed);
  const observer = await FencedTargetLeaseTable.open(root, { store: 'sqlite', coordination: 'multi', leaseTtlMs: 3_600_000 });
  let roundsWithGroupsHeld = 0;
  let spare = spawnChild(root);
  try {
    for (let round = 0; round < rounds; round += 1) {
      const label = `lane ${lane} round ${round} (SYMFENCE_CRASH_SEED=${seed})`;
      const child = spare;
      spare = spawnChild(root);
      await guarded(runChildUntilKilled(child, Math.floor(random() * (MAX_KILL_DELAY_MS + 1))), ROUND_GUARD_MS, label);
      // Throws on any corrupt row: a torn write would show here.
      const records = await guarded(observer.snapshotRecords(), ROUND_GUARD_MS, `${label}: the snapshot`);
      const byGroup = new Map<number, typeof records>();
      for (const entry of records) {
        const g = groupOf.get(entry.id);
        expect(g, `${label}: a record outside every group`).toBeDefined();
        byGroup.set(g!, [...(byGroup.get(g!) ?? []), entry]);
      }
      for (const [g, members] of byGroup) {
        const group = CRASH_GROUPS[g]!;
        const expectedTargets = [...group].sort((a, b) => (targetRecordId(a) < targetRecordId(b) ? -1 : 1)).map(String);
        expect(members.length, `${label}: group ${g} is partial`).toBe(group.length);
        expect(new Set(members.map((m) => m.record.token)).size, `${label}: group ${g} mixes tokens`).toBe(1);
        for (const m of members) expect(m.record.targets, `${label}: group ${g}`).toEqual(expectedTargets);
      }
      if (byGroup.size > 0) roundsWithGroupsHeld += 1;
      // Clear what the killed child held, through the table, for the next child.
      for (const [g, members] of byGroup) expect(await observer.releaseGroup(CRASH_GROUPS[g]!, members[0]!.record.token), label).toEqual({ ok: true });
    }
  } finally {
    spare.process.kill('SIGKILL');
    await spare.exited;
    await observer.close();
  }
  return roundsWithGroupsHeld;
}

const sqliteUnavailable = leaseStoreUnderTest('sqlite').unavailable?.();

describe.skipIf(sqliteUnavailable !== undefined && process.env['CI'] !== 'true')('SQLite store crash atomicity', () => {
  it(`leaves every group of a batch wholly present or wholly absent after a SIGKILL at a random point, ${ROUNDS} rounds`, async () => {
    const seed = Number(process.env['SYMFENCE_CRASH_SEED'] ?? Date.now() % 1_000_000);
    const perLane = Array.from({ length: LANES }, (_, lane) => Math.floor(ROUNDS / LANES) + (lane < ROUNDS % LANES ? 1 : 0));
    const started = Date.now();
    const held = await Promise.all(perLane.map((rounds, lane) => runLane(lane, rounds, seed + lane)));
    // Every round ran (the lanes split ROUNDS exactly), and kills landed while groups were held
    // (not only before the first batch or between cycles).
    expect(perLane.reduce((a, b) => a + b, 0)).toBe(ROUNDS);
    expect(held.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    console.log(`sqlite crash: ${ROUNDS} rounds in ${LANES} lanes, ${((Date.now() - started) / ROUNDS).toFixed(0)} ms per round, ${held.join('+')} with groups held`);
  }, 1_800_000);
});
