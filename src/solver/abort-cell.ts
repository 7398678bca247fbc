/**
 * Per-task cancellation flag in shared memory.
 *
 * piscina's own `AbortSignal` support terminates the worker *thread* when a running task is
 * aborted, which would orphan the solver subprocess and its process group. Instead every task
 * carries one of these cells: the main thread flips it and notifies, the worker thread (which is
 * parked in `Atomics.waitAsync` on it while the solver runs) wakes up and kills the process group
 * itself, then reports back through the normal task result.
 *
 * Layout (one SharedArrayBuffer of 4 bytes per task):
 *
 *   byte 0            4
 *        ┌────────────┐
 *        │ state: i32 │   RUNNING 0 → ABORT_REQUESTED 1   (main thread, requestAbort)
 *        └────────────┘   RUNNING 0 → FINISHED 2          (worker thread, finish)
 *
 * Both transitions are compare-and-swap from RUNNING, so the first one wins: an abort that races
 * with completion is either observed by the worker (and the process group is killed) or loses
 * cleanly (the task had already finished; nothing to kill). This class is the only code that
 * touches the buffer.
 */

const ABORT_CELL_BYTES = 4;
const kStateIndex = 0;
const RUNNING = 0;
const ABORT_REQUESTED = 1;
const FINISHED = 2;

// `Atomics.waitAsync` is in Node 20 (V8) but only in TypeScript's ES2024 lib.
type WaitAsyncResult = { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
const waitAsync = (Atomics as unknown as { waitAsync(array: Int32Array, index: number, value: number): WaitAsyncResult }).waitAsync;

export class TaskAbortCell {
  readonly buffer: SharedArrayBuffer;
  readonly #state: Int32Array;

  constructor(buffer: SharedArrayBuffer = new SharedArrayBuffer(ABORT_CELL_BYTES)) {
    if (buffer.byteLength < ABORT_CELL_BYTES) throw new RangeError(`abort cell needs ${ABORT_CELL_BYTES} bytes`);
    this.buffer = buffer;
    this.#state = new Int32Array(buffer, 0, 1);
  }

  /** Main thread: asks the worker to stop. Returns false when the task had already finished. */
  requestAbort(): boolean {
    const previous = Atomics.compareExchange(this.#state, kStateIndex, RUNNING, ABORT_REQUESTED);
    Atomics.notify(this.#state, kStateIndex);
    return previous === RUNNING || previous === ABORT_REQUESTED;
  }

  /** Worker thread: marks the task finished and wakes its own pending waiter. */
  finish(): void {
    Atomics.compareExchange(this.#state, kStateIndex, RUNNING, FINISHED);
    Atomics.notify(this.#state, kStateIndex);
  }

  get abortRequested(): boolean {
    return Atomics.load(this.#state, kStateIndex) === ABORT_REQUESTED;
  }

  /**
   * Worker thread: resolves true once an abort is requested, false once the task finished.
   * Never blocks the event loop (`Atomics.waitAsync`).
   */
  async whenSettled(): Promise<boolean> {
    for (;;) {
      const state = Atomics.load(this.#state, kStateIndex);
      if (state !== RUNNING) return state === ABORT_REQUESTED;
      const waiter = waitAsync(this.#state, kStateIndex, RUNNING);
      if (waiter.async) await waiter.value;
    }
  }
}
