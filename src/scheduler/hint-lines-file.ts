/**
 * The `--hints <file>` format: JSON lines, one hint per line, keyed by the input's SHA-256.
 *
 *   {"sha256":"<64 lowercase hex>","targetBranch":"123","strategy":2,"focus":{"lo":0,"hi":16}}
 *
 * Every field but `sha256` is optional and has the meaning of `Hint` (hints.ts); unknown fields
 * are errors. Blank lines and lines starting with `#` are skipped; for a repeated sha256 the last
 * line wins. The whole file is checked when it is loaded (at campaign start), so a bad line
 * refuses the start with `ERR_HINT_INVALID` naming the option, the file and the line, instead of
 * being noticed mid-campaign. See docs/scheduler.md "Hints".
 */
import { readFile } from 'node:fs/promises';
import { HintInvalidError, SymfenceError } from '../errors.js';
import { parseHint, type Hint, type HintSource, type SeedIdentity } from './hints.js';

const SHA256 = /^[0-9a-f]{64}$/;
/** Largest hints file read (bytes): far beyond any hand-written or generated set. */
const MAX_HINTS_FILE_BYTES = 64 * 1024 * 1024;

export class HintLinesFile implements HintSource {
  readonly #bySha = new Map<string, Hint>();
  readonly file: string;

  /** Parses the text; `option` names the option in errors (`--hints`). */
  constructor(text: string, file: string, option = '--hints') {
    this.file = file;
    const lines = text.split('\n');
    lines.forEach((raw, index) => {
      const line = raw.trim();
      if (line === '' || line.startsWith('#')) return;
      const where = `${option} ${file} line ${index + 1}`;
      let entry: unknown;
      try {
        entry = JSON.parse(line);
      } catch (error) {
        throw new HintInvalidError(`${where}: not a JSON object (${(error as Error).message})`, { option, file, line: index + 1 });
      }
      const sha256 = (entry as { sha256?: unknown } | null)?.sha256;
      if (typeof sha256 !== 'string' || !SHA256.test(sha256)) {
        throw new HintInvalidError(`${where}: needs "sha256" as 64 lowercase hex digits, received ${JSON.stringify(sha256)}`, { option, file, line: index + 1 });
      }
      const { sha256: _key, ...fields } = entry as Record<string, unknown>;
      if ('path' in fields) throw new HintInvalidError(`${where}: unknown field "path" (hints are keyed by sha256 only)`, { option, file, line: index + 1 });
      try {
        this.#bySha.set(sha256, parseHint(fields, `line ${index + 1}`));
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        throw new HintInvalidError(`${option} ${file}: ${message}`, { option, file, line: index + 1 });
      }
    });
  }

  /** Reads and checks the file; an unreadable file is `ERR_HINT_INVALID` naming the option too. */
  static async load(file: string, option = '--hints'): Promise<HintLinesFile> {
    let text: string;
    try {
      const bytes = await readFile(file);
      if (bytes.length > MAX_HINTS_FILE_BYTES) throw new HintInvalidError(`${option} ${file}: ${bytes.length} bytes, over the ${MAX_HINTS_FILE_BYTES}-byte limit`, { option, file });
      text = bytes.toString('utf8');
    } catch (error) {
      if (error instanceof SymfenceError) throw error;
      const errno = (error as NodeJS.ErrnoException).code ?? 'EIO';
      throw new HintInvalidError(`${option} ${file}: cannot be read (${errno})`, { option, file, errno });
    }
    return new HintLinesFile(text, file, option);
  }

  get size(): number {
    return this.#bySha.size;
  }

  hintFor(seed: SeedIdentity): Hint | undefined {
    return this.#bySha.get(seed.sha256);
  }
}
