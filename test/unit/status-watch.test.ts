import { describe, expect, it } from 'vitest';
import { CLEAR_SCREEN, checkWatchable, STATUS_WATCH_OPTIONS, watchStatus, type WatchFrame } from '../../src/cli/status-watch.js';
import { codeOf } from '../helpers/error-code.js';

const options = (o: { count?: number } = {}) => STATUS_WATCH_OPTIONS.resolve({ intervalMs: 100, ...o });

function recorder() {
  const frames: string[] = [];
  return { frames, io: { stdout: (t: string) => frames.push(t), isTty: true } };
}

/** A wait that resolves at once and counts its calls: the loop's pacing without real time. */
function instantWait() {
  const waits: number[] = [];
  return { waits, wait: async (ms: number) => void waits.push(ms) };
}

describe('status --watch', () => {
  it('refuses a stdout that is not a terminal, and --json, with ERR_USAGE', () => {
    expect(codeOf(() => checkWatchable({ stdout: () => undefined, isTty: false }, false))).toBe('ERR_USAGE');
    expect(codeOf(() => checkWatchable({ stdout: () => undefined, isTty: true }, true))).toBe('ERR_USAGE');
    expect(codeOf(() => checkWatchable({ stdout: () => undefined, isTty: true }, false))).toBeUndefined();
  });

  it('redraws each frame over the last one and stops after --watch-count frames', async () => {
    const { frames, io } = recorder();
    const { waits, wait } = instantWait();
    let n = 0;
    const drawn = await watchStatus(() => ({ text: `frame ${++n}`, final: false }), io, options({ count: 3 }), new AbortController().signal, wait);
    expect(drawn).toBe(3);
    expect(frames.map((f) => f.startsWith(CLEAR_SCREEN))).toEqual([true, true, true]);
    expect(frames[2]).toContain('frame 3');
    expect(waits).toEqual([100, 100]);
  });

  it('stops by itself once a frame is final (every coordinator finished)', async () => {
    const { frames, io } = recorder();
    let n = 0;
    const frame = (): WatchFrame => ({ text: String(++n), final: n === 2 });
    expect(await watchStatus(frame, io, options(), new AbortController().signal, instantWait().wait)).toBe(2);
    expect(frames).toHaveLength(2);
  });

  it('stops when aborted (Ctrl-C) during the wait, and draws a failing read as its error line', async () => {
    const { frames, io } = recorder();
    const controller = new AbortController();
    let n = 0;
    const frame = (): WatchFrame => {
      n++;
      if (n === 1) throw new Error('stats.json vanished');
      return { text: 'ok', final: false };
    };
    // The second wait is where the user presses Ctrl-C: the wait rejects as an aborted timer does.
    const wait = async (_ms: number, signal: AbortSignal): Promise<void> => {
      if (n === 2) {
        controller.abort();
        throw signal.reason;
      }
    };
    expect(await watchStatus(frame, io, options(), controller.signal, wait)).toBe(2);
    expect(frames[0]).toContain('symfence: stats.json vanished');
    expect(frames[1]).toContain('ok');
  });

  it('names a bad interval with ERR_INVALID_OPTION', () => {
    expect(codeOf(() => STATUS_WATCH_OPTIONS.resolve({ intervalMs: 5 }))).toBe('ERR_INVALID_OPTION');
  });
});
