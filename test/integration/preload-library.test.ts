import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { referenceBranchIds } from '../helpers/fake-symcc.js';
import { must, preload, preloadRunner, skipReason } from '../helpers/preload-runner.js';

describe.skipIf(skipReason !== null)(`the SymCC preload library${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'symfence-preload-test-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  const { fixture, run, plainEvents } = preloadRunner(scratch);
  let markers = 0;

  it('records every symbolic branch in program order with its site, direction and the documented ids', () => {
    const input = 'MZ!Axyz';
    const structure = plainEvents(input);
    expect(structure.map((e) => `${e.site}:${e.taken}`)).toEqual(['1:1', '2:1', '3:1', '4:1', '5:1', '5:0', '6:1', '5:0', '6:0']);

    const result = run(input);
    expect(result.status).toBe(0);
    const t = must(result.telemetry);
    expect(t.branchTrace.map((r) => `${r.site}:${r.taken}`)).toEqual(structure.map((e) => `${e.site}:${e.taken}`));
    const expected = referenceBranchIds(structure, 4);
    expect(t.branchTrace.map((r) => [r.parent, r.actual, r.opposite])).toEqual(expected.map((e) => [e.parent, e.actual, e.opposite]));
    expect(t.branchTrace.every((r) => r.interesting === 1)).toBe(true);
    expect(t.targetBranch).toBe(0n);
    expect(t.targetStatus).toBe('none');
    expect(t.openBranches).toEqual([]);
    // Untargeted: the runtime saw every real site id, exactly as without the library.
    expect(result.events).toEqual(structure);
    const extras = must(result.preload);
    expect(extras).toMatchObject({ version: 1, mode: 'untargeted', events: 10, symbolicEvents: 9, solved: 9, skipped: 0, traceDropped: 0, context: 4 });
    expect(t.counters).toMatchObject({ queries: 9, sat: 9, unsat: 0, unknown: 0, generated: 9 });
  });

  it('attributes each generated file to the event that produced it: replayed, the file takes that branch', () => {
    const input = 'MZ!Axyz';
    const result = run(input, { env: { FAKE_SYMCC_UNSAT_SITES: '3,6' } });
    const t = must(result.telemetry);
    const bySite = t.branchTrace.map((r) => Number(r.site));
    const solvable = bySite.filter((site) => site !== 3 && site !== 6);
    expect(result.generatedBy.map(([name]) => name)).toEqual([...result.outputs.keys()]);
    expect(result.generatedBy.map(([, , site]) => Number(site))).toEqual(solvable);
    expect(t.counters).toMatchObject({ queries: 9, sat: solvable.length, unsat: 9 - solvable.length, generated: solvable.length });
    for (const [name, opposite] of result.generatedBy) {
      const row = t.branchTrace.findIndex((r) => r.opposite === BigInt(opposite));
      expect(row).toBeGreaterThanOrEqual(0);
      const replay = run(result.outputs.get(name)!, { env: { SYMFENCE_TRACE_ONLY: '1' } });
      const replayed = must(replay.telemetry).branchTrace;
      // Same prefix, then the flipped branch: the replay's event at that position is the opposite.
      expect(replayed.slice(0, row).map((r) => r.actual)).toEqual(t.branchTrace.slice(0, row).map((r) => r.actual));
      expect(replayed[row]!.actual).toBe(BigInt(opposite));
    }
  });

  it('gives two runs of the same input the same ids, and a different prefix different ids within the context', () => {
    const a = 'MZ!A' + 'x'.repeat(8);
    const b = 'Mq!A' + 'x'.repeat(8);
    const first = must(run(a).telemetry).branchTrace;
    const again = must(run(a).telemetry).branchTrace;
    expect(again).toEqual(first);
    const other = must(run(b).telemetry).branchTrace;
    // a: 1T 2T 3T 4T 5T…   b: 1T 2F 4T 5T…
    expect(other[0]!.actual).toBe(first[0]!.actual);
    expect(other[1]!.site).toBe(2n);
    expect(other[1]!.actual).toBe(first[1]!.opposite);
    const site4 = (trace: typeof first) => trace.find((r) => r.site === 4n)!;
    expect(site4(other).actual).not.toBe(site4(first).actual);
    expect(other.filter((r) => r.site === 5n)[0]!.actual).not.toBe(first.filter((r) => r.site === 5n)[0]!.actual);
    // The context is bounded: once the last K = 4 events and the hit bucket agree, so do the ids.
    expect(first.at(-1)!.site).toBe(5n);
    expect(other.at(-1)!.actual).toBe(first.at(-1)!.actual);
  });

  it('SYMFENCE_BRANCH_CONTEXT changes K, and the ids follow the documented function for every K', () => {
    const input = 'MZ!A' + 'xyqxxyyq';
    const structure = plainEvents(input);
    for (const k of [0, 1, 8, 16]) {
      const t = must(run(input, { env: { SYMFENCE_BRANCH_CONTEXT: String(k), SYMFENCE_TRACE_ONLY: '1' } }).telemetry);
      const expected = referenceBranchIds(structure, k);
      const keptActuals = new Set<bigint>();
      const kept = expected.filter((e) => !keptActuals.has(e.actual) && keptActuals.add(e.actual));
      expect(t.branchTrace.map((r) => r.actual)).toEqual(kept.map((e) => e.actual));
      expect(must(run(input, { env: { SYMFENCE_BRANCH_CONTEXT: String(k) } }).preload).context).toBe(k);
    }
    for (const bad of ['17', '-1', '4x', '']) {
      expect(must(run(input, { env: { SYMFENCE_BRANCH_CONTEXT: bad } }).preload).context).toBe(4);
    }
  });

  it('trace-only mode solves nothing and reports every opposite as open, de-duplicated in first-seen order', () => {
    const input = 'MZ!A' + 'xyqxy';
    const structure = plainEvents(input);
    const result = run(input, { env: { SYMFENCE_TRACE_ONLY: '1' } });
    expect(result.status).toBe(0);
    expect(result.outputs.size).toBe(0);
    expect(result.events.map((e) => e.site)).toEqual(structure.map(() => 0n));
    const t = must(result.telemetry);
    const opposites = referenceBranchIds(structure, 4).map((e) => e.opposite);
    expect(t.openBranches).toEqual([...new Set(opposites)]);
    expect(t.branchTrace.every((r) => r.interesting === 0)).toBe(true);
    expect(t.counters).toMatchObject({ queries: 0, sat: 0, unsat: 0, generated: 0 });
    expect(must(result.preload)).toMatchObject({ mode: 'trace', solved: 0, skipped: structure.length });
  });

  it('directed mode solves exactly the target and the solve/sample actions, nothing else', () => {
    const input = 'MZ!A' + 'xyqxy';
    const structure = plainEvents(input);
    const ids = referenceBranchIds(structure, 4);
    const [target, solve, sample] = [ids[2]!.opposite, ids[5]!.opposite, ids[7]!.opposite];
    const group = new Set([target, solve, sample]);
    const result = run(input, {
      env: { SYMCC_TARGET_BRANCH: target.toString(), SYMFENCE_PRELOAD_EARLY_EXIT: '0' },
      actions: `${solve} solve\n${sample} sample\n`,
    });
    expect(result.status).toBe(0);
    const t = must(result.telemetry);
    expect(result.events.map((e, i) => (e.site === 0n ? null : i)).filter((i) => i !== null)).toEqual([2, 5, 7]);
    expect(result.generatedBy.map(([, opposite]) => BigInt(opposite))).toEqual([target, solve, sample]);
    expect(result.outputs.size).toBe(3);
    expect(t.targetReached).toBe(true);
    expect(t.targetStatus).toBe('sat');
    expect(t.branchTrace.filter((r) => r.interesting === 1).map((r) => r.opposite)).toEqual([target, solve, sample]);
    expect(t.openBranches).toEqual([...new Set(ids.map((e) => e.opposite).filter((id) => !group.has(id)))]);
    expect(t.counters).toMatchObject({ queries: 3, sat: 3, generated: 3 });
    expect(must(result.preload)).toMatchObject({ mode: 'directed', solved: 3, skipped: structure.length - 3, earlyExit: false });
  });

  /** The input offsets the outputs flip (each output differs from the input in one byte). */
  function flippedOffsets(input: string, outputs: Map<string, Buffer>): Set<number> {
    const original = Buffer.from(input, 'latin1');
    const offsets = new Set<number>();
    for (const bytes of outputs.values()) for (let i = 0; i < original.length; i++) if (bytes[i] !== original[i]) offsets.add(i);
    return offsets;
  }

  it('on QSYM, a site-0 call after a solved branch inherits the solve: a run that went on after its first solve would solve outside its group', () => {
    const input = 'MZ!A' + 'xyqxy';
    const structure = plainEvents(input);
    const ids = referenceBranchIds(structure, 4);
    // Detection forced off: the library treats the QSYM-like runtime as one that solves only what it is given.
    const env = { SYMCC_TARGET_BRANCH: ids[2]!.opposite.toString(), SYMFENCE_PRELOAD_EARLY_EXIT: '0', SYMFENCE_PRELOAD_QSYM: '0' };
    const result = run(input, { program: fixture().qsymProgram, env, actions: `${ids[7]!.opposite} solve\n` });
    expect(result.status).toBe(0);
    const groupOffsets = new Set([structure[2]!.offset, structure[7]!.offset]);
    expect([...flippedOffsets(input, result.outputs)].some((o) => !groupOffsets.has(o))).toBe(true);
  });

  it('on QSYM (detected by its solver symbol) with forking off, a directed run solves only its first group branch on the path and ends, whatever the early-exit setting', () => {
    const input = 'MZ!A' + 'xyqxy';
    const structure = plainEvents(input);
    const ids = referenceBranchIds(structure, 4);
    for (const early of ['1', '0']) {
      const env = { SYMCC_TARGET_BRANCH: ids[2]!.opposite.toString(), SYMFENCE_PRELOAD_EARLY_EXIT: early, SYMFENCE_PRELOAD_FORK: '0' };
      const result = run(input, { program: fixture().qsymProgram, env, actions: `${ids[7]!.opposite} solve\n` });
      expect(result.status).toBe(0);
      expect([...flippedOffsets(input, result.outputs)]).toEqual([structure[2]!.offset]);
      const t = must(result.telemetry);
      expect(t.counters.queries).toBe(1);
      expect(t.targetStatus).toBe('sat');
      // The run ended at its first group branch: the action further on was never reached.
      expect(t.branchTrace).toHaveLength(3);
      expect(t.branchTrace.some((r) => r.opposite === ids[7]!.opposite)).toBe(false);
      expect(must(result.preload)).toMatchObject({ earlyExit: true, fork: false, forks: 0 });
      expect(result.preload!.qsym).toBe(true);
    }
    // Off QSYM the same run solves both group branches in place, without forking.
    const plain = run(input, { env: { SYMCC_TARGET_BRANCH: ids[2]!.opposite.toString() }, actions: `${ids[7]!.opposite} solve\n` });
    expect(must(plain.telemetry).counters.queries).toBe(2);
    expect(plain.preload!).toMatchObject({ qsym: false, fork: false, forks: 0 });
    expect([...plain.outputs.keys()]).toEqual(['000000', '000001']);
  });

  it('counts an answer QSYM names NNNNNN-optimistic (unsat under the path, solved alone) as generated and attributes it', () => {
    const input = 'MZ!A' + 'xyqxy';
    const structure = plainEvents(input);
    const ids = referenceBranchIds(structure, 4);
    const target = ids[2]!.opposite;
    const env = { SYMCC_TARGET_BRANCH: target.toString(), FAKE_SYMCC_UNSAT_SITES: String(structure[2]!.site) };
    // A one-target run answers in place (it ends right after); forking every answer, the file
    // comes from forked child 1 and is renamed so that no later child's can collide.
    for (const [extra, name] of [
      [{}, '000000-optimistic'],
      [{ SYMFENCE_PRELOAD_IN_PLACE: '0' }, 'f1-000000-optimistic'],
    ] as const) {
      const result = run(input, { program: fixture().qsymProgram, env: { ...env, ...extra } });
      expect([...result.outputs.keys()]).toEqual([name]);
      const t = must(result.telemetry);
      expect(t.targetStatus).toBe('sat');
      expect(t.counters).toMatchObject({ queries: 1, sat: 1, generated: 1 });
      expect(result.generatedBy).toEqual([[name, target.toString(), String(structure[2]!.site)]]);
    }
  });

  it('solves a group id that recurs on the path once, at its first occurrence', () => {
    const input = 'MZ!A' + 'x'.repeat(40);
    const ids = referenceBranchIds(plainEvents(input), 4);
    const recurring = ids.find((e) => ids.filter((f) => f.opposite === e.opposite).length >= 3)!;
    expect(recurring).toBeDefined();
    const first = ids.findIndex((e) => e.opposite === recurring.opposite);
    const result = run(input, { env: { SYMCC_TARGET_BRANCH: recurring.opposite.toString(), SYMFENCE_PRELOAD_EARLY_EXIT: '0' } });
    expect(result.events.map((e, i) => (e.site === 0n ? null : i)).filter((i) => i !== null)).toEqual([first]);
    expect(must(result.telemetry).counters.queries).toBe(1);
    expect(must(result.telemetry).openBranches).not.toContain(recurring.opposite);
  });

  it('reports an unsat target as unsat, and an unreached target as not reached', () => {
    const input = 'MZ!A' + 'xy';
    const ids = referenceBranchIds(plainEvents(input), 4);
    const unsat = run(input, { env: { SYMCC_TARGET_BRANCH: ids[2]!.opposite.toString(), FAKE_SYMCC_UNSAT_SITES: '3' } });
    expect(must(unsat.telemetry)).toMatchObject({ targetReached: true, targetStatus: 'unsat' });
    expect(unsat.outputs.size).toBe(0);
    expect(must(unsat.telemetry).counters).toMatchObject({ queries: 1, sat: 0, unsat: 1 });
    const missing = run(input, { env: { SYMCC_TARGET_BRANCH: '12345' } });
    expect(must(missing.telemetry)).toMatchObject({ targetBranch: 12345n, targetReached: false, targetStatus: 'none' });
    expect(missing.outputs.size).toBe(0);
  });

  it('never solves a skip branch, not even the primary target; the first line per branch wins and bad lines are ignored', () => {
    const input = 'MZ!A' + 'xyqxy';
    const ids = referenceBranchIds(plainEvents(input), 4);
    const [target, skipFirst, solveFirst, plain] = [ids[1]!.opposite, ids[4]!.opposite, ids[6]!.opposite, ids[8]!.opposite];
    const actions = [
      `${target} skip`,
      'not-a-number solve',
      `${plain}`,
      `-${plain} solve`,
      `${plain} solved`,
      `${plain} solve extra`,
      '0 solve',
      '18446744073709551616 solve',
      `${skipFirst} skip`,
      `${skipFirst} solve`,
      `${solveFirst}\tsolve\r`,
      `${solveFirst} skip`,
      '',
    ].join('\n');
    const result = run(input, { env: { SYMCC_TARGET_BRANCH: target.toString(), SYMFENCE_PRELOAD_EARLY_EXIT: '0' }, actions });
    expect(result.status).toBe(0);
    expect(result.generatedBy.map(([, opposite]) => BigInt(opposite))).toEqual([solveFirst]);
    const t = must(result.telemetry);
    expect(t).toMatchObject({ targetReached: true, targetStatus: 'none' });
    expect(t.openBranches).toContain(target);
    expect(t.openBranches).toContain(skipFirst);
    expect(t.openBranches).toContain(plain);
    expect(t.openBranches).not.toContain(solveFirst);
  });

  it('an event whose real site id is 0 is forwarded but never solved, and its opposite stays open', () => {
    const input = 'ZSAA' + 'x';
    const structure = plainEvents(input);
    expect(structure.map((e) => e.site)).toEqual([1n, 0n, 4n, 5n]);
    const result = run(input);
    const t = must(result.telemetry);
    expect(t.counters.queries).toBe(3);
    expect(result.generatedBy.map(([, , site]) => site)).toEqual(['1', '4', '5']);
    expect(t.openBranches).toEqual([t.branchTrace[1]!.opposite]);
    expect(t.branchTrace[1]!.interesting).toBe(0);
    expect(must(result.preload).skipped).toBe(1);
  });

  it('early exit on and off solve the same set; on, the run stops right after the last group branch', () => {
    const input = 'MZ!A' + 'xyqxyxyqq';
    const structure = plainEvents(input);
    const ids = referenceBranchIds(structure, 4);
    const env = { SYMCC_TARGET_BRANCH: ids[3]!.opposite.toString() };
    const actions = `${ids[6]!.opposite} solve\n`;
    const on = run(input, { env, actions });
    const off = run(input, { env: { ...env, SYMFENCE_PRELOAD_EARLY_EXIT: '0' }, actions });
    expect(on.status).toBe(0);
    expect(off.status).toBe(0);
    expect(on.generatedBy).toEqual(off.generatedBy);
    expect([...on.outputs]).toEqual([...off.outputs]);
    expect(on.generatedBy).toHaveLength(2);
    expect(must(on.preload)).toMatchObject({ earlyExit: true, symbolicEvents: 7 });
    expect(must(off.preload)).toMatchObject({ earlyExit: false, symbolicEvents: structure.length });
    expect(on.stdout).toBe(''); // _exit(0) before the program's own output
    expect(off.stdout).not.toBe('');
    expect(must(on.telemetry).targetStatus).toBe('sat');
  });

  it('keeps an existing LD_PRELOAD library loading when ours is prepended', () => {
    const marker = path.join(scratch, `marker-${markers++}`);
    const result = run('MZ!A', { ldPreload: `${preload} ${fixture().markerLibrary}`, env: { MARKER_OUT: marker } });
    expect(result.status).toBe(0);
    expect(readFileSync(marker, 'utf8')).toBe('loaded\n');
    expect(must(result.telemetry).branchTrace).toHaveLength(4);
  });

  it('a crash mid-run leaves no telemetry file and no temp file', () => {
    const result = run('CRASH' + 'x'.repeat(200), { env: { SYMFENCE_TRACE_ONLY: '1' } });
    expect(result.signal).toBe('SIGABRT');
    expect(result.events.length).toBeGreaterThan(100); // it crashed after the loop's branches
    expect(result.telemetry).toBeNull();
    expect(result.telemetryDirEntries).toEqual([]);
    // The same path without the crash at its end does leave telemetry.
    const control = run('CRASX' + 'x'.repeat(200), { env: { SYMFENCE_TRACE_ONLY: '1' } });
    expect(control.status).toBe(0);
    expect(must(control.preload).symbolicEvents).toBe(result.events.length);
    expect(control.telemetryDirEntries).toEqual(['telemetry.json']);
  });

  it('a forked child that exits normally writes no telemetry: only the process that read the environment does', () => {
    // The child exits cleanly (destructors run), then the parent crashes: no file may appear.
    const crashed = run('CRASHF' + 'x'.repeat(20), { env: { SYMFENCE_TRACE_ONLY: '1' } });
    expect(crashed.signal).toBe('SIGABRT');
    expect(crashed.telemetryDirEntries).toEqual([]);
    const clean = run('MZ!AxF' + 'x'.repeat(20), { env: { SYMFENCE_TRACE_ONLY: '1' } });
    expect(clean.status).toBe(0);
    expect(must(clean.preload).symbolicEvents).toBe(clean.events.length);
  });

  it('without SYMCC_TELEMETRY_OUT it still forwards every call and writes no telemetry', () => {
    const result = run('MZ!A', { telemetry: false });
    expect(result.status).toBe(0);
    expect(result.outputs.size).toBe(4);
    expect(result.telemetryDirEntries).toEqual([]);
  });

  it('leaves a program with a statically linked runtime alone: it solves as before and no telemetry is written', () => {
    const result = run('MZ!A', { program: fixture().staticProgram });
    expect(result.status).toBe(0);
    expect(result.outputs.size).toBe(4);
    expect(result.telemetry).toBeNull();
    expect(result.telemetryDirEntries).toEqual([]);
  });

  it('a huge path stays within the bounds, counts what it dropped, and still matches a target beyond the kept rows', () => {
    // A pseudo-random loop body over x / y / other with K = 8 gives thousands of distinct ids.
    let seed = 7;
    const body = Array.from({ length: 6000 }, () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return 'xyq'[seed % 3];
    }).join('');
    const input = 'MZ!A' + body;
    const structure = plainEvents(input);
    const env = { SYMFENCE_BRANCH_CONTEXT: '8' };
    const ids = referenceBranchIds(structure, 8);

    // The documented bounds, simulated.
    const keptActuals = new Set<bigint>();
    const kept = ids.filter((e) => keptActuals.size < 512 && !keptActuals.has(e.actual) && keptActuals.add(e.actual));
    expect(kept).toHaveLength(512);
    const open: bigint[] = [];
    let openDropped = 0;
    for (const { opposite } of ids) {
      if (open.includes(opposite)) continue;
      if (open.length < 256) open.push(opposite);
      else openDropped++;
    }

    const traced = run(input, { env: { ...env, SYMFENCE_TRACE_ONLY: '1' } });
    const t = must(traced.telemetry);
    expect(t.branchTrace.map((r) => r.actual)).toEqual(kept.map((e) => e.actual));
    expect(t.openBranches).toEqual(open);
    expect(must(traced.preload)).toMatchObject({ symbolicEvents: structure.length, traceDropped: structure.length - 512, openDropped });

    // A target first seen long after the trace filled up is still found and solved.
    const lastKept = ids.findIndex((e) => e.actual === kept.at(-1)!.actual);
    const late = ids.findIndex((e, i) => i > lastKept + 100 && ids.findIndex((f) => f.opposite === e.opposite) === i);
    expect(late).toBeGreaterThan(lastKept);
    const directed = run(input, { env: { ...env, SYMCC_TARGET_BRANCH: ids[late]!.opposite.toString() } });
    expect(must(directed.telemetry)).toMatchObject({ targetReached: true, targetStatus: 'sat' });
    expect(directed.generatedBy).toEqual([['000000', ids[late]!.opposite.toString(), structure[late]!.site.toString()]]);
    expect(must(directed.preload)).toMatchObject({ earlyExit: true, symbolicEvents: late + 1 });
  });
});
