/**
 * Bench `preload-overhead`: what the SymCC preload library (docs/solver.md, "Stock SymCC: the
 * preload library") costs per branch. The fake SymCC program (test/fixtures/fake-symcc/) runs on
 * the same long input without the library (`plain`) and with it untargeted (`preload`: the runtime
 * gets the same calls with the same site ids, so the same solving happens); the difference per
 * symbolic branch is `ns_per_branch`. The loop's sites are made unsat in the fake runtime, so each
 * of the ~all solving calls is cheap (no file written) and the library's own work — ids, tables,
 * one faccessat per solving call, the telemetry at exit — is not hidden behind file writes. The
 * header's few branches are sat (a handful of files per run).
 *
 * Also, on the same input: `trace` (SYMFENCE_TRACE_ONLY=1: nothing solved) and `directed` (one
 * target and one action: the two ids first seen latest on the path) with and without early exit.
 *
 * Variants are interleaved run by run (order rotating); each time is the wall time of one
 * spawnSync of the program; medians are reported. Never pass/fail.
 *
 *   npm run bench -- preload-overhead [--runs 25] [--bytes 60000]
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseTelemetry } from '../src/scheduler/telemetry.js';
import { preloadLibraryPath } from '../src/solver/preload-library.js';
import { buildFakeSymcc, fakeSymccUnavailable, parseEventLog, referenceBranchIds } from '../test/helpers/fake-symcc.js';
import { flag, median } from './_stats.js';

const runs = Number(flag('runs', '25'));
const bytes = Number(flag('bytes', '60000'));
const preload = preloadLibraryPath();
const unavailable = preload === null ? 'preload library not built (npm run build:native)' : fakeSymccUnavailable();
if (unavailable) {
  console.error(`preload-overhead: ${unavailable}`);
  console.log(JSON.stringify({ bench: 'preload-overhead', skipped: unavailable }));
  process.exit(0);
}
const fake = buildFakeSymcc();
const scratch = mkdtempSync(path.join(os.tmpdir(), 'symfence-bench-preload-'));

let seed = 12345;
const body = Array.from({ length: bytes }, () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return 'xyq'[(seed >> 8) % 3];
}).join('');
const inputPath = path.join(scratch, 'input');
writeFileSync(inputPath, `MZ!A${body}`);
const baseEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', FAKE_SYMCC_UNSAT_SITES: '5,6' };

let runCounter = 0;
function once(env: Record<string, string>, withPreload: boolean): { ms: number; telemetry: string | null } {
  const dir = path.join(scratch, `run-${++runCounter}`);
  mkdirSync(path.join(dir, 'out'), { recursive: true });
  const telemetryPath = path.join(dir, 'telemetry.json');
  const fullEnv: Record<string, string> = { ...baseEnv, ...env, SYMCC_OUTPUT_DIR: path.join(dir, 'out') };
  if (withPreload) {
    fullEnv.LD_PRELOAD = preload!;
    fullEnv.SYMCC_TELEMETRY_OUT = telemetryPath;
  }
  const started = performance.now();
  const child = spawnSync(fake.program, [inputPath], { env: fullEnv, stdio: 'ignore' });
  const ms = performance.now() - started;
  if (child.status !== 0) throw new Error(`fake program exited with ${child.status ?? child.signal}`);
  let telemetry: string | null = null;
  try {
    telemetry = readFileSync(telemetryPath, 'utf8');
  } catch {
    // plain runs write none
  }
  rmSync(dir, { recursive: true, force: true });
  return { ms, telemetry };
}

try {
  // The path's events; the target and the action are the two ids first seen latest on the path
  // (with K = 4 and saturated hit buckets, a long loop stops producing new ids early on).
  const logPath = path.join(scratch, 'events');
  once({ FAKE_SYMCC_EVENT_LOG: logPath }, false);
  const events = parseEventLog(readFileSync(logPath, 'utf8'));
  const ids = referenceBranchIds(events, 4);
  const firstAt = new Map<bigint, number>();
  ids.forEach((e, i) => firstAt.has(e.opposite) || firstAt.set(e.opposite, i));
  const [actionAt, targetAt] = [...firstAt.values()].sort((a, b) => b - a) as [number, number];
  const actionsPath = path.join(scratch, 's2f_actions');
  writeFileSync(actionsPath, `${ids[actionAt]!.opposite} solve\n`);
  const directedEnv = { SYMCC_TARGET_BRANCH: ids[targetAt]!.opposite.toString(), SYMCC_S2F_ACTIONS: actionsPath };

  const variants: { name: string; env: Record<string, string>; preload: boolean }[] = [
    { name: 'plain', env: {}, preload: false },
    { name: 'preload', env: {}, preload: true },
    { name: 'trace', env: { SYMFENCE_TRACE_ONLY: '1' }, preload: true },
    { name: 'directed', env: directedEnv, preload: true },
    { name: 'directed_no_early_exit', env: { ...directedEnv, SYMFENCE_PRELOAD_EARLY_EXIT: '0' }, preload: true },
  ];
  const times = variants.map(() => [] as number[]);
  const last: (string | null)[] = variants.map(() => null);
  for (const v of variants) once(v.env, v.preload); // warm-up (page cache, dynamic loader)
  for (let round = 0; round < runs; round++) {
    for (let k = 0; k < variants.length; k++) {
      const i = (k + round) % variants.length;
      const r = once(variants[i]!.env, variants[i]!.preload);
      times[i]!.push(r.ms);
      last[i] = r.telemetry;
    }
  }
  const ms = variants.map((_, i) => Number(median(times[i]!).toFixed(3)));
  const preloadTelemetry = JSON.parse(last[1]!) as { preload: { symbolicEvents: number } };
  parseTelemetry(last[1]!);
  const branches = preloadTelemetry.preload.symbolicEvents;
  const directed = parseTelemetry(last[3]!);
  const directedNoExit = parseTelemetry(last[4]!);
  variants.forEach((v, i) => console.log(`${v.name.padEnd(24)} ${String(ms[i]).padStart(9)} ms (median of ${runs})`));
  console.log(`symbolic branches per run: ${branches}; target at event ${targetAt}, action at event ${actionAt}`);
  console.log(
    JSON.stringify({
      bench: 'preload-overhead',
      runs,
      loadavg_1m: Number(os.loadavg()[0]!.toFixed(2)),
      branches_per_run: branches,
      plain_ms: ms[0],
      preload_ms: ms[1],
      ns_per_branch: Math.round(((ms[1]! - ms[0]!) * 1e6) / branches),
      trace_ms: ms[2],
      directed_ms: ms[3],
      directed_no_early_exit_ms: ms[4],
      // Both directed runs must have made the same two solving calls (early exit changes no result).
      directed_same_queries: directed.counters.queries === 2 && directedNoExit.counters.queries === 2,
      trace_ns_per_branch: Math.round(((ms[2]! - ms[0]!) * 1e6) / branches),
      target_event: targetAt,
      action_event: actionAt,
    }),
  );
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
