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
  /** Checked before each output: a run whose result will be dropped stops claiming coverage. */
  readonly stopRequested: () => boolean;
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
 * The triaged outputs (each with its `showmap` verdict and, for a map, its novelty), or the
 * showmap set-up failure that stopped triage (`ERR_SHOWMAP_SETUP`: no verdict on any output).
 * Every output must carry its bytes.
 */
export async function triageOutputs(request: TriageRequest): Promise<GeneratedInput[] | { readonly setupError: ErrorData }> {
  const { triage, bitmap } = request;
  const candidates = request.outputs.map((output) => {
    if (output.bytes === undefined) throw new InternalError(`triage needs the bytes of output ${output.name}`);
    return output.bytes;
  });
  const batch = await batchVerdicts(request, candidates);
  const generated: GeneratedInput[] = [];
  for (const [i, output] of request.outputs.entries()) {
    if (request.stopRequested()) break;
    const verdict = batch[i];
    if (verdict != null) {
      generated.push(verdict.outcome === 'ok' ? claimed(output, verdict.map, bitmap) : { ...output, showmap: verdict.outcome });
      continue;
    }
    const candidate = candidates[i]!;
    const shown = await runShowmap({
      showmap: triage.showmap,
      target: triage.target,
      inputMode: triage.inputMode,
      timeoutMs: triage.timeoutMs,
      workDir: request.workDir,
      candidate,
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
  if (candidates.length < 2 || !request.batching.supported || request.stopRequested()) return [];
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
