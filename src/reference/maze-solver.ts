/**
 * TEST AND DEMO FIXTURE. The reference solver's constraint solver: given an input and a list of
 * maze tests with the outcome each must have, find the closest input (same length) satisfying all.
 *
 * Byte tests (eq, range) become per-byte domains (256-entry allowed sets); a byte outside its
 * domain moves to the nearest allowed value. Checksums are then repaired one at a time by changing
 * a single byte of their range, trying later bytes first, keeping earlier checksums satisfied.
 * An empty domain, or a checksum whose bytes are all past the end of the input, is `unsat`; a
 * checksum that no single-byte change can repair is `unknown` (like a solver giving up).
 * Deterministic: the same question always gets the same answer.
 */
import { evaluateTest, type MazeTest } from './maze.js';

interface MazeConstraint {
  readonly test: MazeTest;
  readonly want: boolean;
}

type SolveOutcome = { readonly status: 'sat'; readonly input: Uint8Array } | { readonly status: 'unsat' } | { readonly status: 'unknown' };

function allowedSet(test: MazeTest, want: boolean): Uint8Array {
  const allowed = new Uint8Array(256);
  for (let v = 0; v < 256; v++) {
    const holds = test.kind === 'eq' ? v === test.value : test.kind === 'range' ? v >= test.min && v <= test.max : true;
    allowed[v] = holds === want ? 1 : 0;
  }
  return allowed;
}

export function solveConstraints(input: Uint8Array, constraints: readonly MazeConstraint[]): SolveOutcome {
  const domains = new Map<number, Uint8Array>();
  for (const c of constraints) {
    if (c.test.kind === 'checksum') continue;
    const set = allowedSet(c.test, c.want);
    const current = domains.get(c.test.offset);
    if (current) for (let v = 0; v < 256; v++) current[v] = current[v]! & set[v]!;
    else domains.set(c.test.offset, set);
  }
  const candidate = new Uint8Array(input);
  for (const [offset, domain] of domains) {
    if (!domain.includes(1)) return { status: 'unsat' };
    if (offset >= input.length) {
      // Past the end: the byte reads as 0 and cannot change (outputs keep the input's length).
      if (domain[0] !== 1) return { status: 'unsat' };
      continue;
    }
    if (domain[candidate[offset]!] === 1) continue;
    candidate[offset] = nearestAllowed(domain, candidate[offset]!);
  }

  const checksums = constraints.filter((c) => c.test.kind === 'checksum');
  const done: MazeConstraint[] = [];
  for (const c of checksums) {
    done.push(c);
    if (evaluateTest(c.test, candidate) === c.want) continue;
    const test = c.test as Extract<MazeTest, { kind: 'checksum' }>;
    const last = Math.min(test.to, input.length) - 1;
    if (last < test.from) return { status: 'unsat' };
    let repaired = false;
    for (let j = last; j >= test.from && !repaired; j--) {
      const domain = domains.get(j);
      const original = candidate[j]!;
      for (let step = 1; step < 256; step++) {
        const v = (original + step) & 0xff;
        if (domain && domain[v] !== 1) continue;
        candidate[j] = v;
        if (done.every((d) => evaluateTest(d.test, candidate) === d.want)) {
          repaired = true;
          break;
        }
      }
      if (!repaired) candidate[j] = original;
    }
    if (!repaired) return { status: 'unknown' };
  }
  if (!constraints.every((c) => evaluateTest(c.test, candidate) === c.want)) return { status: 'unknown' };
  return { status: 'sat', input: candidate };
}

function nearestAllowed(domain: Uint8Array, from: number): number {
  for (let distance = 1; distance < 256; distance++) {
    if (from + distance < 256 && domain[from + distance] === 1) return from + distance;
    if (from - distance >= 0 && domain[from - distance] === 1) return from - distance;
  }
  return from;
}
