/**
 * TEST AND DEMO FIXTURE. The declarative "maze" target the reference solver runs: nested branch
 * sites that test input bytes. It stands in for a SymCC-instrumented program so the runtime can be
 * exercised (and demonstrated) without SymCC; it is not a fuzzing target of any value.
 *
 * Format (`symfence-maze/1`, JSON):
 *
 *   { "schema": "symfence-maze/1", "name": "demo", "inputLength": 16, "body": [ node, … ] }
 *   node  = { "site": 1..2^31-1 (unique), "test": test, "then": [node…]?, "else": [node…]? }
 *         | { "abort": true }                       reaching it crashes the target (SIGABRT)
 *   test  = { "kind": "eq",       "offset": o, "value": 0..255 }          in[o] == value
 *         | { "kind": "range",    "offset": o, "min": a, "max": b }       a <= in[o] <= b
 *         | { "kind": "checksum", "from": f, "to": t, "value": 0..255 }   (Σ in[f..t)) mod 256 == value
 *
 * A body runs its nodes in order; a site evaluates its test and runs `then` or `else`, then the
 * next sibling. Bytes past the end of the input, or at or past `inputLength`, read as 0 (as in the
 * generated C program, which reads at most `inputLength` bytes).
 */
import { createHash } from 'node:crypto';
import { MazeInvalidError } from '../errors.js';
import { COUNT_CLASS } from '../solver/coverage-bitmap.js';

const MAZE_SCHEMA = 'symfence-maze/1';

export type MazeTest =
  | { readonly kind: 'eq'; readonly offset: number; readonly value: number }
  | { readonly kind: 'range'; readonly offset: number; readonly min: number; readonly max: number }
  | { readonly kind: 'checksum'; readonly from: number; readonly to: number; readonly value: number };

interface MazeBranchNode {
  readonly site: number;
  readonly test: MazeTest;
  readonly then?: readonly MazeNode[];
  readonly else?: readonly MazeNode[];
}
interface MazeAbortNode {
  readonly abort: true;
}
export type MazeNode = MazeBranchNode | MazeAbortNode;

export interface Maze {
  readonly schema: typeof MAZE_SCHEMA;
  readonly name: string;
  readonly inputLength: number;
  readonly body: readonly MazeNode[];
}

const MAX_INPUT_LENGTH = 1 << 20;
const MAX_SITES = 4096;

function fail(message: string, where: string): never {
  throw new MazeInvalidError(`maze ${where}: ${message}`, { where });
}

function byteValue(value: unknown, where: string): number {
  if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > 255) fail('expected a byte value 0..255', where);
  return value as number;
}

function offsetValue(value: unknown, where: string): number {
  if (!Number.isInteger(value) || (value as number) < 0 || (value as number) >= MAX_INPUT_LENGTH) fail(`expected an offset 0..${MAX_INPUT_LENGTH - 1}`, where);
  return value as number;
}

function checkTest(raw: unknown, where: string): MazeTest {
  const t = raw as Record<string, unknown> | null;
  if (typeof t !== 'object' || t === null) fail('test must be an object', where);
  switch (t.kind) {
    case 'eq':
      return { kind: 'eq', offset: offsetValue(t.offset, `${where}.offset`), value: byteValue(t.value, `${where}.value`) };
    case 'range': {
      const min = byteValue(t.min, `${where}.min`);
      const max = byteValue(t.max, `${where}.max`);
      if (min > max) fail('range min must be <= max', where);
      return { kind: 'range', offset: offsetValue(t.offset, `${where}.offset`), min, max };
    }
    case 'checksum': {
      const from = offsetValue(t.from, `${where}.from`);
      const to = offsetValue(t.to, `${where}.to`);
      if (to <= from) fail('checksum needs from < to', where);
      return { kind: 'checksum', from, to, value: byteValue(t.value, `${where}.value`) };
    }
    default:
      fail('test kind must be eq, range or checksum', `${where}.kind`);
  }
}

function checkBody(raw: unknown, where: string, sites: Set<number>): MazeNode[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) fail('body must be an array of nodes', where);
  return raw.map((node: unknown, index) => {
    const at = `${where}[${index}]`;
    const n = node as Record<string, unknown> | null;
    if (typeof n !== 'object' || n === null) fail('node must be an object', at);
    if (n.abort === true) return { abort: true } as const;
    if (!Number.isInteger(n.site) || (n.site as number) < 1 || (n.site as number) > 0x7fffffff) fail('site must be an integer 1..2^31-1', `${at}.site`);
    const site = n.site as number;
    if (sites.has(site)) fail(`site ${site} appears twice`, `${at}.site`);
    sites.add(site);
    if (sites.size > MAX_SITES) fail(`more than ${MAX_SITES} sites`, at);
    return {
      site,
      test: checkTest(n.test, `${at}.test`),
      then: checkBody(n.then, `${at}.then`, sites),
      else: checkBody(n.else, `${at}.else`, sites),
    };
  });
}

/** Validates a parsed JSON value as a maze. Throws `MazeInvalidError` naming the bad field. */
export function parseMaze(raw: unknown): Maze {
  const m = raw as Record<string, unknown> | null;
  if (typeof m !== 'object' || m === null || Array.isArray(m)) fail('must be a JSON object', '$');
  if (m.schema !== MAZE_SCHEMA) fail(`schema must be ${MAZE_SCHEMA}`, '$.schema');
  if (typeof m.name !== 'string' || m.name.length === 0) fail('name must be a non-empty string', '$.name');
  if (!Number.isInteger(m.inputLength) || (m.inputLength as number) < 1 || (m.inputLength as number) > MAX_INPUT_LENGTH) {
    fail(`inputLength must be an integer 1..${MAX_INPUT_LENGTH}`, '$.inputLength');
  }
  return { schema: MAZE_SCHEMA, name: m.name, inputLength: m.inputLength as number, body: checkBody(m.body, '$.body', new Set()) };
}

function* branchSites(body: readonly MazeNode[]): Generator<MazeBranchNode> {
  for (const node of body) {
    if ('abort' in node) continue;
    yield node;
    yield* branchSites(node.then ?? []);
    yield* branchSites(node.else ?? []);
  }
}

function mazeSites(maze: Maze): MazeBranchNode[] {
  return [...branchSites(maze.body)];
}

/** Branch outcomes in the maze: two per site (taken and not taken). */
export function mazeBranchCount(maze: Maze): number {
  return 2 * mazeSites(maze).length;
}

function byteAt(input: Uint8Array, offset: number): number {
  return offset < input.length ? input[offset]! : 0;
}

export function evaluateTest(test: MazeTest, input: Uint8Array): boolean {
  switch (test.kind) {
    case 'eq':
      return byteAt(input, test.offset) === test.value;
    case 'range': {
      const b = byteAt(input, test.offset);
      return b >= test.min && b <= test.max;
    }
    case 'checksum': {
      let sum = 0;
      for (let i = test.from; i < test.to; i++) sum += byteAt(input, i);
      return (sum & 0xff) === test.value;
    }
  }
}

/**
 * Prefix-sensitive branch id: the same site taken the same way after a different path prefix is a
 * different branch. u64 from SHA-256 of `parent/site/taken`, never 0 (0 means "no branch").
 */
export function branchId(parent: bigint, site: number, taken: boolean): bigint {
  const digest = createHash('sha256').update(`${parent.toString(10)}/${site}/${taken ? 1 : 0}`).digest();
  const id = digest.readBigUInt64BE(0);
  return id === 0n ? 1n : id;
}

export interface MazeStep {
  readonly parent: bigint;
  readonly actual: bigint;
  readonly opposite: bigint;
  readonly site: number;
  readonly taken: boolean;
  readonly test: MazeTest;
}

export interface MazeWalk {
  readonly steps: readonly MazeStep[];
  /** An `abort` node was reached (the target crashes there; later nodes do not run). */
  readonly aborted: boolean;
}

interface MazeDecision {
  readonly site: number;
  readonly taken: boolean;
  readonly test: MazeTest;
}

interface MazeTrace {
  readonly decisions: readonly MazeDecision[];
  /** An `abort` node was reached (the target crashes there; later nodes do not run). */
  readonly aborted: boolean;
}

/**
 * Runs the maze on `input` and records every branch decision in order, without branch ids: what
 * coverage and reachability need (ids cost two SHA-256 per decision; see `walkMaze`).
 */
export function traceMaze(maze: Maze, fullInput: Uint8Array): MazeTrace {
  // The program reads at most inputLength bytes (like the generated C program's fread).
  const input = fullInput.subarray(0, maze.inputLength);
  const decisions: MazeDecision[] = [];
  const run = (body: readonly MazeNode[]): boolean => {
    for (const node of body) {
      if ('abort' in node) return true;
      const taken = evaluateTest(node.test, input);
      decisions.push({ site: node.site, taken, test: node.test });
      if (run((taken ? node.then : node.else) ?? [])) return true;
    }
    return false;
  };
  const aborted = run(maze.body);
  return { decisions, aborted };
}

/** Runs the maze on `input` and records every branch decision in order, with prefix-sensitive ids. */
export function walkMaze(maze: Maze, input: Uint8Array): MazeWalk {
  const trace = traceMaze(maze, input);
  const steps: MazeStep[] = [];
  let parent = 0n;
  for (const { site, taken, test } of trace.decisions) {
    const actual = branchId(parent, site, taken);
    steps.push({ parent, actual, opposite: branchId(parent, site, !taken), site, taken, test });
    parent = actual;
  }
  return { steps, aborted: trace.aborted };
}

/** Which `(site, taken)` outcomes `input` reaches, as `"site:1"` / `"site:0"` strings. */
export function reachedBranches(maze: Maze, input: Uint8Array): Set<string> {
  return new Set(traceMaze(maze, input).decisions.map((d) => `${d.site}:${d.taken ? 1 : 0}`));
}

/** Map index of a `(site, taken)` edge in the maze's AFL-style coverage map. */
function edgeIndex(site: number, taken: boolean, mapSizeBytes: number): number {
  let h = Math.imul(site, 0x9e3779b1) ^ (taken ? 0x85ebca6b : 0x27d4eb2f);
  h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d);
  h ^= h >>> 13;
  return (h >>> 0) % mapSizeBytes;
}

/**
 * The maze's coverage map in `afl-showmap -b` form: one byte per edge, hit counts already bucketed
 * (every site runs at most once per input, so each reached edge holds bucket 1).
 */
export function mazeCoverageMap(trace: MazeTrace | MazeWalk, mapSizeBytes: number): Uint8Array {
  const map = new Uint8Array(mapSizeBytes);
  for (const [index, hits] of mazeEdgeHits(trace, mapSizeBytes)) map[index] = COUNT_CLASS[Math.min(255, hits)]!;
  return map;
}

/**
 * The same coverage as a sparse `map index → raw hit count` (a maze run touches a few dozen edges;
 * building and scanning a whole map per input is what made in-process triage expensive).
 */
export function mazeEdgeHits(trace: MazeTrace | MazeWalk, mapSizeBytes: number): Map<number, number> {
  const hits = new Map<number, number>();
  const decisions = 'decisions' in trace ? trace.decisions : trace.steps;
  for (const { site, taken } of decisions) {
    const index = edgeIndex(site, taken, mapSizeBytes);
    hits.set(index, (hits.get(index) ?? 0) + 1);
  }
  return hits;
}
