// A thrown plain `Error` carries no stable code: across a thread it arrives as ERR_INTERNAL and a
// caller cannot tell a bug from bad input. Every failure in src/ throws a coded SymfenceError —
// `InternalError` (ERR_INTERNAL) for a broken invariant — except where the plain Error never
// leaves its module uncoded, listed here with the reason. A new plain throw fails this test.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'src');

/** File → how many plain throws it keeps, and why they are never seen uncoded. */
const KEPT: Readonly<Record<string, { readonly count: number; readonly why: string }>> = {
  'errors.ts': { count: 1, why: 'a code defined twice is refused while the registry itself is being built, at module load' },
  'lease/files/fs-probe.ts': { count: 9, why: 'a failed probe step: probeFailure wraps it as FsProbeError (ERR_FS_PROBE) with the step name' },
  'telemetry/stats-file.ts': { count: 2, why: 'caught a few lines below and rethrown as CampaignStateError (ERR_CAMPAIGN_STATE)' },
};

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []));
}

it('throws no plain Error in src/ outside the listed, wrapped cases', () => {
  const found: Record<string, number> = {};
  for (const file of sources(SRC)) {
    const code = readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => !/^\s*(\*|\/\/)/.test(line))
      .join('\n');
    const count = (code.match(/throw new Error\(/g) ?? []).length;
    if (count > 0) found[path.relative(SRC, file).split(path.sep).join('/')] = count;
  }
  expect(found).toEqual(Object.fromEntries(Object.entries(KEPT).map(([file, { count }]) => [file, count])));
});
