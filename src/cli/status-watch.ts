/**
 * `symfence status --watch`: redraws the status on a terminal every `--watch-interval` until
 * Ctrl-C (SIGINT/SIGTERM), `--watch-count` redraws, or every coordinator has finished. On a
 * stdout that is not a TTY it refuses (`ERR_USAGE`, exit 2) rather than printing frames of escape
 * codes into a file or pipe; without `--watch` status prints once, which is what a script wants.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { defineOptionSchema, type ResolvedOptions } from '../config/schema.js';
import { UsageError } from '../errors.js';

export const STATUS_WATCH_OPTIONS = defineOptionSchema('status --watch', {
  intervalMs: {
    kind: 'duration',
    default: 2_000,
    min: 100,
    max: 3_600_000,
    flag: 'watch-interval',
    description: 'with --watch: time between redraws',
  },
  count: {
    kind: 'integer',
    default: 0,
    min: 0,
    max: 1_000_000,
    flag: 'watch-count',
    description: 'with --watch: stop after this many redraws (0 = until Ctrl-C or every coordinator has finished)',
  },
});

type StatusWatchOptions = ResolvedOptions<typeof STATUS_WATCH_OPTIONS.specs>;

/** Cursor home + clear screen: each frame replaces the previous one. */
export const CLEAR_SCREEN = '\u001b[H\u001b[2J';

export interface WatchFrame {
  readonly text: string;
  /** True once nothing will change any more (every coordinator finished): the watch ends. */
  readonly final: boolean;
}

interface WatchIo {
  readonly stdout: (text: string) => void;
  readonly isTty: boolean;
}

/** Refuses `--watch` where it cannot redraw. Called before the first frame. */
export function checkWatchable(io: WatchIo, json: boolean): void {
  if (json) throw new UsageError('--watch redraws text on a terminal and does not combine with --json (run --json once per poll instead)', {});
  if (!io.isTty) throw new UsageError('--watch needs a terminal: stdout is not a TTY (run status without --watch to print once)', {});
}

/**
 * Draws `frame()` until `signal` aborts, `count` frames are drawn, or a frame is final. A frame
 * that throws is drawn as its error line, and the watch goes on: a coordinator's stats file being
 * replaced or a directory appearing is no reason to stop watching. Resolves with the frames drawn.
 */
export async function watchStatus(frame: () => WatchFrame, io: WatchIo, options: StatusWatchOptions, signal: AbortSignal, wait: (ms: number, signal: AbortSignal) => Promise<unknown> = (ms, s) => delay(ms, undefined, { signal: s })): Promise<number> {
  let drawn = 0;
  for (;;) {
    let current: WatchFrame;
    try {
      current = frame();
    } catch (error) {
      current = { text: `symfence: ${error instanceof Error ? error.message : String(error)}`, final: false };
    }
    io.stdout(`${CLEAR_SCREEN}${current.text}\n\n(every ${options.intervalMs / 1000} s; Ctrl-C to stop) ${new Date().toISOString()}\n`);
    drawn++;
    if (current.final || (options.count > 0 && drawn >= options.count) || signal.aborted) return drawn;
    try {
      await wait(options.intervalMs, signal);
    } catch {
      return drawn; // aborted while waiting
    }
  }
}
