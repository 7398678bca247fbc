/**
 * Fork at the target and in-place answers (docs/solver.md, "Fork at the target", "In-place
 * answers"), bounded setup input and position-independent site ids, on the fake SymCC runtime's
 * QSYM-like build.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { referenceBranchIds, stableSite } from '../helpers/fake-symcc.js';
import { must, preload, preloadRunner, skipReason, type Run } from '../helpers/preload-runner.js';

/** The input offsets each output flips (each output differs from the input in one byte). */
function flippedOffset(input: string | Buffer, output: Buffer): number[] {
  const original = Buffer.isBuffer(input) ? input : Buffer.from(input, 'latin1');
  const out: number[] = [];
  for (let i = 0; i < original.length; i++) if (output[i] !== original[i]) out.push(i);
  return out;
}

/** A deterministic input over the fake program's loop alphabet. */
function loopInput(length: number, seed: number): string {
  let x = seed;
  let text = 'MZ!A';
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    text += 'xyq'[x % 3];
  }
  return text;
}

/** Linux >= 6.1 (MADV_COLLAPSE) with transparent huge pages not disabled. */
function collapseSupported(): boolean {
  const [major = 0, minor = 0] = os.release().split('.').map((x) => Number.parseInt(x, 10));
  if (major < 6 || (major === 6 && minor < 1)) return false;
  try {
    return !readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8').includes('[never]');
  } catch {
    return false;
  }
}

/** Is this pid gone (or a zombie nobody reaped yet: it runs nothing)? */
function dead(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

async function until(what: string, check: () => boolean, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.skipIf(skipReason !== null)(`fork at the target${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'symfence-preload-fork-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  const { fixture, run, plainEvents } = preloadRunner(scratch);

  /** Structure, ids and the first `count` distinct opposites (event index of the first occurrence). */
  function targets(input: string, count: number) {
    const structure = plainEvents(input);
    const ids = referenceBranchIds(structure, 4);
    const first = new Map<bigint, number>();
    ids.forEach((e, i) => {
      if (!first.has(e.opposite) && structure[i]!.site !== 0n && first.size < count) first.set(e.opposite, i);
    });
    return { structure, ids, first };
  }

  /** A directed run; every answer forks unless `env` turns in-place answers back on. */
  function directed(input: string, group: bigint[], env: Record<string, string> = {}): Run {
    const [target, ...rest] = group;
    return run(input, {
      program: fixture().qsymProgram,
      env: { SYMCC_TARGET_BRANCH: target!.toString(), SYMFENCE_PRELOAD_IN_PLACE: '0', ...env },
      actions: rest.map((b) => `${b} solve\n`).join(''),
    });
  }

  it('on QSYM, one process answers every group branch: each in a forked child on the exact path, and the parent never solves', () => {
    const input = 'MZ!A' + 'xyqxy';
    const { structure, ids } = targets(input, 0);
    const group = [ids[2]!.opposite, ids[7]!.opposite];
    const result = directed(input, group);
    expect(result.status).toBe(0);
    expect([...result.outputs.keys()]).toEqual(['f1-000000', 'f2-000000']);
    expect(flippedOffset(input, result.outputs.get('f1-000000')!)).toEqual([structure[2]!.offset]);
    expect(flippedOffset(input, result.outputs.get('f2-000000')!)).toEqual([structure[7]!.offset]);
    expect(result.generatedBy).toEqual([
      ['f1-000000', group[0]!.toString(), structure[2]!.site.toString()],
      ['f2-000000', group[1]!.toString(), structure[7]!.site.toString()],
    ]);
    // The runtime saw exactly two real site ids, the children's; every parent call had site 0.
    expect(result.events.filter((e) => e.site !== 0n).map((e) => e.site)).toEqual([structure[2]!.site, structure[7]!.site]);
    const t = must(result.telemetry);
    expect(t.targetStatus).toBe('sat');
    expect(t.counters).toMatchObject({ queries: 2, sat: 2, unsat: 0, unknown: 0, generated: 2 });
    expect(result.answers.map(([b, s, , , files]) => [b, s, files])).toEqual([
      [group[0]!.toString(), 'sat', 1],
      [group[1]!.toString(), 'sat', 1],
    ]);
    expect(t.answers?.map((a) => [a.branch, a.status])).toEqual([
      [group[0], 'sat'],
      [group[1], 'sat'],
    ]);
    // No solver timer thread can exist at a fork: the parent made no solving call.
    expect(must(result.preload)).toMatchObject({ fork: true, forks: 2, forkFailed: false, forkCapped: false, threadsAtFork: 1, earlyExit: true });
  });

  it('answers a 64-target group in one process, every file attributed to the branch it flips', () => {
    const input = loopInput(400, 7);
    const { structure, ids, first } = targets(input, 64);
    expect(first.size).toBe(64);
    const group = [...first.keys()];
    const result = directed(input, group, { SYMFENCE_PRELOAD_EARLY_EXIT: '0' });
    expect(result.status).toBe(0);
    const p = must(result.preload);
    expect(p).toMatchObject({ forks: 64, forkCapped: false, forkFailed: false, symbolicEvents: structure.length });
    expect(result.outputs.size).toBe(64);
    expect(result.answers).toHaveLength(64);
    expect(new Set(result.answers.map(([b]) => b))).toEqual(new Set(group.map(String)));
    for (const [name, opposite, site] of result.generatedBy) {
      const index = first.get(BigInt(opposite))!;
      expect(index, name).toBeDefined();
      expect(site).toBe(structure[index]!.site.toString());
      expect(flippedOffset(input, result.outputs.get(name)!)).toEqual([structure[index]!.offset]);
    }
    expect(must(result.telemetry).counters).toMatchObject({ queries: 64, sat: 64, generated: 64 });
    expect(ids.length).toBe(structure.length);
  });

  it('before the second fork of a large group, backs fully resident anonymous memory by huge pages and changes none of it', () => {
    // Byte 5 'H': the program fills 6 MiB of anonymous memory with a pattern before the loop and
    // exits 3 after it if any byte changed; the forks (and the collapse before the second) come in between.
    const input = 'MZ!AxH' + loopInput(80, 11).slice(4);
    const { structure, first } = targets(input, 16);
    expect(first.size).toBe(16);
    const group = [...first.keys()];
    const huge = directed(input, group, { SYMFENCE_PRELOAD_EARLY_EXIT: '0' });
    const plain = directed(input, group, { SYMFENCE_PRELOAD_EARLY_EXIT: '0', SYMFENCE_PRELOAD_HUGE: '0' });
    const small = directed(input, group.slice(0, 7), { SYMFENCE_PRELOAD_EARLY_EXIT: '0' });
    const once = directed(input, group, { SYMFENCE_PRELOAD_EARLY_EXIT: '0', SYMFENCE_PRELOAD_MAX_FORKS: '1' });
    for (const r of [huge, plain, small, once]) {
      expect(r.status).toBe(0); // the pattern is intact after every fork
      expect(must(r.preload)).toMatchObject({ forkFailed: false, symbolicEvents: structure.length });
    }
    expect(must(huge.preload).forks).toBe(16);
    // The same answers and the same files, byte for byte, with or without the collapse.
    expect(huge.answers.map(([b, status, , , files]) => [b, status, files])).toEqual(plain.answers.map(([b, status, , , files]) => [b, status, files]));
    expect([...huge.outputs.entries()].sort()).toEqual([...plain.outputs.entries()].sort());
    const hugeKb = must(huge.preload).hugeKb;
    expect(hugeKb % 2048).toBe(0);
    expect(must(plain.preload).hugeKb).toBe(0); // SYMFENCE_PRELOAD_HUGE=0
    expect(must(small.preload).hugeKb).toBe(0); // fewer than 8 branches: not worth a copy
    expect(must(once.preload)).toMatchObject({ forks: 1, hugeKb: 0 }); // a run that forks once never pays for it
    // Where the kernel can collapse (Linux >= 6.1 with THP not disabled), the 6 MiB pattern holds
    // at least two aligned 2 MiB ranges, resident in full.
    if (collapseSupported()) expect(hugeKb).toBeGreaterThanOrEqual(4096);
  });

  it('stops forking at the per-run fork cap: the rest of the group stays open and the run goes on to its end', () => {
    const input = loopInput(60, 3);
    const { structure, first } = targets(input, 4);
    const group = [...first.keys()];
    const result = directed(input, group, { SYMFENCE_PRELOAD_MAX_FORKS: '2' });
    expect(result.status).toBe(0);
    expect(must(result.preload)).toMatchObject({ forks: 2, forkCapped: true, earlyExit: false, symbolicEvents: structure.length });
    expect(result.answers.map(([b]) => b)).toEqual(group.slice(0, 2).map(String));
    const t = must(result.telemetry);
    expect(t.counters.queries).toBe(2);
    for (const b of group.slice(2)) expect(t.openBranches).toContain(b);
    expect(result.outputs.size).toBe(2);
  });

  it('a child over the CPU budget leaves its target unknown, never unsat, and the spent budget stops further forks', () => {
    const input = loopInput(60, 3);
    const { structure, first } = targets(input, 2);
    const group = [...first.keys()];
    const spinSite = structure[first.get(group[0]!)!]!.site;
    const result = directed(input, group, { FAKE_SYMCC_SPIN_SITES: spinSite.toString(), SYMFENCE_PRELOAD_FORK_CPU_MS: '200' });
    expect(result.status).toBe(0);
    expect(result.answers.map(([b, s]) => [b, s])).toEqual([[group[0]!.toString(), 'unknown']]);
    const t = must(result.telemetry);
    expect(t.targetStatus).toBe('unknown');
    expect(t.counters).toMatchObject({ queries: 1, unknown: 1, unsat: 0 });
    const p = must(result.preload);
    expect(p).toMatchObject({ forks: 1, forkCapped: true });
    expect(p.childCpuUs).toBeGreaterThanOrEqual(200_000); // killed by its CPU limit, not before
    expect(t.openBranches).toContain(group[1]);
  });

  it('a crashing child leaves its target unknown and the run answers the next one', () => {
    const input = loopInput(60, 3);
    const { structure, first } = targets(input, 2);
    const group = [...first.keys()];
    const crashSite = structure[first.get(group[0]!)!]!.site;
    const second = structure[first.get(group[1]!)!]!.site;
    expect(second).not.toBe(crashSite);
    const result = directed(input, group, { FAKE_SYMCC_CRASH_SITES: crashSite.toString() });
    expect(result.status).toBe(0);
    expect(result.answers.map(([b, s]) => [b, s])).toEqual([
      [group[0]!.toString(), 'unknown'],
      [group[1]!.toString(), 'sat'],
    ]);
    expect([...result.outputs.keys()]).toEqual(['f2-000000']);
    expect(must(result.telemetry).targetStatus).toBe('unknown');
  });

  it('with the QSYM rule forced off, or with forking turned off, nothing forks', () => {
    const input = 'MZ!A' + 'xyqxy';
    const { ids } = targets(input, 0);
    const group = [ids[2]!.opposite, ids[7]!.opposite];
    const off = directed(input, group, { SYMFENCE_PRELOAD_FORK: '0' });
    expect(must(off.preload)).toMatchObject({ fork: false, forks: 0, earlyExit: true });
    expect(must(off.telemetry).counters.queries).toBe(1);
    const notQsym = directed(input, group, { SYMFENCE_PRELOAD_QSYM: '0', SYMFENCE_PRELOAD_EARLY_EXIT: '1' });
    expect(must(notQsym.preload)).toMatchObject({ qsym: false, fork: false, forks: 0 });
    expect([...notQsym.outputs.keys()].every((name) => /^\d{6}$/.test(name))).toBe(true);
  });

  it('when fork() fails the run falls back to the one-solve rule for its group and says so', () => {
    const input = 'MZ!A' + 'xyqxy';
    const { ids, structure } = targets(input, 0);
    const group = [ids[2]!.opposite, ids[7]!.opposite];
    // A process limit of 1 for an unprivileged user: the program runs, every fork() gets EAGAIN.
    const dir = mkdtempSync(path.join(scratch, 'nproc-'));
    const out = path.join(dir, 'out');
    mkdirSync(out);
    writeFileSync(path.join(dir, 'input'), input);
    writeFileSync(path.join(dir, 'actions'), `${group[1]} solve\n`);
    for (const p of [dir, out]) chmodSync(p, 0o777);
    // The fixture and this file's scratch directory are private (mkdtemp): let that user in.
    for (const p of [scratch, fixture().runtimeDir, path.dirname(fixture().qsymProgram), path.join(fixture().runtimeDir, 'qsym')]) chmodSync(p, 0o755);
    chmodSync(path.join(dir, 'input'), 0o644);
    chmodSync(path.join(dir, 'actions'), 0o644);
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      LD_PRELOAD: preload!,
      SYMCC_OUTPUT_DIR: out,
      SYMCC_TELEMETRY_OUT: path.join(dir, 'telemetry.json'),
      SYMCC_TARGET_BRANCH: group[0]!.toString(),
      SYMCC_S2F_ACTIONS: path.join(dir, 'actions'),
    };
    const asUser = process.getuid?.() === 0 ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--'] : [];
    const argv = ['--nproc=1:1', '--', ...asUser, fixture().qsymProgram, path.join(dir, 'input')];
    const child = spawnSync('prlimit', argv, { env, encoding: 'utf8', timeout: 20_000 });
    expect(child.status, child.stderr).toBe(0);
    const raw = JSON.parse(readFileSync(path.join(dir, 'telemetry.json'), 'utf8')) as { preload: Record<string, unknown>; counters: Record<string, number>; targetStatus: string };
    expect(raw.preload).toMatchObject({ fork: true, forks: 0, forkFailed: true, earlyExit: true });
    // One solving call in the process itself, as without forking.
    expect(raw.counters.queries).toBe(1);
    expect(raw.targetStatus).toBe('sat');
    expect(readdirSync(out)).toEqual(['000000']);
    expect(flippedOffset(input, readFileSync(path.join(out, '000000')))).toEqual([structure[2]!.offset]);
  });

  it('does not fork a process that has started threads of its own: it keeps the one-solve rule and says so', () => {
    const input = 'MZ!AxT' + 'xyqxyq';
    const { structure, ids } = targets(input, 0);
    const loop = ids.map((e, i) => ({ e, i })).filter(({ i }) => i > 4); // after the thread started
    const group = [loop[0]!.e.opposite, loop[2]!.e.opposite];
    const result = directed(input, group);
    expect(result.status).toBe(0);
    expect(must(result.preload)).toMatchObject({ forks: 0, forkFailed: true, threadsAtFork: 2, earlyExit: true });
    expect(must(result.telemetry).counters.queries).toBe(1);
    expect([...result.outputs.keys()]).toEqual(['000000']);
    expect(flippedOffset(input, result.outputs.get('000000')!)).toEqual([structure[loop[0]!.i]!.offset]);
  });

  for (const how of ['the run alone', 'its process group'] as const) {
    it(`leaves no process behind when ${how} is SIGKILLed while a child solves`, async () => {
      const input = loopInput(30, 5);
      const { structure, first } = targets(input, 1);
      const [target] = [...first.keys()];
      const dir = mkdtempSync(path.join(scratch, 'kill-'));
      mkdirSync(path.join(dir, 'out'));
      writeFileSync(path.join(dir, 'input'), input);
      const marker = path.join(dir, 'hung');
      const child = spawn(fixture().qsymProgram, [path.join(dir, 'input')], {
        detached: true, // its own process group, as the solver runs get
        stdio: 'ignore',
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          LD_PRELOAD: preload!,
          SYMCC_OUTPUT_DIR: path.join(dir, 'out'),
          SYMCC_TELEMETRY_OUT: path.join(dir, 'telemetry.json'),
          SYMCC_TARGET_BRANCH: target!.toString(),
          SYMFENCE_PRELOAD_IN_PLACE: '0', // a one-target run would otherwise answer in place
          FAKE_SYMCC_HANG_SITES: structure[first.get(target!)!]!.site.toString(),
          FAKE_SYMCC_HANG_MARKER: marker,
        },
      });
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      await until('the forked child to start solving', () => existsSync(marker) && readFileSync(marker, 'utf8').endsWith('\n'));
      const hung = Number(readFileSync(marker, 'utf8'));
      expect(hung).not.toBe(child.pid);
      // The child is in the run's process group.
      const stat = readFileSync(`/proc/${hung}/stat`, 'utf8');
      expect(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2])).toBe(child.pid);
      if (how === 'the run alone') process.kill(child.pid!, 'SIGKILL');
      else process.kill(-child.pid!, 'SIGKILL');
      await exited;
      await until('the forked child to die with the run', () => dead(hung));
      expect(existsSync(path.join(dir, 'telemetry.json'))).toBe(false);
    });
  }

  it('a trace run with a wanted set traces the whole path and answers every wanted branch on it', () => {
    const input = 'MZ!A' + 'xyqxy';
    const { structure, ids } = targets(input, 0);
    const wanted = [ids[2]!.opposite, ids[7]!.opposite, 12345n /* not on this path */];
    const files = { wanted: wanted.map((b) => `${b}\n`).join('') };
    const env = { SYMFENCE_TRACE_ONLY: '1', SYMFENCE_WANTED: '{dir}/wanted', SYMFENCE_PRELOAD_IN_PLACE: '0' };
    const result = run(input, { program: fixture().qsymProgram, env, files });
    expect(result.status).toBe(0);
    const p = must(result.preload);
    expect(p).toMatchObject({ mode: 'trace', wanted: 3, forks: 2, earlyExit: false, symbolicEvents: structure.length });
    expect(result.generatedBy.map(([name, b]) => [name, b])).toEqual([
      ['f1-000000', wanted[0]!.toString()],
      ['f2-000000', wanted[1]!.toString()],
    ]);
    const t = must(result.telemetry);
    expect(t.openBranches).not.toContain(wanted[0]);
    expect(t.openBranches).not.toContain(wanted[1]);
    expect(t.branchTrace.filter((r) => r.interesting === 1).map((r) => r.opposite)).toEqual(wanted.slice(0, 2));
    // Without the wanted set it is the plain trace run; off QSYM the wanted branches are solved in place.
    const plain = run(input, { program: fixture().qsymProgram, env: { SYMFENCE_TRACE_ONLY: '1' } });
    expect(plain.outputs.size).toBe(0);
    expect(must(plain.telemetry).counters.queries).toBe(0);
    const inPlace = run(input, { env, files });
    expect([...inPlace.outputs.keys()]).toEqual(['000000', '000001']);
    expect(must(inPlace.preload)).toMatchObject({ forks: 0, wanted: 3 });
  });

  describe('in-place answers', () => {
    /** Each answer's branch with the input offset its file flips, in path order. */
    function flips(result: Run, input: string): [string, number[]][] {
      return result.generatedBy.map(([name, branch]) => [branch, flippedOffset(input, result.outputs.get(name)!)]);
    }

    it("after one forked answer shows QSYM's decision comes through the library, answers the rest of the group in this process, one solving step each", () => {
      const input = 'MZ!A' + 'xyqxyqx';
      const { structure, ids } = targets(input, 0);
      const picks = [2, 7, 9];
      const group = picks.map((i) => ids[i]!.opposite);
      const result = directed(input, group, { SYMFENCE_PRELOAD_IN_PLACE: '1' });
      expect(result.status).toBe(0);
      // The first answer comes from a child (f1-), the others from this process under QSYM's own names.
      expect(result.generatedBy).toEqual([
        ['f1-000000', group[0]!.toString(), structure[2]!.site.toString()],
        ['000000', group[1]!.toString(), structure[7]!.site.toString()],
        ['000001', group[2]!.toString(), structure[9]!.site.toString()],
      ]);
      expect(flips(result, input)).toEqual(picks.map((i, k) => [group[k]!.toString(), [structure[i]!.offset]]));
      // The runtime saw a real site id exactly at the group's events; every other call had site 0.
      expect(result.events.filter((e) => e.site !== 0n).map((e) => e.site)).toEqual(picks.map((i) => structure[i]!.site));
      const p = must(result.preload);
      // QSYM solved exactly the two in-place branches here: no inherited verdict solved anything else.
      expect(p).toMatchObject({ forks: 1, inPlace: 2, negations: 2, interposed: true, forkFailed: false, earlyExit: true });
      const t = must(result.telemetry);
      expect(t.targetStatus).toBe('sat');
      expect(t.counters).toMatchObject({ queries: 3, sat: 3, unsat: 0, unknown: 0, generated: 3 });
      expect(result.answers.map(([b, s, , , files]) => [b, s, files])).toEqual(group.map((b) => [b.toString(), 'sat', 1]));
      expect(t.branchTrace.filter((r) => r.interesting === 1).map((r) => r.opposite)).toEqual(group);
    });

    it('answers a 64-target group with one fork, with the same answers and bytes as forking every one', () => {
      const input = loopInput(400, 7);
      const { structure, first } = targets(input, 64);
      const group = [...first.keys()];
      const inPlace = directed(input, group, { SYMFENCE_PRELOAD_IN_PLACE: '1', SYMFENCE_PRELOAD_EARLY_EXIT: '0' });
      const forked = directed(input, group, { SYMFENCE_PRELOAD_EARLY_EXIT: '0' });
      for (const r of [inPlace, forked]) expect(r.status).toBe(0);
      expect(must(inPlace.preload)).toMatchObject({ forks: 1, inPlace: 63, negations: 63, symbolicEvents: structure.length, forkCapped: false });
      expect(must(forked.preload)).toMatchObject({ forks: 64, inPlace: 0, negations: 0 });
      expect(flips(inPlace, input)).toEqual(flips(forked, input));
      for (const [branch, offsets] of flips(inPlace, input)) expect(offsets).toEqual([structure[first.get(BigInt(branch))!]!.offset]);
      expect(inPlace.answers.map(([b, s, , , f]) => [b, s, f])).toEqual(forked.answers.map(([b, s, , , f]) => [b, s, f]));
      expect(must(inPlace.telemetry).openBranches).toEqual(must(forked.telemetry).openBranches);
    });

    it('on a build whose decision never reaches the library, every answer forks but the last (the run ends after it); with SYMFENCE_PRELOAD_IN_PLACE=0, every one', () => {
      const input = 'MZ!A' + 'xyqxyqx';
      const { structure, ids } = targets(input, 0);
      const picks = [2, 7, 9];
      const group = picks.map((i) => ids[i]!.opposite);
      const sealed = directed(input, group, { SYMFENCE_PRELOAD_IN_PLACE: '1', FAKE_SYMCC_QSYM_SEALED: '1' });
      const off = directed(input, group);
      for (const r of [sealed, off]) {
        expect(r.status).toBe(0);
        expect(flips(r, input)).toEqual(picks.map((i, k) => [group[k]!.toString(), [structure[i]!.offset]]));
        expect(must(r.telemetry).counters).toMatchObject({ queries: 3, sat: 3 });
        // Only the group's events reached QSYM with a real site id: nothing else was solved.
        expect(r.events.filter((e) => e.site !== 0n).map((e) => e.site)).toEqual(picks.map((i) => structure[i]!.site));
      }
      expect(sealed.generatedBy.map(([name]) => name)).toEqual(['f1-000000', 'f2-000000', '000000']);
      expect(must(sealed.preload)).toMatchObject({ forks: 2, inPlace: 1, negations: 0, interposed: false, earlyExit: true });
      expect(off.generatedBy.map(([name]) => name)).toEqual(['f1-000000', 'f2-000000', 'f3-000000']);
      expect(must(off.preload)).toMatchObject({ forks: 3, inPlace: 0, negations: 0, interposed: false });
    });

    it('the fork cap counts forks only: after the proving fork, in-place answers go on', () => {
      const input = 'MZ!A' + 'xyqxyqx';
      const { ids } = targets(input, 0);
      const group = [2, 7, 9].map((i) => ids[i]!.opposite);
      const result = directed(input, group, { SYMFENCE_PRELOAD_IN_PLACE: '1', SYMFENCE_PRELOAD_MAX_FORKS: '1' });
      expect(result.status).toBe(0);
      expect(must(result.preload)).toMatchObject({ forks: 1, inPlace: 2, forkCapped: false });
      expect(must(result.telemetry).counters).toMatchObject({ queries: 3, sat: 3 });
    });

    it('an untargeted run leaves every decision to QSYM: the same files as without the library', () => {
      const input = loopInput(120, 9);
      const withLibrary = run(input, { program: fixture().qsymProgram });
      const without = run(input, { program: fixture().qsymProgram, ldPreload: null, telemetry: false });
      expect(withLibrary.status).toBe(0);
      expect(without.status).toBe(0);
      // QSYM's pruning skips most of the loop's repeats; the library changes none of it.
      expect(without.outputs.size).toBeGreaterThan(0);
      expect(without.outputs.size).toBeLessThan(plainEvents(input).length);
      expect([...withLibrary.outputs.entries()]).toEqual([...without.outputs.entries()]);
      expect(must(withLibrary.preload)).toMatchObject({ mode: 'untargeted', forks: 0, inPlace: 0, interposed: true, negations: without.outputs.size });
    });

    it('a one-target run answers in place and ends: no fork at all', () => {
      const input = 'MZ!A' + 'xyqxyqx';
      const { structure, ids } = targets(input, 0);
      for (const sealedEnv of [{}, { FAKE_SYMCC_QSYM_SEALED: '1' }]) {
        const result = directed(input, [ids[7]!.opposite], { SYMFENCE_PRELOAD_IN_PLACE: '1', ...sealedEnv });
        expect(result.status).toBe(0);
        expect(result.generatedBy).toEqual([['000000', ids[7]!.opposite.toString(), structure[7]!.site.toString()]]);
        expect(must(result.preload)).toMatchObject({ forks: 0, inPlace: 1, earlyExit: true });
        expect(must(result.telemetry).targetStatus).toBe('sat');
        // The run ended at its answer: no event after it reached the runtime.
        expect(result.events).toHaveLength(8);
      }
    });

    it('spends the answers CPU budget in place too: past it the rest of the group stays open', () => {
      const input = 'MZ!A' + 'xyqxyqx';
      const { structure, ids } = targets(input, 0);
      const group = [2, 7, 9].map((i) => ids[i]!.opposite);
      // The second answer (the first in place) burns 100 ms of CPU; the budget is 50 ms.
      const env = { SYMFENCE_PRELOAD_IN_PLACE: '1', FAKE_SYMCC_SLOW_SITES: structure[7]!.site.toString(), SYMFENCE_PRELOAD_FORK_CPU_MS: '50' };
      const result = directed(input, group, env);
      expect(result.status).toBe(0);
      expect(result.answers.map(([b, s]) => [b, s])).toEqual([
        [group[0]!.toString(), 'sat'],
        [group[1]!.toString(), 'sat'],
      ]);
      expect(result.answers[1]![3]).toBeGreaterThanOrEqual(100_000); // its CPU, in microseconds
      expect(must(result.preload)).toMatchObject({ forks: 1, inPlace: 1, forkCapped: true, earlyExit: false });
      expect(must(result.telemetry).openBranches).toContain(group[2]);
    });

    it('a crash inside an in-place solving call ends the run; the answers before it stay on disk', () => {
      const input = 'MZ!A' + 'xyqxyqx';
      const { structure, ids } = targets(input, 0);
      const group = [2, 7, 9].map((i) => ids[i]!.opposite);
      const result = directed(input, group, { SYMFENCE_PRELOAD_IN_PLACE: '1', FAKE_SYMCC_CRASH_SITES: structure[7]!.site.toString() });
      expect(result.signal).toBe('SIGABRT');
      expect([...result.outputs.keys()]).toEqual(['f1-000000']);
      expect(flippedOffset(input, result.outputs.get('f1-000000')!)).toEqual([structure[2]!.offset]);
      expect(result.telemetry).toBeNull();
      expect(result.telemetryDirEntries.filter((name) => name.includes('.tmp'))).toEqual([]);
    });

    it('a trace run with a wanted set answers the wanted branches after the first in place', () => {
      const input = 'MZ!A' + 'xyqxyqx';
      const { structure, ids } = targets(input, 0);
      const wanted = [ids[2]!.opposite, ids[7]!.opposite, ids[9]!.opposite];
      const files = { wanted: wanted.map((b) => `${b}\n`).join('') };
      const result = run(input, { program: fixture().qsymProgram, env: { SYMFENCE_TRACE_ONLY: '1', SYMFENCE_WANTED: '{dir}/wanted' }, files });
      expect(result.status).toBe(0);
      expect(must(result.preload)).toMatchObject({ mode: 'trace', wanted: 3, forks: 1, inPlace: 2, negations: 2, symbolicEvents: structure.length });
      expect(result.generatedBy.map(([name, b]) => [name, b])).toEqual([
        ['f1-000000', wanted[0]!.toString()],
        ['000000', wanted[1]!.toString()],
        ['000001', wanted[2]!.toString()],
      ]);
      for (const b of wanted) expect(must(result.telemetry).openBranches).not.toContain(b);
    });
  });

  describe('setup reads bounded input', () => {
    const fifo = path.join(scratch, 'fifo');
    const big = path.join(scratch, 'big');
    const cases: [string, string, string][] = [
      ['/dev/zero', '/dev/zero', 'ERR_PRELOAD_INPUT_NOT_REGULAR'],
      ['/dev/urandom', '/dev/urandom', 'ERR_PRELOAD_INPUT_NOT_REGULAR'],
      ['a FIFO without a writer', fifo, 'ERR_PRELOAD_INPUT_NOT_REGULAR'],
      ['a directory', scratch, 'ERR_PRELOAD_INPUT_NOT_REGULAR'],
      ['a regular file over 64 KiB', big, 'ERR_PRELOAD_INPUT_TOO_LARGE'],
      ['a missing file', path.join(scratch, 'missing'), 'ERR_PRELOAD_INPUT_OPEN'],
    ];
    for (const [variable, errorField] of [
      ['SYMCC_S2F_ACTIONS', 'actionsError'],
      ['SYMFENCE_WANTED', 'wantedError'],
    ] as const) {
      for (const [what, file, code] of cases) {
        it(`${variable} naming ${what}: the program runs to its end promptly, solving nothing, with ${code}`, () => {
          if (!existsSync(fifo)) execFileSync('mkfifo', [fifo]);
          if (!existsSync(big)) writeFileSync(big, `${'1 solve\n'.repeat(9000)}`);
          const env: Record<string, string> = { [variable]: file };
          if (variable === 'SYMFENCE_WANTED') env.SYMFENCE_TRACE_ONLY = '1';
          const result = run('MZ!Axy', { program: fixture().qsymProgram, env, timeoutMs: 20_000 });
          expect(result.signal).toBeNull();
          expect(result.status).toBe(0);
          expect(result.stderr).toContain(`[${code}]`);
          expect(result.stderr).toContain(`${variable}=${file}`);
          const p = must(result.preload);
          expect(p).toMatchObject({ mode: 'trace', [errorField]: code, forks: 0 });
          expect(must(result.telemetry).counters.queries).toBe(0);
          expect(result.outputs.size).toBe(0);
        });
      }
    }
  });

  it('gives a site id inside the runtime library (a libc wrapper address) the same id in every run, whatever ASLR does', () => {
    const input = 'WRxy';
    const symbols = execFileSync('nm', ['-D', '--defined-only', path.join(path.dirname(fixture().qsymProgram), 'libSymRuntime.so')], { encoding: 'utf8' });
    const line = symbols.split('\n').find((l) => l.endsWith(' _sym_fake_input'));
    expect(line).toBeDefined();
    const offset = BigInt(`0x${line!.split(' ')[0]}`);
    const runs = [run(input), run(input)]; // untargeted: the runtime logs the raw site ids it receives
    const raw = runs.map((r) => r.events[1]!.site);
    const traces = runs.map((r) => must(r.telemetry).branchTrace);
    expect(traces[1]).toEqual(traces[0]);
    expect(traces[0]![1]!.site).toBe(stableSite('libSymRuntime.so', offset));
    // The raw address moved (ASLR on, the default here); the compile-time sites stay as they are.
    if (readFileSync('/proc/sys/kernel/randomize_va_space', 'utf8').trim() !== '0') expect(raw[1]).not.toBe(raw[0]);
    expect(traces[0]![0]!.site).toBe(1n);
    expect(must(runs[0]!.preload).siteLookups).toBe(new Set(runs[0]!.events.map((e) => e.site)).size);
  });
});
