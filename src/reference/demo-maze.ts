/**
 * TEST AND DEMO FIXTURE. The maze bundled for `symfence demo`: a handful of nested branches on a
 * 16-byte input — equalities, ranges, a checksum, a crash at the bottom of the deepest path — that
 * the reference solver plus scheduling explore completely in seconds. Use it as `builtin:demo`
 * wherever a maze path is accepted.
 */
import type { Maze } from './maze.js';

export const DEMO_MAZE: Maze = Object.freeze({
  schema: 'symfence-maze/1',
  name: 'demo',
  inputLength: 16,
  body: [
    {
      site: 1,
      test: { kind: 'eq', offset: 0, value: 0x46 }, // 'F'
      then: [
        {
          site: 2,
          test: { kind: 'eq', offset: 1, value: 0x55 }, // 'U'
          then: [
            {
              site: 3,
              test: { kind: 'range', offset: 2, min: 0x30, max: 0x39 }, // a digit
              then: [
                {
                  site: 4,
                  test: { kind: 'checksum', from: 0, to: 4, value: 0x5a },
                  then: [
                    {
                      site: 5,
                      test: { kind: 'eq', offset: 4, value: 0x21 }, // '!'
                      then: [{ abort: true }],
                    },
                  ],
                },
              ],
            },
          ],
        },
      ],
      else: [
        {
          site: 6,
          test: { kind: 'range', offset: 0, min: 0x61, max: 0x7a }, // a-z
          then: [{ site: 7, test: { kind: 'eq', offset: 1, value: 0x78 } }], // 'x'
        },
      ],
    },
    { site: 8, test: { kind: 'eq', offset: 15, value: 0x7f } },
  ],
} as const satisfies Maze);
