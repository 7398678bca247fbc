/**
 * Runs the fake SymCC program (test/fixtures/fake-symcc) under the preload library and collects
 * what a test asserts on: outputs, the runtime's event log, the telemetry (through the scheduler's
 * strict parser) and what is left beside it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { parseTelemetry, type PreloadReport, type Telemetry } from '../../src/scheduler/telemetry.js';
import { preloadLibraryPath } from '../../src/solver/preload-library.js';
import { buildFakeSymcc, fakeSymccUnavailable, parseEventLog, type FakeSymcc, type LoggedEvent } from './fake-symcc.js';

export const preload = preloadLibraryPath();
export const skipReason = preload === null ? 'native-bindings/build/Release/symfence_preload.so is not built (npm run build:native)' : fakeSymccUnavailable();

/** The `preload` block as written: what the parser reads, plus the fields it leaves alone. */
export type PreloadExtras = PreloadReport & {
  readonly version: number;
  readonly context: number;
  readonly qsym: boolean;
  readonly fork: boolean;
  readonly forks: number;
  readonly forkFailed: boolean;
  readonly forkCapped: boolean;
  readonly childCpuUs: number;
  readonly threadsAtFork: number;
  readonly siteLookups: number;
  readonly wanted: number;
  /** KiB of anonymous memory backed by huge pages before the second fork (0 = none). */
  readonly hugeKb: number;
  /** Answers solved in the process itself, QSYM solving steps there, and whether QSYM's decision came through the library. */
  readonly inPlace: number;
  readonly negations: number;
  readonly interposed: boolean;
  readonly actionsError?: string;
  readonly wantedError?: string;
};

export interface Run {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** The run's private directory (input, extra files). */
  readonly dir: string;
  /** Generated files, name → bytes, in name order. */
  readonly outputs: Map<string, Buffer>;
  /** What the runtime received, in order (site 0 = not a solving call). */
  readonly events: LoggedEvent[];
  /** Parsed by the scheduler's strict parser; null when no file was written. */
  readonly telemetry: Telemetry | null;
  readonly preload: PreloadExtras | null;
  readonly generatedBy: [string, string, string][];
  /** Forked answers as written: [branch, status, solverTimeUs, cpuUs, files]. */
  readonly answers: [string, string, number, number, number][];
  /** The telemetry JSON as written. */
  readonly raw: Record<string, unknown> | null;
  /** What is left in the telemetry file's directory. */
  readonly telemetryDirEntries: string[];
}

export interface RunOptions {
  /** Added to the run's environment; `{dir}` in a value stands for the run's directory. */
  readonly env?: Record<string, string>;
  /** Default: our preload library. */
  readonly ldPreload?: string | null;
  readonly program?: string;
  readonly actions?: string;
  readonly telemetry?: boolean;
  /** Extra files beside the input, name -> content; their paths are `dir/<name>`. */
  readonly files?: Record<string, string | Buffer>;
  /** spawnSync's timeout (ms); the run is then SIGKILLed (`signal`). */
  readonly timeoutMs?: number;
}


export interface PreloadRunner {
  fixture(): FakeSymcc;
  run(input: string | Buffer, options?: RunOptions): Run;
  plainEvents(input: string | Buffer): LoggedEvent[];
}

export function must<T>(value: T | null): T {
  expect(value).not.toBeNull();
  return value!;
}

/** Runs under `scratch` (each run in its own numbered directory). */
export function preloadRunner(scratch: string): PreloadRunner {
  let fake: FakeSymcc | undefined;
  let runCounter = 0;

  function fixture(): FakeSymcc {
    fake ??= buildFakeSymcc();
    return fake;
  }

  function run(input: string | Buffer, options: RunOptions = {}): Run {
    const dir = path.join(scratch, `run-${++runCounter}`);
    const out = path.join(dir, 'out');
    const telemetryDir = path.join(dir, 'telemetry');
    mkdirSync(out, { recursive: true });
    mkdirSync(telemetryDir);
    const inputPath = path.join(dir, 'input');
    writeFileSync(inputPath, input);
    const telemetryPath = path.join(telemetryDir, 'telemetry.json');
    const eventLog = path.join(dir, 'events');
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      SYMCC_OUTPUT_DIR: out,
      FAKE_SYMCC_EVENT_LOG: eventLog,
      ...Object.fromEntries(Object.entries(options.env ?? {}).map(([k, v]) => [k, v.replaceAll('{dir}', dir)])),
    };
    if (options.telemetry !== false) env.SYMCC_TELEMETRY_OUT = telemetryPath;
    const ldPreload = options.ldPreload === undefined ? preload : options.ldPreload;
    if (ldPreload) env.LD_PRELOAD = ldPreload;
    if (options.actions !== undefined) {
      writeFileSync(path.join(dir, 's2f_actions'), options.actions);
      env.SYMCC_S2F_ACTIONS = path.join(dir, 's2f_actions');
    }
    for (const [name, content] of Object.entries(options.files ?? {})) writeFileSync(path.join(dir, name), content);
    const child = spawnSync(options.program ?? fixture().program, [inputPath], {
      env,
      encoding: 'utf8',
      ...(options.timeoutMs !== undefined ? { timeout: options.timeoutMs, killSignal: 'SIGKILL' as const } : {}),
    });
    if (child.error) throw child.error;
    const outputs = new Map<string, Buffer>();
    for (const name of readdirSync(out).sort()) outputs.set(name, readFileSync(path.join(out, name)));
    let telemetry: Telemetry | null = null;
    let raw: Record<string, unknown> | null = null;
    if (existsSync(telemetryPath)) {
      const text = readFileSync(telemetryPath, 'utf8');
      telemetry = parseTelemetry(text); // every file the library writes must satisfy the real parser
      raw = JSON.parse(text) as Record<string, unknown>;
    }
    return {
      status: child.status,
      signal: child.signal,
      stdout: child.stdout,
      stderr: child.stderr,
      dir,
      outputs,
      events: existsSync(eventLog) ? parseEventLog(readFileSync(eventLog, 'utf8')) : [],
      telemetry,
      preload: (raw?.preload as PreloadExtras | undefined) ?? null,
      generatedBy: (raw?.generatedBy as [string, string, string][] | undefined) ?? [],
      answers: (raw?.answers as [string, string, number, number, number][] | undefined) ?? [],
      raw,
      telemetryDirEntries: readdirSync(telemetryDir),
    };
  }

  /** The program's real branch structure: a plain run without the preload library. */
  function plainEvents(input: string | Buffer): LoggedEvent[] {
    const plain = run(input, { ldPreload: null, telemetry: false });
    expect(plain.status).toBe(0);
    return plain.events;
  }

  return { fixture, run, plainEvents };
}
