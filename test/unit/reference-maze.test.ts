import { describe, expect, it } from 'vitest';
import { DEMO_MAZE } from '../../src/reference/demo-maze.js';
import { branchId, mazeBranchCount, mazeCoverageMap, parseMaze, reachedBranches, traceMaze, walkMaze, type Maze } from '../../src/reference/maze.js';
import { solveConstraints } from '../../src/reference/maze-solver.js';
import { parseActionsText, runReference } from '../../src/reference/reference-run.js';
import { mazeToC } from '../../src/reference/maze-c.js';

const bytes = (text: string, length = 16): Uint8Array => {
  const out = new Uint8Array(length);
  out.set(Buffer.from(text, 'latin1').subarray(0, length));
  return out;
};

describe('maze format', () => {
  it('accepts the bundled demo maze and counts two outcomes per site', () => {
    const parsed = parseMaze(JSON.parse(JSON.stringify(DEMO_MAZE)));
    expect(mazeBranchCount(parsed)).toBe(16);
    expect(mazeBranchCount(DEMO_MAZE)).toBe(16);
    expect(walkMaze(parsed, bytes('FU7'))).toEqual(walkMaze(DEMO_MAZE, bytes('FU7')));
  });

  it.each([
    [{ schema: 'other', name: 'x', inputLength: 4, body: [] }, '$.schema'],
    [{ schema: 'symfence-maze/1', name: '', inputLength: 4, body: [] }, '$.name'],
    [{ schema: 'symfence-maze/1', name: 'x', inputLength: 0, body: [] }, '$.inputLength'],
    [{ schema: 'symfence-maze/1', name: 'x', inputLength: 4, body: [{ site: 1, test: { kind: 'eq', offset: 0, value: 256 } }] }, '$.body[0].test.value'],
    [{ schema: 'symfence-maze/1', name: 'x', inputLength: 4, body: [{ site: 1, test: { kind: 'range', offset: 0, min: 9, max: 3 } }] }, '$.body[0].test'],
    [{ schema: 'symfence-maze/1', name: 'x', inputLength: 4, body: [{ site: 1, test: { kind: 'checksum', from: 2, to: 2, value: 0 } }] }, '$.body[0].test'],
    [{ schema: 'symfence-maze/1', name: 'x', inputLength: 4, body: [{ site: 1, test: { kind: 'eq', offset: 0, value: 1 }, then: [{ site: 1, test: { kind: 'eq', offset: 0, value: 1 } }] }] }, '$.body[0].then[0].site'],
    [{ schema: 'symfence-maze/1', name: 'x', inputLength: 4, body: [{ site: 1, test: { kind: 'lt', offset: 0 } }] }, '$.body[0].test.kind'],
  ])('rejects a malformed maze, naming the field (%#)', (raw, where) => {
    expect(() => parseMaze(raw)).toThrow(expect.objectContaining({ code: 'ERR_MAZE_INVALID', details: { where } }));
  });
});

describe('maze walk', () => {
  it('records branch decisions in order with prefix-sensitive ids', () => {
    const walk = walkMaze(DEMO_MAZE, bytes('FU'));
    expect(walk.steps.map((s) => [s.site, s.taken])).toEqual([[1, true], [2, true], [3, false], [8, false]]);
    expect(walk.steps[0]!.parent).toBe(0n);
    for (let k = 1; k < walk.steps.length; k++) expect(walk.steps[k]!.parent).toBe(walk.steps[k - 1]!.actual);
    // Site 8 after a different prefix is a different branch.
    const other = walkMaze(DEMO_MAZE, bytes('a'));
    expect(other.steps.at(-1)!.site).toBe(8);
    expect(other.steps.at(-1)!.actual).not.toBe(walk.steps.at(-1)!.actual);
    expect(branchId(0n, 1, true)).not.toBe(branchId(0n, 1, false));
  });

  it('traces the same decisions as the walk, without computing ids', () => {
    for (const input of ['FU', 'ax', 'FU0\x8f!', '']) {
      const walk = walkMaze(DEMO_MAZE, bytes(input));
      const trace = traceMaze(DEMO_MAZE, bytes(input));
      expect(trace.decisions.map((d) => [d.site, d.taken])).toEqual(walk.steps.map((s) => [s.site, s.taken]));
      expect(trace.aborted).toBe(walk.aborted);
      expect(mazeCoverageMap(trace, 4096)).toEqual(mazeCoverageMap(walk, 4096));
    }
  });

  it('stops at an abort node and reports it', () => {
    const walk = walkMaze(DEMO_MAZE, bytes('FU0\x8f!'));
    expect(walk.aborted).toBe(true);
    expect(walk.steps.map((s) => s.site)).toEqual([1, 2, 3, 4, 5]);
  });

  it('tells which outcomes an input reached and maps them to bucketed coverage', () => {
    expect(reachedBranches(DEMO_MAZE, bytes('ax'))).toEqual(new Set(['1:0', '6:1', '7:1', '8:0']));
    const map = mazeCoverageMap(walkMaze(DEMO_MAZE, bytes('ax')), 65536);
    expect(map.filter((b) => b !== 0).length).toBe(4);
    expect(Math.max(...map)).toBe(1);
  });
});

describe('maze solver', () => {
  const eq = (offset: number, value: number) => ({ kind: 'eq', offset, value }) as const;

  it('solves equalities and ranges with the nearest change', () => {
    const outcome = solveConstraints(bytes(''), [
      { test: eq(0, 0x46), want: true },
      { test: { kind: 'range', offset: 1, min: 0x30, max: 0x39 }, want: true },
    ]);
    expect(outcome.status).toBe('sat');
    if (outcome.status === 'sat') expect([...outcome.input.subarray(0, 3)]).toEqual([0x46, 0x30, 0]);
  });

  it('reports contradictory byte constraints as unsat', () => {
    expect(solveConstraints(bytes(''), [{ test: eq(0, 1), want: true }, { test: eq(0, 2), want: true }]).status).toBe('unsat');
  });

  it('repairs a checksum through a free byte while keeping pinned bytes', () => {
    const outcome = solveConstraints(bytes('FU5'), [
      { test: eq(0, 0x46), want: true },
      { test: { kind: 'checksum', from: 0, to: 4, value: 0x5a }, want: true },
    ]);
    expect(outcome.status).toBe('sat');
    if (outcome.status === 'sat') {
      expect(outcome.input[0]).toBe(0x46);
      expect((outcome.input[0]! + outcome.input[1]! + outcome.input[2]! + outcome.input[3]!) & 0xff).toBe(0x5a);
    }
  });

  it('gives up (unknown) on a checksum whose only byte is pinned to a wrong value', () => {
    expect(solveConstraints(bytes(''), [{ test: eq(0, 1), want: true }, { test: { kind: 'checksum', from: 0, to: 1, value: 9 }, want: true }]).status).toBe('unknown');
  });

  it('cannot change bytes past the end of the input', () => {
    expect(solveConstraints(bytes('', 2), [{ test: eq(5, 1), want: true }]).status).toBe('unsat');
  });
});

describe('reference run', () => {
  it('untargeted: flips every branch on the path and describes it as symfence-telemetry/1', () => {
    const run = runReference(DEMO_MAZE, bytes(''), null);
    expect(run.telemetry.schema).toBe('symfence-telemetry/1');
    expect(run.telemetry.counters.queries).toBe(run.telemetry.branchTrace.length);
    expect(run.solutions.length).toBe(run.telemetry.counters.generated);
    expect(run.solutions.every((s) => s.length === 16)).toBe(true);
    expect(run.telemetry.targetStatus).toBe('none');
    for (const row of run.telemetry.branchTrace) expect(row).toHaveLength(6);
  });

  it('directed: solves only the target and solve/sample actions, never skip', () => {
    const walk = walkMaze(DEMO_MAZE, bytes('F'));
    const [first, second] = walk.steps;
    const run = runReference(DEMO_MAZE, bytes('F'), { targetBranch: second!.opposite, actions: new Map([[first!.opposite, 'skip']]) });
    expect(run.telemetry.counters.queries).toBe(1);
    expect(run.telemetry.targetReached).toBe(true);
    expect(run.telemetry.targetStatus).toBe('sat');
    expect(Buffer.from(run.solutions[0]!).subarray(0, 2).toString('latin1')).toBe('FU');
    expect(run.telemetry.openBranches).toContain(first!.opposite.toString());
    const skipped = runReference(DEMO_MAZE, bytes('F'), { targetBranch: second!.opposite, actions: new Map([[second!.opposite, 'skip']]) });
    expect(skipped.telemetry.counters.queries).toBe(0);
  });

  it('reports an unreached target as not reached with status none', () => {
    const run = runReference(DEMO_MAZE, bytes(''), { targetBranch: 12345n, actions: new Map() });
    expect(run.telemetry.targetReached).toBe(false);
    expect(run.telemetry.targetStatus).toBe('none');
    expect(run.solutions).toEqual([]);
  });

  it('is deterministic', () => {
    expect(runReference(DEMO_MAZE, bytes('a?'), null)).toEqual(runReference(DEMO_MAZE, bytes('a?'), null));
  });

  it('reads the S2F actions file format: first occurrence per branch wins, junk lines skipped', () => {
    expect(parseActionsText('77 solve\n88 SAMPLE\nbad line\n77 skip\n99 skip\n')).toEqual(
      new Map([[77n, 'solve'], [88n, 'sample'], [99n, 'skip']]),
    );
  });

  it('explores the whole demo maze from an all-zero seed by following novel outputs', () => {
    const maze: Maze = DEMO_MAZE;
    const queue = [bytes('')];
    const reached = new Set<string>();
    const seen = new Set<string>();
    while (queue.length > 0) {
      const input = queue.shift()!;
      for (const branch of reachedBranches(maze, input)) reached.add(branch);
      for (const solution of runReference(maze, input, null).solutions) {
        const key = Buffer.from(solution).toString('hex');
        if (!seen.has(key)) {
          seen.add(key);
          queue.push(solution);
        }
      }
    }
    expect(reached.size).toBe(mazeBranchCount(maze));
  });
});

describe('maze to C', () => {
  it('emits one if/else per site, an abort per abort node, and reads at most inputLength bytes', () => {
    const source = mazeToC(DEMO_MAZE);
    expect(source.match(/\/\* site \d+ \*\//g)).toHaveLength(8);
    expect(source).toContain('abort();');
    expect(source).toContain('fread(in, 1, 16, f)');
    expect(source).toContain('(unsigned char)(in[0] + in[1] + in[2] + in[3]) == 90');
  });
});
