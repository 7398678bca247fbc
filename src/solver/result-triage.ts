/**
 * Coverage triage of a finished run's outputs, on the pool's calling thread, after the run's solver
 * slot was given back (docs/solver.md "Triage"): each collected output goes through afl-showmap and
 * its map is claimed in the shared coverage bitmap.
 *
 * Why here and not on the solver's slot: triage runs afl-showmap on every generated input (one
 * batch process for several, docs/solver.md *Batch triage*), often as long as the solver run
 * itself on a short directed job. On the slot it kept a core's
 * solver idle; here it overlaps the slot's next solver run. The pool bounds how many triages run
 * at once (`TriageSlots`), so a burst of outputs cannot start an unbounded number of showmaps.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { type ErrorData, InternalError, ShowmapSetupError, toErrorData } from '../errors.js';
import type { CoverageBitmap } from './coverage-bitmap.js';
import { runShowmap, runShowmapBatch, type BatchVerdict } from './showmap.js';
import type { SpawnMethod } from './spawn-method.js';
import type { GeneratedInput, WireTask } from './solver-types.js';

/** Scratch directories for concurrent triages: at most `limit` at once, FIFO beyond that. */
export class TriageSlots {
  readonly #root: string;
  readonly #limit: number;
  readonly #free: string[] = [];
  readonly #waiting: ((dir: string) => void)[] = [];
  #created = 0;

  constructor(root: string, limit: number) {
    this.#root = root;
    this.#limit = limit;
  }

  acquire(): Promise<string> {
    const free = this.#free.pop();
    if (free !== undefined) return Promise.resolve(free);
    if (this.#created < this.#limit) {
      const dir = path.join(this.#root, `triage-${this.#created++}`);
      mkdirSync(dir, { recursive: true });
      return Promise.resolve(dir);
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  release(dir: string): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next(dir);
    else this.#free.push(dir);
  }
}

interface TriageRequest {
  readonly triage: NonNullable<WireTask['triage']>;
  readonly outputs: readonly GeneratedInput[];
  readonly bitmap: CoverageBitmap;
  readonly workDir: string;
  /**
   * Checked for each output (by its index) before it is triaged: the output of a run whose result
   * will be dropped claims no coverage.
   */
  readonly stopRequested: (index: number) => boolean;
  /** The environment afl-showmap's is derived from (a snapshot: `process.env` is slow to iterate). */
  readonly baseEnv: NodeJS.ProcessEnv;
  readonly spawnMethod?: SpawnMethod;
  /**
   * Whether this pool's showmap runs batches (docs/solver.md, *Batch triage*): true until a batch
   * comes back unsupported, then every later triage runs one showmap per output.
   */
  readonly batching: { supported: boolean };
}

/**
 * The triaged outputs, aligned with `request.outputs` (each with its `showmap` verdict and, for a
 * map, its novelty; `null` for an output whose run was stopped first), or the showmap set-up
 * failure that stopped triage (`ERR_SHOWMAP_SETUP`: no verdict on any output). Every output must
 * carry its bytes.
 */
export async function triageOutputs(request: TriageRequest): Promise<(GeneratedInput | null)[] | { readonly setupError: ErrorData }> {
  const { triage, bitmap } = request;
  const candidates = request.outputs.map((output) => {
    if (output.bytes === undefined) throw new InternalError(`triage needs the bytes of output ${output.name}`);
    return output.bytes;
  });
  const live = request.outputs.map((_, i) => i).filter((i) => !request.stopRequested(i));
  const batch = await batchVerdicts(request, live.map((i) => candidates[i]!));
  const verdicts = new Map(live.map((index, at) => [index, batch[at] ?? null]));
  const generated: (GeneratedInput | null)[] = [];
  for (const [i, output] of request.outputs.entries()) {
    if (request.stopRequested(i)) {
      generated.push(null);
      continue;
    }
    const verdict = verdicts.get(i);
    if (verdict != null) {
      generated.push(verdict.outcome === 'ok' ? claimed(output, verdict.map, bitmap) : { ...output, showmap: verdict.outcome });
      continue;
    }
    const shown = await runShowmap({
      showmap: triage.showmap,
      target: triage.target,
      inputMode: triage.inputMode,
      timeoutMs: triage.timeoutMs,
      workDir: request.workDir,
      candidate: candidates[i]!,
      baseEnv: request.baseEnv,
      ...(request.spawnMethod !== undefined ? { spawnMethod: request.spawnMethod } : {}),
    });
    if (shown.setupFailure) {
      const error = new ShowmapSetupError(`afl-showmap cannot run the target: ${shown.detail ?? 'set-up failed'}`, {
        showmap: triage.showmap.binary,
        target: triage.target.binary,
        exitCode: shown.exitCode,
        detail: shown.detail ?? null,
      });
      return { setupError: toErrorData(error) };
    }
    generated.push(shown.outcome === 'ok' && shown.map ? claimed(output, shown.map, bitmap) : { ...output, showmap: shown.outcome });
  }
  return generated;
}

/** A clean run's map claimed in the shared bitmap; a map larger than the bitmap is refused (`error`). */
function claimed(output: GeneratedInput, map: Uint8Array, bitmap: CoverageBitmap): GeneratedInput {
  if (map.length > bitmap.sizeBytes) return { ...output, showmap: 'error' };
  return { ...output, showmap: 'ok', novelty: bitmap.claim(map) };
}

/**
 * The batch's verdict per candidate (null: none, run it alone). One candidate runs alone anyway:
 * a batch of one costs the same process and a directory more.
 */
async function batchVerdicts(request: TriageRequest, candidates: readonly Uint8Array[]): Promise<readonly BatchVerdict[]> {
  if (candidates.length < 2 || !request.batching.supported) return [];
  const verdicts = await runShowmapBatch({
    showmap: request.triage.showmap,
    target: request.triage.target,
    inputMode: request.triage.inputMode,
    timeoutMs: request.triage.timeoutMs,
    workDir: request.workDir,
    candidates,
    baseEnv: request.baseEnv,
    ...(request.spawnMethod !== undefined ? { spawnMethod: request.spawnMethod } : {}),
  });
  if (verdicts !== 'unsupported') return verdicts;
  request.batching.supported = false;
  return [];
}

/** One run's outputs waiting in a `TriageQueue`. */
interface QueuedTriage {
  readonly outputs: readonly GeneratedInput[];
  readonly stopRequested: () => boolean;
  readonly resolve: (result: (GeneratedInput | null)[] | { readonly setupError: ErrorData }) => void;
  readonly reject: (error: unknown) => void;
}

/** What every triage of a pool shares: the bitmap, the environment, the batching state. */
type TriageCommon = Pick<TriageRequest, 'bitmap' | 'baseEnv' | 'batching'>;

/**
 * Grouped triage (docs/solver.md *Grouped triage*): runs whose outputs wait for a triage slot are
 * triaged together, in arrival order, as one batch. Like a group commit, a group forms only when
 * triage is behind: a run that finds a slot free is triaged at once, alone; outputs that arrive
 * while every slot is busy join the next group. So under load one afl-showmap start serves several
 * runs, and its cost per run falls as the load grows. A group holds at most `maxOutputs` outputs
 * (one run's outputs are never split); runs of different triage settings never share one.
 */
export class TriageQueue {
  readonly #slots: TriageSlots;
  readonly #common: TriageCommon;
  readonly #maxOutputs: number;
  /** Waiting runs per triage setting (showmap, target, input mode, timeout, spawn method). */
  readonly #waiting = new Map<string, { triage: TriageRequest['triage']; spawnMethod: SpawnMethod | undefined; runs: QueuedTriage[] }>();

  constructor(slots: TriageSlots, common: TriageCommon, maxOutputs = 256) {
    this.#slots = slots;
    this.#common = common;
    this.#maxOutputs = maxOutputs;
  }

  /** The run's triaged outputs (aligned; `null` where its run was stopped), or the set-up failure. */
  triage(triage: TriageRequest['triage'], spawnMethod: SpawnMethod | undefined, outputs: readonly GeneratedInput[], stopRequested: () => boolean): Promise<(GeneratedInput | null)[] | { readonly setupError: ErrorData }> {
    return new Promise((resolve, reject) => {
      const key = JSON.stringify([triage, spawnMethod ?? null]);
      let entry = this.#waiting.get(key);
      if (entry === undefined) {
        entry = { triage, spawnMethod, runs: [] };
        this.#waiting.set(key, entry);
      }
      entry.runs.push({ outputs, stopRequested, resolve, reject });
      void this.#drain(key);
    });
  }

  /** Takes a slot, then the group waiting for it (empty: an earlier drain took it). */
  async #drain(key: string): Promise<void> {
    const workDir = await this.#slots.acquire();
    const entry = this.#waiting.get(key);
    const group: QueuedTriage[] = [];
    let outputs = 0;
    while (entry !== undefined && entry.runs.length > 0) {
      const next = entry.runs[0]!;
      if (group.length > 0 && outputs + next.outputs.length > this.#maxOutputs) break;
      group.push(entry.runs.shift()!);
      outputs += next.outputs.length;
    }
    if (entry !== undefined && entry.runs.length === 0) this.#waiting.delete(key);
    try {
      if (group.length > 0) await this.#triageGroup(entry!, group, workDir);
    } finally {
      this.#slots.release(workDir);
    }
  }

  async #triageGroup(entry: { triage: TriageRequest['triage']; spawnMethod: SpawnMethod | undefined }, group: readonly QueuedTriage[], workDir: string): Promise<void> {
    const owners: number[] = [];
    const outputs: GeneratedInput[] = [];
    group.forEach((run, at) => {
      for (const output of run.outputs) {
        outputs.push(output);
        owners.push(at);
      }
    });
    let result: Awaited<ReturnType<typeof triageOutputs>>;
    try {
      result = await triageOutputs({
        ...this.#common,
        triage: entry.triage,
        outputs,
        workDir,
        stopRequested: (index) => group[owners[index]!]!.stopRequested(),
        ...(entry.spawnMethod !== undefined ? { spawnMethod: entry.spawnMethod } : {}),
      });
    } catch (error) {
      for (const run of group) run.reject(error);
      return;
    }
    if (!Array.isArray(result)) {
      for (const run of group) run.resolve(result);
      return;
    }
    let next = 0;
    for (const run of group) {
      run.resolve(result.slice(next, next + run.outputs.length));
      next += run.outputs.length;
    }
  }
}
