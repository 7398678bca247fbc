/** Shared by the campaign benches: deterministic distinct seeds of the demo maze's length. */
import { DEMO_MAZE } from '../src/reference/demo-maze.js';

/** `count` seeds from an xorshift32 stream started at `state` (printable bytes). */
export function mazeSeeds(count: number, state = 0x9e3779b9): Uint8Array[] {
  let x = state;
  return Array.from({ length: count }, () => {
    const bytes = new Uint8Array(DEMO_MAZE.inputLength);
    for (let i = 0; i < bytes.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      bytes[i] = 0x20 + ((x >>> 0) % 0x5f);
    }
    return bytes;
  });
}
