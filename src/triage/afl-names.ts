/**
 * AFL++ queue entry names: `id:NNNNNN,orig:<seed>` for seeds,
 * `id:NNNNNN,src:NNNNNN,op:…[,+cov]` for found inputs, `id:NNNNNN,sync:<peer>,src:NNNNNN` for
 * imports. AFL's sync only looks at names starting with `id:` and parses the id that follows, so a
 * producer's ids must be strictly increasing and staging files must never start with `id:`.
 */

/** AFL parses ids into 32-bit counters. */
export const MAX_AFL_ID = 0xffff_ffff;
/** Ids are written with at least this many digits. */
const AFL_ID_WIDTH = 6;

export interface AflEntryName {
  /** The numeric id. */
  readonly id: number;
  /** The id digits exactly as written (kept for `src:` of children). */
  readonly idDigits: string;
  /** The `src:` field's digits, when present. */
  readonly src: string | undefined;
  /** An initial seed (`orig:`). */
  readonly orig: boolean;
  /** AFL marked it as new coverage (`+cov`). */
  readonly cov: boolean;
}

const ID_RE = /^id:(\d{1,10})(?:,|$)/;

/** Parses an AFL queue entry name; `null` for anything that is not an `id:` entry AFL would read. */
export function parseAflEntryName(name: string): AflEntryName | null {
  const match = ID_RE.exec(name);
  if (!match) return null;
  const idDigits = match[1]!;
  const id = Number(idDigits);
  if (id > MAX_AFL_ID) return null;
  const fields = name.split(',');
  const srcField = fields.find((f) => f.startsWith('src:'));
  const srcMatch = srcField ? /^src:(\d+)/.exec(srcField) : null;
  return {
    id,
    idDigits,
    src: srcMatch ? srcMatch[1] : undefined,
    orig: fields.some((f) => f.startsWith('orig:')),
    cov: name.endsWith('+cov'),
  };
}

/** The next free id after every `id:` entry in `names` (0 for none). Non-id names are ignored. */
export function nextAflId(names: Iterable<string>): number {
  let next = 0;
  for (const name of names) {
    const parsed = parseAflEntryName(name);
    if (parsed && parsed.id + 1 > next) next = parsed.id + 1;
  }
  return next;
}

/** `id` zero-padded to at least six digits. */
export function formatAflId(id: number): string {
  return String(id).padStart(AFL_ID_WIDTH, '0');
}

/** The `src:` digits naming a parent: its own id digits, or `000000` when it has no id. */
export function sourceIdOf(parentName: string): string {
  return parseAflEntryName(parentName)?.idDigits ?? formatAflId(0);
}
