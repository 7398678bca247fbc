/**
 * Coverage triage of a finished run's outputs, on the pool's calling thread, after the run's solver
 * slot was given back (docs/solver.md "Triage"): each collected output goes through afl-showmap and
 * its map is claimed in the shared coverage bitmap.
 *
 * Why here and not on the solver's slot: triage is one afl-showmap process per generated input,
 * often as long as the solver run itself on a short directed job. On the slot it kept a core's
 * solver idle; here it overlaps the slot's next solver run. The pool bounds how many triages run
 * at once (`TriageSlots`), so a burst of outputs cannot start an unbounded number of showmaps.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { type ErrorData, InternalError, ShowmapSetupError, toErrorData } from '../errors.js';
import type { CoverageBitmap } from './coverage-bitmap.js';
import { runShowmap } from './showmap.js';
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
}

/**
 * The triaged outputs (each with its `showmap` verdict and, for a map, its novelty), or the
 * showmap set-up failure that stopped triage (`ERR_SHOWMAP_SETUP`: no verdict on any output).
 * Every output must carry its bytes.
 */
export async function triageOutputs(request: TriageRequest): Promise<GeneratedInput[] | { readonly setupError: ErrorData }> {
  const { triage, bitmap } = request;
  const generated: GeneratedInput[] = [];
  for (const output of request.outputs) {
    if (request.stopRequested()) break;
    const candidate = output.bytes;
    if (candidate === undefined) throw new InternalError(`triage needs the bytes of output ${output.name}`);
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
    if (shown.outcome === 'ok' && shown.map) {
      if (shown.map.length > bitmap.sizeBytes) {
        generated.push({ ...output, showmap: 'error' });
        continue;
      }
      generated.push({ ...output, showmap: 'ok', novelty: bitmap.claim(shown.map) });
    } else {
      generated.push({ ...output, showmap: shown.outcome });
    }
  }
  return generated;
}
