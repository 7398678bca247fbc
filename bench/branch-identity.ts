/**
 * Bench `branch-identity`: how the preload library's bounded branch context (K previous events +
 * hit bucket, docs/solver.md "Stock SymCC: the preload library") names branches, against the two
 * extremes: full-prefix ids (a chain hash of every previous event) and (site, direction) alone.
 *
 * A queue of inputs for the fake SymCC program is generated the way a fuzzer grows one: each new
 * input is a prefix of an earlier one plus a random tail, so inputs share prefixes. Each input is
 * run once (plain, the fake runtime logging its symbolic events) and the event streams are named
 * with every scheme by the reference implementation (test/helpers/fake-symcc.ts), which is first
 * checked against the C library for K = 4 on one input. Per scheme:
 *   events              symbolic events over the whole queue (the same for every scheme)
 *   distinct_ids        distinct `actual` ids
 *   distinct_opposites  distinct `opposite` ids = solving calls a scheduler that solves each id once makes
 *   repeated_queries    events whose opposite was already seen earlier (queries deduplication saves)
 *   merged_vs_full      distinct full-prefix opposites that the scheme names with an id it already
 *                       gave another prefix: different path prefixes collapsed into one target
 * Deterministic (seeded); wall time is not the point. Never pass/fail.
 *
 *   npm run bench -- branch-identity [--inputs 300] [--seed 1]
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseTelemetry } from '../src/scheduler/telemetry.js';
import { preloadLibraryPath } from '../src/solver/preload-library.js';
import { buildFakeSymcc, fakeSymccUnavailable, parseEventLog, referenceBranchIds, type LoggedEvent } from '../test/helpers/fake-symcc.js';
import { flag } from './_stats.js';

const inputCount = Number(flag('inputs', '300'));
let seed = Number(flag('seed', '1'));
const unavailable = fakeSymccUnavailable();
if (unavailable) {
  console.error(`branch-identity: ${unavailable}`);
  console.log(JSON.stringify({ bench: 'branch-identity', skipped: unavailable }));
  process.exit(0);
}
const fake = buildFakeSymcc();
const scratch = mkdtempSync(path.join(os.tmpdir(), 'symfence-bench-identity-'));

function random(n: number): number {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return (seed >> 4) % n;
}

function tail(length: number): string {
  return Array.from({ length }, () => 'xyq'[random(3)]).join('');
}

function eventsOf(input: string, extraEnv: Record<string, string> = {}): { events: LoggedEvent[]; telemetry: string | null } {
  const dir = mkdtempSync(path.join(scratch, 'run-'));
  mkdirSync(path.join(dir, 'out'));
  writeFileSync(path.join(dir, 'input'), input);
  const telemetryPath = path.join(dir, 'telemetry.json');
  const child = spawnSync(fake.program, [path.join(dir, 'input')], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      SYMCC_OUTPUT_DIR: path.join(dir, 'out'),
      FAKE_SYMCC_EVENT_LOG: path.join(dir, 'events'),
      SYMCC_TELEMETRY_OUT: telemetryPath,
      ...extraEnv,
    },
    stdio: 'ignore',
  });
  if (child.status !== 0) throw new Error(`fake program exited with ${child.status ?? child.signal}`);
  const events = parseEventLog(readFileSync(path.join(dir, 'events'), 'utf8'));
  let telemetry: string | null = null;
  try {
    telemetry = readFileSync(telemetryPath, 'utf8');
  } catch {
    // no preload library in this run
  }
  rmSync(dir, { recursive: true, force: true });
  return { events, telemetry };
}

try {
  const headers = ['MZ!A', 'MZqA', 'MqqA', 'qqqA', 'ZSqA'];
  const queue: string[] = headers.map((h) => h + tail(40));
  while (queue.length < inputCount) {
    const parent = queue[random(queue.length)]!;
    const cut = 4 + random(Math.max(1, parent.length - 3));
    queue.push(parent.slice(0, cut) + tail(10 + random(120)));
  }
  const streams = queue.map((input) => eventsOf(input).events);

  // The reference must be what the C library computes.
  const preload = preloadLibraryPath();
  let checkedAgainstC = false;
  if (preload) {
    const probe = eventsOf(queue[queue.length - 1]!, { LD_PRELOAD: preload, SYMFENCE_TRACE_ONLY: '1' });
    const fromC = parseTelemetry(probe.telemetry!).branchTrace.map((r) => r.actual);
    const seen = new Set<bigint>();
    // Trace-only: the runtime logged site 0 for every call, so name the plain run's events.
    const fromTs = referenceBranchIds(streams[streams.length - 1]!, 4)
      .map((e) => e.actual)
      .filter((id) => !seen.has(id) && seen.add(id));
    if (JSON.stringify(fromC.map(String)) !== JSON.stringify(fromTs.slice(0, 512).map(String))) {
      throw new Error('reference branch ids differ from the preload library: fix test/helpers/fake-symcc.ts');
    }
    checkedAgainstC = true;
  }

  const schemes: (number | 'full' | 'site-dir')[] = [0, 1, 2, 4, 8, 'full', 'site-dir'];
  const named = new Map(schemes.map((s) => [s, streams.map((events) => referenceBranchIds(events, s))]));
  const fullOpposites = named.get('full')!.flat().map((e) => e.opposite);
  const rows = schemes.map((scheme) => {
    const ids = named.get(scheme)!.flat();
    const actual = new Set(ids.map((e) => e.actual));
    const opposites = new Set<bigint>();
    let repeated = 0;
    // Full-prefix opposite → this scheme's opposite, first seen; counts prefixes collapsed.
    const owner = new Map<bigint, bigint>();
    const claimedBy = new Map<bigint, bigint>();
    let merged = 0;
    ids.forEach((e, i) => {
      if (opposites.has(e.opposite)) repeated++;
      else opposites.add(e.opposite);
      const full = fullOpposites[i]!;
      if (owner.has(full)) return;
      owner.set(full, e.opposite);
      if (claimedBy.has(e.opposite)) merged++;
      else claimedBy.set(e.opposite, full);
    });
    return {
      scheme: typeof scheme === 'number' ? `K=${scheme}` : scheme,
      events: ids.length,
      distinct_ids: actual.size,
      distinct_opposites: opposites.size,
      repeated_queries: repeated,
      merged_vs_full: merged,
    };
  });
  for (const r of rows) {
    console.log(
      `${r.scheme.padEnd(9)} events ${r.events}  distinct ids ${String(r.distinct_ids).padStart(6)}  ` +
        `distinct opposites ${String(r.distinct_opposites).padStart(6)}  repeated queries ${String(r.repeated_queries).padStart(6)}  ` +
        `merged vs full ${String(r.merged_vs_full).padStart(6)}`,
    );
  }
  console.log(JSON.stringify({ bench: 'branch-identity', inputs: queue.length, checked_against_c: checkedAgainstC, rows }));
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
